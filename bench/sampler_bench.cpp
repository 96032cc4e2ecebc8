// Sampler benchmarks: one Sample() call per iteration over a row of logits
// shaped like a language model's (most ids far below a few likely ones), at
// SmolLM2's vocabulary (49152) and Llama 3's (128256).
//   llm_bench --benchmark_filter=Sample
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "sampling/sampler_config.h"

namespace llm {
namespace {

// Normal(0, 2.5) logits plus a few ids raised by 8..16: a peaked row, as a
// model's next-token distribution usually is.
std::vector<float> ModelLikeLogits(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::vector<float> logits(static_cast<size_t>(n));
  for (float& v : logits) v = normal(rng);
  std::uniform_int_distribution<int64_t> id(0, n - 1);
  for (int i = 0; i < 8; ++i) logits[static_cast<size_t>(id(rng))] += 8.0f + i;
  return logits;
}

enum Config { kDefault, kGreedy, kTopPOnly, kPenalties };

SamplerConfig MakeConfig(int which) {
  SamplerConfig c;  // temperature 0.8, top_k 40, top_p 0.95, min_p 0.05
  switch (which) {
    case kGreedy:
      c.temperature = 0.0f;
      break;
    case kTopPOnly:
      c.top_k = 0;
      c.min_p = 0.0f;
      break;
    case kPenalties:
      c.repeat_penalty = 1.1f;
      break;
    default:
      break;
  }
  return c;
}

// Args: n_vocab, Config.
void BM_Sample(benchmark::State& state) {
  const int64_t n = state.range(0);
  Sampler sampler(MakeConfig(static_cast<int>(state.range(1))));
  const std::vector<float> logits = ModelLikeLogits(n, 7);
  std::vector<int32_t> history;
  for (int i = 0; i < 64; ++i) history.push_back(static_cast<int32_t>((i * 7919) % n));
  Rng rng(1);
  for (auto _ : state) benchmark::DoNotOptimize(sampler.Sample(logits, history, rng));
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Sample)->ArgsProduct({{49152, 128256}, {kDefault, kGreedy, kTopPOnly, kPenalties}});

}  // namespace
}  // namespace llm
