// llm_generate: the streaming helper.
#include <cstring>
#include <string>
#include <vector>

#include "api/abi_structs.h"
#include "api/handles.h"
#include "engine/generate.h"

using llm::api::Fail;

namespace {

llm_generate_params DefaultGenerateParams() {
  llm_generate_params p = llm::api::ZeroedStruct<llm_generate_params>();
  p.max_tokens = 256;
  return p;
}

}  // namespace

extern "C" {

LLM_API llm_status llm_generate_params_init_v(llm_generate_params* params, size_t struct_size) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(params != nullptr, "params must not be NULL");
  return llm::api::InitStruct(params, struct_size, DefaultGenerateParams(), "params");
  LLM_API_END
}

// The unsized inits write the struct as it was when they were published
// (docs/ABI.md): their callers' headers may be older than this library's.
LLM_API llm_status(llm_generate_params_init)(llm_generate_params* params) {
  return llm_generate_params_init_v(params, llm::api::FirstSize<llm_generate_params>());
}

LLM_API llm_status llm_generate_result_init_v(llm_generate_result* result, size_t struct_size) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(result != nullptr, "result must not be NULL");
  return llm::api::InitStruct(result, struct_size, llm::api::ZeroedStruct<llm_generate_result>(),
                              "result");
  LLM_API_END
}

LLM_API llm_status(llm_generate_result_init)(llm_generate_result* result) {
  return llm_generate_result_init_v(result, llm::api::FirstSize<llm_generate_result>());
}

LLM_API llm_status llm_generate(llm_session* session, const llm_token* prompt, size_t n,
                                const llm_generate_params* params, llm_generate_result* result) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = llm::api::AcquireIdle(lease, session); st != LLM_OK) return st;
  LLM_CHECK_ARG(prompt != nullptr || n == 0, "prompt must not be NULL when n > 0");
  LLM_CHECK_ARG(params != nullptr, "params must not be NULL (use llm_generate_params_init)");
  const size_t result_size = result != nullptr ? result->struct_size : 0;
  if (result != nullptr) {
    llm_status s = llm::api::CheckStructSize<llm_generate_result>(result_size, "result");
    if (s != LLM_OK) return s;
  }
  llm_generate_params p;
  llm_status s = llm::api::ReadStruct(params, DefaultGenerateParams(), "params", &p);
  if (s != LLM_OK) return s;
  LLM_CHECK_ARG(p.max_tokens > 0, "params: max_tokens must be > 0");
  LLM_CHECK_ARG(p.stop != nullptr || p.n_stop == 0, "params: stop is NULL but n_stop is not 0");
  LLM_CHECK_ARG(p.n_stop <= 64, "params: n_stop must be at most 64");
  const size_t n_ctx = static_cast<size_t>(lease->n_ctx());
  if (n > n_ctx) {
    return Fail(LLM_ERR_CONTEXT_FULL, "n = " + std::to_string(n) +
                                          " prompt tokens exceed the session's n_ctx = " +
                                          std::to_string(n_ctx));
  }
  llm::GenerateOptions options;
  options.max_tokens = p.max_tokens;
  for (size_t i = 0; i < p.n_stop; ++i) {
    LLM_CHECK_ARG(p.stop[i] != nullptr, "params: stop[" + std::to_string(i) + "] is NULL");
    options.stop.emplace_back(p.stop[i]);
  }
  if (p.on_piece != nullptr) {
    llm_piece_fn fn = p.on_piece;
    void* user = p.user;
    // A callback that frees this very session stops the generation; the
    // session is destroyed when this call returns (the lease's destructor).
    const llm::api::SessionLease* l = &lease;
    options.on_piece = [fn, user, l](std::string_view text) {
      return fn(text.data(), text.size(), user) == 0 && !l->free_requested();
    };
  }
  absl::StatusOr<llm::GenerateResult> r =
      llm::Generate(*lease, absl::MakeConstSpan(prompt, n), options);
  if (!r.ok()) return Fail(r.status());
  if (result != nullptr) {
    llm_generate_result out = llm::api::ZeroedStruct<llm_generate_result>();
    out.stop_reason = static_cast<int32_t>(r->stop_reason);
    out.n_prompt_tokens = r->n_prompt_tokens;
    out.n_generated = r->n_generated;
    out.prefill_ms = r->prefill_ms;
    out.decode_ms = r->decode_ms;
    llm::api::WriteStruct(out, result, result_size);
  }
  return LLM_OK;
  LLM_API_END
}

}  // extern "C"
