using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;

namespace LibLlm
{
    /// <summary>Options of a session (llm_session_params); null fields keep
    /// the library's defaults. Temperature = 0 is greedy.</summary>
    public sealed class SessionOptions
    {
        public int ContextLength;   // 0: the model's trained context, capped at 4096
        public bool KvF32;
        public ulong Seed;
        public float? Temperature, TopP, MinP, RepeatPenalty, PresencePenalty, FrequencyPenalty;
        public int? TopK, PenaltyLastN;

        internal void Apply(ref SamplerParams s)
        {
            if (Temperature.HasValue) s.temperature = Temperature.Value;
            if (TopK.HasValue) s.top_k = TopK.Value;
            if (TopP.HasValue) s.top_p = TopP.Value;
            if (MinP.HasValue) s.min_p = MinP.Value;
            if (RepeatPenalty.HasValue) s.repeat_penalty = RepeatPenalty.Value;
            if (PresencePenalty.HasValue) s.presence_penalty = PresencePenalty.Value;
            if (FrequencyPenalty.HasValue) s.frequency_penalty = FrequencyPenalty.Value;
            if (PenaltyLastN.HasValue) s.penalty_last_n = PenaltyLastN.Value;
        }
    }

    public enum StopReason { EndOfGeneration = 0, MaxTokens = 1, StopString = 2, Callback = 3, ContextFull = 4 }

    /// <summary>Result of Session.Generate.</summary>
    public sealed class Generation
    {
        public string Text;
        public StopReason StopReason;
        public int PromptTokens, GeneratedTokens;
        public double PrefillMs, DecodeMs;
    }

    /// <summary>Per-session batcher counters.</summary>
    public struct SessionStats
    {
        public ulong Iterations, PrefillChunks, CachedTokens;
    }

    /// <summary>A conversation state on a model (history, KV cache,
    /// sampler). One call at a time: a concurrent call throws LlmException
    /// with LlmStatus.Busy, except Cancel() and Stats, which any thread may
    /// call at any time. Different sessions may run on different threads at
    /// once; the library batches their steps.</summary>
    public sealed class Session : IDisposable
    {
        internal readonly SessionHandle Handle;
        public Model Model { get; private set; }

        internal Session(Model model, SessionOptions options)
        {
            var p = new SessionParams();
            Llm.Check(Native.llm_session_params_init_v(ref p, Native.SizeOf<SessionParams>()));
            if (options != null)
            {
                p.n_ctx = options.ContextLength;
                p.kv_type = options.KvF32 ? 1 : 0;
                p.seed = options.Seed;
                options.Apply(ref p.sampler);
            }
            SessionHandle h;
            int status = Native.llm_session_create(model.Live, ref p, out h);
            if (status != 0) { var e = Llm.Error(status); h.SetHandleAsInvalid(); throw e; }
            Handle = h;
            Model = model;
        }

        private Session(Model model, SessionHandle handle)
        {
            Model = model;
            Handle = handle;
        }

        /// <summary>Frees the session. If a call is running on it on another
        /// thread, the native free waits until that call returns (SafeHandle
        /// reference counting); use Cancel() to stop it.</summary>
        public void Dispose() { Handle.Dispose(); }

        public bool IsDisposed { get { return Handle.IsClosed; } }

        internal SessionHandle Live
        {
            get
            {
                if (Handle.IsClosed) throw Llm.Closed("session");
                return Handle;
            }
        }

        // ---- blocking steps ----
        public void Prefill(int[] tokens)
        {
            Llm.Check(Native.llm_session_prefill(Live, tokens, (UIntPtr)tokens.Length));
        }

        public void Prefill(string text) { Prefill(Model.Tokenize(text)); }

        /// <summary>Samples the next token, appends and runs it; returns it.</summary>
        public int Decode()
        {
            int token;
            Llm.Check(Native.llm_session_decode(Live, out token));
            return token;
        }

        /// <summary>A copy of the next-token logits.</summary>
        public float[] Logits()
        {
            IntPtr p;
            UIntPtr n;
            Llm.Check(Native.llm_session_logits(Live, out p, out n));
            var logits = new float[(int)n];
            Marshal.Copy(p, logits, 0, logits.Length);
            return logits;
        }

        public int TokenCount
        {
            get
            {
                UIntPtr n;
                Llm.Check(Native.llm_session_n_tokens(Live, out n));
                return (int)n;
            }
        }

        public void SetSampler(SessionOptions options)
        {
            var s = new SamplerParams();
            Llm.Check(Native.llm_sampler_params_init_v(ref s, Native.SizeOf<SamplerParams>()));
            options.Apply(ref s);
            Llm.Check(Native.llm_session_set_sampler(Live, ref s));
        }

