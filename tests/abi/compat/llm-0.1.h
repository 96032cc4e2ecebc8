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
 *  - Params structs begin with uint32_t struct_size and are filled with
 *    defaults by llm_x_params_init(). The library reads only struct_size bytes,
 *    so fields are appended in later versions without breaking old callers.
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
 * Different sessions may be driven from different threads at once.
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
#define LLM_VERSION_MINOR 1
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

/* "0.1.0". Static string. */
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

typedef struct llm_model_params {
  uint32_t struct_size;
  int32_t vocab_only;          /* 1: load tokenizer and metadata, no weights */
  int32_t n_threads;           /* default threads for sessions; 0 = physical cores */
  uint32_t reserved0;
  llm_progress_fn progress;    /* may be NULL */
  void *progress_user;
} llm_model_params;

/* Fill *params with defaults (struct_size set). NULL -> INVALID_ARGUMENT. */
LLM_API llm_status llm_model_params_init(llm_model_params *params);

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
} llm_model_info;

LLM_API llm_status llm_model_info_init(llm_model_info *info);

/* Fill *info (the caller sets info->struct_size, e.g. with
 * llm_model_info_init). Thread-safe. */
LLM_API llm_status llm_model_get_info(const llm_model *model, llm_model_info *info);

/* The chat template text from the model's metadata, NUL-terminated, copied
 * into buf. *len_out receives the length without NUL. No template ->
 * LLM_ERR_UNSUPPORTED. buf may be NULL when capacity is 0 (size query). */
LLM_API llm_status llm_model_chat_template(const llm_model *model, char *buf, size_t capacity,
                                           size_t *len_out);

/* Whether token is an end-of-generation token of the model (EOS, EOT,
 * <|im_end|>-style tokens). *out = 1 or 0. */
LLM_API llm_status llm_token_is_eog(const llm_model *model, llm_token token, int32_t *out);

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
typedef struct llm_chat_message {
  const char *role;    /* "system", "user", "assistant" */
  const char *content; /* UTF-8, NUL-terminated */
} llm_chat_message;

/* Format messages with a chat template into text for llm_tokenize (with
 * parse_special = 1). template_name: NULL to use the model's own template, or
 * a built-in name: "chatml", "llama2", "llama3", "mistral", "zephyr", "phi3",
 * "gemma". model may be NULL when template_name is given. An unrecognised
 * template -> LLM_ERR_UNSUPPORTED. Output NUL-terminated into buf; *len_out
 * receives the length without NUL. */
LLM_API llm_status llm_chat_format(const llm_model *model, const char *template_name,
                                   const llm_chat_message *messages, size_t n_messages,
                                   int32_t add_generation_prompt, char *buf, size_t capacity,
                                   size_t *len_out);

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

LLM_API llm_status llm_sampler_params_init(llm_sampler_params *params);

typedef struct llm_session_params {
  uint32_t struct_size;
  int32_t n_ctx;            /* context length; 0 = the model's trained context,
                               capped at 4096 */
  int32_t kv_type;          /* LLM_KV_F16 (default) or LLM_KV_F32 */
  int32_t n_threads;        /* 0 = the model's default */
  uint64_t seed;            /* sampler RNG seed (default 0) */
  llm_sampler_params sampler;
} llm_session_params;

LLM_API llm_status llm_session_params_init(llm_session_params *params);

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
 * appended). Afterwards llm_session_logits gives the next-token logits. */
LLM_API llm_status llm_session_prefill(llm_session *session, const llm_token *tokens, size_t n);

/* Sample the next token from the current logits with the session's sampler,
 * append it and run the forward pass for it. *out_token receives the token.
 * Needs logits: before the first prefill -> LLM_ERR_INVALID_ARGUMENT. At the
 * context limit -> LLM_ERR_CONTEXT_FULL (nothing changes). */
LLM_API llm_status llm_session_decode(llm_session *session, llm_token *out_token);

/* Logits for the next position: *out_logits receives n_vocab floats owned by
 * the session, valid until the next call that changes the session;
 * *n_vocab_out receives n_vocab (neither pointer may be NULL). No logits yet
 * (no prefill since creation or reset) -> LLM_ERR_INVALID_ARGUMENT. */
LLM_API llm_status llm_session_logits(const llm_session *session, const float **out_logits,
                                      size_t *n_vocab_out);

/* Number of tokens in the session's history. */
LLM_API llm_status llm_session_n_tokens(const llm_session *session, size_t *n_out);

/* Replace the sampler settings (e.g. between turns). */
LLM_API llm_status llm_session_set_sampler(llm_session *session, const llm_sampler_params *params);

/* Clear history, KV and logits; re-seed the RNG with the session's seed. */
LLM_API llm_status llm_session_reset(llm_session *session);

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

LLM_API llm_status llm_generate_params_init(llm_generate_params *params);

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

LLM_API llm_status llm_generate_result_init(llm_generate_result *result);

/* Prefill prompt (n may be 0 to continue from the current logits), then
 * decode until an end-of-generation token, a stop string, max_tokens, the
 * callback, or the end of the session's context stops it (LLM_OK in every
 * case; result->stop_reason says which). params must not be NULL (fill it
 * with llm_generate_params_init); result may be NULL. A prompt that does not
 * fit -> LLM_ERR_CONTEXT_FULL with nothing appended. The generated tokens stay
 * in the session, so a later call can continue the text. */
LLM_API llm_status llm_generate(llm_session *session, const llm_token *prompt, size_t n,
                                const llm_generate_params *params, llm_generate_result *result);

#ifdef __cplusplus
}
#endif

#endif /* LLM_LLM_H */
