// One conversation: token history, KV block table (from the model's pool),
// sampler and its seeded RNG, and the logits for the next position.
//
// Work reaches the model through its scheduler (engine/scheduler.h): a
// session submits a step (tokens to run) and waits for it -- or, for the
// non-blocking API, polls. While a step of the session is pending, the
// scheduler thread owns the session's history, KV and logits; the session's
// own thread touches them again only after collecting the step.
//
// One thread at a time per session, except Cancel() and the counters, which
// any thread may call.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/executor.h"
#include "engine/model.h"
#include "engine/scheduler.h"
#include "kv/block_table.h"
#include "kv/session_kv.h"
#include "model/llama.h"
#include "sampling/sampler.h"

namespace llm {

struct SessionOptions {
  int64_t n_ctx = 0;  // 0: trained context capped at kDefaultMaxCtx
  KvType kv_type = KvType::kF16;
  int n_threads = 0;  // accepted for compatibility; passes use the model's threads
  uint64_t seed = 0;
  SamplerConfig sampler;
};

inline constexpr int64_t kDefaultMaxCtx = 4096;

class Session : private StepClient {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Create(std::shared_ptr<const Model> model,
                                                         const SessionOptions& options);
  // Cancels a pending step and waits until the scheduler has let go of it.
  ~Session();

