#include "engine/session.h"

#include <algorithm>

#include "core/status.h"
#include "core/thread_pool.h"

namespace llm {

absl::StatusOr<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const Model> model,
                                                         const SessionOptions& options) {
  if (model->vocab_only()) {
    return Error(LLM_ERR_UNSUPPORTED, "the model was loaded with vocab_only: it cannot run sessions");
  }
  const LlamaHParams& hp = model->hparams();
  if (options.n_ctx < 0) return Errorf(LLM_ERR_INVALID_ARGUMENT, "n_ctx = %d is negative", options.n_ctx);
  if (options.n_threads < 0 || options.n_threads > 1024) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "n_threads = %d is outside [0, 1024]", options.n_threads);
  }
  LLM_RETURN_IF_ERROR(ValidateSamplerConfig(options.sampler));
  std::unique_ptr<Session> s(new Session());
  s->n_ctx_ = options.n_ctx > 0 ? options.n_ctx : std::min(hp.n_ctx_train, kDefaultMaxCtx);
  if (s->n_ctx_ > (int64_t{1} << 24)) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "n_ctx = %d is larger than the supported 16M tokens",
                  s->n_ctx_);
  }
  s->n_threads_ = options.n_threads > 0 ? options.n_threads : model->default_threads();
  s->seed_ = options.seed;
  s->pool_ = std::make_unique<ThreadPool>(s->n_threads_);
  s->kv_ = std::make_unique<KvCache>(hp.n_layer, s->n_ctx_, hp.n_head_kv, hp.head_dim, options.kv_type);
  s->sampler_ = std::make_unique<Sampler>(options.sampler);
  s->rng_ = Rng(options.seed);
  s->logits_.assign(static_cast<size_t>(hp.n_vocab), 0.0f);
  s->model_ = std::move(model);
  return s;
}

Session::~Session() = default;

absl::Status Session::CheckTokens(absl::Span<const int32_t> tokens) const {
  if (tokens.empty()) return Error(LLM_ERR_INVALID_ARGUMENT, "tokens: n must be > 0");
  const int64_t n_vocab = model_->hparams().n_vocab;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab) {
      return Errorf(LLM_ERR_INVALID_ARGUMENT, "tokens[%d] = %d is not a token id (vocabulary has %d)",
                    i, tokens[i], n_vocab);
    }
  }
  const int64_t have = static_cast<int64_t>(tokens_.size());
  if (static_cast<int64_t>(tokens.size()) > n_ctx_ - have) {
    return Errorf(LLM_ERR_CONTEXT_FULL,
                  "%d new tokens do not fit: the session holds %d of n_ctx = %d tokens",
                  tokens.size(), have, n_ctx_);
  }
  return absl::OkStatus();
}

absl::Status Session::RunChunked(absl::Span<const int32_t> tokens) {
  // Allocation failure safety: the history can grow without allocating after
  // a forward pass has succeeded, and logits being overwritten are not
  // reported as valid if the pass throws (std::bad_alloc) half way.
  tokens_.reserve(tokens_.size() + tokens.size());
  has_logits_ = false;
  std::lock_guard<std::mutex> lock(model_->forward_mutex());
  for (size_t begin = 0; begin < tokens.size(); begin += kPrefillChunk) {
    const size_t n = std::min<size_t>(kPrefillChunk, tokens.size() - begin);
    const bool last = begin + n == tokens.size();
    SequenceStep step;
    step.kv = kv_.get();
    step.tokens = tokens.subspan(begin, n);
    step.pos0 = static_cast<int64_t>(tokens_.size());
    step.logits = last ? logits_.data() : nullptr;
    absl::Status status = model_->llama().Forward({&step, 1}, pool_.get(), n_threads_, scratch_);
    if (!status.ok()) {
      // The chunk's KV may be partly written; positions past tokens_ are
      // simply overwritten by the next step, so history stays consistent.
      has_logits_ = false;
      return status;
    }
    tokens_.insert(tokens_.end(), step.tokens.begin(), step.tokens.end());
  }
  has_logits_ = true;
  return absl::OkStatus();
}

absl::Status Session::Prefill(absl::Span<const int32_t> tokens) {
  LLM_RETURN_IF_ERROR(CheckTokens(tokens));
  return RunChunked(tokens);
}

absl::StatusOr<int32_t> Session::Decode() {
  if (!has_logits_) {
    return Error(LLM_ERR_INVALID_ARGUMENT,
                 "session has no logits to sample from: call llm_session_prefill first");
  }
  if (static_cast<int64_t>(tokens_.size()) >= n_ctx_) {
    return Errorf(LLM_ERR_CONTEXT_FULL, "session is full: %d of n_ctx = %d tokens", tokens_.size(),
                  n_ctx_);
  }
  const int32_t token = sampler_->Sample(logits_, tokens_, rng_);
  LLM_RETURN_IF_ERROR(RunChunked({&token, 1}));
  return token;
}

absl::Status Session::SetSampler(const SamplerConfig& config) {
  LLM_RETURN_IF_ERROR(ValidateSamplerConfig(config));
  sampler_ = std::make_unique<Sampler>(config);
  return absl::OkStatus();
}

void Session::Reset() {
  tokens_.clear();
  has_logits_ = false;
  rng_ = Rng(seed_);
}

absl::Status Session::PrefillBatch(absl::Span<Session* const> sessions,
                                   absl::Span<const absl::Span<const int32_t>> tokens) {
  if (sessions.empty() || sessions.size() != tokens.size()) {
    return Error(LLM_ERR_INVALID_ARGUMENT, "sessions and tokens must be non-empty and match");
  }
  const Model* model = sessions[0]->model_.get();
  std::vector<SequenceStep> steps(sessions.size());
  for (size_t i = 0; i < sessions.size(); ++i) {
    Session* s = sessions[i];
    if (s->model_.get() != model) return Error(LLM_ERR_INVALID_ARGUMENT, "sessions of different models");
    LLM_RETURN_IF_ERROR(s->CheckTokens(tokens[i]));
    steps[i] = SequenceStep{s->kv_.get(), tokens[i], static_cast<int64_t>(s->tokens_.size()),
                            s->logits_.data()};
  }
  for (size_t i = 0; i < sessions.size(); ++i) {
    sessions[i]->tokens_.reserve(sessions[i]->tokens_.size() + tokens[i].size());
    sessions[i]->has_logits_ = false;
  }
  Session* lead = sessions[0];
  std::lock_guard<std::mutex> lock(model->forward_mutex());
  LLM_RETURN_IF_ERROR(model->llama().Forward(steps, lead->pool_.get(), lead->n_threads_, lead->scratch_));
  for (size_t i = 0; i < sessions.size(); ++i) {
    sessions[i]->tokens_.insert(sessions[i]->tokens_.end(), tokens[i].begin(), tokens[i].end());
    sessions[i]->has_logits_ = true;
  }
  return absl::OkStatus();
}

}  // namespace llm
