#include "engine/session.h"

#include <algorithm>
#include <utility>

#include "core/status.h"
#include "engine/session_state.h"

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
  const int64_t n_ctx = options.n_ctx > 0 ? options.n_ctx : std::min(hp.n_ctx_train, kDefaultMaxCtx);
  if (n_ctx > (int64_t{1} << 24)) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "n_ctx = %d is larger than the supported 16M tokens",
                  n_ctx);
  }
  std::unique_ptr<Session> s(new Session());
  s->Init(std::move(model), n_ctx, options.kv_type, options.seed, options.sampler);
  return s;
}

void Session::Init(std::shared_ptr<const Model> model, int64_t n_ctx, KvType kv_type,
                           uint64_t seed, const SamplerConfig& sampler) {
  model_ = std::move(model);
  n_ctx_ = n_ctx;
  rope_long_ = model_->llama().UsesLongRope(n_ctx);
  kv_type_ = kv_type;
  seed_ = seed;
  kv_ = std::make_unique<SessionKv>(&model_->kv_groups(), model_->kv_pools(), kv_type, n_ctx,
                                    KvVariant());
  sampler_ = std::make_unique<Sampler>(sampler);
  rng_ = Rng(seed);
  logits_.assign(static_cast<size_t>(model_->hparams().n_vocab), 0.0f);
  step_logits_.assign(logits_.size(), 0.0f);
  AttachToScheduler();
}

void Session::AttachToScheduler() {
  client_.step_client = this;
  model_->scheduler().Attach(&client_);
  attached_ = true;
}

Session::~Session() {
  if (attached_) model_->scheduler().Detach(&client_);
}

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

absl::Status Session::CheckCanDecode() const {
  if (!has_logits_) {
    return Error(LLM_ERR_INVALID_ARGUMENT,
                 "session has no logits to sample from: call llm_session_prefill first");
  }
  if (static_cast<int64_t>(tokens_.size()) >= n_ctx_) {
    return Errorf(LLM_ERR_CONTEXT_FULL, "session is full: %d of n_ctx = %d tokens", tokens_.size(),
                  n_ctx_);
  }
  return absl::OkStatus();
}

absl::Status Session::CheckNotCancelled() {
  if (TakeCancel()) return Error(LLM_ERR_CANCELLED, "cancelled by llm_session_cancel");
  return absl::OkStatus();
}

bool Session::TakeCancel() {
  std::lock_guard<std::mutex> lock(cancel_mu_);
  return std::exchange(cancel_latched_, false);
}

void Session::MarkCallStart() {
  history_at_call_ = tokens_.size();
  // A sliding-window table keeps what a failed call rolls back to.
  const int64_t at_call = static_cast<int64_t>(history_at_call_);
  kv_->SetPin(checkpoint_pin_ >= 0 ? std::min(checkpoint_pin_, at_call) : at_call);
  logits_valid_at_call_ = has_logits_;
  rng_at_call_ = rng_;
  logits_swapped_ = false;
}

absl::Status Session::SubmitPrefill(absl::Span<const int32_t> tokens) {
  if (step_pending()) return Error(LLM_ERR_BUSY, "a step is already pending on this session");
  LLM_RETURN_IF_ERROR(CheckNotCancelled());
  LLM_RETURN_IF_ERROR(CheckTokens(tokens));
  // Allocate first: from the adoption on, nothing below may fail half way
  // (the scheduler thread, too, appends to the history without allocating).
  tokens_.reserve(tokens_.size() + tokens.size());
  step_tokens_.reserve(tokens.size());
  MarkCallStart();
  // Prefix caching: whole blocks of history + tokens already in the pool are
  // attached instead of computed. The last token is always computed, since
  // its logits are wanted.
  const int64_t have = static_cast<int64_t>(tokens_.size());
  int64_t adopted = 0;
  if (have % kv_->block_tokens() == 0 &&
      static_cast<int64_t>(tokens.size()) > kv_->block_tokens()) {
    std::vector<int32_t> all;
    all.reserve(tokens_.size() + tokens.size());
    all.insert(all.end(), tokens_.begin(), tokens_.end());
    all.insert(all.end(), tokens.begin(), tokens.end());
    adopted = kv_->AdoptCachedPrefix(all, static_cast<int64_t>(all.size()) - 1) - have;
    if (adopted > 0) {
      tokens_.insert(tokens_.end(), tokens.begin(), tokens.begin() + adopted);
      cached_tokens_.fetch_add(static_cast<uint64_t>(adopted), std::memory_order_relaxed);
    }
  }
  step_tokens_.assign(tokens.begin() + adopted, tokens.end());
  has_logits_ = false;
  return SubmitStep(Pending::kPrefill);
}

