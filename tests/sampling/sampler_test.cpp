// Sampler: greedy/top_k=1 are argmax; the empirical distribution of many
// draws matches the distribution the documented chain implies (computed here
// independently, in double); penalties follow llama.cpp's formula; bad logits
// never crash or get chosen; determinism and Rng state round trips; config
// validation.
#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "sampling/rng.h"
#include "sampling/sampler_config.h"

namespace llm {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> RandomLogits(size_t n, uint32_t seed, float scale = 2.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

SamplerConfig Off() {
  SamplerConfig c;
  c.temperature = 1.0f;
  c.top_k = 0;
  c.top_p = 1.0f;
  c.min_p = 0.0f;
  c.repeat_penalty = 1.0f;
  c.presence_penalty = 0.0f;
  c.frequency_penalty = 0.0f;
  c.penalty_last_n = 64;
  return c;
}

// The penalty formula as llama.cpp states it, on a copy.
std::vector<float> ExpectedPenalized(std::vector<float> logits, const std::vector<int32_t>& history,
                                     const SamplerConfig& c) {
  const int n = static_cast<int>(logits.size());
  std::vector<int> count(n, 0);
  size_t start = 0;
  if (c.penalty_last_n >= 0 && history.size() > static_cast<size_t>(c.penalty_last_n)) {
    start = history.size() - c.penalty_last_n;
  }
  if (c.penalty_last_n == 0) start = history.size();
  for (size_t i = start; i < history.size(); ++i) {
    if (history[i] >= 0 && history[i] < n) ++count[history[i]];
  }
  for (int i = 0; i < n; ++i) {
    if (count[i] == 0) continue;
    float l = logits[i];
    if (l > 0) {
      l = l / c.repeat_penalty;
    } else {
      l = l * c.repeat_penalty;
    }
    l = l - (static_cast<float>(count[i]) * c.frequency_penalty +
             (count[i] > 0 ? 1.0f : 0.0f) * c.presence_penalty);
    logits[i] = l;
  }
  return logits;
}

// Probability of each token after penalties -> top_k -> top_p -> min_p ->
// temperature -> softmax, in double. Also reports how close any top_p/min_p
// decision came to its threshold, so a test can refuse ambiguous inputs.
std::vector<double> ExpectedProbs(const std::vector<float>& raw,
                                  const std::vector<int32_t>& history, const SamplerConfig& c,
                                  double* closest_call) {
  const std::vector<float> logits = ExpectedPenalized(raw, history, c);
  std::vector<std::pair<double, int>> v;  // (logit, id)
  for (int i = 0; i < static_cast<int>(logits.size()); ++i) v.push_back({logits[i], i});
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (c.top_k > 0 && static_cast<size_t>(c.top_k) < v.size()) v.resize(c.top_k);
  *closest_call = 1.0;
  if (c.top_p < 1.0f) {
    double z = 0;
    for (const auto& e : v) z += std::exp(e.first);
    double cum = 0;
    size_t keep = v.size();
    for (size_t i = 0; i < v.size(); ++i) {
      cum += std::exp(v[i].first) / z;
      *closest_call = std::min(*closest_call, std::fabs(cum - c.top_p));
      if (cum >= c.top_p) {
        keep = i + 1;
        break;
      }
    }
    v.resize(keep);
  }
  if (c.min_p > 0.0f) {
    const double pmax = std::exp(v[0].first);
    std::vector<std::pair<double, int>> kept;
    for (const auto& e : v) {
      const double ratio = std::exp(e.first) / pmax;
      *closest_call = std::min(*closest_call, std::fabs(ratio - c.min_p));
      if (ratio >= c.min_p) kept.push_back(e);
    }
    v = kept;
  }
  std::vector<double> p(raw.size(), 0.0);
  double z = 0;
  for (const auto& e : v) z += std::exp(e.first / c.temperature);
  for (const auto& e : v) p[e.second] = std::exp(e.first / c.temperature) / z;
  return p;
}

int32_t ArgMax(const std::vector<float>& v) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(v.size()); ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

TEST(SamplerGreedy, TemperatureZeroIsArgmax) {
  for (size_t n : {1u, 2u, 7u, 1001u, 49152u}) {
    const std::vector<float> logits = RandomLogits(n, 100 + n);
    SamplerConfig c;  // defaults, but greedy
    c.temperature = 0.0f;
    Sampler s(c);
    Rng rng(1);
    EXPECT_EQ(s.Sample(logits, {}, rng), ArgMax(logits)) << n;
    c.temperature = -1.0f;  // negative is greedy too
    s.set_config(c);
    EXPECT_EQ(s.Sample(logits, {}, rng), ArgMax(logits)) << n;
  }
}

// The greedy pass against the plain scalar loop (first id whose logit is
// greater than every earlier one; NaN never greater; all NaN / -inf -> 0) on
// rows mixing ties, +-0, NaN and infinities, at sizes around the 16-lane
// blocks it works in.
TEST(SamplerGreedy, MatchesTheScalarLoopOnSpecialValues) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float specials[] = {std::nanf(""), kInf, -kInf, 0.0f, -0.0f, 2.5f, -2.5f};
  std::mt19937 rng(20261205);
  SamplerConfig c = Off();
  c.temperature = 0.0f;
  Sampler greedy(c);
  Rng draw(1);
  for (size_t n : {1u, 2u, 15u, 16u, 17u, 31u, 33u, 100u, 49157u}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> logits(n);
      std::uniform_int_distribution<int> pick(0, 9);
      for (float& v : logits) {
        const int k = pick(rng);
        v = k < 7 ? specials[k] : static_cast<float>(pick(rng) - 5);
      }
      int32_t expected = -1;
      float best = -kInf;
      for (size_t i = 0; i < n; ++i) {
        if (logits[i] > best) expected = static_cast<int32_t>(i), best = logits[i];
      }
      if (expected < 0) expected = 0;
      ASSERT_EQ(greedy.Sample(logits, {}, draw), expected) << n << " logits, trial " << trial;
    }
  }
  const std::vector<float> all_nan(40, std::nanf(""));
  EXPECT_EQ(greedy.Sample(all_nan, {}, draw), 0);
}

