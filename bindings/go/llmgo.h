/* C helpers of the Go binding (llmgo.c).
 *
 * Each wraps one libllm call and, when it fails, copies llm_last_error() into
 * a malloc'ed string (*err, freed by Go) before returning: the message is
 * thread-local and valid only until the next libllm call on that thread, and
 * Go may move a goroutine to another thread between two cgo calls, so it must
 * be taken inside the same C call.
 *
 * Handles cross as uintptr_t: libllm's handles are ids, not pointers, and Go's
 * garbage collector must never find them in pointer-typed variables.
 */
#ifndef LLMGO_H
#define LLMGO_H

#include <stddef.h>
#include <stdint.h>

#include <llm/llm.h>

llm_status llmgo_model_load(const char *path, const llm_model_params *params,
                            uintptr_t progress_handle, uintptr_t *out, char **err);
void llmgo_model_free(uintptr_t model);
llm_status llmgo_model_get_info(uintptr_t model, llm_model_info *info, char **err);
llm_status llmgo_tokenize(uintptr_t model, const char *text, size_t len, int32_t add_special,
                          int32_t parse_special, llm_token *tokens, size_t capacity, size_t *n_out,
                          char **err);
llm_status llmgo_token_to_piece(uintptr_t model, llm_token token, int32_t render_special, char *buf,
                                size_t capacity, size_t *len_out, char **err);
llm_status llmgo_detokenize(uintptr_t model, const llm_token *tokens, size_t n,
                            int32_t render_special, char *buf, size_t capacity, size_t *len_out,
                            char **err);
llm_status llmgo_token_is_eog(uintptr_t model, llm_token token, int32_t *out, char **err);
llm_status llmgo_chat_format(uintptr_t model, const char *template_name,
                             const llm_chat_message *messages, size_t n_messages,
                             int32_t add_generation_prompt, char *buf, size_t capacity,
                             size_t *len_out, char **err);
llm_status llmgo_kv_stats(uintptr_t model, llm_kv_stats *stats, char **err);
llm_status llmgo_batch_stats(uintptr_t model, llm_batch_stats *stats, char **err);

llm_status llmgo_session_create(uintptr_t model, const llm_session_params *params, uintptr_t *out,
                                char **err);
void llmgo_session_free(uintptr_t session);
llm_status llmgo_session_prefill(uintptr_t session, const llm_token *tokens, size_t n, char **err);
llm_status llmgo_session_decode(uintptr_t session, llm_token *out, char **err);
/* Copies the logits into out (capacity floats); *n_vocab receives n_vocab. */
llm_status llmgo_session_logits(uintptr_t session, float *out, size_t capacity, size_t *n_vocab,
                                char **err);
llm_status llmgo_session_n_tokens(uintptr_t session, size_t *n, char **err);
llm_status llmgo_session_set_sampler(uintptr_t session, const llm_sampler_params *params,
                                     char **err);
llm_status llmgo_session_reset(uintptr_t session, char **err);
llm_status llmgo_session_set_seed(uintptr_t session, uint64_t seed, char **err);
llm_status llmgo_session_rewind(uintptr_t session, size_t n, char **err);
llm_status llmgo_session_fork(uintptr_t session, uintptr_t *out, char **err);
llm_status llmgo_session_save(uintptr_t session, void *buf, size_t capacity, size_t *size_out,
                              char **err);
llm_status llmgo_session_load(uintptr_t session, const void *buf, size_t size, char **err);
llm_status llmgo_session_stats(uintptr_t session, llm_session_stats *stats, char **err);
llm_status llmgo_session_cancel(uintptr_t session, char **err);
llm_status llmgo_session_prefill_async(uintptr_t session, const llm_token *tokens, size_t n,
                                       char **err);
llm_status llmgo_session_decode_async(uintptr_t session, char **err);
llm_status llmgo_session_poll(uintptr_t session, int32_t *done, llm_token *token, char **err);
/* Consumes a cancel latched after the call it was meant for had returned:
 * with the latch set, llm_session_rewind to the current length fails with
 * LLM_ERR_CANCELLED, clearing it and changing nothing. */
void llmgo_absorb_cancel(uintptr_t session);

/* llm_generate with on_piece calling the exported Go function llmgoPiece with
 * piece_handle (a cgo.Handle; 0: no callback). max_tokens 0: the default. */
llm_status llmgo_generate(uintptr_t session, const llm_token *prompt, size_t n, int32_t max_tokens,
                          const char *const *stop, size_t n_stop, uintptr_t piece_handle,
                          llm_generate_result *result, char **err);

/* enable 0: discard messages (the default); else send them to llmgoLog. */
llm_status llmgo_set_log(int32_t enable, int32_t min_level, char **err);

#endif /* LLMGO_H */