absl::Status Session::SubmitDecode() {
  if (step_pending()) return Error(LLM_ERR_BUSY, "a step is already pending on this session");
  LLM_RETURN_IF_ERROR(CheckNotCancelled());
  LLM_RETURN_IF_ERROR(CheckCanDecode());
  MarkCallStart();
  try {
    const int32_t token = sampler_->Sample(logits_, tokens_, rng_);
    step_tokens_.assign(1, token);
    tokens_.reserve(tokens_.size() + 1);
  } catch (...) {  // std::bad_alloc: the draw is undone as well
    rng_ = rng_at_call_;
    throw;
  }
  has_logits_ = false;
  return SubmitStep(Pending::kDecode);
}

absl::Status Session::SubmitStep(Pending kind) {
  // Until the scheduler holds the step, every way out (an error status or an
  // exception such as std::bad_alloc) undoes the call, so the session is
  // never left waiting for a step that does not exist.
  struct UndoUnlessSubmitted {
    Session* s;
    bool submitted = false;
    ~UndoUnlessSubmitted() {
      if (!submitted) s->UndoStep();
    }
  } guard{this};
  LLM_RETURN_IF_ERROR(model_->scheduler().Submit(&client_, step_tokens_));
  guard.submitted = true;
  pending_ = kind;
  // A cancel that came after the call's start found no step to end; end it
  // now rather than after it ran (Collect would report it either way).
  std::lock_guard<std::mutex> lock(cancel_mu_);
  if (cancel_latched_) model_->scheduler().Cancel(&client_);
  return absl::OkStatus();
}

void Session::UndoStep() noexcept {
  // Truncate and the shrinking resize release or allocate nothing that can
  // fail; the swap only exchanges buffers.
  if (tokens_.size() != history_at_call_) {
    kv_->Truncate(static_cast<int64_t>(history_at_call_));
    tokens_.resize(history_at_call_);
  }
  if (logits_swapped_) logits_.swap(step_logits_);
  logits_swapped_ = false;
  has_logits_ = logits_valid_at_call_;
  rng_ = rng_at_call_;
}

absl::Status Session::Collect(absl::Status status, int32_t* token) {
  const bool decode = pending_ == Pending::kDecode;
  pending_ = Pending::kNone;
  rewrite_last_ = false;
  // A cancel since the call started makes it fail, even when its step
  // completed: the call returns CANCELLED whatever the step's status.
  if (TakeCancel()) status = Error(LLM_ERR_CANCELLED, "cancelled by llm_session_cancel");
  // Any failure returns the session to where the call started, so a retry
  // behaves as the first attempt would have.
  if (!status.ok()) UndoStep();
  if (token != nullptr) *token = decode && status.ok() ? step_tokens_[0] : -1;
  return status;
}

std::optional<absl::Status> Session::Poll(int32_t* token) {
  if (!step_pending()) {
    return Error(LLM_ERR_INVALID_ARGUMENT,
                 "no step to poll: submit one with llm_session_prefill_async or "
                 "llm_session_decode_async first");
  }
  absl::Status status;
  if (!model_->scheduler().Poll(&client_, &status)) return std::nullopt;
  return Collect(std::move(status), token);
}

absl::Status Session::Wait(int32_t* token) {
  if (!step_pending()) {
    return Error(LLM_ERR_INVALID_ARGUMENT,
                 "no step to wait for: submit one with llm_session_prefill_async or "
                 "llm_session_decode_async first");
  }
  return Collect(model_->scheduler().Wait(&client_), token);
}

absl::Status Session::Prefill(absl::Span<const int32_t> tokens) {
  LLM_RETURN_IF_ERROR(SubmitPrefill(tokens));
  return Wait(nullptr);
}

absl::StatusOr<int32_t> Session::Decode() {
  LLM_RETURN_IF_ERROR(SubmitDecode());
  int32_t token = -1;
  LLM_RETURN_IF_ERROR(Wait(&token));
  return token;
}

