// llm_tokenize, llm_token_to_piece, llm_detokenize.
#include <string>
#include <vector>

#include "api/handles.h"

using llm::api::Fail;

extern "C" {

LLM_API llm_status llm_tokenize(const llm_model* model, const char* text, size_t len,
                                int32_t add_special, int32_t parse_special, llm_token* tokens,
                                size_t capacity, size_t* n_out) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(model != nullptr, "model must not be NULL");
  std::shared_ptr<const llm::Model> mp = llm::api::FindModel(model);
  LLM_CHECK_ARG(mp != nullptr, "model is not a live model handle (freed, or never returned by "
                               "llm_model_load)");
  LLM_CHECK_ARG(text != nullptr || len == 0, "text must not be NULL when len > 0");
  LLM_CHECK_ARG(tokens != nullptr || capacity == 0, "tokens is NULL but capacity is not 0");
  LLM_CHECK_ARG(n_out != nullptr, "n_out must not be NULL");
  LLM_CHECK_ARG(len <= (size_t{1} << 31), "len: text longer than 2 GiB is not accepted");
  absl::StatusOr<std::vector<int32_t>> ids = mp->tokenizer().Tokenize(
      std::string_view(text == nullptr ? "" : text, len), add_special != 0, parse_special != 0);
  if (!ids.ok()) return Fail(ids.status());
  *n_out = ids->size();
  if (capacity < ids->size()) {
    return Fail(LLM_ERR_BUFFER_TOO_SMALL, "tokens: capacity " + std::to_string(capacity) +
                                              " is too small, " + std::to_string(ids->size()) +
                                              " tokens are needed");
  }
  std::copy(ids->begin(), ids->end(), tokens);
  return LLM_OK;
  LLM_API_END
}

LLM_API llm_status llm_token_to_piece(const llm_model* model, llm_token token,
                                      int32_t render_special, char* buf, size_t capacity,
                                      size_t* len_out) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(model != nullptr, "model must not be NULL");
  std::shared_ptr<const llm::Model> mp = llm::api::FindModel(model);
  LLM_CHECK_ARG(mp != nullptr, "model is not a live model handle (freed, or never returned by "
                               "llm_model_load)");
  const llm::Tokenizer& tok = mp->tokenizer();
  LLM_CHECK_ARG(token >= 0 && token < tok.n_vocab(), "token is not a token id of this model");
  return llm::api::CopyOut(tok.TokenToPiece(token, render_special != 0), false, buf, capacity,
                           len_out);
  LLM_API_END
}

LLM_API llm_status llm_detokenize(const llm_model* model, const llm_token* tokens, size_t n_tokens,
                                  int32_t render_special, char* buf, size_t capacity,
                                  size_t* len_out) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(model != nullptr, "model must not be NULL");
  std::shared_ptr<const llm::Model> mp = llm::api::FindModel(model);
  LLM_CHECK_ARG(mp != nullptr, "model is not a live model handle (freed, or never returned by "
                               "llm_model_load)");
  LLM_CHECK_ARG(tokens != nullptr || n_tokens == 0, "tokens must not be NULL when n_tokens > 0");
  LLM_CHECK_ARG(n_tokens <= (size_t{1} << 31), "n_tokens is larger than 2^31");
  const llm::Tokenizer& tok = mp->tokenizer();
  std::string text;
  for (size_t i = 0; i < n_tokens; ++i) {
    if (tokens[i] < 0 || tokens[i] >= tok.n_vocab()) {
      return Fail(LLM_ERR_INVALID_ARGUMENT, "tokens[" + std::to_string(i) + "] = " +
                                                std::to_string(tokens[i]) + " is not a token id");
    }
    text += tok.TokenToPiece(tokens[i], render_special != 0);
  }
  return llm::api::CopyOut(text, true, buf, capacity, len_out);
  LLM_API_END
}

}  // extern "C"
