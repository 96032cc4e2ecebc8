/*
 * libllm — an embeddable LLM inference library behind a stable C ABI.
 *
 * Conventions (docs/ABI.md has the compatibility policy):
 *  - Every fallible function returns llm_status (LLM_OK == 0) and writes its
 *    results through out-parameters. On failure, llm_last_error() returns a
 *    thread-local message naming the problem; out-parameters are untouched
 *    unless stated otherwise.
 *  - Handles are opaque ids, not pointers to library memory: every call looks
 *    its handle up in a registry of live handles first, so a NULL, freed,
 *    foreign or wrong-kind handle is refused with LLM_ERR_INVALID_ARGUMENT
 *    without being dereferenced. Ids are never reused within a process.
 *    llm_x_free(NULL) and freeing a stale handle are no-ops.
 *  - Structs begin with uint32_t struct_size and are filled by llm_x_init(),
 *    a macro that passes sizeof the struct as this header declares it to
 *    llm_x_init_v(). The library reads and writes only struct_size bytes, so
 *    fields are appended in later versions without breaking old callers.
 *    A struct_size larger than the library knows (a newer header) is
 *    accepted: input structs only if the bytes it does not know are zero,
 *    and getters zero them (docs/ABI.md, "Struct sizes"). FFI bindings,
 *    which cannot use the macros, call llm_x_init_v with their struct size.
 *  - No bool and no enum-typed fields in structs: int32_t/uint32_t only.
 *  - Buffers the caller provides: pass the capacity, get the needed size back;
 *    too small -> LLM_ERR_BUFFER_TOO_SMALL with the needed size filled in.
 *  - The library never writes to stdout/stderr; install a log sink with
 *    llm_set_log_callback().
 *  - Nothing (exception, abort, exit, assert) crosses this boundary.
 *
 * Threads: an llm_model is immutable after load and may be used from any
 * number of threads. An llm_session serves one call at a time: a second call
 * on a session while a call on it runs (from another thread, or re-entered
 * from that call's callback) returns LLM_ERR_BUSY and changes nothing.
 * Different sessions may be driven from different threads at once: their
 * steps are merged into shared forward passes by the model's batcher, which
 * runs on one libllm thread per model (started with the first step, joined
 * when the model's last reference goes) plus the model's n_threads - 1
 * worker threads.
 *
 * Callbacks (progress, on_piece) run on the calling thread, inside the call.
 * They may call any libllm function, with these results: calls on the session
 * being driven -> LLM_ERR_BUSY; llm_session_free on it -> the handle dies at
 * once, the generation stops (LLM_OK, LLM_STOP_CALLBACK) and the session is
 * destroyed when the call returns; llm_model_free on any model -> allowed
 * (sessions hold their own reference; a model being loaded has no handle
 * yet). Returning "stop" is honoured at every call.
 *
 * This header compiles as C99 and as C++.
 */
#ifndef LLM_LLM_H
#define LLM_LLM_H

#include <stddef.h>
#include <stdint.h>

#define LLM_VERSION_MAJOR 0
#define LLM_VERSION_MINOR 3
#define LLM_VERSION_PATCH 0

#if defined(_WIN32)
#if defined(LLM_BUILDING_LIBRARY)
#define LLM_API __declspec(dllexport)
#else
#define LLM_API __declspec(dllimport)
#endif
#else
#define LLM_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes (values are never renumbered) ------------------------ */
typedef int32_t llm_status;
#define LLM_OK 0
#define LLM_ERR_INVALID_ARGUMENT 1 /* a NULL/foreign handle, bad length, bad id */
#define LLM_ERR_IO 2               /* the file could not be opened or read */
#define LLM_ERR_BAD_MODEL 3        /* the model file is corrupt or inconsistent */
#define LLM_ERR_UNSUPPORTED 4      /* valid, but not supported by this build */
#define LLM_ERR_OUT_OF_MEMORY 5
#define LLM_ERR_CONTEXT_FULL 6     /* the session's n_ctx would be exceeded */
#define LLM_ERR_KV_FULL 7          /* the model's KV pool has no free blocks */
#define LLM_ERR_CANCELLED 8        /* a callback or llm_session_cancel stopped it */
#define LLM_ERR_BUFFER_TOO_SMALL 9 /* the needed size was written back */
#define LLM_ERR_BUSY 10            /* the object is in use by another call */
#define LLM_ERR_DEVICE 11          /* a GPU/driver error */
#define LLM_ERR_INTERNAL 12        /* a bug in libllm: please report it */

/* Static name of a status, e.g. "LLM_ERR_IO". Never NULL. Thread-safe. */
LLM_API const char *llm_status_string(llm_status status);

/* Message of the last failure on the calling thread ("" if none). The pointer
 * stays valid until the next libllm call on this thread. */
LLM_API const char *llm_last_error(void);

/* The library's version, "MAJOR.MINOR.PATCH" (e.g. "0.3.0"): it may be newer
 * than the LLM_VERSION_* of the header a caller was compiled against. Static
 * string. */
LLM_API const char *llm_version(void);