  const Model& model() const { return *model_; }
  int64_t n_ctx() const { return n_ctx_; }
  // Whether its tokens rotate with LongRoPE's long factors (Phi-3, n_ctx above
  // the original context).
  bool rope_long() const { return rope_long_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  bool has_logits() const { return has_logits_; }
  absl::Span<const float> logits() const { return logits_; }
  // Group 0's table (the only one of a one-group model).
  const KvBlockTable& kv() const { return kv_->table(0); }
  // Every group's table (kv/session_kv.h).
  const SessionKv& session_kv() const { return *kv_; }

  // Failure atomicity (docs/BATCHING.md): a prefill or decode step that
  // fails -- any status, a cancel included -- leaves the session exactly as
  // it was before the call (tokens, KV, logits, RNG).

  // ---- blocking steps ----
  // Append tokens and run them (CONTEXT_FULL if they do not fit: nothing
  // changes). Whole blocks of the prompt already in the model's pool are
  // reused instead of recomputed (prefix caching).
  absl::Status Prefill(absl::Span<const int32_t> tokens);
  // Sample from the current logits, append, run. Returns the token.
  absl::StatusOr<int32_t> Decode();

  // ---- non-blocking steps ----
  absl::Status SubmitPrefill(absl::Span<const int32_t> tokens);  // tokens are copied
  absl::Status SubmitDecode();  // samples now; the token comes with the result
  // A submitted step not yet collected.
  bool step_pending() const { return pending_ != Pending::kNone; }
  // nullopt while the step runs; else its status (collected). *token: the
  // decoded token of a decode step (else -1). No step -> INVALID_ARGUMENT.
  std::optional<absl::Status> Poll(int32_t* token);
  absl::Status Wait(int32_t* token);

  // Any thread. Latches a cancel: the step running or queued ends with
  // LLM_ERR_CANCELLED, the call in progress (or, with none, the next call
  // that runs the model) returns LLM_ERR_CANCELLED and clears the latch.
  void Cancel();
  // Clears the latch; true if a cancel was latched.
  bool TakeCancel();
  // Fails with LLM_ERR_CANCELLED (clearing the latch) if a cancel is latched.
  absl::Status CheckNotCancelled();

  // The state a failed multi-step call (llm_generate) returns to.
  struct Checkpoint {
    size_t n_tokens = 0;
    bool has_logits = false;
    std::vector<float> logits;  // empty unless has_logits
    Rng rng{0};
  };
  // While a checkpoint is held, a sliding-window KV table keeps the blocks
  // needed to roll back to it (KvBlockTable::SetPin): RollBack or
  // EndCheckpoint ends that.
  Checkpoint MakeCheckpoint();   // may throw std::bad_alloc
  void RollBack(Checkpoint& cp) noexcept;
  void EndCheckpoint() noexcept;

  absl::Status SetSampler(const SamplerConfig& config);
  void SetSeed(uint64_t seed);
  // Also clears a latched cancel.
  void Reset();
  // Keep the first n tokens; recompute the logits of the last one. On
  // failure the session holds the first n tokens without logits, and
  // Rewind(n) again computes them (a latched cancel: nothing changes).
  absl::Status Rewind(int64_t n);
  // A copy sharing this session's KV blocks (copy-on-write).
  absl::StatusOr<std::unique_ptr<Session>> Fork() const;
  // docs/SESSION_FORMAT.md. Save: the size needed (BUFFER_TOO_SMALL if
  // capacity is smaller; out may then be null).
  absl::StatusOr<size_t> Save(uint8_t* out, size_t capacity) const;
  size_t SaveSize() const;
  // Replaces the state; on failure nothing changes.
  absl::Status Load(const uint8_t* data, size_t size);

  // Counters (any thread).
  uint64_t iterations() const { return client_.iterations.load(std::memory_order_relaxed); }
  uint64_t prefill_chunks() const { return client_.chunks.load(std::memory_order_relaxed); }
  uint64_t cached_tokens() const { return cached_tokens_.load(std::memory_order_relaxed); }

 private:
  enum class Pending { kNone, kPrefill, kDecode };
  Session() = default;
  void Init(std::shared_ptr<const Model> model, int64_t n_ctx, KvType kv_type, uint64_t seed,
            const SamplerConfig& sampler);
  // Registers with the model's scheduler (the last step of Init and Fork).
  void AttachToScheduler();
  absl::Status CheckTokens(absl::Span<const int32_t> tokens) const;
  absl::Status CheckCanDecode() const;
  // Records the state a failed step returns to (the call's start).
  void MarkCallStart();
  absl::Status SubmitStep(Pending kind);  // step_tokens_ -> scheduler
  void UndoStep() noexcept;  // back to the state MarkCallStart recorded
  absl::Status Collect(absl::Status status, int32_t* token);

  // StepClient: the scheduler thread, while a step of this session is in a
  // pass (the executor reaches them through client_.step_client).
  absl::Status PrepareChunk(int64_t n) override;
  SequenceStep StepFor(const ScheduledChunk& chunk) override;
  void CommitChunk(const ScheduledChunk& chunk) override;

  std::shared_ptr<const Model> model_;
  int64_t n_ctx_ = 0;
  // LongRoPE long factors (LlamaModel::UsesLongRope(n_ctx_)): fixed for the
  // session's life, so its KV is rotated one way; its blocks are shared only
  // with sessions rotating alike (BlockKey::variant).
  bool rope_long_ = false;
  uint32_t KvVariant() const { return rope_long_ ? 1u : 0u; }
  KvType kv_type_ = KvType::kF16;
  uint64_t seed_ = 0;
  std::unique_ptr<SessionKv> kv_;
  std::unique_ptr<Sampler> sampler_;
  Rng rng_{0};
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
  bool has_logits_ = false;

  SchedulerClient client_;
  bool attached_ = false;
  Pending pending_ = Pending::kNone;
  std::vector<int32_t> step_tokens_;  // the submitted step's tokens
  // Rewind's step: runs the last history token again at its own position
  // (recomputing its logits) instead of appending.
  bool rewrite_last_ = false;
  // A failed step changes nothing: the history length (before any prefix
  // adoption), the logits' validity and the RNG as they were when the call
  // started restore them. The pass writes a step's logits into step_logits_
  // and swaps them in when the step's last chunk commits, so the previous
  // logits are still there to swap back (logits_swapped_).
  size_t history_at_call_ = 0;
  int64_t checkpoint_pin_ = -1;  // a held Checkpoint's n_tokens, or -1
  bool logits_valid_at_call_ = false;
  Rng rng_at_call_{0};
  bool logits_swapped_ = false;
  std::vector<float> step_logits_;
  // The cancel latch. Cancel sets it and cancels the scheduler step under
  // cancel_mu_, and a call clears it under cancel_mu_, so each cancel is
  // seen by exactly one call (never by a step submitted after the latch was
  // cleared).
  std::mutex cancel_mu_;
  bool cancel_latched_ = false;
  std::atomic<uint64_t> cached_tokens_{0};
};

}  // namespace llm
