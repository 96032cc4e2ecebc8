#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace llm {
namespace {

// Effective settings: values ValidateSamplerConfig refuses fall back to "off"
// so that Sample never misbehaves on them.
bool GreedyTemperature(float t) { return !(t > 0.0f) || !std::isfinite(t); }
bool TopPActive(float p) { return p < 1.0f && p >= 0.0f; }  // false for NaN
bool MinPActive(float p) { return p > 0.0f && p <= 1.0f; }     // false for NaN
float FiniteOr(float v, float fallback) { return std::isfinite(v) ? v : fallback; }

}  // namespace

Sampler::Sampler(SamplerConfig config) : config_(config) {}

void Sampler::set_config(SamplerConfig config) { config_ = config; }

bool Sampler::PenaltiesActive() const {
  if (config_.penalty_last_n == 0) return false;
  const float rp = config_.repeat_penalty;
  const bool repeat = std::isfinite(rp) && rp > 0.0f && rp != 1.0f;
  return repeat || FiniteOr(config_.frequency_penalty, 0.0f) != 0.0f ||
         FiniteOr(config_.presence_penalty, 0.0f) != 0.0f;
}

void Sampler::CountHistory(size_t n_vocab, absl::Span<const int32_t> history) {
  if (counts_.size() < n_vocab) counts_.resize(n_vocab, 0);
  size_t window = history.size();
  if (config_.penalty_last_n >= 0) {
    window = std::min(window, static_cast<size_t>(config_.penalty_last_n));
  }
  for (size_t i = history.size() - window; i < history.size(); ++i) {
    const int32_t id = history[i];
    if (id < 0 || static_cast<size_t>(id) >= n_vocab) continue;
    if (counts_[id]++ == 0) touched_.push_back(id);
  }
}

void Sampler::ClearCounts() {
  for (int32_t id : touched_) counts_[id] = 0;
  touched_.clear();
}

float Sampler::Penalize(float logit, int32_t count) const {
  const float rp = config_.repeat_penalty;
  if (std::isfinite(rp) && rp > 0.0f && rp != 1.0f) {
    logit = logit <= 0.0f ? logit * rp : logit / rp;
  }
  const float freq = FiniteOr(config_.frequency_penalty, 0.0f);
  const float presence = FiniteOr(config_.presence_penalty, 0.0f);
  logit -= static_cast<float>(count) * freq + static_cast<float>(count > 0) * presence;
  return logit;
}

void Sampler::ApplyPenalties(absl::Span<float> logits, absl::Span<const int32_t> history) {
  if (!PenaltiesActive()) return;
  CountHistory(logits.size(), history);
  for (int32_t id : touched_) logits[id] = Penalize(logits[id], counts_[id]);
  ClearCounts();
}

