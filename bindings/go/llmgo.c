// C helpers of the Go binding: see llmgo.h.
#include "llmgo.h"

#include <stdlib.h>
#include <string.h>

#include "_cgo_export.h"

// The failing call's message, copied on the thread that made the call.
static llm_status take(llm_status status, char **err) {
  if (status != LLM_OK && err != NULL) {
    const char *msg = llm_last_error();
    size_t len = strlen(msg);
    *err = malloc(len + 1);
    if (*err != NULL) memcpy(*err, msg, len + 1);
  }
  return status;
}

#define MODEL(h) ((llm_model *)(h))
#define SESSION(h) ((llm_session *)(h))

static int32_t progress_trampoline(float progress, void *user) {
  return llmgoProgress(progress, (uintptr_t)user);
}

static int32_t piece_trampoline(const char *text, size_t len, void *user) {
  return llmgoPiece((char *)text, len, (uintptr_t)user);
}

static void log_trampoline(int32_t level, const char *message, void *user) {
  (void)user;
  llmgoLog(level, (char *)message);
}

llm_status llmgo_model_load(const char *path, const llm_model_params *params,
                            uintptr_t progress_handle, uintptr_t *out, char **err) {
  llm_model_params p = *params;
  if (progress_handle != 0) {
    p.progress = progress_trampoline;
    p.progress_user = (void *)progress_handle;
  }
  llm_model *model = NULL;
  llm_status st = take(llm_model_load(path, &p, &model), err);
  if (st == LLM_OK) *out = (uintptr_t)model;
  return st;
}

void llmgo_model_free(uintptr_t model) { llm_model_free(MODEL(model)); }

llm_status llmgo_model_get_info(uintptr_t model, llm_model_info *info, char **err) {
  llm_status st = llm_model_info_init_v(info, sizeof *info);
  if (st != LLM_OK) return take(st, err);
  return take(llm_model_get_info(MODEL(model), info), err);
}

llm_status llmgo_tokenize(uintptr_t model, const char *text, size_t len, int32_t add_special,
                          int32_t parse_special, llm_token *tokens, size_t capacity, size_t *n_out,
                          char **err) {
  return take(llm_tokenize(MODEL(model), text, len, add_special, parse_special, tokens, capacity,
                           n_out),
              err);
}

llm_status llmgo_token_to_piece(uintptr_t model, llm_token token, int32_t render_special, char *buf,
                                size_t capacity, size_t *len_out, char **err) {
  return take(llm_token_to_piece(MODEL(model), token, render_special, buf, capacity, len_out), err);
}

llm_status llmgo_detokenize(uintptr_t model, const llm_token *tokens, size_t n,
                            int32_t render_special, char *buf, size_t capacity, size_t *len_out,
                            char **err) {
  return take(llm_detokenize(MODEL(model), tokens, n, render_special, buf, capacity, len_out), err);
}

llm_status llmgo_token_is_eog(uintptr_t model, llm_token token, int32_t *out, char **err) {
  return take(llm_token_is_eog(MODEL(model), token, out), err);
}

llm_status llmgo_chat_format(uintptr_t model, const char *template_name,
                             const llm_chat_message *messages, size_t n_messages,
                             int32_t add_generation_prompt, char *buf, size_t capacity,
                             size_t *len_out, char **err) {
  return take(llm_chat_format_v(MODEL(model), template_name, messages, n_messages,
                                sizeof(llm_chat_message), add_generation_prompt, buf, capacity,
                                len_out),
              err);
}

llm_status llmgo_kv_stats(uintptr_t model, llm_kv_stats *stats, char **err) {
  llm_status st = llm_kv_stats_init_v(stats, sizeof *stats);
  if (st != LLM_OK) return take(st, err);
  return take(llm_model_kv_stats(MODEL(model), stats), err);
}

llm_status llmgo_batch_stats(uintptr_t model, llm_batch_stats *stats, char **err) {
  llm_status st = llm_batch_stats_init_v(stats, sizeof *stats);
  if (st != LLM_OK) return take(st, err);
  return take(llm_model_batch_stats(MODEL(model), stats), err);
}

llm_status llmgo_session_create(uintptr_t model, const llm_session_params *params, uintptr_t *out,
                                char **err) {
  llm_session *session = NULL;
  llm_status st = take(llm_session_create(MODEL(model), params, &session), err);
  if (st == LLM_OK) *out = (uintptr_t)session;
  return st;
}

void llmgo_session_free(uintptr_t session) { llm_session_free(SESSION(session)); }

