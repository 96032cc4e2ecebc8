using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;

namespace LibLlm
{
    /// <summary>Options of Model.Load (llm_model_params); zero values are the
    /// library's defaults.</summary>
    public sealed class ModelOptions
    {
        public bool VocabOnly;
        public int Threads;
        public ulong KvBudgetBytes;
        public bool Deterministic;
        public int BatchTokens;
    }

    /// <summary>Model metadata (llm_model_info).</summary>
    public sealed class ModelInfo
    {
        public string Architecture;
        public string Name;
        public ulong Params;
        public int ContextTrain, Vocab, Layers, Embedding, Heads, KvHeads;
        public int BosToken, EosToken, EotToken, PadToken;
        /// <summary>Bytes of the model file read in place, and host memory the
        /// backend holds as its own copies of weights.</summary>
        public ulong MappedWeightBytes, WeightCopyBytes;
    }

    /// <summary>A loaded GGUF model. Thread-safe: any number of threads may
    /// use it and its sessions at once. Dispose releases this reference;
    /// sessions hold their own.</summary>
    public sealed class Model : IDisposable
    {
        internal readonly ModelHandle Handle;
        private readonly Dictionary<int, bool> _eog = new Dictionary<int, bool>();

        public Model(string path) : this(path, null) { }

        public Model(string path, ModelOptions options)
        {
            if (path == null) throw new ArgumentNullException("path");
            Llm.EnsureCompatible();
            var p = new ModelParams();
            Llm.Check(Native.llm_model_params_init_v(ref p, Native.SizeOf<ModelParams>()));
            if (options != null)
            {
                p.vocab_only = options.VocabOnly ? 1 : 0;
                p.n_threads = options.Threads;
                p.kv_budget_bytes = options.KvBudgetBytes;
                p.deterministic = options.Deterministic ? 1 : 0;
                p.batch_tokens = options.BatchTokens;
            }
            ModelHandle h;
            int status = Native.llm_model_load(Utf8.CString(path), ref p, out h);
            if (status != 0) { var e = Llm.Error(status); h.SetHandleAsInvalid(); throw e; }
            Handle = h;
        }

        public void Dispose() { Handle.Dispose(); }

        public bool IsDisposed { get { return Handle.IsClosed; } }

        internal ModelHandle Live
        {
            get
            {
                if (Handle.IsClosed) throw Llm.Closed("model");
                return Handle;
            }
        }

        public ModelInfo Info
        {
            get
            {
                var n = new ModelInfoNative();
                Llm.Check(Native.llm_model_info_init_v(ref n, Native.SizeOf<ModelInfoNative>()));
                Llm.Check(Native.llm_model_get_info(Live, ref n));
                return new ModelInfo
                {
                    Architecture = CString(n.architecture), Name = CString(n.name), Params = n.n_params,
                    ContextTrain = n.n_ctx_train, Vocab = n.n_vocab, Layers = n.n_layer,
                    Embedding = n.n_embd, Heads = n.n_head, KvHeads = n.n_head_kv,
                    BosToken = n.bos_token, EosToken = n.eos_token, EotToken = n.eot_token,
                    PadToken = n.pad_token, MappedWeightBytes = n.mapped_weight_bytes,
                    WeightCopyBytes = n.weight_copy_bytes,
                };
            }
        }

        private static string CString(byte[] b)
        {
            int n = Array.IndexOf(b, (byte)0);
            return System.Text.Encoding.UTF8.GetString(b, 0, n < 0 ? b.Length : n);
        }

        public KvStats KvStats
        {
            get
            {
                var s = new KvStats();
                Llm.Check(Native.llm_kv_stats_init_v(ref s, Native.SizeOf<KvStats>()));
                Llm.Check(Native.llm_model_kv_stats(Live, ref s));
                return s;
            }
        }

        public BatchStats BatchStats
        {
            get
            {
                var s = new BatchStats();
                Llm.Check(Native.llm_batch_stats_init_v(ref s, Native.SizeOf<BatchStats>()));
                Llm.Check(Native.llm_model_batch_stats(Live, ref s));
                return s;
            }
        }