// top_k's kept set (the vector scan skips 16 logits at a time once its heap
// is full) against a sort, on rows mixing ties, +-0, NaN and infinities, at
// sizes around the 16-value steps, with and without penalties: at a huge
// temperature every kept token is drawn, and no other.
TEST(SamplerTopK, KeepsTheKBestOnSpecialValues) {
  const float specials[] = {kNaN, kInf, -kInf, 0.0f, -0.0f, 2.5f, -2.5f};
  std::mt19937 rng(20261206);
  for (const bool penalties : {false, true}) {
    SamplerConfig c = Off();
    c.temperature = 1e4f;
    c.top_k = 5;
    if (penalties) c.repeat_penalty = 0.5f;  // < 1 raises negative logits
    for (size_t n : {6u, 15u, 16u, 17u, 33u, 100u, 4099u}) {
      for (int trial = 0; trial < 12; ++trial) {
        std::vector<float> logits(n);
        std::uniform_int_distribution<int> pick(0, 99);
        for (float& v : logits) {
          const int k = pick(rng);
          // Specials rare (+inf in about one row in three), ties common.
          v = k < 7 && (k != 1 || pick(rng) < 3) ? specials[k] : static_cast<float>(k % 23) - 11.0f;
        }
        std::vector<int32_t> history;
        if (penalties) {
          for (int i = 0; i < 20; ++i) history.push_back(static_cast<int32_t>(rng() % n));
        }
        const std::vector<float> pen = ExpectedPenalized(logits, history, c);
        std::vector<std::pair<float, int32_t>> order;
        bool any_inf = false;
        for (size_t i = 0; i < n; ++i) {
          if (std::isnan(pen[i]) || pen[i] == -kInf) continue;
          any_inf |= pen[i] == kInf;
          order.push_back({pen[i], static_cast<int32_t>(i)});
        }
        if (any_inf) {
          order.erase(std::remove_if(order.begin(), order.end(),
                                     [](const auto& e) { return e.first != kInf; }),
                      order.end());
        }
        std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
          return a.first > b.first || (a.first == b.first && a.second < b.second);
        });
        if (order.size() > 5) order.resize(5);
        std::vector<int32_t> expected;
        for (const auto& e : order) expected.push_back(e.second);
        std::sort(expected.begin(), expected.end());
        if (expected.empty()) expected.push_back(0);  // nothing choosable -> 0

        Sampler s(c);
        Rng draw(static_cast<uint64_t>(trial) + 1);
        std::vector<int32_t> seen;
        for (int d = 0; d < 200; ++d) seen.push_back(s.Sample(logits, history, draw));
        std::sort(seen.begin(), seen.end());
        seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
        ASSERT_EQ(seen, expected) << n << " logits, trial " << trial << ", penalties " << penalties;
      }
    }
  }
}

