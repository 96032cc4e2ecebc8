// Raw P/Invoke declarations of include/llm/llm.h (0.3). Struct layouts are
// the 0.3 header's (docs/ABI.md, "Historical sizes"); every llm_*_init_v gets
// Marshal.SizeOf of the struct declared here, because the unsized init names
// are C macros. Strings go in as NUL-terminated UTF-8 byte arrays, and
// const char* results come back as IntPtr, copied at once (Utf8.Copy): a
// string return type would make the marshaller free library memory.
using System;
using System.Runtime.InteropServices;

namespace LibLlm
{
    [StructLayout(LayoutKind.Sequential)]
    internal struct ModelParams
    {
        public uint struct_size;
        public int vocab_only;
        public int n_threads;
        public uint reserved0;
        public IntPtr progress;
        public IntPtr progress_user;
        public ulong kv_budget_bytes;
        public int deterministic;
        public int batch_tokens;
        public int device;
        public int device_index;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ModelInfoNative
    {
        public uint struct_size;
        public int vocab_only;
        public ulong n_params;
        public int n_ctx_train;
        public int n_vocab;
        public int n_layer;
        public int n_embd;
        public int n_head;
        public int n_head_kv;
        public int bos_token;
        public int eos_token;
        public int eot_token;
        public int pad_token;
        public int add_bos;
        [MarshalAs(UnmanagedType.ByValArray, SizeConst = 32)] public byte[] architecture;
        [MarshalAs(UnmanagedType.ByValArray, SizeConst = 128)] public byte[] name;
        public int device;
        public int device_index;
        public ulong mapped_weight_bytes;
        public ulong weight_copy_bytes;
    }

    /// <summary>KV block pool of a model (llm_kv_stats).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct KvStats
    {
        public uint struct_size;
        public uint block_tokens;
        public ulong budget_bytes;
        public ulong block_bytes;
        public ulong block_overhead_bytes;
        public ulong blocks_total;
        public ulong blocks_allocated;
        public ulong blocks_used;
        public ulong blocks_shared;
        public ulong blocks_cached;
        public ulong prefix_hits;
        public ulong bytes_per_token_f16;
        public ulong bytes_per_token_f32;
        public uint n_pools;
        public uint local_window;
        public ulong local_budget_bytes;
        public ulong local_block_bytes;
        public ulong local_blocks_total;
        public ulong local_blocks_allocated;
        public ulong local_blocks_used;
        public ulong local_blocks_shared;
        public ulong local_blocks_cached;
        public ulong local_prefix_hits;
    }

