// The machine's limit for decode: read bandwidth over a buffer far larger
// than the caches, with 1 and 2 threads. BENCHMARKS.md divides decode's bytes
// per second (weights read per token x tokens/s) by this figure.
// The buffer is 2 GiB: at least 4x the last-level cache of the machines we
// measure on (260-300 MiB of L3), so that no pass is served from the cache.
// On AVX-512 hosts the loop reads 64-byte vectors with 8 independent
// accumulators, so that the loop's own instructions cannot be the limit (the
// portable loop is compiled for SSE2: 16-byte loads).
// GCC 12 reports its own _mm512_undefined_*() placeholders inside the
// AVX-512 intrinsic headers as uninitialized (a false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <immintrin.h>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBytes = size_t{2} << 30;  // 2 GiB

const std::vector<uint64_t>& Buffer() {
  static std::vector<uint64_t>* buffer = [] {
    auto* b = new std::vector<uint64_t>(kBytes / sizeof(uint64_t));
    for (size_t i = 0; i < b->size(); ++i) (*b)[i] = i * 0x9E3779B97F4A7C15ull;
    return b;
  }();
  return *buffer;
}

uint64_t SumRange(const uint64_t* p, size_t n) {
  // Four independent accumulators let the loads overlap; the compiler
  // vectorises this loop.
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  return a + b + c + d;
}

__attribute__((target("avx512f"))) uint64_t SumRangeAvx512(const uint64_t* p, size_t n) {
  __m512i acc[8];
  for (auto& a : acc) a = _mm512_setzero_si512();
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 8; ++k) {
      acc[k] = _mm512_add_epi64(acc[k], _mm512_loadu_si512(p + i + 8 * k));
    }
  }
  for (int k = 1; k < 8; ++k) acc[0] = _mm512_add_epi64(acc[0], acc[k]);
  return _mm512_reduce_add_epi64(acc[0]) + SumRange(p + i, n - i);
}

uint64_t SumRangeFastest(const uint64_t* p, size_t n) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512 ? SumRangeAvx512(p, n) : SumRange(p, n);
}

void BM_ReadBandwidth(benchmark::State& state) {
  const auto& buf = Buffer();
  const int n_threads = static_cast<int>(state.range(0));
  const size_t per_thread = buf.size() / n_threads;
  for (auto _ : state) {
    std::vector<uint64_t> sums(n_threads);
    std::vector<std::thread> threads;
    for (int t = 1; t < n_threads; ++t) {
      threads.emplace_back(
          [&, t] { sums[t] = SumRangeFastest(buf.data() + t * per_thread, per_thread); });
    }
    sums[0] = SumRangeFastest(buf.data(), per_thread);
    for (auto& th : threads) th.join();
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