// top_p without top_k sorts only the bands of logit that hold the kept
// prefix: the kept set must be the one a full sort gives (same sums: the
// total in id order, the cumulative mass in descending order). At a huge
// temperature every kept token is drawn, and no other.
TEST(SamplerTopP, KeepsTheFullSortsPrefix) {
  for (size_t n : {70u, 1000u, 12345u}) {
    for (float top_p : {0.3f, 0.9f, 0.99f}) {
      for (uint32_t seed : {1u, 2u}) {
        const std::vector<float> logits =
            RandomLogits(n, seed * 977 + static_cast<uint32_t>(n), 3.0f);
        std::vector<std::pair<float, int32_t>> order;
        double max_logit = -kInf;
        for (size_t i = 0; i < n; ++i) {
          order.push_back({logits[i], static_cast<int32_t>(i)});
          max_logit = std::max<double>(max_logit, logits[i]);
        }
        double total = 0.0;
        for (float l : logits) total += std::exp(static_cast<double>(l) - max_logit);
        std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
          return a.first > b.first || (a.first == b.first && a.second < b.second);
        });
        const double target = static_cast<double>(top_p) * total;
        double cum = 0.0;
        std::vector<int32_t> expected;
        for (const auto& e : order) {
          expected.push_back(e.second);
          cum += std::exp(static_cast<double>(e.first) - max_logit);
          if (cum >= target) break;
        }
        std::sort(expected.begin(), expected.end());

        SamplerConfig c = Off();
        c.temperature = 1e4f;
        c.top_p = top_p;
        Sampler s(c);
        Rng draw(seed);
        std::vector<int32_t> seen;
        const int draws =
            expected.size() <= 150 ? static_cast<int>(20 * expected.size() + 50) : 300;
        for (int d = 0; d < draws; ++d) seen.push_back(s.Sample(logits, {}, draw));
        std::sort(seen.begin(), seen.end());
        seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
        ASSERT_TRUE(std::includes(expected.begin(), expected.end(), seen.begin(), seen.end()))
            << n << " logits, top_p " << top_p << ": a token outside the kept prefix drawn";
        if (expected.size() <= 150) {
          ASSERT_EQ(seen, expected) << n << " logits, top_p " << top_p;
        }
        if (getenv("LLM_TEST_VERBOSE"))
          std::printf("n %zu top_p %g kept %zu\n", n, top_p, expected.size());
      }
    }
  }
}

TEST(SamplerGreedy, TopK1IsArgmaxAtAnyTemperature) {
  const std::vector<float> logits = RandomLogits(49152, 7);
  SamplerConfig c;
  c.top_k = 1;
  c.temperature = 1.5f;
  Sampler s(c);
  Rng rng(9);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.Sample(logits, {}, rng), ArgMax(logits));
}

TEST(SamplerGreedy, TiesGoToLowestId) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 3.0f};
  SamplerConfig c = Off();
  c.temperature = 0.0f;
  Sampler greedy(c);
  Rng rng(3);
  EXPECT_EQ(greedy.Sample(logits, {}, rng), 1);
  c.temperature = 1.0f;
  c.top_k = 1;
  Sampler topk1(c);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(topk1.Sample(logits, {}, rng), 1);
  // top_k on a row of equal logits keeps the k lowest ids, each drawn.
  const std::vector<float> flat(1000, 0.5f);
  c.top_k = 3;
  Sampler topk3(c);
  std::vector<int> seen(1000, 0);
  for (int i = 0; i < 300; ++i) ++seen[topk3.Sample(flat, {}, rng)];
  EXPECT_GT(seen[0], 0);
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[2], 0);
  EXPECT_EQ(seen[0] + seen[1] + seen[2], 300);
}

struct DistCase {
  const char* name;
  SamplerConfig config;
  size_t n_vocab;
  std::vector<int32_t> history;
  size_t min_kept = 1;  // the filters must leave at least this many tokens
  int draws = 100000;
};