/* ---- logging ------------------------------------------------------------ */
#define LLM_LOG_DEBUG 0
#define LLM_LOG_INFO 1
#define LLM_LOG_WARN 2
#define LLM_LOG_ERROR 3

/* Called with one complete message (no trailing newline). May be called from
 * any libllm thread, so it must be thread-safe. */
typedef void (*llm_log_fn)(int32_t level, const char *message, void *user);

/* Install a process-wide log sink (NULL: discard, the default). Messages below
 * min_level are not formatted. Thread-safe; the sink in force when a message
 * is emitted receives it. */
LLM_API llm_status llm_set_log_callback(llm_log_fn fn, void *user, int32_t min_level);

/* ---- types -------------------------------------------------------------- */
typedef int32_t llm_token;
typedef struct llm_model llm_model;
typedef struct llm_session llm_session;

/* ---- model -------------------------------------------------------------- */

/* Load progress in [0, 1]. Return 0 to go on, non-zero to cancel the load
 * (the load then fails with LLM_ERR_CANCELLED). Runs on the loading thread. */
typedef int32_t (*llm_progress_fn)(float progress, void *user);

/* Values of llm_model_params.device and llm_model_info.device (0.3). */
#define LLM_DEVICE_AUTO 0
#define LLM_DEVICE_CPU 1
#define LLM_DEVICE_CUDA 2

typedef struct llm_model_params {
  uint32_t struct_size;
  int32_t vocab_only;          /* 1: load tokenizer and metadata, no weights */
  int32_t n_threads;           /* threads of the model's batched forward passes
                                  (all its sessions); 0 = physical cores */
  uint32_t reserved0;
  llm_progress_fn progress;    /* may be NULL */
  void *progress_user;
  /* ---- 0.2 ---- */
  uint64_t kv_budget_bytes;    /* cap on the model's KV block pool, shared by
                                  all its sessions; 0 = default: a quarter of
                                  physical memory, at most what 64 sessions of
                                  4096 tokens need (F16). A value below one
                                  block of all layers (llm_kv_stats.block_bytes
                                  + local_block_bytes) fails the load with
                                  LLM_ERR_INVALID_ARGUMENT. A model with two
                                  pools splits it by layer count. Memory is
                                  taken as sessions use it, never all at load. */
  int32_t deterministic;       /* 1: batch-invariant kernels: a session's
                                  results are bit-identical whether it runs
                                  alone or batched with any other sessions,
                                  with any prefill chunking or prefix reuse.
                                  0 (default): llama.cpp's summation orders
                                  (see docs/BATCHING.md for what may differ) */
  int32_t batch_tokens;        /* most tokens in one batched forward pass
                                  (decode steps + prefill chunks); 0 = 256 */
  /* ---- 0.3 ---- */
  int32_t device;              /* LLM_DEVICE_AUTO (default): the best device
                                  this build and host have (today the CPU);
                                  LLM_DEVICE_CPU; LLM_DEVICE_CUDA: an NVIDIA
                                  GPU -- a build without the CUDA backend
                                  gives LLM_ERR_UNSUPPORTED, a host without a
                                  usable GPU LLM_ERR_DEVICE; never a silent
                                  fall back to the CPU */
  int32_t device_index;        /* which device of that kind, from 0 (the CPU
                                  has only 0) */
} llm_model_params;

/* Fill the first struct_size bytes of *params with defaults and set
 * params->struct_size = struct_size (0.3). struct_size: a size the struct has
 * had (docs/ABI.md), or a larger one from a newer header (the bytes beyond
 * this library's struct are zeroed); else INVALID_ARGUMENT. NULL ->
 * INVALID_ARGUMENT. */
LLM_API llm_status llm_model_params_init_v(llm_model_params *params, size_t struct_size);

/* llm_model_params_init(p) passes sizeof(llm_model_params) of this header.
 * The function of that name, for binaries built against 0.1 and 0.2 headers,
 * writes the 0.1 struct (up to progress_user) and nothing past it. */
LLM_API llm_status llm_model_params_init(llm_model_params *params);
#define llm_model_params_init(params) llm_model_params_init_v((params), sizeof(llm_model_params))

/* Load a GGUF model from a file path (UTF-8). The file is memory-mapped for
 * the model's lifetime. params may be NULL (defaults). On success *out_model
 * owns the model: free it with llm_model_free. */
LLM_API llm_status llm_model_load(const char *path, const llm_model_params *params,
                                  llm_model **out_model);

/* Load from a caller buffer (e.g. a game's asset pack). The library copies
 * nothing it does not need: the buffer must stay valid and unchanged until the
 * model and all its sessions are freed. */
LLM_API llm_status llm_model_load_from_memory(const void *data, size_t size,
                                              const llm_model_params *params,
                                              llm_model **out_model);

/* Release the caller's reference. Sessions hold their own reference, so the
 * model may be freed before its sessions: memory goes with the last one.
 * NULL is a no-op. */
LLM_API void llm_model_free(llm_model *model);