        public void Reset() { Llm.Check(Native.llm_session_reset(Live)); }

        public void SetSeed(ulong seed) { Llm.Check(Native.llm_session_set_seed(Live, seed)); }

        public void Rewind(int tokens) { Llm.Check(Native.llm_session_rewind(Live, (UIntPtr)tokens)); }

        /// <summary>Latches a cancel (any thread, any time): the running or
        /// next model call throws LlmException(Cancelled) and leaves the
        /// session as it was.</summary>
        public void Cancel() { Llm.Check(Native.llm_session_cancel(Live)); }

        /// <summary>A new session sharing this one's history and KV blocks
        /// (copy-on-write).</summary>
        public Session Fork()
        {
            SessionHandle child;
            int status = Native.llm_session_fork(Live, out child);
            if (status != 0) { var e = Llm.Error(status); child.SetHandleAsInvalid(); throw e; }
            return new Session(Model, child);
        }

        public byte[] Save()
        {
            UIntPtr n;
            int status = Native.llm_session_save(Live, null, UIntPtr.Zero, out n);
            if (status != (int)LlmStatus.BufferTooSmall) Llm.Check(status);
            var buf = new byte[(int)n];
            Llm.Check(Native.llm_session_save(Live, buf, (UIntPtr)buf.Length, out n));
            return buf;
        }

        public void Load(byte[] state)
        {
            Llm.Check(Native.llm_session_load(Live, state, (UIntPtr)state.Length));
        }

        public SessionStats Stats
        {
            get
            {
                var s = new SessionStatsNative();
                Llm.Check(Native.llm_session_stats_init_v(ref s, Native.SizeOf<SessionStatsNative>()));
                Llm.Check(Native.llm_session_get_stats(Live, ref s));
                return new SessionStats
                {
                    Iterations = s.iterations, PrefillChunks = s.prefill_chunks, CachedTokens = s.cached_tokens,
                };
            }
        }

        // ---- non-blocking steps (game loops) ----
        public void PrefillAsync(int[] tokens)
        {
            Llm.Check(Native.llm_session_prefill_async(Live, tokens, (UIntPtr)tokens.Length));
        }

        public void DecodeAsync() { Llm.Check(Native.llm_session_decode_async(Live)); }

        /// <summary>Never blocks. False while the submitted step runs; true
        /// once it ended, with the decoded token (-1 for a prefill). A failed
        /// step throws LlmException.</summary>
        public bool Poll(out int token)
        {
            int done;
            Llm.Check(Native.llm_session_poll(Live, out done, out token));
            return done != 0;
        }

        /// <summary>Blocks until the submitted step ends; returns its token
        /// (-1 for a prefill).</summary>
        public int Wait()
        {
            int token;
            Llm.Check(Native.llm_session_wait(Live, out token));
            return token;
        }

        /// <summary>Starts a generation driven by TryPoll from a frame loop:
        /// nothing here or in TryPoll blocks.</summary>
        public TokenStream StartGeneration(int[] prompt, int maxTokens)
        {
            return new TokenStream(this, prompt, maxTokens);
        }

        // ---- generation ----
        private sealed class GenerateState
        {
            public Action<string> OnPiece;
            public Func<string, bool> StopWhen;
            public readonly System.Text.StringBuilder Text = new System.Text.StringBuilder();
            public Exception Failure;
        }

        // Static delegate (never collected, reachable from managed code) bound
        // to a static method marked for AOT; per-call state goes through a
        // GCHandle in the user pointer.
        private static readonly PieceFn s_pieceTrampoline = PieceTrampoline;

        [AOT.MonoPInvokeCallback(typeof(PieceFn))]
        private static int PieceTrampoline(IntPtr text, UIntPtr len, IntPtr user)
        {
            var state = (GenerateState)GCHandle.FromIntPtr(user).Target;
            try
            {
                string piece = Utf8.Copy(text, (int)len);
                state.Text.Append(piece);
                if (state.OnPiece != null) state.OnPiece(piece);
                return state.StopWhen != null && state.StopWhen(piece) ? 1 : 0;
            }
            catch (Exception e)
            {
                state.Failure = e;  // rethrown by Generate; never crosses into C
                return 1;
            }
        }