std::vector<DistCase> DistCases() {
  std::vector<DistCase> cases;
  SamplerConfig c = Off();
  cases.push_back({"plain_t1", c, 37, {}});
  c.temperature = 0.6f;
  cases.push_back({"plain_t0.6", c, 37, {}});
  c = Off();
  c.temperature = 0.7f;
  c.top_k = 5;
  cases.push_back({"top_k5", c, 64, {}});
  c = Off();
  c.temperature = 1.3f;
  c.top_p = 0.8f;
  cases.push_back({"top_p0.8", c, 41, {}});
  c.top_p = 0.97f;
  c.temperature = 0.8f;
  // Many survivors: top_p's lazy chunked sort must go past 64 and 128.
  cases.push_back({"top_p0.97_wide", c, 400, {}, 150, 40000});
  c = Off();
  c.temperature = 0.9f;
  c.min_p = 0.1f;
  cases.push_back({"min_p0.1", c, 41, {}});
  cases.push_back({"defaults", SamplerConfig(), 64, {}});
  c = Off();
  c.repeat_penalty = 1.3f;
  c.frequency_penalty = 0.2f;
  c.presence_penalty = 0.5f;
  c.penalty_last_n = 8;
  cases.push_back({"penalties", c, 23, {1, 2, 2, 5, 0, 0, 0, 7, 3, 3, 22, 40, -1}});
  c.top_k = 12;
  c.top_p = 0.9f;
  c.min_p = 0.02f;
  c.temperature = 0.75f;
  cases.push_back({"penalties_and_filters", c, 23, {4, 4, 4, 9, 1, 0, 0, 11, 12, 6}});
  return cases;
}

TEST(SamplerDistribution, MatchesChainDistribution) {
  int case_index = 0;
  for (const DistCase& dc : DistCases()) {
    SCOPED_TRACE(dc.name);
    // Fresh random logits per case; redraw if a top_p/min_p decision sits so
    // close to its threshold that float vs double rounding could flip it.
    std::vector<float> logits;
    std::vector<double> expected;
    double closest = 0;
    for (uint32_t seed = 1000 + case_index++;; seed += 100) {
      logits = RandomLogits(dc.n_vocab, seed);
      expected = ExpectedProbs(logits, dc.history, dc.config, &closest);
      if (closest > 1e-4) break;
    }
    const int kDraws = dc.draws;
    Sampler sampler(dc.config);
    Rng rng(2024);
    std::vector<int> counts(dc.n_vocab, 0);
    for (int i = 0; i < kDraws; ++i) {
      const int32_t t = sampler.Sample(logits, dc.history, rng);
      ASSERT_GE(t, 0);
      ASSERT_LT(t, static_cast<int32_t>(dc.n_vocab));
      ++counts[t];
    }
    // Pearson chi-square; tokens expected fewer than 20 times are pooled
    // into one bin so that every bin's expectation is large enough.
    double chi2 = 0, pooled_e = 0, pooled_o = 0;
    int df = -1;
    size_t kept = 0;
    for (size_t i = 0; i < dc.n_vocab; ++i) {
      if (expected[i] == 0.0) {
        EXPECT_EQ(counts[i], 0) << "token " << i << " was filtered out but drawn";
        continue;
      }
      ++kept;
      const double e = expected[i] * kDraws;
      if (e < 20.0) {
        pooled_e += e;
        pooled_o += counts[i];
        continue;
      }
      chi2 += (counts[i] - e) * (counts[i] - e) / e;
      ++df;
    }
    if (pooled_e > 0) {
      chi2 += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
      ++df;
    }
    EXPECT_GE(kept, dc.min_kept);
    ASSERT_GE(df, 1);
    // Far in the tail of chi-square(df): mean df, sd sqrt(2 df).
    const double bound = df + 6.0 * std::sqrt(2.0 * df) + 10.0;
    EXPECT_LT(chi2, bound) << "df=" << df;
    if (getenv("LLM_TEST_VERBOSE"))
      printf("%s chi2=%.1f df=%d kept=%zu\n", dc.name, chi2, df, kept);
  }
}

TEST(SamplerDistribution, TopKOnFullVocabOnlyDrawsFromTopK) {
  const std::vector<float> logits = RandomLogits(49152, 77, 3.0f);
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + 40, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  std::vector<bool> in_top(logits.size(), false);
  for (int i = 0; i < 40; ++i) in_top[order[i]] = true;
  SamplerConfig c = Off();
  c.top_k = 40;
  c.temperature = 5.0f;  // flatten, so that all 40 get drawn
  Sampler s(c);
  Rng rng(5);
  std::vector<bool> seen(logits.size(), false);
  for (int i = 0; i < 3000; ++i) {
    const int32_t t = s.Sample(logits, {}, rng);
    ASSERT_TRUE(in_top[t]) << t;
    seen[t] = true;
  }
  for (int i = 0; i < 40; ++i) EXPECT_TRUE(seen[order[i]]) << order[i];
}