typedef struct llm_model_info {
  uint32_t struct_size;
  int32_t vocab_only;
  uint64_t n_params;           /* number of weight elements */
  int32_t n_ctx_train;         /* trained context length */
  int32_t n_vocab;
  int32_t n_layer;
  int32_t n_embd;
  int32_t n_head;
  int32_t n_head_kv;
  llm_token bos_token;         /* -1 if the model has none */
  llm_token eos_token;         /* -1 if none */
  llm_token eot_token;         /* end of turn, -1 if none */
  llm_token pad_token;         /* -1 if none */
  int32_t add_bos;             /* the tokenizer prepends BOS with add_special */
  char architecture[32];       /* NUL-terminated, e.g. "llama" */
  char name[128];              /* general.name, truncated, NUL-terminated */
  /* ---- 0.3 ---- */
  int32_t device;              /* the device the model runs on: LLM_DEVICE_CPU
                                  or LLM_DEVICE_CUDA (vocab_only: LLM_DEVICE_CPU) */
  int32_t device_index;        /* which device of that kind */
  /* The load's memory (0 for a vocab_only model). mapped_weight_bytes: the
     bytes of the model file (or buffer) that inference reads in place, all
     made resident by the load. weight_copy_bytes: host memory the backend
     holds as its own copies of weights (the CPU backend's matrices,
     repacked or copied as they are, f32 norm vectors); a copied weight's
     file pages are dropped after the copy (llm_model_load; a caller's
     buffer is never touched), so the two add up to about the file's weight
     bytes, never twice them.
     Both are as the load left them: a CPU model whose output is tied to
     its embedding table copies that table at the first forward pass (and
     drops its file pages then), which these do not count. */
  uint64_t mapped_weight_bytes;
  uint64_t weight_copy_bytes;
} llm_model_info;

/* Zero *info and set struct_size (the rules of llm_model_params_init_v). */
LLM_API llm_status llm_model_info_init_v(llm_model_info *info, size_t struct_size);
LLM_API llm_status llm_model_info_init(llm_model_info *info);
#define llm_model_info_init(info) llm_model_info_init_v((info), sizeof(llm_model_info))

/* Fill *info (the caller sets info->struct_size, e.g. with
 * llm_model_info_init). Writes struct_size bytes: fields this library does
 * not know are zeroed, struct_size is left as it was. Thread-safe. */
LLM_API llm_status llm_model_get_info(const llm_model *model, llm_model_info *info);

/* The chat template text from the model's metadata, NUL-terminated, copied
 * into buf. *len_out receives the length without NUL. No template ->
 * LLM_ERR_UNSUPPORTED. buf may be NULL when capacity is 0 (size query). */
LLM_API llm_status llm_model_chat_template(const llm_model *model, char *buf, size_t capacity,
                                           size_t *len_out);

/* Whether token is an end-of-generation token of the model (EOS, EOT,
 * <|im_end|>-style tokens). *out = 1 or 0. */
LLM_API llm_status llm_token_is_eog(const llm_model *model, llm_token token, int32_t *out);

/* KV block pool of a model (DESIGN.md §2). Every session's KV cache is a
 * table of fixed-size blocks from its model's pool; forked sessions and
 * prompts with a common prefix share blocks. */
typedef struct llm_kv_stats {
  uint32_t struct_size;
  uint32_t block_tokens;         /* positions per block of an F16 cache (F32: half) */
  uint64_t budget_bytes;         /* the pool's cap (kv_budget_bytes) */
  uint64_t block_bytes;          /* KV data per block */
  uint64_t block_overhead_bytes; /* bookkeeping per block, beyond block_bytes */
  uint64_t blocks_total;         /* blocks that fit in the cap */
  uint64_t blocks_allocated;     /* blocks whose memory has been taken so far */
  uint64_t blocks_used;          /* held by at least one session */
  uint64_t blocks_shared;        /* held by two or more sessions */
  uint64_t blocks_cached;        /* held by none, kept for prefix reuse */
  uint64_t prefix_hits;          /* blocks reused from the prefix cache so far */
  uint64_t bytes_per_token_f16;  /* 2 x n_layer x n_head_kv x head_dim x 2 */
  uint64_t bytes_per_token_f32;  /* 2 x n_layer x n_head_kv x head_dim x 4 */
  /* 0.3: a model mixing sliding-window ("local") and full-attention
   * ("global") layers -- Gemma 2/3 -- keeps its local layers' KV in a second
   * pool, whose blocks hold only those layers and which a session's window
   * releases as it moves (docs/SLIDING_WINDOW.md). The fields above then
   * describe the first pool (the global layers'; budget_bytes and block_bytes
   * are its share), these the second. One pool: n_pools = 1, the rest 0. */
  uint32_t n_pools;                /* 1 or 2 */
  uint32_t local_window;           /* attention window of the second pool's layers */
  uint64_t local_budget_bytes;     /* the second pool's share of kv_budget_bytes */
  uint64_t local_block_bytes;
  uint64_t local_blocks_total;
  uint64_t local_blocks_allocated;
  uint64_t local_blocks_used;
  uint64_t local_blocks_shared;
  uint64_t local_blocks_cached;
  uint64_t local_prefix_hits;
} llm_kv_stats;

