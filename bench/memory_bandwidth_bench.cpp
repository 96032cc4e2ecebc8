// The machine's limit for decode: read bandwidth over a buffer far larger
// than the caches, with 1 and 2 threads. BENCHMARKS.md divides decode's bytes
// per second (weights read per token x tokens/s) by this figure.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBytes = size_t{1} << 30;  // 1 GiB

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

void BM_ReadBandwidth(benchmark::State& state) {
  const auto& buf = Buffer();
  const int n_threads = static_cast<int>(state.range(0));
  const size_t per_thread = buf.size() / n_threads;
  for (auto _ : state) {
    std::vector<uint64_t> sums(n_threads);
    std::vector<std::thread> threads;
    for (int t = 1; t < n_threads; ++t) {
      threads.emplace_back([&, t] { sums[t] = SumRange(buf.data() + t * per_thread, per_thread); });
    }
    sums[0] = SumRange(buf.data(), per_thread);
    for (auto& th : threads) th.join();
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