TEST(SamplerPenalties, ChangeLogitsAsTheFormulaSays) {
  std::mt19937 gen(31);
  std::uniform_real_distribution<float> logit_dist(-5.0f, 5.0f);
  std::uniform_int_distribution<int32_t> id_dist(-3, 120);  // some out of range
  for (int32_t last_n : {-1, 0, 1, 50, 1000}) {
    SCOPED_TRACE(last_n);
    std::vector<float> logits(101);
    for (float& l : logits) l = logit_dist(gen);
    logits[5] = 0.0f;
    std::vector<int32_t> history(200);
    for (int32_t& t : history) t = id_dist(gen);
    history.push_back(5);
    SamplerConfig c = Off();
    c.repeat_penalty = 1.37f;
    c.frequency_penalty = 0.31f;
    c.presence_penalty = 0.77f;
    c.penalty_last_n = last_n;
    const std::vector<float> expected = ExpectedPenalized(logits, history, c);
    Sampler s(c);
    std::vector<float> got = logits;
    s.ApplyPenalties(absl::MakeSpan(got), history);
    int changed = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      EXPECT_FLOAT_EQ(got[i], expected[i]) << i;
      changed += got[i] != logits[i];
    }
    if (last_n == 0) {
      EXPECT_EQ(changed, 0);
    } else {
      EXPECT_GT(changed, 0);
    }
    // Twice in a row gives the same: the scratch counts are cleared.
    std::vector<float> again = logits;
    s.ApplyPenalties(absl::MakeSpan(again), history);
    EXPECT_EQ(again, got);
  }
}

TEST(SamplerPenalties, RepeatPenaltyFlipsGreedyChoice) {
  SamplerConfig c = Off();
  c.temperature = 0.0f;
  c.repeat_penalty = 1.1f;
  Sampler s(c);
  Rng rng(1);
  // Positive logits are divided: 3.0 / 1.1 = 2.73 < 2.9.
  EXPECT_EQ(s.Sample(std::vector<float>{3.0f, 2.9f}, std::vector<int32_t>{0}, rng), 1);
  EXPECT_EQ(s.Sample(std::vector<float>{3.0f, 2.9f}, std::vector<int32_t>{}, rng), 0);
  // Negative logits are multiplied: -1.0 * 1.1 = -1.1 < -1.05.
  EXPECT_EQ(s.Sample(std::vector<float>{-1.0f, -1.05f}, std::vector<int32_t>{0}, rng), 1);
  // Presence penalty subtracts once, frequency per occurrence.
  c.repeat_penalty = 1.0f;
  c.presence_penalty = 0.5f;
  c.frequency_penalty = 0.3f;
  s.set_config(c);
  // 2.0 - (1*0.3 + 0.5) = 1.2 > 1.1; with two occurrences 0.9 < 1.1.
  EXPECT_EQ(s.Sample(std::vector<float>{2.0f, 1.1f}, std::vector<int32_t>{0}, rng), 0);
  EXPECT_EQ(s.Sample(std::vector<float>{2.0f, 1.1f}, std::vector<int32_t>{0, 0}, rng), 1);
  // Only the last penalty_last_n tokens count.
  c.penalty_last_n = 1;
  s.set_config(c);
  EXPECT_EQ(s.Sample(std::vector<float>{2.0f, 1.1f}, std::vector<int32_t>{0, 0, 1}, rng), 0);
}

TEST(SamplerRobustness, NaNAndInfLogitsAreNeverChosen) {
  std::mt19937 gen(8);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> logits = RandomLogits(1000, 12);
  for (float& l : logits) {
    const float r = u(gen);
    if (r < 0.3f) {
      l = kNaN;
    } else if (r < 0.5f) {
      l = -kInf;
    }
  }
  for (const SamplerConfig& c : {Off(), SamplerConfig(),
                                 [] {
                                   SamplerConfig g = Off();
                                   g.temperature = 0.0f;
                                   return g;
                                 }(),
                                 [] {
                                   SamplerConfig p = Off();
                                   p.top_p = 0.5f;
                                   p.repeat_penalty = 1.5f;
                                   p.frequency_penalty = 1.0f;
                                   return p;
                                 }()}) {
    Sampler s(c);
    Rng rng(77);
    std::vector<int32_t> history;
    for (int i = 0; i < 3000; ++i) {
      const int32_t t = s.Sample(logits, history, rng);
      ASSERT_GE(t, 0);
      ASSERT_LT(t, 1000);
      ASSERT_TRUE(std::isfinite(logits[t])) << t << " " << logits[t];
      history.push_back(t);
    }
  }
}

