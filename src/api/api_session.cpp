// llm_session_*: create, prefill, decode, logits, reset.
#include <cstring>

#include "api/abi_structs.h"
#include "api/handles.h"
#include "core/status.h"

using llm::api::Fail;

namespace {

llm_sampler_params DefaultSamplerParams() {
  llm::SamplerConfig c;
  llm_sampler_params p = llm::api::ZeroedStruct<llm_sampler_params>();
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
  llm_session_params p = llm::api::ZeroedStruct<llm_session_params>();
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

LLM_API llm_status llm_sampler_params_init_v(llm_sampler_params* params, size_t struct_size) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(params != nullptr, "params must not be NULL");
  return llm::api::InitStruct(params, struct_size, DefaultSamplerParams(), "params");
  LLM_API_END
}

// The unsized inits write the struct as it was when they were published
// (docs/ABI.md): their callers' headers may be older than this library's.
LLM_API llm_status(llm_sampler_params_init)(llm_sampler_params* params) {
  return llm_sampler_params_init_v(params, llm::api::FirstSize<llm_sampler_params>());
}

LLM_API llm_status llm_sampler_ext_init_v(llm_sampler_ext* ext, size_t struct_size) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(ext != nullptr, "ext must not be NULL");
  return llm::api::InitStruct(ext, struct_size, llm::api::ZeroedStruct<llm_sampler_ext>(), "ext");
  LLM_API_END
}

LLM_API llm_status llm_session_params_init_v(llm_session_params* params, size_t struct_size) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(params != nullptr, "params must not be NULL");
  return llm::api::InitStruct(params, struct_size, DefaultSessionParams(), "params");
  LLM_API_END
}

LLM_API llm_status(llm_session_params_init)(llm_session_params* params) {
  return llm_session_params_init_v(params, llm::api::FirstSize<llm_session_params>());
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
  llm_status s = llm::api::ReadStruct(params, DefaultSessionParams(), "params", &p);
  if (s != LLM_OK) return s;
  LLM_CHECK_ARG(p.kv_type == LLM_KV_F16 || p.kv_type == LLM_KV_F32,
                "params: kv_type must be LLM_KV_F16 or LLM_KV_F32");
  // Embedded by value, the sampler can never have another size.
  LLM_CHECK_ARG(p.sampler.struct_size == sizeof(llm_sampler_params),
                "params: sampler.struct_size must be " +
                    std::to_string(sizeof(llm_sampler_params)) + " (call llm_session_params_init)");
  llm_sampler_ext ext;
  s = llm::api::ReadStruct(p.sampler_ext, llm::api::ZeroedStruct<llm_sampler_ext>(),
                           "params: sampler_ext", &ext);
  if (s != LLM_OK) return s;
  LLM_CHECK_ARG(ext.reserved0 == 0, "params: sampler_ext->reserved0 must be 0");
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
  if (llm_status st = llm::api::AcquireIdle(lease, session); st != LLM_OK) return st;
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
  if (llm_status st = llm::api::AcquireIdle(lease, session); st != LLM_OK) return st;
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
  if (llm_status st = llm::api::AcquireIdle(lease, session); st != LLM_OK) return st;
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
  if (llm_status st = llm::api::AcquireIdle(lease, session); st != LLM_OK) return st;
  LLM_CHECK_ARG(n_out != nullptr, "n_out must not be NULL");
  *n_out = lease->tokens().size();
  return LLM_OK;
  LLM_API_END
}

LLM_API llm_status llm_session_set_sampler(llm_session* session, const llm_sampler_params* params) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = llm::api::AcquireIdle(lease, session); st != LLM_OK) return st;
  LLM_CHECK_ARG(params != nullptr, "params must not be NULL");
  llm_sampler_params p;
  llm_status s = llm::api::ReadStruct(params, DefaultSamplerParams(), "params", &p);
  if (s != LLM_OK) return s;
  absl::Status status = lease->SetSampler(ToSamplerConfig(p));
  return status.ok() ? LLM_OK : Fail(status);
  LLM_API_END
}

LLM_API llm_status llm_session_reset(llm_session* session) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = llm::api::AcquireIdle(lease, session); st != LLM_OK) return st;
  lease->Reset();
  return LLM_OK;
  LLM_API_END
}

}  // extern "C"

// ---- 0.2: non-blocking steps, cancel, rewind, fork, save/load, stats -------

namespace {

llm_status ToStatus(const absl::Status& status) { return status.ok() ? LLM_OK : Fail(status); }

}  // namespace

extern "C" {

LLM_API llm_status llm_session_set_seed(llm_session* session, uint64_t seed) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = llm::api::AcquireIdle(lease, session); st != LLM_OK) return st;
  lease->SetSeed(seed);
  return LLM_OK;
  LLM_API_END
}

LLM_API llm_status llm_session_prefill_async(llm_session* session, const llm_token* tokens,
                                             size_t n) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = llm::api::AcquireIdle(lease, session); st != LLM_OK) return st;
  LLM_CHECK_ARG(tokens != nullptr, "tokens must not be NULL");
  LLM_CHECK_ARG(n > 0, "n must be > 0 (an empty prompt has nothing to run)");
  LLM_CHECK_ARG(n <= static_cast<size_t>(INT32_MAX), "n is too large");
  return ToStatus(lease->SubmitPrefill(absl::MakeConstSpan(tokens, n)));
  LLM_API_END
}