LLM_API llm_status llm_kv_stats_init_v(llm_kv_stats *stats, size_t struct_size);
LLM_API llm_status llm_kv_stats_init(llm_kv_stats *stats);
#define llm_kv_stats_init(stats) llm_kv_stats_init_v((stats), sizeof(llm_kv_stats))

/* Fill *stats (caller sets struct_size, e.g. with llm_kv_stats_init).
 * vocab_only models -> LLM_ERR_UNSUPPORTED. Thread-safe. */
LLM_API llm_status llm_model_kv_stats(const llm_model *model, llm_kv_stats *stats);

/* Counters of the model's batcher since load (monotonic). */
typedef struct llm_batch_stats {
  uint32_t struct_size;
  uint32_t reserved0;
  uint64_t iterations;          /* batched forward passes run */
  uint64_t decode_iterations;   /* passes holding at least one one-token step */
  uint64_t decode_rows;         /* one-token steps run, summed over passes:
                                   decode_rows / decode_iterations is the mean
                                   number of sessions decoding together */
  uint64_t prefill_chunks;      /* chunks of multi-token steps run */
  uint64_t tokens;              /* tokens run in all passes */
  uint64_t max_sessions_in_pass;
  uint64_t steps_completed;
  uint64_t steps_failed;        /* ended with an error (cancel included) */
} llm_batch_stats;

LLM_API llm_status llm_batch_stats_init_v(llm_batch_stats *stats, size_t struct_size);
LLM_API llm_status llm_batch_stats_init(llm_batch_stats *stats);
#define llm_batch_stats_init(stats) llm_batch_stats_init_v((stats), sizeof(llm_batch_stats))

/* Fill *stats (caller sets struct_size). Thread-safe. */
LLM_API llm_status llm_model_batch_stats(const llm_model *model, llm_batch_stats *stats);

/* ---- tokenizer ---------------------------------------------------------- */

/* Tokenize len bytes of UTF-8 text. add_special: add BOS/EOS as the model's
 * metadata asks. parse_special: turn control-token text (e.g. "<|im_start|>")
 * into control tokens; when 0 such text is tokenized as plain text.
 * tokens may be NULL when capacity is 0; *n_out receives the count (also on
 * LLM_ERR_BUFFER_TOO_SMALL). Thread-safe. */
LLM_API llm_status llm_tokenize(const llm_model *model, const char *text, size_t len,
                                int32_t add_special, int32_t parse_special, llm_token *tokens,
                                size_t capacity, size_t *n_out);

/* The bytes a token stands for (may be part of a UTF-8 sequence). Not
 * NUL-terminated; *len_out receives the length. Control tokens give their
 * text only when render_special != 0, else an empty piece. */
LLM_API llm_status llm_token_to_piece(const llm_model *model, llm_token token,
                                      int32_t render_special, char *buf, size_t capacity,
                                      size_t *len_out);

/* Text of a token sequence, NUL-terminated into buf; *len_out receives the
 * length without NUL (capacity must hold len + 1). */
LLM_API llm_status llm_detokenize(const llm_model *model, const llm_token *tokens, size_t n_tokens,
                                  int32_t render_special, char *buf, size_t capacity,
                                  size_t *len_out);

/* ---- chat templates ----------------------------------------------------- */
/* An array element: it has no struct_size; llm_chat_format_v takes the size
 * of one element instead, so that later versions can append fields. */
typedef struct llm_chat_message {
  const char *role;    /* "system", "user", "assistant" ("tool": qwen2.5, qwen3) */
  const char *content; /* UTF-8, NUL-terminated */
} llm_chat_message;

/* Format messages with a chat template into text for llm_tokenize (with
 * parse_special = 1; the text starts with the BOS token's text where the
 * template writes it, so tokenize it with add_special = 0 then).
 * template_name: NULL to use the model's own template (recognised from its
 * tokenizer.chat_template), or a built-in name:
 *   "chatml"            ChatML (SmolLM2, Qwen2, OpenHermes...)
 *   "llama2"            Llama-2-chat
 *   "llama3"            Llama 3 Instruct
 *   "llama3.1"          Llama 3.1 and 3.3 Instruct (reads date_string)
 *   "llama3.2"          Llama 3.2 Instruct (reads date_string)
 *   "mistral"           Mistral 'v1' (Mistral-7B-Instruct v0.1/v0.2)
 *   "mistral-v3"        Mistral 'v3' (Mistral-Large-Instruct-2407's template)
 *   "mistral-v3-tekken" Mistral 'v3-tekken' (Mistral-Nemo-2407)
 *   "zephyr"            Zephyr
 *   "phi3"              Phi-3.5-mini / Phi-3
 *   "phi3-legacy"       the first Phi-3-mini template
 *   "gemma"             Gemma 3
 *   "gemma2"            Gemma 1/2 (refuses system messages)
 *   "qwen2.5"           Qwen2.5 Instruct
 *   "qwen3"             Qwen3 (reads enable_thinking)
 * Each renders byte for byte what jinja2 renders with the official template
 * (docs/CHAT_TEMPLATES.md). model may be NULL when template_name is given.
 * A model template libllm does not render exactly -> LLM_ERR_UNSUPPORTED
 * naming it (size, hash, first bytes): pass a built-in name instead.
 * Conversations the official template refuses (raise_exception: roles not
 * alternating, a system message for gemma2...) and roles the renderer does
 * not support -> LLM_ERR_INVALID_ARGUMENT with the reason. Output
 * NUL-terminated into buf; *len_out receives the length without NUL. */