        /// <summary>llm_generate: prefills prompt (may be empty to continue)
        /// and decodes until an end-of-generation token, a stop string,
        /// maxTokens, or stopWhen(piece) returning true. onPiece and stopWhen
        /// run on this thread, inside the call; an exception they throw stops
        /// the generation and is rethrown here.</summary>
        public Generation Generate(int[] prompt, int maxTokens = 256, string[] stop = null,
                                   Action<string> onPiece = null, Func<string, bool> stopWhen = null)
        {
            prompt = prompt ?? new int[0];
            var gp = new GenerateParams();
            Llm.Check(Native.llm_generate_params_init_v(ref gp, Native.SizeOf<GenerateParams>()));
            var result = new GenerateResultNative();
            Llm.Check(Native.llm_generate_result_init_v(ref result, Native.SizeOf<GenerateResultNative>()));
            var state = new GenerateState { OnPiece = onPiece, StopWhen = stopWhen };
            GCHandle stateHandle = GCHandle.Alloc(state);
            var pinned = new List<GCHandle>();
            try
            {
                if (stop != null && stop.Length > 0)
                {
                    var ptrs = new IntPtr[stop.Length];
                    for (int i = 0; i < stop.Length; i++)
                    {
                        GCHandle h = GCHandle.Alloc(Utf8.CString(stop[i]), GCHandleType.Pinned);
                        pinned.Add(h);
                        ptrs[i] = h.AddrOfPinnedObject();
                    }
                    GCHandle arr = GCHandle.Alloc(ptrs, GCHandleType.Pinned);
                    pinned.Add(arr);
                    gp.stop = arr.AddrOfPinnedObject();
                    gp.n_stop = (UIntPtr)stop.Length;
                }
                gp.max_tokens = maxTokens;
                gp.on_piece = Marshal.GetFunctionPointerForDelegate(s_pieceTrampoline);
                gp.user = GCHandle.ToIntPtr(stateHandle);
                int status = Native.llm_generate(Live, prompt, (UIntPtr)prompt.Length, ref gp, ref result);
                LlmException error = status != 0 ? Llm.Error(status) : null;
                if (state.Failure != null)
                    System.Runtime.ExceptionServices.ExceptionDispatchInfo.Capture(state.Failure).Throw();
                if (error != null) throw error;
            }
            finally
            {
                stateHandle.Free();
                foreach (var h in pinned) h.Free();
            }
            return new Generation
            {
                Text = state.Text.ToString(), StopReason = (StopReason)result.stop_reason,
                PromptTokens = result.n_prompt_tokens, GeneratedTokens = result.n_generated,
                PrefillMs = result.prefill_ms, DecodeMs = result.decode_ms,
            };
        }

        public Generation Generate(string prompt, int maxTokens = 256, string[] stop = null,
                                   Action<string> onPiece = null, Func<string, bool> stopWhen = null)
        {
            return Generate(Model.Tokenize(prompt), maxTokens, stop, onPiece, stopWhen);
        }

        /// <summary>Generated token ids, one blocking decode step per item on
        /// the enumerating thread; ends at an end-of-generation token (not
        /// yielded) or after maxTokens. prompt null: continue.</summary>
        public IEnumerable<int> Tokens(int[] prompt, int maxTokens = 256)
        {
            if (prompt != null) Prefill(prompt);
            for (int i = 0; i < maxTokens; i++)
            {
                int token = Decode();
                if (Model.IsEndOfGeneration(token)) yield break;
                yield return token;
            }
        }

        /// <summary>UTF-8-complete text pieces of the generated tokens.</summary>
        public IEnumerable<string> Stream(int[] prompt, int maxTokens = 256)
        {
            var decoder = new PieceDecoder(Model);
            foreach (int token in Tokens(prompt, maxTokens))
            {
                string text = decoder.Add(token);
                if (text.Length > 0) yield return text;
            }
            string tail = decoder.Flush();
            if (tail.Length > 0) yield return tail;
        }

        public IEnumerable<string> Stream(string prompt, int maxTokens = 256)
        {
            return Stream(Model.Tokenize(prompt), maxTokens);
        }
    }

    /// <summary>Token bytes to text, holding back an incomplete UTF-8 sequence.</summary>
    internal sealed class PieceDecoder
    {
        private readonly Model _model;
        private readonly System.Text.Decoder _utf8 = new System.Text.UTF8Encoding(false, false).GetDecoder();
        private char[] _chars = new char[64];

        public PieceDecoder(Model model) { _model = model; }

        public string Add(int token) { return Decode(_model.TokenBytes(token), false); }

        public string Flush() { return Decode(new byte[0], true); }

        private string Decode(byte[] bytes, bool flush)
        {
            int need = _utf8.GetCharCount(bytes, 0, bytes.Length, false) + 8;
            if (need > _chars.Length) _chars = new char[need];
            int n = _utf8.GetChars(bytes, 0, bytes.Length, _chars, 0, flush);
            return new string(_chars, 0, n);
        }
    }
}