    /// <summary>Counters of a model's batcher (llm_batch_stats).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct BatchStats
    {
        public uint struct_size;
        public uint reserved0;
        public ulong iterations;
        public ulong decode_iterations;
        public ulong decode_rows;
        public ulong prefill_chunks;
        public ulong tokens;
        public ulong max_sessions_in_pass;
        public ulong steps_completed;
        public ulong steps_failed;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct SamplerParams
    {
        public uint struct_size;
        public float temperature;
        public int top_k;
        public float top_p;
        public float min_p;
        public float repeat_penalty;
        public float presence_penalty;
        public float frequency_penalty;
        public int penalty_last_n;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct SamplerExt
    {
        public uint struct_size;
        public uint reserved0;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct SessionParams
    {
        public uint struct_size;
        public int n_ctx;
        public int kv_type;
        public int n_threads;
        public ulong seed;
        public SamplerParams sampler;
        public IntPtr sampler_ext;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct SessionStatsNative
    {
        public uint struct_size;
        public uint reserved0;
        public ulong iterations;
        public ulong prefill_chunks;
        public ulong cached_tokens;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct GenerateParams
    {
        public uint struct_size;
        public int max_tokens;
        public IntPtr stop;
        public UIntPtr n_stop;
        public IntPtr on_piece;
        public IntPtr user;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct GenerateResultNative
    {
        public uint struct_size;
        public int stop_reason;
        public int n_prompt_tokens;
        public int n_generated;
        public double prefill_ms;
        public double decode_ms;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ChatMessageNative
    {
        public IntPtr role;
        public IntPtr content;
    }

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate void LogFn(int level, IntPtr message, IntPtr user);

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate int PieceFn(IntPtr text, UIntPtr len, IntPtr user);

    internal static class Native
    {
        // Resolved as libllm.so through the loader's search path
        // (LD_LIBRARY_PATH, the system's directories); the unversioned link
        // comes with `cmake --install` and is in every build directory.
        private const string Lib = "llm";

        [DllImport(Lib)] internal static extern IntPtr llm_status_string(int status);
        [DllImport(Lib)] internal static extern IntPtr llm_last_error();
        [DllImport(Lib)] internal static extern IntPtr llm_version();
        [DllImport(Lib)] internal static extern int llm_set_log_callback(IntPtr fn, IntPtr user, int minLevel);

        [DllImport(Lib)] internal static extern int llm_model_params_init_v(ref ModelParams p, UIntPtr size);
        [DllImport(Lib)] internal static extern int llm_model_load(byte[] path, ref ModelParams p, out ModelHandle model);
        [DllImport(Lib)] internal static extern void llm_model_free(IntPtr model);
        [DllImport(Lib)] internal static extern int llm_model_info_init_v(ref ModelInfoNative info, UIntPtr size);
        [DllImport(Lib)] internal static extern int llm_model_get_info(ModelHandle model, ref ModelInfoNative info);
        [DllImport(Lib)] internal static extern int llm_token_is_eog(ModelHandle model, int token, out int isEog);
        [DllImport(Lib)] internal static extern int llm_kv_stats_init_v(ref KvStats stats, UIntPtr size);
        [DllImport(Lib)] internal static extern int llm_model_kv_stats(ModelHandle model, ref KvStats stats);
        [DllImport(Lib)] internal static extern int llm_batch_stats_init_v(ref BatchStats stats, UIntPtr size);
        [DllImport(Lib)] internal static extern int llm_model_batch_stats(ModelHandle model, ref BatchStats stats);
        [DllImport(Lib)] internal static extern int llm_tokenize(ModelHandle model, byte[] text, UIntPtr len, int addSpecial, int parseSpecial, int[] tokens, UIntPtr capacity, out UIntPtr nOut);
        [DllImport(Lib)] internal static extern int llm_token_to_piece(ModelHandle model, int token, int renderSpecial, byte[] buf, UIntPtr capacity, out UIntPtr lenOut);
        [DllImport(Lib)] internal static extern int llm_detokenize(ModelHandle model, int[] tokens, UIntPtr n, int renderSpecial, byte[] buf, UIntPtr capacity, out UIntPtr lenOut);
        [DllImport(Lib)] internal static extern int llm_chat_format_v(ModelHandle model, byte[] templateName, ChatMessageNative[] messages, UIntPtr n, UIntPtr messageSize, int addGenerationPrompt, byte[] buf, UIntPtr capacity, out UIntPtr lenOut);

        [DllImport(Lib)] internal static extern int llm_sampler_params_init_v(ref SamplerParams p, UIntPtr size);
        [DllImport(Lib)] internal static extern int llm_session_params_init_v(ref SessionParams p, UIntPtr size);
        [DllImport(Lib)] internal static extern int llm_session_create(ModelHandle model, ref SessionParams p, out SessionHandle session);
        [DllImport(Lib)] internal static extern void llm_session_free(IntPtr session);
        [DllImport(Lib)] internal static extern int llm_session_prefill(SessionHandle s, int[] tokens, UIntPtr n);
        [DllImport(Lib)] internal static extern int llm_session_decode(SessionHandle s, out int token);
        [DllImport(Lib)] internal static extern int llm_session_logits(SessionHandle s, out IntPtr logits, out UIntPtr nVocab);
        [DllImport(Lib)] internal static extern int llm_session_n_tokens(SessionHandle s, out UIntPtr n);
        [DllImport(Lib)] internal static extern int llm_session_set_sampler(SessionHandle s, ref SamplerParams p);
        [DllImport(Lib)] internal static extern int llm_session_reset(SessionHandle s);
        [DllImport(Lib)] internal static extern int llm_session_set_seed(SessionHandle s, ulong seed);
        [DllImport(Lib)] internal static extern int llm_session_prefill_async(SessionHandle s, int[] tokens, UIntPtr n);
        [DllImport(Lib)] internal static extern int llm_session_decode_async(SessionHandle s);
        [DllImport(Lib)] internal static extern int llm_session_poll(SessionHandle s, out int done, out int token);
        [DllImport(Lib)] internal static extern int llm_session_wait(SessionHandle s, out int token);
        [DllImport(Lib)] internal static extern int llm_session_cancel(SessionHandle s);
        [DllImport(Lib)] internal static extern int llm_session_rewind(SessionHandle s, UIntPtr n);
        [DllImport(Lib)] internal static extern int llm_session_fork(SessionHandle parent, out SessionHandle child);
        [DllImport(Lib)] internal static extern int llm_session_save(SessionHandle s, byte[] buf, UIntPtr capacity, out UIntPtr sizeOut);
        [DllImport(Lib)] internal static extern int llm_session_load(SessionHandle s, byte[] buf, UIntPtr size);
        [DllImport(Lib)] internal static extern int llm_session_stats_init_v(ref SessionStatsNative stats, UIntPtr size);
        [DllImport(Lib)] internal static extern int llm_session_get_stats(SessionHandle s, ref SessionStatsNative stats);
        [DllImport(Lib)] internal static extern int llm_generate_params_init_v(ref GenerateParams p, UIntPtr size);
        [DllImport(Lib)] internal static extern int llm_generate_result_init_v(ref GenerateResultNative r, UIntPtr size);
        [DllImport(Lib)] internal static extern int llm_generate(SessionHandle s, int[] prompt, UIntPtr n, ref GenerateParams p, ref GenerateResultNative r);

        /// <summary>Size of a struct for llm_*_init_v.</summary>
        internal static UIntPtr SizeOf<T>() { return (UIntPtr)Marshal.SizeOf(typeof(T)); }
    }

    /// <summary>NUL-terminated UTF-8 in both directions.</summary>
    internal static class Utf8
    {
        internal static string Copy(IntPtr p)
        {
            if (p == IntPtr.Zero) return "";
            int n = 0;
            while (Marshal.ReadByte(p, n) != 0) n++;
            return Copy(p, n);
        }

        internal static string Copy(IntPtr p, int n)
        {
            if (n == 0) return "";
            var bytes = new byte[n];
            Marshal.Copy(p, bytes, 0, n);
            return System.Text.Encoding.UTF8.GetString(bytes);
        }

        internal static byte[] Bytes(string s) { return System.Text.Encoding.UTF8.GetBytes(s); }

        internal static byte[] CString(string s)
        {
            var b = System.Text.Encoding.UTF8.GetBytes(s);
            Array.Resize(ref b, b.Length + 1);
            return b;
        }
    }
}
