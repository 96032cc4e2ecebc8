#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace llm {
namespace {

// Effective settings: values ValidateSamplerConfig refuses fall back to "off"
// so that Sample never misbehaves on them.
bool GreedyTemperature(float t) { return !(t > 0.0f) || !std::isfinite(t); }
bool TopPActive(float p) { return p < 1.0f && p >= 0.0f; }  // false for NaN
bool MinPActive(float p) { return p > 0.0f && p <= 1.0f; }  // false for NaN
float FiniteOr(float v, float fallback) { return std::isfinite(v) ? v : fallback; }

// The first index j >= i of v[0, n) with v[j] > t (an ordered compare: NaN
// never passes), or n. SSE2 (every x86-64 CPU) tests 16 values per step:
// the top_k scan below calls it with the worst kept logit, which most of a
// vocabulary's logits do not beat, so it skips them 16 at a time.
size_t FirstAbove(const float* v, size_t i, size_t n, float t) {
#if defined(__SSE2__)
  const __m128 vt = _mm_set1_ps(t);
  for (; i + 16 <= n; i += 16) {
    const __m128 a = _mm_cmpgt_ps(_mm_loadu_ps(v + i), vt);
    const __m128 b = _mm_cmpgt_ps(_mm_loadu_ps(v + i + 4), vt);
    const __m128 c = _mm_cmpgt_ps(_mm_loadu_ps(v + i + 8), vt);
    const __m128 d = _mm_cmpgt_ps(_mm_loadu_ps(v + i + 12), vt);
    if (_mm_movemask_ps(_mm_or_ps(_mm_or_ps(a, b), _mm_or_ps(c, d))) != 0) break;
  }
#endif
  for (; i < n; ++i) {
    if (v[i] > t) return i;
  }
  return n;
}

// The id of the first maximum of logits (NaN never compares greater; all NaN
// or -inf -> 0): the scalar greedy loop's answer, in two passes. The maximum
// runs in 16 independent lanes (lane = id % 16; max is exact, so lanes
// change no value; maxps(v, m) is v > m ? v : m, NaN-safe as the scalar
// compare), then the first id holding it is found. The single branchy loop
// took ~2.6 % of a 16-session SmolLM2 step (49152 logits per session).
int32_t GreedyArgMax(absl::Span<const float> logits) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const float* v = logits.data();
  const size_t n = logits.size();
  float best = kNegInf;
  size_t i = 0;
#if defined(__SSE2__)
  __m128 m[4];
  for (__m128& x : m) x = _mm_set1_ps(kNegInf);
  for (; i + 16 <= n; i += 16) {
    for (int k = 0; k < 4; ++k) m[k] = _mm_max_ps(_mm_loadu_ps(v + i + 4 * k), m[k]);
  }
  alignas(16) float lanes[16];
  for (int k = 0; k < 4; ++k) _mm_store_ps(lanes + 4 * k, m[k]);
  for (float x : lanes) best = x > best ? x : best;
#endif
  for (; i < n; ++i) best = v[i] > best ? v[i] : best;
  if (!(best > kNegInf)) return 0;
  // The first id holding the maximum: the first one above its predecessor.
  return static_cast<int32_t>(FirstAbove(v, 0, n, std::nextafter(best, kNegInf)));
}

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

  constexpr float kInf = std::numeric_limits<float>::infinity();
  // 1. Penalties, on a copy (only the history's ids change): the steps below
  //    then read one plain row, which the vector scans need. The copy costs
  //    about a tenth of what a per-id penalty lookup in every scan did
  //    (49152 logits, repeat_penalty 1.1: 93 -> ~13 us, BM_Sample).
  absl::Span<const float> row = logits;
  if (PenaltiesActive()) {
    penalized_.assign(logits.begin(), logits.end());
    ApplyPenalties(absl::MakeSpan(penalized_), history);
    row = penalized_;
  }

  // 2. Greedy, no further copy. The first maximum in id order is the lowest
  //    id among ties; NaN never compares greater; all NaN/-inf -> 0.
  if (GreedyTemperature(config_.temperature)) return GreedyArgMax(row);

  // Descending logit, ties by ascending id: a total order, so the kept set
  // and its order never depend on the algorithm that finds it.
  auto greater = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  if (candidates_.capacity() < n) candidates_.reserve(n);
  candidates_.clear();

  // 3a. top_k << n_vocab: one pass keeping the k best in a min-heap (top =
  //     worst kept). Ids arrive ascending, so a newcomer only displaces the
  //     worst when its logit is strictly greater. Expected heap updates are
  //     about k ln(n/k), so this costs little more than reading the logits.
  const bool top_k_active = config_.top_k > 0 && static_cast<size_t>(config_.top_k) < n;
  bool any_pos_inf = false;
  if (top_k_active) {
    const size_t k = static_cast<size_t>(config_.top_k);
    auto offer = [&](size_t i, float v) {
      if (std::isnan(v) || v == -kInf) return;
      any_pos_inf |= v == kInf;
      if (candidates_.size() < k) {
        candidates_.push_back({v, static_cast<int32_t>(i)});
        std::push_heap(candidates_.begin(), candidates_.end(), greater);
      } else if (v > candidates_.front().logit) {
        std::pop_heap(candidates_.begin(), candidates_.end(), greater);
        candidates_.back() = {v, static_cast<int32_t>(i)};
        std::push_heap(candidates_.begin(), candidates_.end(), greater);
      }
    };
    // Until the heap is full every choosable logit enters; after that only
    // those above its worst, and (no NaN or -inf passes v > worst; +inf
    // passes a finite worst, and a worst of +inf means any_pos_inf is set)
    // FirstAbove skips exactly the ids offer would ignore: 49152 logits 92
    // -> 8 us, 128256: 234 -> 13 us (BM_Sample).
    size_t i = 0;
    for (; i < n && candidates_.size() < k; ++i) offer(i, row[i]);
    while (candidates_.size() == k &&
           (i = FirstAbove(row.data(), i, n, candidates_.front().logit)) < n) {
      offer(i, row[i]);
      ++i;
    }
  }
  if (!top_k_active || any_pos_inf) {
    // 3b. All choosable logits, ascending id order.
    // Written by index into a sized vector: push_back kept the vector's end
    // in memory, a store and a reload per logit (~7 ns each).
    candidates_.resize(n);
    size_t count = 0;
    any_pos_inf = false;
    for (size_t i = 0; i < n; ++i) {
      const float v = row[i];
      if (std::isnan(v) || v == -kInf) continue;
      any_pos_inf |= v == kInf;
      candidates_[count++] = {v, static_cast<int32_t>(i)};
    }
    candidates_.resize(count);
  }
  if (candidates_.empty()) return 0;
  if (any_pos_inf) {
    // +inf dominates every finite logit and softmax would give NaN: the +inf
    // tokens are kept as equally likely (then top_k applies to them by id).
    auto end = std::remove_if(candidates_.begin(), candidates_.end(),
                              [](const Candidate& c) { return c.logit != kInf; });
    candidates_.erase(end, candidates_.end());
    for (Candidate& c : candidates_) c.logit = 0.0f;
  }

  // 3c. Finish top_k: sorted descending, at most k.
  size_t size = candidates_.size();
  bool sorted = false;
  if (top_k_active) {
    size = std::min(size, static_cast<size_t>(config_.top_k));
    if (any_pos_inf) {
      // Equal logits: the total order keeps the lowest ids, already in order.
      candidates_.resize(size);
    } else {
      std::sort(candidates_.begin(), candidates_.end(), greater);
    }
    sorted = true;
  }

  // 4. top_p over the softmax at temperature 1: keep the smallest prefix by
  //    descending probability whose mass reaches top_p * total. Without top_k
  //    the candidates are sorted lazily, best first, in chunks that double
  //    (64, 128, ...), and only among those in the first bands of logit
  //    (below) that hold the kept prefix: sorting all n_vocab entries is
  //    rarely needed. The result equals a full sort's.
  if (TopPActive(config_.top_p) && size > 1) {
    double max_logit = candidates_[0].logit;
    if (!sorted) {
      for (size_t i = 0; i < size; ++i)
        max_logit = std::max<double>(max_logit, candidates_[i].logit);
    }
    // The mass of each 1/8-nat band of max_logit - logit (the last band
    // holds the rest): a band is a function of the logit, so the bands up
    // to b hold a prefix of the descending order.
    constexpr int kBands = 256;
    double band_mass[kBands];
    auto band_of = [&](float logit) {
      const double d = (max_logit - static_cast<double>(logit)) * 8.0;
      return d < kBands - 1 ? static_cast<int>(d) : kBands - 1;
    };
    if (!sorted) std::fill(band_mass, band_mass + kBands, 0.0);
    double total = 0.0;
    for (size_t i = 0; i < size; ++i) {
      const double w = std::exp(static_cast<double>(candidates_[i].logit) - max_logit);
      total += w;
      if (!sorted) band_mass[band_of(candidates_[i].logit)] += w;
    }
    const double target = static_cast<double>(config_.top_p) * total;
    // candidates_[0, block_end) are sorted before the rest: the bands whose
    // mass passes the target by a margin far above the rounding of either
    // sum (relative n * 2^-53), so the prefix ends among them. (Should the
    // cumulative sum not reach the target there, the loop goes on into the
    // rest, which is all below them.)
    size_t block_end = size;
    if (!sorted) {
      const double need = target + total * 1e-9;
      double mass = 0.0;
      for (int b = 0; b < kBands - 1; ++b) {
        mass += band_mass[b];
        if (mass >= need) {
          block_end = static_cast<size_t>(
              std::partition(candidates_.begin(), candidates_.begin() + size,
                             [&](const Candidate& c) { return band_of(c.logit) <= b; }) -
              candidates_.begin());
          break;
        }
      }
    }
    size_t sorted_end = sorted ? size : 0;  // candidates_[0, sorted_end) is final
    double cum = 0.0;
    size_t keep = size;
    for (size_t i = 0; i < size; ++i) {
      if (i == block_end) block_end = size;
      if (i == sorted_end) {
        const size_t m = std::min(block_end, std::max<size_t>(64, 2 * sorted_end));
        auto first = candidates_.begin() + sorted_end;
        if (m < block_end) {
          std::nth_element(first, candidates_.begin() + (m - 1), candidates_.begin() + block_end,
                           greater);
        }
        std::sort(first, candidates_.begin() + m, greater);
        sorted_end = m;
      }
      cum += std::exp(static_cast<double>(candidates_[i].logit) - max_logit);
      if (cum >= target) {
        keep = i + 1;
        break;
      }
    }
    size = keep;  // candidates_[0, size) is sorted
    sorted = true;
  }

  // 5. min_p: p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p).
  if (MinPActive(config_.min_p) && size > 1) {
    double max_logit = candidates_[0].logit;
    if (!sorted) {
      for (size_t i = 0; i < size; ++i)
        max_logit = std::max<double>(max_logit, candidates_[i].logit);
    }
    const double threshold = max_logit + std::log(static_cast<double>(config_.min_p));
    size_t kept = 0;
    for (size_t i = 0; i < size; ++i) {
      if (static_cast<double>(candidates_[i].logit) >= threshold)
        candidates_[kept++] = candidates_[i];
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
  if (weights_.capacity() < n) weights_.reserve(n);
  weights_.clear();
  double sum = 0.0;
  for (size_t i = 0; i < size; ++i) {
    weights_.push_back(
        std::exp((static_cast<double>(candidates_[i].logit) - max_logit) * inv_temp));
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
