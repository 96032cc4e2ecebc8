// One conversation: token history, KV cache, sampler and its seeded RNG, and
// the logits for the next position. One thread at a time per session; several
// sessions of one model may run on different threads (0.1 serialises their
// forward passes on the model's lock).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/model.h"
#include "kv/kv_cache.h"
#include "model/llama.h"
#include "sampling/sampler.h"

namespace llm {

class ThreadPool;

struct SessionOptions {
  int64_t n_ctx = 0;  // 0: trained context capped at kDefaultMaxCtx
  KvType kv_type = KvType::kF16;
  int n_threads = 0;  // 0: the model's default
  uint64_t seed = 0;
  SamplerConfig sampler;
};

inline constexpr int64_t kDefaultMaxCtx = 4096;
// Prefill runs in chunks of at most this many tokens (bounds the activations).
inline constexpr int64_t kPrefillChunk = 256;

class Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Create(std::shared_ptr<const Model> model,
                                                         const SessionOptions& options);
  ~Session();

  const Model& model() const { return *model_; }
  int64_t n_ctx() const { return n_ctx_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  bool has_logits() const { return has_logits_; }
  absl::Span<const float> logits() const { return logits_; }

  // Append tokens and run them (CONTEXT_FULL if they do not fit: nothing changes).
  absl::Status Prefill(absl::Span<const int32_t> tokens);
  // Sample from the current logits, append, run. Returns the token.
  absl::StatusOr<int32_t> Decode();
  absl::Status SetSampler(const SamplerConfig& config);
  void Reset();

  // Runs several sessions' new tokens as ONE forward pass (each session's
  // tokens must fit its context). Used by tests and, later, the batcher.
  static absl::Status PrefillBatch(absl::Span<Session* const> sessions,
                                   absl::Span<const absl::Span<const int32_t>> tokens);

 private:
  Session() = default;
  absl::Status CheckTokens(absl::Span<const int32_t> tokens) const;
  absl::Status RunChunked(absl::Span<const int32_t> tokens);

  std::shared_ptr<const Model> model_;
  int64_t n_ctx_ = 0;
  int n_threads_ = 1;
  uint64_t seed_ = 0;
  std::unique_ptr<ThreadPool> pool_;  // n_threads_ - 1 workers, joined on free
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<Sampler> sampler_;
  Rng rng_{0};
  ForwardScratch scratch_;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
  bool has_logits_ = false;
};

}  // namespace llm