LLM_API llm_status llm_chat_format_v(const llm_model *model, const char *template_name,
                                     const llm_chat_message *messages, size_t n_messages,
                                     size_t message_size, int32_t add_generation_prompt, char *buf,
                                     size_t capacity, size_t *len_out);

/* llm_chat_format(...) passes message_size = sizeof(llm_chat_message) of this
 * header (0.3). message_size is the stride of the messages array: a size the
 * element has had, or a larger one whose bytes beyond this library's element
 * are zero. The function of that name (0.1 binaries) reads 0.1 elements. */
LLM_API llm_status llm_chat_format(const llm_model *model, const char *template_name,
                                   const llm_chat_message *messages, size_t n_messages,
                                   int32_t add_generation_prompt, char *buf, size_t capacity,
                                   size_t *len_out);
#define llm_chat_format(model, template_name, messages, n_messages, add_generation_prompt, buf,   \
                        capacity, len_out)                                                        \
  llm_chat_format_v((model), (template_name), (messages), (n_messages), sizeof(llm_chat_message), \
                    (add_generation_prompt), (buf), (capacity), (len_out))

/* Values of llm_chat_options.enable_thinking (Qwen3's `enable_thinking`). */
#define LLM_CHAT_THINKING_DEFAULT 0 /* the variable is not set: Qwen3 thinks */
#define LLM_CHAT_THINKING_ON 1      /* enable_thinking = true (renders as DEFAULT) */
#define LLM_CHAT_THINKING_OFF 2     /* enable_thinking = false: an empty think block
                                       follows the generation prompt */

/* Options of llm_chat_format_ex (0.3), filled with defaults by
 * llm_chat_options_init. The template variables are passed to every
 * template; like jinja2, a template that does not read one ignores it. */
typedef struct llm_chat_options {
  uint32_t struct_size;
  int32_t add_generation_prompt; /* default 1: end with the assistant's turn header */
  int32_t enable_thinking;       /* LLM_CHAT_THINKING_*; default DEFAULT */
  /* Llama 3.1/3.2's `date_string`, the "Today Date: ..." of the system turn.
   * NULL (default): "26 Jul 2024", the templates' own default when the
   * variable is undefined (transformers makes Llama 3.2's today's date
   * through strftime_now: pass e.g. "02 Dec 2026", format "%d %b %Y", to
   * match it). "" is an empty date. */
  const char *date_string;
  /* The `bos_token` / `eos_token` texts. NULL (default): the model's BOS/EOS
   * token text; without a model, "" for BOS and the family's usual EOS. */
  const char *bos_token;
  const char *eos_token;
} llm_chat_options;

LLM_API llm_status llm_chat_options_init_v(llm_chat_options *options, size_t struct_size);
#define llm_chat_options_init(options) \
  llm_chat_options_init_v((options), sizeof(llm_chat_options))

/* llm_chat_format_v with options (NULL: the defaults of llm_chat_options_init,
 * which are what llm_chat_format_v does with add_generation_prompt = 1).
 * options->struct_size follows docs/ABI.md "Struct sizes"; an unknown
 * enable_thinking value -> LLM_ERR_INVALID_ARGUMENT. */
LLM_API llm_status llm_chat_format_ex(const llm_model *model, const char *template_name,
                                      const llm_chat_message *messages, size_t n_messages,
                                      size_t message_size, const llm_chat_options *options,
                                      char *buf, size_t capacity, size_t *len_out);

/* ---- sessions ----------------------------------------------------------- */
#define LLM_KV_F16 0
#define LLM_KV_F32 1

typedef struct llm_sampler_params {
  uint32_t struct_size;
  float temperature;        /* <= 0: greedy (default 0.8) */
  int32_t top_k;            /* <= 0: off (default 40) */
  float top_p;              /* >= 1: off (default 0.95) */
  float min_p;              /* <= 0: off (default 0.05) */
  float repeat_penalty;     /* 1: off (default 1.0) */
  float presence_penalty;   /* 0: off */
  float frequency_penalty;  /* 0: off */
  int32_t penalty_last_n;   /* tokens of history the penalties look at (default 64) */
} llm_sampler_params;

/* Fill with defaults (the rules of llm_model_params_init_v). */
LLM_API llm_status llm_sampler_params_init_v(llm_sampler_params *params, size_t struct_size);
LLM_API llm_status llm_sampler_params_init(llm_sampler_params *params);
#define llm_sampler_params_init(params) \
  llm_sampler_params_init_v((params), sizeof(llm_sampler_params))

