// Next-token sampler: picks one token id from a row of logits.
//
// The chain is llama.cpp's default order (common/sampling defaults), minus the
// samplers we do not offer:
//   1. penalties   over the last penalty_last_n history tokens (llama.cpp
//                  semantics): for a token seen count > 0 times,
//                    logit = logit <= 0 ? logit * repeat_penalty
//                                       : logit / repeat_penalty;
//                    logit -= count * frequency_penalty
//                             + (count > 0) * presence_penalty;
//   2. greedy      if temperature <= 0: argmax of the penalized logits (ties ->
//                  lowest id); nothing else applies;
//   3. top_k       keep the k largest logits (ties -> lower id first);
//   4. top_p       softmax of the remaining logits (temperature 1); keep the
//                  smallest prefix, by descending probability, whose mass
//                  reaches top_p (at least one token);
//   5. min_p       keep logits >= max_logit + log(min_p), i.e. p >= min_p * p_max;
//   6. temperature divide the remaining logits by it;
//   7. softmax + draw one token with Rng::Uniform() (inverse CDF over the
//                  remaining candidates in descending-logit order).
// Robustness: NaN and -inf logits (after penalties) are never chosen. If some
// logits are +inf, the choice is uniform among those (greedy: the lowest id).
// If no logit is finite or +inf, or logits is empty, the result is 0.
// Out-of-range ids in the history are ignored.
//
// Cost per call (BM_Sample, this repository's AVX-512 host; 49152 / 128256
// logits): greedy is one vector pass for the maximum and a short one for its
// first id (~4 / 10 us). With top_k set, the first k choosable logits fill a
// k-sized heap; after that a vector scan skips, 16 at a time, the logits
// that do not beat the heap's worst (most of them), so only a few hundred
// enter the heap (defaults: ~8 / 14 us); then only those k are sorted and
// filtered. Penalties copy the row once and change the history's ids in the
// copy (~4 / 12 us more). A candidate per choosable logit is made only when
// top_k is off, or when some logit is +inf; top_p then sums every
// candidate's exp (double, in id order) and sorts only the bands of logit
// that hold the kept prefix (~0.5 / 1.0 ms). Scratch buffers are members,
// sized on the first call and reused: no n_vocab-sized allocation after
// that (unless n_vocab grows).
//
// Not thread-safe: one Sampler per session.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "sampling/rng.h"
#include "sampling/sampler_config.h"

namespace llm {

class Sampler {
 public:
  // The config should have passed ValidateSamplerConfig; values it would
  // refuse are still handled without crashing (NaN temperature -> greedy,
  // NaN/negative filters and penalties -> off).
  explicit Sampler(SamplerConfig config);

  const SamplerConfig& config() const { return config_; }
  void set_config(SamplerConfig config);

  // logits: n_vocab values for the next position (may hold NaN/±inf).
  // history: the session's tokens so far (penalties use the last
  // penalty_last_n). Deterministic for a given rng state; consumes exactly
  // one rng.Next() unless greedy (or a single candidate) decides it.
  int32_t Sample(absl::Span<const float> logits, absl::Span<const int32_t> history, Rng& rng);

  // Step 1 alone, in place (what Sample applies before filtering); exposed so
  // tests and callers that need penalized logits can see them.
  void ApplyPenalties(absl::Span<float> logits, absl::Span<const int32_t> history);

 private:
  struct Candidate {
    float logit;
    int32_t id;
  };

  bool PenaltiesActive() const;
  // Counts history[-last_n:] tokens into counts_ (ids in [0, n_vocab)).
  void CountHistory(size_t n_vocab, absl::Span<const int32_t> history);
  void ClearCounts();
  float Penalize(float logit, int32_t count) const;

  SamplerConfig config_;
  std::vector<Candidate> candidates_;  // [n_vocab] capacity
  std::vector<int32_t> counts_;        // [n_vocab], all zero between calls
  std::vector<int32_t> touched_;       // ids with counts_ != 0
  std::vector<double> weights_;        // [n_vocab] capacity
  std::vector<float> penalized_;       // [n_vocab]: the penalized copy of a row
};

}  // namespace llm