llm_status llmgo_session_prefill(uintptr_t session, const llm_token *tokens, size_t n, char **err) {
  return take(llm_session_prefill(SESSION(session), tokens, n), err);
}

llm_status llmgo_session_decode(uintptr_t session, llm_token *out, char **err) {
  return take(llm_session_decode(SESSION(session), out), err);
}

llm_status llmgo_session_logits(uintptr_t session, float *out, size_t capacity, size_t *n_vocab,
                                char **err) {
  const float *logits = NULL;
  llm_status st = take(llm_session_logits(SESSION(session), &logits, n_vocab), err);
  if (st == LLM_OK && out != NULL) {
    memcpy(out, logits, (*n_vocab < capacity ? *n_vocab : capacity) * sizeof(float));
  }
  return st;
}

llm_status llmgo_session_n_tokens(uintptr_t session, size_t *n, char **err) {
  return take(llm_session_n_tokens(SESSION(session), n), err);
}

llm_status llmgo_session_set_sampler(uintptr_t session, const llm_sampler_params *params,
                                     char **err) {
  return take(llm_session_set_sampler(SESSION(session), params), err);
}

llm_status llmgo_session_reset(uintptr_t session, char **err) {
  return take(llm_session_reset(SESSION(session)), err);
}

llm_status llmgo_session_set_seed(uintptr_t session, uint64_t seed, char **err) {
  return take(llm_session_set_seed(SESSION(session), seed), err);
}

llm_status llmgo_session_rewind(uintptr_t session, size_t n, char **err) {
  return take(llm_session_rewind(SESSION(session), n), err);
}

llm_status llmgo_session_fork(uintptr_t session, uintptr_t *out, char **err) {
  llm_session *child = NULL;
  llm_status st = take(llm_session_fork(SESSION(session), &child), err);
  if (st == LLM_OK) *out = (uintptr_t)child;
  return st;
}

llm_status llmgo_session_save(uintptr_t session, void *buf, size_t capacity, size_t *size_out,
                              char **err) {
  return take(llm_session_save(SESSION(session), buf, capacity, size_out), err);
}

llm_status llmgo_session_load(uintptr_t session, const void *buf, size_t size, char **err) {
  return take(llm_session_load(SESSION(session), buf, size), err);
}

llm_status llmgo_session_stats(uintptr_t session, llm_session_stats *stats, char **err) {
  llm_status st = llm_session_stats_init_v(stats, sizeof *stats);
  if (st != LLM_OK) return take(st, err);
  return take(llm_session_get_stats(SESSION(session), stats), err);
}

llm_status llmgo_session_cancel(uintptr_t session, char **err) {
  return take(llm_session_cancel(SESSION(session)), err);
}

llm_status llmgo_session_prefill_async(uintptr_t session, const llm_token *tokens, size_t n,
                                       char **err) {
  return take(llm_session_prefill_async(SESSION(session), tokens, n), err);
}

llm_status llmgo_session_decode_async(uintptr_t session, char **err) {
  return take(llm_session_decode_async(SESSION(session)), err);
}

llm_status llmgo_session_poll(uintptr_t session, int32_t *done, llm_token *token, char **err) {
  return take(llm_session_poll(SESSION(session), done, token), err);
}

void llmgo_absorb_cancel(uintptr_t session) {
  size_t n = 0;
  if (llm_session_n_tokens(SESSION(session), &n) == LLM_OK) {
    llm_session_rewind(SESSION(session), n);
  }
}

llm_status llmgo_generate(uintptr_t session, const llm_token *prompt, size_t n, int32_t max_tokens,
                          const char *const *stop, size_t n_stop, uintptr_t piece_handle,
                          llm_generate_result *result, char **err) {
  llm_generate_params params;
  llm_status st = llm_generate_params_init_v(&params, sizeof params);
  if (st == LLM_OK) st = llm_generate_result_init_v(result, sizeof *result);
  if (st != LLM_OK) return take(st, err);
  if (max_tokens != 0) params.max_tokens = max_tokens;
  params.stop = stop;
  params.n_stop = n_stop;
  if (piece_handle != 0) {
    params.on_piece = piece_trampoline;
    params.user = (void *)piece_handle;
  }
  return take(llm_generate(SESSION(session), prompt, n, &params, result), err);
}

llm_status llmgo_set_log(int32_t enable, int32_t min_level, char **err) {
  return take(llm_set_log_callback(enable ? log_trampoline : NULL, NULL, min_level), err);
}