/* llm_sampler_params is embedded by value in llm_session_params, so it is
 * frozen as it is: sampler settings added after 0.2 are appended here and
 * reach a session through llm_session_params.sampler_ext (0.3). It has no
 * settings yet. */
typedef struct llm_sampler_ext {
  uint32_t struct_size;
  uint32_t reserved0; /* must be 0 */
} llm_sampler_ext;

LLM_API llm_status llm_sampler_ext_init_v(llm_sampler_ext *ext, size_t struct_size);
#define llm_sampler_ext_init(ext) llm_sampler_ext_init_v((ext), sizeof(llm_sampler_ext))

typedef struct llm_session_params {
  uint32_t struct_size;
  int32_t n_ctx;            /* context length; 0 = the model's trained context,
                               capped at 4096. It also selects a Phi-3
                               (LongRoPE) model's rotation, as llama.cpp's
                               context does: the long factors when n_ctx
                               exceeds the model's original context
                               (rope.scaling.original_context_length), else
                               the short ones (docs/ARCHITECTURE.md) */
  int32_t kv_type;          /* LLM_KV_F16 (default) or LLM_KV_F32 */
  int32_t n_threads;        /* ignored since 0.2: sessions' steps are batched
                               and run on the model's n_threads */
  uint64_t seed;            /* sampler RNG seed (default 0) */
  llm_sampler_params sampler; /* frozen: sampler.struct_size must be
                                 sizeof(llm_sampler_params) */
  /* ---- 0.3 ---- */
  const llm_sampler_ext *sampler_ext; /* NULL (default): no extension */
} llm_session_params;

LLM_API llm_status llm_session_params_init_v(llm_session_params *params, size_t struct_size);
/* The function of this name (0.1 and 0.2 binaries) writes the 0.1 struct. */
LLM_API llm_status llm_session_params_init(llm_session_params *params);
#define llm_session_params_init(params) \
  llm_session_params_init_v((params), sizeof(llm_session_params))

/* Create a session on model. params may be NULL (defaults). The session
 * holds a reference to the model. Not available on a vocab_only model
 * (LLM_ERR_UNSUPPORTED). */
LLM_API llm_status llm_session_create(llm_model *model, const llm_session_params *params,
                                      llm_session **out_session);

/* Free a session (and the model if it held the last reference). NULL or a
 * stale handle: no-op. May be called while another call uses the session
 * (another thread, or that call's callback): the handle is dead at once, the
 * call in flight finishes (a generation with on_piece stops at its next
 * piece) and the session is destroyed when it returns. */
LLM_API void llm_session_free(llm_session *session);

/* Append n tokens and run the forward pass over them. n must be > 0 and the
 * history plus n must fit in n_ctx (else LLM_ERR_CONTEXT_FULL; nothing is
 * appended). Afterwards llm_session_logits gives the next-token logits.
 * Any failure (LLM_ERR_KV_FULL, LLM_ERR_CANCELLED, ...) leaves the session
 * exactly as it was before the call: history, KV, logits and RNG (whole
 * blocks already computed may stay in the prefix cache, so a retry can
 * reuse them). */
LLM_API llm_status llm_session_prefill(llm_session *session, const llm_token *tokens, size_t n);

/* Sample the next token from the current logits with the session's sampler,
 * append it and run the forward pass for it. *out_token receives the token.
 * Needs logits: before the first prefill -> LLM_ERR_INVALID_ARGUMENT. At the
 * context limit -> LLM_ERR_CONTEXT_FULL (nothing changes). Any failure,
 * LLM_ERR_CANCELLED included, leaves the session exactly as it was: the
 * sampled token is not appended, the logits and the RNG draw are restored
 * (a retry samples the same token) and *out_token is untouched. */
LLM_API llm_status llm_session_decode(llm_session *session, llm_token *out_token);

/* Logits for the next position: *out_logits receives n_vocab floats owned by
 * the session, valid until the next call that changes the session;
 * *n_vocab_out receives n_vocab (neither pointer may be NULL). No logits ->
 * LLM_ERR_INVALID_ARGUMENT: none yet (no prefill since creation or reset),
 * after llm_session_rewind to 0, or after a failed llm_session_rewind (see
 * there). A failed prefill/decode/generate keeps the logits the session had
 * before it. */
LLM_API llm_status llm_session_logits(const llm_session *session, const float **out_logits,
                                      size_t *n_vocab_out);

/* Number of tokens in the session's history. */
LLM_API llm_status llm_session_n_tokens(const llm_session *session, size_t *n_out);

/* Replace the sampler settings (e.g. between turns). */
LLM_API llm_status llm_session_set_sampler(llm_session *session, const llm_sampler_params *params);

/* Clear history, KV and logits; re-seed the RNG with the session's seed;
 * clear a latched cancel (llm_session_cancel). */
LLM_API llm_status llm_session_reset(llm_session *session);

/* Re-seed the session's RNG (also the seed a later llm_session_reset uses).
 * E.g. to make forked sessions sample differently. */
LLM_API llm_status llm_session_set_seed(llm_session *session, uint64_t seed);