TEST(SamplerRobustness, DegenerateRows) {
  SamplerConfig c;
  Sampler s(c);
  Rng rng(4);
  const std::vector<float> all_neg_inf(50, -kInf);
  const std::vector<float> all_nan(50, kNaN);
  std::vector<float> mixed(50, kNaN);
  for (size_t i = 0; i < mixed.size(); i += 2) mixed[i] = -kInf;
  EXPECT_EQ(s.Sample(all_neg_inf, {}, rng), 0);
  EXPECT_EQ(s.Sample(all_nan, {}, rng), 0);
  EXPECT_EQ(s.Sample(mixed, {}, rng), 0);
  EXPECT_EQ(s.Sample({}, {}, rng), 0);
  mixed[7] = -1e30f;  // the only finite value wins
  EXPECT_EQ(s.Sample(mixed, {}, rng), 7);
  // +inf tokens dominate; the choice is among them only.
  std::vector<float> pos_inf = RandomLogits(50, 3);
  pos_inf[9] = kInf;
  pos_inf[3] = kInf;
  pos_inf[4] = kNaN;
  bool saw3 = false, saw9 = false;
  for (int i = 0; i < 200; ++i) {
    const int32_t t = s.Sample(pos_inf, {}, rng);
    ASSERT_TRUE(t == 3 || t == 9) << t;
    saw3 |= t == 3;
    saw9 |= t == 9;
  }
  EXPECT_TRUE(saw3 && saw9);
  c.temperature = 0.0f;
  s.set_config(c);
  EXPECT_EQ(s.Sample(pos_inf, {}, rng), 3);
  // Huge and tiny values do not overflow the softmax.
  c = Off();
  c.temperature = 1e-30f;
  s.set_config(c);
  const std::vector<float> extreme = {-3e38f, 3e38f, 1e38f, -kInf, 2e38f};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.Sample(extreme, {}, rng), 1);
  // History ids out of range are ignored, not indexed.
  c.repeat_penalty = 2.0f;
  s.set_config(c);
  EXPECT_EQ(s.Sample(extreme, std::vector<int32_t>{-5, 99999, INT32_MAX, INT32_MIN}, rng), 1);
}

TEST(SamplerRobustness, ConfigValuesValidationRefusesDoNotCrash) {
  SamplerConfig c;
  c.temperature = kNaN;
  c.top_p = kNaN;
  c.min_p = -3.0f;
  c.repeat_penalty = 0.0f;
  c.frequency_penalty = kInf;
  c.presence_penalty = kNaN;
  c.penalty_last_n = -7;
  Sampler s(c);
  Rng rng(1);
  const std::vector<float> logits = RandomLogits(100, 4);
  EXPECT_EQ(s.Sample(logits, std::vector<int32_t>{1, 2, 3}, rng), ArgMax(logits));
}