LLM_API llm_status llm_session_decode_async(llm_session* session) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = llm::api::AcquireIdle(lease, session); st != LLM_OK) return st;
  return ToStatus(lease->SubmitDecode());
  LLM_API_END
}

LLM_API llm_status llm_session_poll(llm_session* session, int32_t* done, llm_token* out_token) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = lease.Acquire(session); st != LLM_OK) return st;
  LLM_CHECK_ARG(done != nullptr, "done must not be NULL");
  if (!lease->step_pending()) return ToStatus(*lease->Poll(nullptr));  // "no step to poll"
  int32_t token = -1;
  std::optional<absl::Status> result = lease->Poll(&token);
  if (!result.has_value()) {
    *done = 0;
    return LLM_OK;
  }
  *done = 1;
  if (out_token != nullptr) *out_token = token;
  return ToStatus(*result);
  LLM_API_END
}

LLM_API llm_status llm_session_wait(llm_session* session, llm_token* out_token) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = lease.Acquire(session); st != LLM_OK) return st;
  const bool pending = lease->step_pending();
  int32_t token = -1;
  absl::Status status = lease->Wait(&token);
  if (pending && out_token != nullptr) *out_token = token;
  return ToStatus(status);
  LLM_API_END
}

LLM_API llm_status llm_session_cancel(llm_session* session) {
  LLM_API_BEGIN
  return llm::api::WithSessionUnleased(
      session, [](llm::Session& s, void*) { s.Cancel(); }, nullptr);
  LLM_API_END
}

LLM_API llm_status llm_session_rewind(llm_session* session, size_t n_tokens) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = llm::api::AcquireIdle(lease, session); st != LLM_OK) return st;
  LLM_CHECK_ARG(n_tokens <= lease->tokens().size(),
                "n_tokens = " + std::to_string(n_tokens) + " exceeds the session's " +
                    std::to_string(lease->tokens().size()) + " tokens");
  return ToStatus(lease->Rewind(static_cast<int64_t>(n_tokens)));
  LLM_API_END
}

LLM_API llm_status llm_session_fork(llm_session* parent, llm_session** out_child) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = llm::api::AcquireIdle(lease, parent); st != LLM_OK) return st;
  LLM_CHECK_ARG(out_child != nullptr, "out_child must not be NULL");
  absl::StatusOr<std::unique_ptr<llm::Session>> child = lease->Fork();
  if (!child.ok()) return Fail(child.status());
  *out_child = llm::api::RegisterSession(std::move(child).value());
  return LLM_OK;
  LLM_API_END
}

LLM_API llm_status llm_session_save(llm_session* session, void* buf, size_t capacity,
                                    size_t* size_out) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = llm::api::AcquireIdle(lease, session); st != LLM_OK) return st;
  LLM_CHECK_ARG(size_out != nullptr, "size_out must not be NULL");
  LLM_CHECK_ARG(buf != nullptr || capacity == 0, "buf must not be NULL when capacity > 0");
  const size_t needed = lease->SaveSize();
  *size_out = needed;
  if (capacity < needed) {
    return Fail(LLM_ERR_BUFFER_TOO_SMALL, "the session needs " + std::to_string(needed) +
                                              " bytes; capacity is " + std::to_string(capacity));
  }
  absl::StatusOr<size_t> written = lease->Save(static_cast<uint8_t*>(buf), capacity);
  if (!written.ok()) return Fail(written.status());
  *size_out = *written;
  return LLM_OK;
  LLM_API_END
}

LLM_API llm_status llm_session_load(llm_session* session, const void* buf, size_t size) {
  LLM_API_BEGIN
  llm::api::SessionLease lease;
  if (llm_status st = llm::api::AcquireIdle(lease, session); st != LLM_OK) return st;
  LLM_CHECK_ARG(buf != nullptr, "buf must not be NULL");
  return ToStatus(lease->Load(static_cast<const uint8_t*>(buf), size));
  LLM_API_END
}

LLM_API llm_status llm_session_stats_init_v(llm_session_stats* stats, size_t struct_size) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(stats != nullptr, "stats must not be NULL");
  return llm::api::InitStruct(stats, struct_size, llm::api::ZeroedStruct<llm_session_stats>(),
                              "stats");
  LLM_API_END
}

LLM_API llm_status(llm_session_stats_init)(llm_session_stats* stats) {
  return llm_session_stats_init_v(stats, llm::api::FirstSize<llm_session_stats>());
}

LLM_API llm_status llm_session_get_stats(const llm_session* session, llm_session_stats* stats) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(stats != nullptr, "stats must not be NULL");
  const size_t size = stats->struct_size;
  if (llm_status s = llm::api::CheckStructSize<llm_session_stats>(size, "stats"); s != LLM_OK) {
    return s;
  }
  llm_session_stats out = llm::api::ZeroedStruct<llm_session_stats>();
  llm_status st = llm::api::WithSessionUnleased(
      session,
      [](llm::Session& s, void* arg) {
        auto* o = static_cast<llm_session_stats*>(arg);
        o->iterations = s.iterations();
        o->prefill_chunks = s.prefill_chunks();
        o->cached_tokens = s.cached_tokens();
      },
      &out);
  if (st != LLM_OK) return st;
  llm::api::WriteStruct(out, stats, size);
  return LLM_OK;
  LLM_API_END
}

}  // extern "C"