/* ---- non-blocking steps (game loops) ------------------------------------- */
/* Submit a step and return at once; the model's batcher runs it beside the
 * other sessions' work. Collect the result with llm_session_poll (never
 * blocks) or llm_session_wait. Until it is collected, every other call on the
 * session returns LLM_ERR_BUSY, except llm_session_poll, llm_session_wait,
 * llm_session_cancel, llm_session_get_stats and llm_session_free (which
 * cancels the step). Argument errors (bad tokens, context full, no logits)
 * are returned by the submit call itself. */

/* Queue a prefill of n tokens (copied: the caller's array may be reused at
 * once). Same rules as llm_session_prefill. */
LLM_API llm_status llm_session_prefill_async(llm_session *session, const llm_token *tokens,
                                             size_t n);

/* Sample the next token now (on the calling thread) and queue its forward
 * pass. The token is returned by poll/wait. Same rules as llm_session_decode. */
LLM_API llm_status llm_session_decode_async(llm_session *session);

/* Non-blocking. While the step runs: returns LLM_OK with *done = 0. Once it
 * ended: *done = 1 and returns the step's status (LLM_OK, or e.g.
 * LLM_ERR_CANCELLED / LLM_ERR_KV_FULL with llm_last_error() set); for a
 * decode step *out_token receives the token (out_token may be NULL; -1 when
 * the step failed). The step is then collected and the session free for
 * other calls. A cancel issued since the submit makes the collecting call
 * return LLM_ERR_CANCELLED even if the step completed; a failed step is
 * undone as by the blocking calls. No step submitted ->
 * LLM_ERR_INVALID_ARGUMENT. done must not be NULL. */
LLM_API llm_status llm_session_poll(llm_session *session, int32_t *done, llm_token *out_token);

/* Blocks until the submitted step ends, collects it and returns its status
 * (as llm_session_poll with *done = 1). */
LLM_API llm_status llm_session_wait(llm_session *session, llm_token *out_token);

/* ---- cancel, rewind, fork, save/load ------------------------------------- */

/* May be called from any thread, also while another call runs on the
 * session. It latches a cancel, which exactly one call sees:
 *  - A call that runs the model (llm_session_prefill, llm_session_decode,
 *    llm_generate, llm_session_rewind, or an async step from its submit to
 *    its collection by llm_session_poll / llm_session_wait) in progress when
 *    the cancel is issued returns LLM_ERR_CANCELLED -- whether its step was
 *    queued, running, or had already completed. A queued or running step
 *    ends before its next batcher iteration (at most the iteration already
 *    running includes it).
 *  - With no such call in progress, the next one returns LLM_ERR_CANCELLED
 *    at once, changing nothing (only NULL-pointer / zero-length argument
 *    errors are reported before it).
 * The call that returns LLM_ERR_CANCELLED clears the latch, so the call
 * after it runs; llm_session_reset clears it too. Other calls (logits,
 * n_tokens, set_sampler, set_seed, fork, save, load, get_stats) neither see
 * nor clear it; a fork does not inherit it. Several cancels before a call
 * sees them count as one.
 * A cancelled call is a failed call: the session is left exactly as before
 * it (see llm_session_prefill / llm_session_decode / llm_generate; a
 * rewind: see llm_session_rewind) and stays usable. */
LLM_API llm_status llm_session_cancel(llm_session *session);

/* Truncate the history (and KV) to its first n_tokens tokens
 * (n_tokens <= llm_session_n_tokens, else LLM_ERR_INVALID_ARGUMENT). For
 * n_tokens > 0 the logits of the new last position are recomputed (one
 * forward step of that token, which may need a KV block: copy-on-write of a
 * block shared with a fork), so decoding can continue at once; for 0 the
 * session is empty and has no logits. The RNG is not touched.
 * If that step fails (LLM_ERR_KV_FULL, LLM_ERR_CANCELLED, ...) the session
 * holds its first n_tokens tokens (KV intact, the blocks past them released)
 * and has no logits; calling llm_session_rewind(session, n_tokens) again
 * computes them. A latched cancel (llm_session_cancel) fails the call
 * before it changes anything. With a sliding-window model (every layer
 * attends to the last W positions, e.g. Mistral's llama.attention.
 * sliding_window) the KV of positions before the window has been released:
 * a rewind needing positions [n_tokens - W, n_tokens) of which some were
 * released fails with LLM_ERR_INVALID_ARGUMENT and changes nothing
 * (docs/SLIDING_WINDOW.md); llm_session_reset + prefill recomputes. */
LLM_API llm_status llm_session_rewind(llm_session *session, size_t n_tokens);

/* A new session continuing exactly where parent stands: same history, logits,
 * parameters, sampler settings and RNG state. It shares the parent's KV
 * blocks (copy-on-write: the first write into a shared, partly filled block
 * copies it), so a long common prompt is stored once. Free it with
 * llm_session_free; parent and child are independent afterwards. */
LLM_API llm_status llm_session_fork(llm_session *parent, llm_session **out_child);

