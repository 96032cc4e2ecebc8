// llm_session_*: create, prefill, decode, logits, reset.
#include <cstring>

#include "api/handles.h"
#include "core/status.h"

using llm::api::Fail;

namespace {

llm_sampler_params DefaultSamplerParams() {
  llm::SamplerConfig c;
  llm_sampler_params p;
  std::memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.temperature = c.temperature;
  p.top_k = c.top_k;
  p.top_p = c.top_p;
  p.min_p = c.min_p;
  p.repeat_penalty = c.repeat_penalty;
  p.presence_penalty = c.presence_penalty;
  p.frequency_penalty = c.frequency_penalty;
  p.penalty_last_n = c.penalty_last_n;
  return p;
}

llm_session_params DefaultSessionParams() {
  llm_session_params p;
  std::memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.kv_type = LLM_KV_F16;
  p.sampler = DefaultSamplerParams();
  return p;
}

llm::SamplerConfig ToSamplerConfig(const llm_sampler_params& p) {
  llm::SamplerConfig c;
  c.temperature = p.temperature;
  c.top_k = p.top_k;
  c.top_p = p.top_p;
  c.min_p = p.min_p;
  c.repeat_penalty = p.repeat_penalty;
  c.presence_penalty = p.presence_penalty;
  c.frequency_penalty = p.frequency_penalty;
  c.penalty_last_n = p.penalty_last_n;
  return c;
}

}  // namespace

extern "C" {

LLM_API llm_status llm_sampler_params_init(llm_sampler_params* params) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(params != nullptr, "params must not be NULL");
  *params = DefaultSamplerParams();
  return LLM_OK;
  LLM_API_END
}

LLM_API llm_status llm_session_params_init(llm_session_params* params) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(params != nullptr, "params must not be NULL");
  *params = DefaultSessionParams();
  return LLM_OK;
  LLM_API_END
}

LLM_API llm_status llm_session_create(llm_model* model, const llm_session_params* params,
                                      llm_session** out_session) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(model != nullptr, "model must not be NULL");
  LLM_CHECK_ARG(out_session != nullptr, "out_session must not be NULL");
  std::shared_ptr<const llm::Model> m = llm::api::FindModel(model);
  LLM_CHECK_ARG(m != nullptr, "model is not a live model handle (freed, or never returned by "
                              "llm_model_load)");
  llm_session_params p;
  llm_status s = llm::api::ReadParams(params, DefaultSessionParams(), sizeof(llm_session_params),
                                      "params", &p);
  if (s != LLM_OK) return s;
  LLM_CHECK_ARG(p.kv_type == LLM_KV_F16 || p.kv_type == LLM_KV_F32,
                "params: kv_type must be LLM_KV_F16 or LLM_KV_F32");
  LLM_CHECK_ARG(p.sampler.struct_size >= sizeof(llm_sampler_params),
                "params: sampler.struct_size is too small (call llm_session_params_init)");
  llm::SessionOptions options;
  options.n_ctx = p.n_ctx;
  options.kv_type = p.kv_type == LLM_KV_F32 ? llm::KvType::kF32 : llm::KvType::kF16;
  options.n_threads = p.n_threads;
  options.seed = p.seed;
  options.sampler = ToSamplerConfig(p.sampler);
  absl::StatusOr<std::unique_ptr<llm::Session>> session = llm::Session::Create(std::move(m), options);
  if (!session.ok()) return Fail(session.status());
  *out_session = llm::api::RegisterSession(std::move(session).value());
  return LLM_OK;
  LLM_API_END
}

LLM_API void llm_session_free(llm_session* session) { llm::api::FreeSession(session); }

LLM_API llm_status llm_session_prefill(llm_session* session, const llm_token* tokens, size_t n) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = lease.Acquire(session); st != LLM_OK) return st;
  LLM_CHECK_ARG(tokens != nullptr, "tokens must not be NULL");
  LLM_CHECK_ARG(n > 0, "n must be > 0 (an empty prompt has nothing to run)");
  const size_t n_ctx = static_cast<size_t>(lease->n_ctx());
  if (n > n_ctx) {
    return Fail(LLM_ERR_CONTEXT_FULL, "n = " + std::to_string(n) +
                                          " tokens exceed the session's n_ctx = " +
                                          std::to_string(n_ctx));
  }
  absl::Status status = lease->Prefill(absl::MakeConstSpan(tokens, n));
  return status.ok() ? LLM_OK : Fail(status);
  LLM_API_END
}

LLM_API llm_status llm_session_decode(llm_session* session, llm_token* out_token) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = lease.Acquire(session); st != LLM_OK) return st;
  LLM_CHECK_ARG(out_token != nullptr, "out_token must not be NULL");
  absl::StatusOr<int32_t> token = lease->Decode();
  if (!token.ok()) return Fail(token.status());
  *out_token = *token;
  return LLM_OK;
  LLM_API_END
}

LLM_API llm_status llm_session_logits(const llm_session* session, const float** out_logits,
                                      size_t* n_vocab_out) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = lease.Acquire(session); st != LLM_OK) return st;
  LLM_CHECK_ARG(out_logits != nullptr, "out_logits must not be NULL");
  LLM_CHECK_ARG(n_vocab_out != nullptr, "n_vocab_out must not be NULL");
  if (!lease->has_logits()) {
    return Fail(LLM_ERR_INVALID_ARGUMENT,
                "session has no logits yet: call llm_session_prefill first");
  }
  *out_logits = lease->logits().data();
  *n_vocab_out = lease->logits().size();
  return LLM_OK;
  LLM_API_END
}

LLM_API llm_status llm_session_n_tokens(const llm_session* session, size_t* n_out) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = lease.Acquire(session); st != LLM_OK) return st;
  LLM_CHECK_ARG(n_out != nullptr, "n_out must not be NULL");
  *n_out = lease->tokens().size();
  return LLM_OK;
  LLM_API_END
}

LLM_API llm_status llm_session_set_sampler(llm_session* session, const llm_sampler_params* params) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = lease.Acquire(session); st != LLM_OK) return st;
  LLM_CHECK_ARG(params != nullptr, "params must not be NULL");
  llm_sampler_params p;
  llm_status s = llm::api::ReadParams(params, DefaultSamplerParams(), sizeof(llm_sampler_params),
                                      "params", &p);
  if (s != LLM_OK) return s;
  absl::Status status = lease->SetSampler(ToSamplerConfig(p));
  return status.ok() ? LLM_OK : Fail(status);
  LLM_API_END
}

LLM_API llm_status llm_session_reset(llm_session* session) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = lease.Acquire(session); st != LLM_OK) return st;
  lease->Reset();
  return LLM_OK;
  LLM_API_END
}

}  // extern "C"