        /// <summary>UTF-8 text to token ids.</summary>
        public int[] Tokenize(string text, bool addSpecial = true, bool parseSpecial = false)
        {
            if (text == null) throw new ArgumentNullException("text");
            byte[] bytes = Utf8.Bytes(text);
            var tokens = new int[bytes.Length + 8];
            UIntPtr n;
            int status = Native.llm_tokenize(Live, bytes, (UIntPtr)bytes.Length, addSpecial ? 1 : 0,
                                             parseSpecial ? 1 : 0, tokens, (UIntPtr)tokens.Length, out n);
            if (status == (int)LlmStatus.BufferTooSmall)
            {
                tokens = new int[(int)n];
                status = Native.llm_tokenize(Live, bytes, (UIntPtr)bytes.Length, addSpecial ? 1 : 0,
                                             parseSpecial ? 1 : 0, tokens, (UIntPtr)tokens.Length, out n);
            }
            Llm.Check(status);
            Array.Resize(ref tokens, (int)n);
            return tokens;
        }

        /// <summary>The bytes of one token (possibly part of a UTF-8 sequence).</summary>
        public byte[] TokenBytes(int token, bool renderSpecial = false)
        {
            var buf = new byte[64];
            UIntPtr n;
            int status = Native.llm_token_to_piece(Live, token, renderSpecial ? 1 : 0, buf, (UIntPtr)buf.Length, out n);
            if (status == (int)LlmStatus.BufferTooSmall)
            {
                buf = new byte[(int)n];
                status = Native.llm_token_to_piece(Live, token, renderSpecial ? 1 : 0, buf, (UIntPtr)buf.Length, out n);
            }
            Llm.Check(status);
            Array.Resize(ref buf, (int)n);
            return buf;
        }

        public string Detokenize(int[] tokens, bool renderSpecial = false)
        {
            UIntPtr n;
            int status = Native.llm_detokenize(Live, tokens, (UIntPtr)tokens.Length, renderSpecial ? 1 : 0,
                                               null, UIntPtr.Zero, out n);
            if (status != (int)LlmStatus.BufferTooSmall) Llm.Check(status);
            var buf = new byte[(int)n + 1];
            Llm.Check(Native.llm_detokenize(Live, tokens, (UIntPtr)tokens.Length, renderSpecial ? 1 : 0,
                                            buf, (UIntPtr)buf.Length, out n));
            return System.Text.Encoding.UTF8.GetString(buf, 0, (int)n);
        }

        /// <summary>Whether token ends a generation (EOS, EOT, ...).</summary>
        public bool IsEndOfGeneration(int token)
        {
            lock (_eog)
            {
                bool v;
                if (_eog.TryGetValue(token, out v)) return v;
            }
            int isEog;
            Llm.Check(Native.llm_token_is_eog(Live, token, out isEog));
            lock (_eog) _eog[token] = isEog != 0;
            return isEog != 0;
        }

        /// <summary>Formats (role, content) pairs with the model's chat
        /// template (or a built-in one by name); tokenize the result with
        /// parseSpecial = true.</summary>
        public string ChatFormat(IList<KeyValuePair<string, string>> messages, bool addGenerationPrompt = true,
                                 string templateName = null)
        {
            var pinned = new List<GCHandle>();
            try
            {
                var arr = new ChatMessageNative[messages.Count];
                for (int i = 0; i < arr.Length; i++)
                {
                    GCHandle r = GCHandle.Alloc(Utf8.CString(messages[i].Key), GCHandleType.Pinned);
                    pinned.Add(r);
                    GCHandle c = GCHandle.Alloc(Utf8.CString(messages[i].Value), GCHandleType.Pinned);
                    pinned.Add(c);
                    arr[i].role = r.AddrOfPinnedObject();
                    arr[i].content = c.AddrOfPinnedObject();
                }
                byte[] name = templateName == null ? null : Utf8.CString(templateName);
                var size = Native.SizeOf<ChatMessageNative>();
                UIntPtr n;
                int status = Native.llm_chat_format_v(Live, name, arr, (UIntPtr)arr.Length, size,
                                                      addGenerationPrompt ? 1 : 0, null, UIntPtr.Zero, out n);
                if (status != (int)LlmStatus.BufferTooSmall) Llm.Check(status);
                var buf = new byte[(int)n + 1];
                Llm.Check(Native.llm_chat_format_v(Live, name, arr, (UIntPtr)arr.Length, size,
                                                   addGenerationPrompt ? 1 : 0, buf, (UIntPtr)buf.Length, out n));
                return System.Text.Encoding.UTF8.GetString(buf, 0, (int)n);
            }
            finally
            {
                foreach (var h in pinned) h.Free();
            }
        }

        public Session CreateSession(SessionOptions options = null) { return new Session(this, options); }
    }
}