/* Serialize the session (tokens, KV, logits, sampler settings, seed and RNG
 * state) into buf, with a format version, a fingerprint of the model and a
 * checksum (docs/SESSION_FORMAT.md). *size_out receives the size; a buf
 * smaller than that (or NULL with capacity 0) -> LLM_ERR_BUFFER_TOO_SMALL. */
LLM_API llm_status llm_session_save(llm_session *session, void *buf, size_t capacity,
                                    size_t *size_out);

/* Replace the session's state with one saved by llm_session_save from a
 * session of the same model with the same kv_type. A buffer from another
 * model, another KV type, a newer format, corrupt in any byte, or (Phi-3)
 * from a session whose n_ctx lies on the other side of the model's original
 * context (its KV was rotated with the other LongRoPE factors) is refused
 * (LLM_ERR_INVALID_ARGUMENT / LLM_ERR_UNSUPPORTED, with a message) and the
 * session is left unchanged; so is one whose history does not fit the
 * session's n_ctx (LLM_ERR_CONTEXT_FULL) or the KV pool (LLM_ERR_KV_FULL). */
LLM_API llm_status llm_session_load(llm_session *session, const void *buf, size_t size);

/* Per-session batcher counters (monotonic). Thread-safe: may be called while
 * another call runs on the session. */
typedef struct llm_session_stats {
  uint32_t struct_size;
  uint32_t reserved0;
  uint64_t iterations;      /* batched passes this session took part in */
  uint64_t prefill_chunks;  /* chunks of its multi-token steps that ran */
  uint64_t cached_tokens;   /* prompt tokens whose KV came from the prefix cache */
} llm_session_stats;

LLM_API llm_status llm_session_stats_init_v(llm_session_stats *stats, size_t struct_size);
LLM_API llm_status llm_session_stats_init(llm_session_stats *stats);
#define llm_session_stats_init(stats) llm_session_stats_init_v((stats), sizeof(llm_session_stats))
LLM_API llm_status llm_session_get_stats(const llm_session *session, llm_session_stats *stats);

/* ---- streaming generation ------------------------------------------------ */

/* Receives UTF-8-complete text (never a broken sequence), not NUL-terminated.
 * Return 0 to go on, non-zero to stop (generation then ends with LLM_OK).
 * Runs on the calling thread. */
typedef int32_t (*llm_piece_fn)(const char *text, size_t len, void *user);

typedef struct llm_generate_params {
  uint32_t struct_size;
  int32_t max_tokens;          /* default 256; <= 0 -> INVALID_ARGUMENT */
  const char *const *stop;     /* stop strings (may be NULL); the text up to
                                  a stop string is emitted, the stop string not */
  size_t n_stop;
  llm_piece_fn on_piece;       /* may be NULL */
  void *user;
} llm_generate_params;

LLM_API llm_status llm_generate_params_init_v(llm_generate_params *params, size_t struct_size);
LLM_API llm_status llm_generate_params_init(llm_generate_params *params);
#define llm_generate_params_init(params) \
  llm_generate_params_init_v((params), sizeof(llm_generate_params))

#define LLM_STOP_EOG 0        /* an end-of-generation token */
#define LLM_STOP_MAX_TOKENS 1 /* max_tokens were generated */
#define LLM_STOP_STRING 2     /* a stop string appeared */
#define LLM_STOP_CALLBACK 3   /* on_piece returned non-zero */
#define LLM_STOP_CONTEXT_FULL 4 /* the session reached n_ctx */

typedef struct llm_generate_result {
  uint32_t struct_size;
  int32_t stop_reason;         /* LLM_STOP_* */
  int32_t n_prompt_tokens;
  int32_t n_generated;         /* tokens sampled (the EOG token included) */
  double prefill_ms;
  double decode_ms;
} llm_generate_result;

LLM_API llm_status llm_generate_result_init_v(llm_generate_result *result, size_t struct_size);
LLM_API llm_status llm_generate_result_init(llm_generate_result *result);
#define llm_generate_result_init(result) \
  llm_generate_result_init_v((result), sizeof(llm_generate_result))

/* Prefill prompt (n may be 0 to continue from the current logits), then
 * decode until an end-of-generation token, a stop string, max_tokens, the
 * callback, or the end of the session's context stops it (LLM_OK in every
 * case; result->stop_reason says which). params must not be NULL (fill it
 * with llm_generate_params_init); result may be NULL. A prompt that does not
 * fit -> LLM_ERR_CONTEXT_FULL with nothing appended. The generated tokens stay
 * in the session, so a later call can continue the text. A generation that
 * fails (LLM_ERR_CANCELLED from llm_session_cancel, LLM_ERR_KV_FULL, ...)
 * leaves the session exactly as it was before the call, prompt included;
 * text already passed to on_piece is not taken back. To stop and keep the
 * text, return non-zero from on_piece instead (LLM_OK, LLM_STOP_CALLBACK). */
LLM_API llm_status llm_generate(llm_session *session, const llm_token *prompt, size_t n,
                                const llm_generate_params *params, llm_generate_result *result);

#ifdef __cplusplus
}
#endif

#endif /* LLM_LLM_H */