void Session::Cancel() {
  std::lock_guard<std::mutex> lock(cancel_mu_);
  cancel_latched_ = true;
  model_->scheduler().Cancel(&client_);
}

Session::Checkpoint Session::MakeCheckpoint() {
  Checkpoint cp;
  cp.n_tokens = tokens_.size();
  cp.has_logits = has_logits_;
  if (has_logits_) cp.logits = logits_;
  cp.rng = rng_;
  checkpoint_pin_ = static_cast<int64_t>(cp.n_tokens);
  kv_->SetPin(checkpoint_pin_);
  return cp;
}

void Session::EndCheckpoint() noexcept {
  checkpoint_pin_ = -1;
  kv_->SetPin(-1);
}

void Session::RollBack(Checkpoint& cp) noexcept {
  if (tokens_.size() > cp.n_tokens) {
    kv_->Truncate(static_cast<int64_t>(cp.n_tokens));
    tokens_.resize(cp.n_tokens);
  }
  if (cp.has_logits) logits_.swap(cp.logits);  // same size: n_vocab
  has_logits_ = cp.has_logits;
  rng_ = cp.rng;
  EndCheckpoint();
}

absl::Status Session::PrepareChunk(int64_t n) {
  const int64_t pos = static_cast<int64_t>(tokens_.size()) - (rewrite_last_ ? 1 : 0);
  return kv_->PrepareWrite(pos, pos + n);
}

SequenceStep Session::StepFor(const ScheduledChunk& chunk) {
  SequenceStep step;
  step.kv = kv_.get();
  step.tokens = chunk.tokens;
  step.pos0 = static_cast<int64_t>(tokens_.size()) - (rewrite_last_ ? 1 : 0);
  step.logits = chunk.last ? step_logits_.data() : nullptr;
  step.rope_long = rope_long_;
  return step;
}

void Session::CommitChunk(const ScheduledChunk& chunk) {
  if (!rewrite_last_) {
    tokens_.insert(tokens_.end(), chunk.tokens.begin(), chunk.tokens.end());  // reserved
  }
  kv_->Commit(tokens_);
  if (chunk.last) {
    logits_.swap(step_logits_);
    logits_swapped_ = true;
    has_logits_ = true;
  }
}

absl::Status Session::SetSampler(const SamplerConfig& config) {
  LLM_RETURN_IF_ERROR(ValidateSamplerConfig(config));
  sampler_ = std::make_unique<Sampler>(config);
  return absl::OkStatus();
}

void Session::SetSeed(uint64_t seed) {
  seed_ = seed;
  rng_ = Rng(seed);
}

void Session::Reset() {
  kv_->Truncate(0);
  tokens_.clear();
  has_logits_ = false;
  rng_ = Rng(seed_);
  TakeCancel();
}

absl::Status Session::Rewind(int64_t n) {
  if (step_pending()) return Error(LLM_ERR_BUSY, "a step is pending on this session");
  const int64_t have = static_cast<int64_t>(tokens_.size());
  if (n < 0 || n > have) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "cannot rewind to %d tokens: the session holds %d", n,
                  have);
  }
  LLM_RETURN_IF_ERROR(CheckNotCancelled());
  if (n == have && (has_logits_ || n == 0)) return absl::OkStatus();
  // A sliding-window table released the KV of old positions: rewinding to n
  // needs positions [n - window, n) (docs/SLIDING_WINDOW.md). Refused, with
  // nothing changed, rather than recomputed from position 0.
  if (n > 0 && !kv_->CanResumeAt(n)) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "cannot rewind to %d tokens: the model's sliding window (%d positions) has "
                  "released the KV that position %d needs; rewind less far, or reset and "
                  "prefill again",
                  n, kv_->window(), n - 1);
  }
  // Drop the tokens past n first (this cannot fail, and frees blocks the
  // recomputation may need), then run token n - 1 again at its own position:
  // that recomputes the logits of position n - 1 and rewrites its KV with
  // the same values. If that step fails the session keeps n tokens without
  // logits -- the state Rewind(n) starts from, so a retry completes it.
  kv_->Truncate(n);
  tokens_.resize(static_cast<size_t>(n));
  has_logits_ = false;
  if (n == 0) return absl::OkStatus();
  step_tokens_.assign(1, tokens_.back());
  MarkCallStart();
  rewrite_last_ = true;
  absl::Status status = SubmitStep(Pending::kPrefill);
  if (!status.ok()) {
    rewrite_last_ = false;
    return status;
  }
  return Wait(nullptr);
}