TEST(SamplerDeterminism, SameSeedSameSequence) {
  const std::vector<float> logits = RandomLogits(49152, 21, 1.0f);
  auto run = [&](uint64_t seed) {
    Sampler s{SamplerConfig()};
    Rng rng(seed);
    std::vector<int32_t> history;
    for (int i = 0; i < 300; ++i) history.push_back(s.Sample(logits, history, rng));
    return history;
  };
  const auto a = run(123), b = run(123), c = run(124);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(SamplerDeterminism, RngStateRoundTripReproducesSamples) {
  const std::vector<float> logits = RandomLogits(5000, 22, 1.0f);
  SamplerConfig c = Off();
  c.temperature = 1.2f;
  Sampler s(c);
  Rng rng(99);
  for (int i = 0; i < 17; ++i) s.Sample(logits, {}, rng);
  const std::array<uint64_t, 4> saved = rng.state();
  std::vector<int32_t> first, second;
  for (int i = 0; i < 200; ++i) first.push_back(s.Sample(logits, {}, rng));
  Rng other(0);
  ASSERT_TRUE(other.set_state(saved).ok());
  for (int i = 0; i < 200; ++i) second.push_back(s.Sample(logits, {}, other));
  EXPECT_EQ(first, second);
  EXPECT_EQ(rng.state(), other.state());
}

TEST(Rng, MatchesReferenceSplitMix64AndXoshiro256StarStar) {
  // Expected values from an independent Python transcription of the
  // reference C code; splitmix64(0) = e220a8397b1dcdaf is the published
  // first output of Vigna's splitmix64.c.
  Rng a(0);
  EXPECT_EQ(a.state(), (std::array<uint64_t, 4>{0xe220a8397b1dcdafull, 0x6e789e6aa1b965f4ull,
                                                0x06c45d188009454full, 0xf88bb8a8724c81ecull}));
  for (uint64_t want : {0x99ec5f36cb75f2b4ull, 0xbf6e1f784956452aull, 0x1a5f849d4933e6e0ull,
                        0x6aa594f1262d2d2cull, 0xbba5ad4a1f842e59ull}) {
    EXPECT_EQ(a.Next(), want);
  }
  Rng b(42);
  for (uint64_t want : {0x15780b2e0c2ec716ull, 0x6104d9866d113a7eull, 0xae17533239e499a1ull}) {
    EXPECT_EQ(b.Next(), want);
  }
}

TEST(Rng, UniformIsInUnitIntervalAndStateIsGuarded) {
  Rng r(7);
  double sum = 0, lo = 1, hi = 0;
  constexpr int kN = 100000;
  for (int i = 0; i < kN; ++i) {
    const double u = r.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_NEAR(sum / kN, 0.5, 0.005);
  EXPECT_LT(lo, 0.001);
  EXPECT_GT(hi, 0.999);
  const auto before = r.state();
  const absl::Status st = r.set_state({0, 0, 0, 0});
  EXPECT_EQ(ToLlmStatus(st), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r.state(), before);
}

TEST(SamplerConfigValidation, AcceptsDefaultsAndDocumentedSpecialValues) {
  EXPECT_TRUE(ValidateSamplerConfig(SamplerConfig()).ok());
  SamplerConfig c;
  c.temperature = 0.0f;
  c.top_k = 0;
  c.top_p = 1.0f;
  c.min_p = 0.0f;
  c.penalty_last_n = -1;
  c.presence_penalty = -0.5f;
  c.frequency_penalty = -0.5f;
  EXPECT_TRUE(ValidateSamplerConfig(c).ok());
  c.temperature = -1.0f;  // greedy, per the ABI
  c.top_k = -5;           // off
  c.top_p = 2.0f;         // off
  c.min_p = 1.0f;
  EXPECT_TRUE(ValidateSamplerConfig(c).ok());
}

TEST(SamplerConfigValidation, RefusesInvalidValuesNamingTheField) {
  struct Bad {
    const char* field;
    void (*mutate)(SamplerConfig*);
  };
  const Bad bads[] = {
      {"temperature", [](SamplerConfig* c) { c->temperature = kNaN; }},
      {"temperature", [](SamplerConfig* c) { c->temperature = kInf; }},
      {"top_p", [](SamplerConfig* c) { c->top_p = kNaN; }},
      {"top_p", [](SamplerConfig* c) { c->top_p = -0.1f; }},
      {"min_p", [](SamplerConfig* c) { c->min_p = kNaN; }},
      {"min_p", [](SamplerConfig* c) { c->min_p = -0.01f; }},
      {"min_p", [](SamplerConfig* c) { c->min_p = 1.5f; }},
      {"repeat_penalty", [](SamplerConfig* c) { c->repeat_penalty = 0.0f; }},
      {"repeat_penalty", [](SamplerConfig* c) { c->repeat_penalty = -1.0f; }},
      {"repeat_penalty", [](SamplerConfig* c) { c->repeat_penalty = kNaN; }},
      {"presence_penalty", [](SamplerConfig* c) { c->presence_penalty = kNaN; }},
      {"frequency_penalty", [](SamplerConfig* c) { c->frequency_penalty = -kInf; }},
      {"penalty_last_n", [](SamplerConfig* c) { c->penalty_last_n = -2; }},
  };
  for (const Bad& bad : bads) {
    SamplerConfig c;
    bad.mutate(&c);
    const absl::Status st = ValidateSamplerConfig(c);
    ASSERT_FALSE(st.ok()) << bad.field;
    EXPECT_EQ(ToLlmStatus(st), LLM_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(st.message()).find(bad.field), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace llm