int32_t Sampler::Sample(absl::Span<const float> logits, absl::Span<const int32_t> history,
                        Rng& rng) {
  const size_t n = logits.size();
  if (n == 0) return 0;

  // 1. Copy the choosable logits, penalties folded in. candidates_ ends up in
  //    ascending id order.
  const bool penalize = PenaltiesActive();
  if (penalize) CountHistory(n, history);
  if (candidates_.capacity() < n) candidates_.reserve(n);
  candidates_.clear();
  bool any_pos_inf = false;
  for (size_t i = 0; i < n; ++i) {
    float v = logits[i];
    if (penalize && counts_[i] != 0) v = Penalize(v, counts_[i]);
    if (std::isnan(v) || v == -std::numeric_limits<float>::infinity()) continue;
    any_pos_inf |= v == std::numeric_limits<float>::infinity();
    candidates_.push_back({v, static_cast<int32_t>(i)});
  }
  if (penalize) ClearCounts();
  if (candidates_.empty()) return 0;
  if (any_pos_inf) {
    // +inf dominates every finite logit; softmax would give NaN. Keep the
    // +inf tokens as equally likely.
    auto end = std::remove_if(candidates_.begin(), candidates_.end(), [](const Candidate& c) {
      return c.logit != std::numeric_limits<float>::infinity();
    });
    candidates_.erase(end, candidates_.end());
    for (Candidate& c : candidates_) c.logit = 0.0f;
  }

  // 2. Greedy: first maximum in id order = lowest id among ties.
  if (GreedyTemperature(config_.temperature)) {
    const Candidate* best = &candidates_[0];
    for (const Candidate& c : candidates_) {
      if (c.logit > best->logit) best = &c;
    }
    return best->id;
  }

  // Descending logit, ties by ascending id: a total order, so the kept set
  // and its order never depend on the sort algorithm.
  auto greater = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };

  // 3. top_k.
  size_t size = candidates_.size();
  bool sorted = false;
  if (config_.top_k > 0 && static_cast<size_t>(config_.top_k) < size) {
    const size_t k = static_cast<size_t>(config_.top_k);
    std::nth_element(candidates_.begin(), candidates_.begin() + (k - 1), candidates_.end(),
                     greater);
    size = k;
    std::sort(candidates_.begin(), candidates_.begin() + size, greater);
    sorted = true;
  }

  if (weights_.capacity() < n) weights_.reserve(n);

  // 4. top_p over the softmax at temperature 1.
  if (TopPActive(config_.top_p) && size > 1) {
    if (!sorted) {
      std::sort(candidates_.begin(), candidates_.begin() + size, greater);
      sorted = true;
    }
    const double max_logit = candidates_[0].logit;
    weights_.clear();
    double sum = 0.0;
    for (size_t i = 0; i < size; ++i) {
      weights_.push_back(std::exp(static_cast<double>(candidates_[i].logit) - max_logit));
      sum += weights_.back();
    }
    const double target = static_cast<double>(config_.top_p) * sum;
    double cum = 0.0;
    size_t keep = size;
    for (size_t i = 0; i < size; ++i) {
      cum += weights_[i];
      if (cum >= target) {
        keep = i + 1;
        break;
      }
    }
    size = keep;
  }

  // 5. min_p: p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p).
  if (MinPActive(config_.min_p) && size > 1) {
    double max_logit = candidates_[0].logit;
    if (!sorted) {
      for (size_t i = 0; i < size; ++i) max_logit = std::max<double>(max_logit, candidates_[i].logit);
    }
    const double threshold = max_logit + std::log(static_cast<double>(config_.min_p));
    size_t kept = 0;
    for (size_t i = 0; i < size; ++i) {
      if (static_cast<double>(candidates_[i].logit) >= threshold) candidates_[kept++] = candidates_[i];
    }
    size = kept;  // >= 1: the maximum always passes (log(min_p) <= 0)
  }

  if (size == 1) return candidates_[0].id;

  // 6-7. Temperature, softmax (double), inverse-CDF draw.
  // Scaling the difference to the maximum keeps a tiny temperature from
  // overflowing: (logit - max) <= 0, so the exponent is <= 0, never NaN.
  const double inv_temp = 1.0 / static_cast<double>(config_.temperature);
  double max_logit = candidates_[0].logit;
  for (size_t i = 0; i < size; ++i) max_logit = std::max<double>(max_logit, candidates_[i].logit);
  weights_.clear();
  double sum = 0.0;
  for (size_t i = 0; i < size; ++i) {
    weights_.push_back(std::exp((static_cast<double>(candidates_[i].logit) - max_logit) * inv_temp));
    sum += weights_.back();
  }
  const double target = rng.Uniform() * sum;
  double cum = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < size; ++i) {
    if (weights_[i] <= 0.0) continue;
    last_positive = i;
    cum += weights_[i];
    if (cum > target) return candidates_[i].id;
  }
  // Rounding left cum <= target: the last token with weight.
  return candidates_[last_positive].id;
}

}  // namespace llm