absl::StatusOr<std::unique_ptr<Session>> Session::Fork() const {
  if (step_pending()) return Error(LLM_ERR_BUSY, "a step is pending on the parent session");
  std::unique_ptr<Session> child(new Session());
  child->model_ = model_;
  child->n_ctx_ = n_ctx_;
  child->rope_long_ = rope_long_;
  child->kv_type_ = kv_type_;
  child->seed_ = seed_;
  child->kv_ = kv_->Fork();
  child->sampler_ = std::make_unique<Sampler>(sampler_->config());
  child->rng_ = rng_;
  child->tokens_ = tokens_;
  child->logits_ = logits_;
  child->step_logits_.assign(logits_.size(), 0.0f);
  child->has_logits_ = has_logits_;
  child->AttachToScheduler();
  return child;
}

namespace {

SessionState StateOf(const Model& model, KvType kv_type, bool rope_long,
                     const std::vector<int32_t>& tokens, uint64_t seed, const Sampler& sampler,
                     const Rng& rng, bool has_logits, const std::vector<float>& logits) {
  SessionState state;
  state.model_fingerprint = model.fingerprint();
  state.kv_type = kv_type;
  state.tokens = tokens;
  state.seed = seed;
  state.sampler = sampler.config();
  state.rng_state = rng.state();
  state.has_logits = has_logits;
  if (has_logits) state.logits = logits;
  state.rope_long = rope_long;
  return state;
}

}  // namespace

size_t Session::SaveSize() const {
  const SessionState state = StateOf(*model_, kv_type_, rope_long_, tokens_, seed_, *sampler_,
                                     rng_, has_logits_, logits_);
  return SerializedSessionSize(state, model_->kv_layout());
}

absl::StatusOr<size_t> Session::Save(uint8_t* out, size_t capacity) const {
  if (step_pending()) return Error(LLM_ERR_BUSY, "a step is pending on this session");
  const SessionState state = StateOf(*model_, kv_type_, rope_long_, tokens_, seed_, *sampler_,
                                     rng_, has_logits_, logits_);
  const KvLayout layout = model_->kv_layout();
  const size_t size = SerializedSessionSize(state, layout);
  if (out == nullptr || capacity < size) {
    return Errorf(LLM_ERR_BUFFER_TOO_SMALL, "the session needs %d bytes; the buffer holds %d", size,
                  capacity);
  }
  LLM_RETURN_IF_ERROR(SerializeSession(state, *kv_, layout, out));
  return size;
}

absl::Status Session::Load(const uint8_t* data, size_t size) {
  if (step_pending()) return Error(LLM_ERR_BUSY, "a step is pending on this session");
  const KvLayout layout = model_->kv_layout();
  SessionLoadExpect expect;
  expect.model_fingerprint = model_->fingerprint();
  expect.kv_type = kv_type_;
  expect.n_vocab = model_->hparams().n_vocab;
  expect.n_ctx = n_ctx_;
  expect.layout = &layout;
  expect.rope_long = rope_long_;
  auto fresh = std::make_unique<SessionKv>(&model_->kv_groups(), model_->kv_pools(), kv_type_,
                                           n_ctx_, KvVariant());
  SessionState state;
  LLM_RETURN_IF_ERROR(DeserializeSession(data, size, expect, &state, fresh.get()));
  Rng rng = rng_;
  LLM_RETURN_IF_ERROR(rng.set_state(state.rng_state));
  auto sampler = std::make_unique<Sampler>(state.sampler);
  std::vector<float> logits = logits_;
  if (state.has_logits) logits = std::move(state.logits);
  // Nothing below fails: the session changes all at once.
  kv_ = std::move(fresh);
  tokens_ = std::move(state.tokens);
  seed_ = state.seed;
  sampler_ = std::move(sampler);
  rng_ = rng;
  logits_ = std::move(logits);
  has_logits_ = state.has_logits;
  return absl::OkStatus();
}

}  // namespace llm
