// CPU kernel benchmarks: QuantMatMul (decode GEMV) in bytes of weights per
// second -- decode is memory bound, so compare with the machine's bandwidth --
// and oneDNN MatMulF32 (prefill GEMM) in FLOP/s.
//   llm_bench --benchmark_filter=QuantMatMul
#include <benchmark/benchmark.h>

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/packed_weight.h"
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/quant_matmul_kernels.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_buffer.h"
#include "core/dtype.h"
#include "core/half.h"
#include "kv/kv_layout.h"

namespace llm {
namespace {

// Random blocks with sane f16 scales (quant bytes random): each block's f16
// scale fields (where the format puts them; block sizes from the GGUF type
// table, so Q4_0's 18-byte blocks are walked as 18, not 20) are overwritten.
std::vector<uint8_t> RandomQuantWeights(DType t, int64_t n_out, int64_t n_in) {
  const size_t rb = *RowBytes(t, n_in);
  std::vector<uint8_t> w(n_out * rb);
  std::mt19937 rng(1);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const size_t block = GetDTypeTraits(static_cast<uint32_t>(t))->block_bytes;
  const uint16_t d = F32ToF16(0.01f), m = F32ToF16(-0.05f), dk = F32ToF16(0.001f);
  for (size_t off = 0; off < w.size(); off += block) {
    switch (t) {
      case DType::kQ4_1:
      case DType::kQ5_1:
        std::memcpy(&w[off], &d, 2);
        std::memcpy(&w[off + 2], &m, 2);
        break;
      case DType::kQ2_K:  // scales[16], qs[64], then d, dmin
        std::memcpy(&w[off + 80], &dk, 2);
        std::memcpy(&w[off + 82], &dk, 2);
        break;
      case DType::kQ3_K:  // hmask, qs, scales, then d
        std::memcpy(&w[off + block - 2], &dk, 2);
        break;
      case DType::kQ4_K:
      case DType::kQ5_K:  // d, dmin first
        std::memcpy(&w[off], &dk, 2);
        std::memcpy(&w[off + 2], &dk, 2);
        break;
      case DType::kQ6_K:  // ql, qh, scales, then d
        std::memcpy(&w[off + block - 2], &dk, 2);
        break;
      case DType::kF16: {  // finite weights in [-1, 1] (random bits hold NaNs)
        const uint16_t h = F32ToF16(static_cast<float>(rng() % 2001) / 1000.0f - 1.0f);
        std::memcpy(&w[off], &h, 2);
        break;
      }
      default:  // Q4_0, Q8_0, Q5_0, IQ4_NL, IQ4_XS: d first
        std::memcpy(&w[off], &d, 2);
        break;
    }
  }
  return w;
}

// Args: n_out, n_in, n_rows, threads.
void BM_QuantMatMul(benchmark::State& state, DType t) {
  const int64_t n_out = state.range(0), n_in = state.range(1), n_rows = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const std::vector<uint8_t> w = RandomQuantWeights(t, n_out, n_in);
  std::vector<float> x(n_rows * n_in), y(n_rows * n_out);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& f : x) f = u(rng);
  ThreadPool pool(threads);
  const size_t rb = *RowBytes(t, n_in);
  for (auto _ : state) {
    auto s =
        QuantMatMul(t, w.data(), rb, n_out, n_in, x.data(), n_in, n_rows, y.data(), n_out, &pool);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(w.size()));
  state.SetLabel(SimdLevelName(ActiveSimdLevel()));
}

BENCHMARK_CAPTURE(BM_QuantMatMul, Q4_1, DType::kQ4_1)
    ->Args({576, 1536, 1, 1})
    ->Args({1536, 576, 1, 1})
    ->Args({576, 1536, 16, 1})
    ->Args({1536, 576, 16, 1})
    ->Args({576, 1536, 1, 2})
    ->UseRealTime();
// The random 1B model's shapes (tools/make_random_llama.py: n_embd 2048,
// n_ff 8192): ffn_up one row and a 16-session decode pass, ffn_down.
BENCHMARK_CAPTURE(BM_QuantMatMul, Q4_0, DType::kQ4_0)
    ->Args({8192, 2048, 1, 1})
    ->Args({8192, 2048, 16, 1})
    ->Args({2048, 8192, 16, 1})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_QuantMatMul, Q8_0, DType::kQ8_0)
    ->Args({49152, 576, 1, 1})
    ->Args({49152, 576, 16, 1})
    ->Args({49152, 576, 1, 2})
    ->UseRealTime();
// F16 batches at the AVX2 level (PlainBatchKernel; oneDNN at AVX-512): the
// TinyLlama shapes' ffn_up (2048 -> 5632) and ffn_down, a 128-token chunk.
BENCHMARK_CAPTURE(BM_QuantMatMul, F16, DType::kF16)
    ->Args({5632, 2048, 128, 1})
    ->Args({2048, 5632, 128, 1})
    ->UseRealTime();

// The K-quant kernels (Q8_K activations) at a chosen SIMD level. Args:
// n_out, n_in, n_rows, threads, level (0 scalar, 1 AVX2, 2 AVX-512 without
// AMX, 3 AVX-512 with AMX; skipped above the CPU's). The time includes the Q8_K quantization of the
// activations, as in the engine.
void BM_KQuantMatMul(benchmark::State& state, DType t) {
  const int64_t n_out = state.range(0), n_in = state.range(1), n_rows = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const SimdLevel level = state.range(4) == 0   ? SimdLevel::kScalar
                          : state.range(4) == 1 ? SimdLevel::kAvx2
                                                : SimdLevel::kAvx512;
  if (static_cast<int>(level) > static_cast<int>(DetectSimdLevel()) ||
      (state.range(4) == 3 && !AmxActive())) {
    state.SkipWithError("SIMD level not available on this CPU");
    return;
  }
  SetSimdLevelForTesting(level);
  SetAmxForTesting(state.range(4) == 3);
  const std::vector<uint8_t> w = RandomQuantWeights(t, n_out, n_in);
  std::vector<float> x(n_rows * n_in), y(n_rows * n_out);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& f : x) f = u(rng);
  ThreadPool pool(threads);
  const size_t rb = *RowBytes(t, n_in);
  for (auto _ : state) {
    auto s =
        QuantMatMul(t, w.data(), rb, n_out, n_in, x.data(), n_in, n_rows, y.data(), n_out, &pool);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(w.size()));
  state.SetLabel(std::string(SimdLevelName(ActiveSimdLevel())) + (AmxActive() ? "+amx" : ""));
  state.counters["MAC/s"] = benchmark::Counter(
      static_cast<double>(n_out) * static_cast<double>(n_in) * static_cast<double>(n_rows),
      benchmark::Counter::kIsIterationInvariantRate);
  SetSimdLevelForTesting(std::nullopt);
  SetAmxForTesting(std::nullopt);
}
// 1B shapes (n_embd 2048, n_ff 8192): ffn_up one decode row and a 16-row
// batch, ffn_down 16 rows; 1 thread; every level; a 128-row prefill chunk.
#define LLM_KQUANT_BENCH(name, type)                              \
  BENCHMARK_CAPTURE(BM_KQuantMatMul, name, type)                  \
      ->ArgsProduct({{8192}, {2048}, {1, 16}, {1}, {0, 1, 2, 3}}) \
      ->ArgsProduct({{8192}, {2048}, {128, 256}, {1}, {1, 2, 3}})    \
      ->Args({2048, 8192, 16, 1, 1})                              \
      ->Args({2048, 8192, 16, 1, 2})                              \
      ->UseRealTime()
LLM_KQUANT_BENCH(Q4_K, DType::kQ4_K);
LLM_KQUANT_BENCH(Q5_K, DType::kQ5_K);
LLM_KQUANT_BENCH(Q6_K, DType::kQ6_K);
LLM_KQUANT_BENCH(Q2_K, DType::kQ2_K);
LLM_KQUANT_BENCH(Q3_K, DType::kQ3_K);
LLM_KQUANT_BENCH(IQ4_XS, DType::kIQ4_XS);
#undef LLM_KQUANT_BENCH

// One decode row from memory: as BM_KQuantMatMul at one activation row, but
// each iteration multiplies the next of enough copies of the matrix to fill
// 2 GiB (over 4x this host's 480 MiB L3), so every weight byte comes from
// DRAM as in a real decode, where the model is larger than the cache. Compare
// bytes_per_second with BM_ReadBandwidth/<threads>. Args: n_out, n_in,
// threads, activation rows (1: one decode row; 16: a batch of 16 sessions'
// decode step, whose products read the weights from memory too).
// The current SIMD level (AVX-512 here; LLM_CPU_ISA to force one).
void BM_DecodeFromMemory(benchmark::State& state, DType t) {
  const int64_t n_out = state.range(0), n_in = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const int64_t n_rows = state.range(3);
  ThreadPool pool(threads);
  const std::vector<uint8_t> one = RandomQuantWeights(t, n_out, n_in);
  const size_t rb = *RowBytes(t, n_in);
  // The kernels read the rows16 copy where the CPU backend makes one
  // (QuantMatMulReadsRows16: at this level and type), else the GGUF rows;
  // both in weight-buffer memory, as the backend's copies.
  const bool packed = QuantMatMulReadsRows16(t);
  const rows16::PackedBuffer packed_one =
      packed ? rows16::MakePacked(t, one.data(), rb, n_out, n_in, &pool) : rows16::PackedBuffer{};
  const uint8_t* src = packed ? packed_one.data.get() : one.data();
  const size_t bytes = packed ? packed_one.bytes : one.size();
  const size_t copies = ((size_t{2} << 30) + bytes - 1) / bytes;
  const WeightBuffer w = AllocateWeightBuffer(copies * bytes);
  for (size_t c = 0; c < copies; ++c) std::memcpy(w.data.get() + c * bytes, src, bytes);
  std::vector<float> x(static_cast<size_t>(n_rows * n_in)), y(static_cast<size_t>(n_rows * n_out));
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& f : x) f = u(rng);
  QuantMatMulOutput out;
  out.wtype = t;
  out.row_bytes = rb;
  out.n_out = n_out;
  out.y = y.data();
  out.y_stride = static_cast<size_t>(n_out);
  size_t c = 0;
  for (auto _ : state) {
    const uint8_t* copy = w.data.get() + c * bytes;
    // With a packed copy the GGUF rows are not read (the kernel takes the copy).
    out.W = packed ? one.data() : copy;
    out.packed = packed ? copy : nullptr;
    auto s = QuantMatMulShared(&out, 1, n_in, x.data(), n_in, n_rows, &pool);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(y.data());
    c = (c + 1) % copies;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  state.counters["MAC/s"] = benchmark::Counter(
      static_cast<double>(n_out) * static_cast<double>(n_in) * static_cast<double>(n_rows),
      benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(SimdLevelName(ActiveSimdLevel())) + (packed ? " packed" : ""));
}
// 1B shapes: ffn_up (n_in 2048; 1 and 2 threads), attn_k, attn_q and
// ffn_down (n_in 8192), 2 threads.
#define LLM_DECODE_BENCH(name, type)                 \
  BENCHMARK_CAPTURE(BM_DecodeFromMemory, name, type) \
      ->ArgsProduct({{8192}, {2048}, {1, 2}, {1}})   \
      ->Args({512, 2048, 2, 1})                      \
      ->Args({2048, 2048, 2, 1})                     \
      ->Args({2048, 8192, 2, 1})                     \
      ->UseRealTime()
LLM_DECODE_BENCH(Q4_0, DType::kQ4_0)
    // SmolLM2's ffn_up and 1B's ffn_up with 16 sessions' rows, 1 and 2 threads.
    ->ArgsProduct({{1536}, {576}, {1, 2}, {16}})
    ->ArgsProduct({{8192}, {2048}, {1, 2}, {16}});
LLM_DECODE_BENCH(Q8_0, DType::kQ8_0);
// Q4_1 (SmolLM2-135M-Instruct's type): one row, and 16 sessions' rows.
BENCHMARK_CAPTURE(BM_DecodeFromMemory, Q4_1, DType::kQ4_1)
    ->Args({8192, 2048, 2, 1})
    ->ArgsProduct({{1536}, {576}, {1, 2}, {16}})
    ->UseRealTime();
LLM_DECODE_BENCH(Q4_K, DType::kQ4_K);
LLM_DECODE_BENCH(Q5_K, DType::kQ5_K);
LLM_DECODE_BENCH(Q6_K, DType::kQ6_K);
#undef LLM_DECODE_BENCH

// The Q8_K activation quantizer alone, per level. Args: n (elements), level
// (0 scalar, 1 AVX2, 2 AVX-512). Bytes = the f32 input.
void BM_QuantizeQ8K(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int level = static_cast<int>(state.range(1));
  if (level > static_cast<int>(DetectSimdLevel())) {
    state.SkipWithError("SIMD level not available on this CPU");
    return;
  }
  std::vector<float> x(n);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& f : x) f = u(rng);
  std::vector<int8_t> q(n);
  std::vector<float> d(n / 256);
  std::vector<int16_t> bsum(n / 16);
  for (auto _ : state) {
    if (level == 2) {
      qmm::QuantizeRowQ8KAvx512(x.data(), n, q.data(), d.data(), bsum.data());
    } else if (level == 1) {
      qmm::QuantizeRowQ8KAvx2(x.data(), n, q.data(), d.data(), bsum.data());
    } else {
      qmm::QuantizeRowQ8K(x.data(), n, q.data(), d.data(), bsum.data());
    }
    benchmark::DoNotOptimize(q.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * 4);
}
BENCHMARK(BM_QuantizeQ8K)->ArgsProduct({{2048, 8192}, {0, 1, 2}})->UseRealTime();

// The Q8_0 / Q8_1 activation quantizer (32-blocks) alone, per level; args as
// BM_QuantizeQ8K (576: SmolLM2's rows, 16 + 2 blocks).
void BM_QuantizeQ8(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int level = static_cast<int>(state.range(1));
  if (level > static_cast<int>(DetectSimdLevel())) {
    state.SkipWithError("SIMD level not available on this CPU");
    return;
  }
  std::vector<float> x(n);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& f : x) f = u(rng);
  std::vector<int8_t> q(n);
  std::vector<float> ds(2 * n / 32);
  for (auto _ : state) {
    if (level == 2) {
      qmm::QuantizeRowQ8Avx512(x.data(), n, q.data(), ds.data());
    } else if (level == 1) {
      qmm::QuantizeRowQ8Avx2(x.data(), n, q.data(), ds.data());
    } else {
      qmm::QuantizeRowQ8Scalar(x.data(), n, q.data(), ds.data());
    }
    benchmark::DoNotOptimize(q.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * 4);
}
BENCHMARK(BM_QuantizeQ8)->ArgsProduct({{576, 2048}, {0, 1, 2}})->UseRealTime();

// BM_QuantMatMul with the weights repacked as the CPU backend does at load
// on AVX-512 machines (backend/cpu/packed_weight.h; the same bits). Arg 4:
// 1 = use the packed copy, 0 = the GGUF rows (the same run's baseline).
void BM_QuantMatMulPacked(benchmark::State& state, DType t) {
  const int64_t n_out = state.range(0), n_in = state.range(1), n_rows = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const bool use_packed = state.range(4) != 0;
  const std::vector<uint8_t> w = RandomQuantWeights(t, n_out, n_in);
  std::vector<float> x(n_rows * n_in), y(n_rows * n_out);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& f : x) f = u(rng);
  ThreadPool pool(threads);
  const size_t rb = *RowBytes(t, n_in);
  const rows16::PackedBuffer packed = rows16::MakePacked(t, w.data(), rb, n_out, n_in, &pool);
  QuantMatMulOutput out;
  out.wtype = t;
  out.W = w.data();
  out.row_bytes = rb;
  out.n_out = n_out;
  out.y = y.data();
  out.y_stride = static_cast<size_t>(n_out);
  out.packed = use_packed ? packed.data.get() : nullptr;
  for (auto _ : state) {
    auto s = QuantMatMulShared(&out, 1, n_in, x.data(), n_in, n_rows, &pool);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(w.size()));
  const bool amx = AmxActive() && n_rows >= qmm::kAmxMinRows && qmm::AmxKernel(t, use_packed);
  state.SetLabel(std::string(SimdLevelName(ActiveSimdLevel())) + (amx ? "+amx" : "") +
                 (use_packed ? " packed" : ""));
  // Multiply-adds per second (a prefill pass's rate, 2 ops each).
  state.counters["MAC/s"] = benchmark::Counter(
      static_cast<double>(n_out) * static_cast<double>(n_in) * static_cast<double>(n_rows),
      benchmark::Counter::kIsIterationInvariantRate);
}
// 1B shapes: ffn_up (8192 x 2048), one decode row, a 16-row pass and a
// 512-row prefill chunk, packed and not, 1 and 2 threads; one row of a
// 512 x 2048 matrix, which stays in L2 (the kernel's rate without DRAM);
// SmolLM2's tied Q8_0 output (49152 x 576).
BENCHMARK_CAPTURE(BM_QuantMatMulPacked, Q4_0, DType::kQ4_0)
    ->ArgsProduct({{8192}, {2048}, {1, 16, 512}, {1, 2}, {0, 1}})
    ->Args({512, 2048, 1, 1, 1})
    ->Args({1536, 576, 16, 1, 1})  // SmolLM2's ffn_up, 16 sessions' rows
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_QuantMatMulPacked, Q4_1, DType::kQ4_1)
    ->ArgsProduct({{8192}, {2048}, {1}, {1, 2}, {0, 1}})
    ->UseRealTime();
// SmolLM2's ffn_up (1536 x 576) in Q4_1 and Q5_0 (its Q4_K_M files' most
// common type), the rows16 vec_dot kernel on 16 sessions' rows and a
// 256-row prefill chunk.
BENCHMARK_CAPTURE(BM_QuantMatMulPacked, Q4_1, DType::kQ4_1)
    ->ArgsProduct({{1536}, {576}, {16, 256}, {1}, {1}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_QuantMatMulPacked, Q5_0, DType::kQ5_0)
    ->ArgsProduct({{1536}, {576}, {16, 256}, {1}, {1}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_QuantMatMulPacked, Q8_0, DType::kQ8_0)
    ->ArgsProduct({{8192, 49152}, {2048}, {1}, {1, 2}, {0, 1}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_QuantMatMulPacked, Q8_0, DType::kQ8_0)
    ->ArgsProduct({{8192}, {2048}, {16, 512}, {1, 2}, {1}})
    ->UseRealTime();
// Q4_K and Q6_K (AVX-512 without AMX): one decode row, 16 sessions' rows,
// prefill chunks; 1B ffn_up and ffn_down.
#define LLM_KROWS16_BENCH(name, type)                                         \
  BENCHMARK_CAPTURE(BM_QuantMatMulPacked, name, type)                         \
      ->ArgsProduct({{8192}, {2048}, {1, 16, 32, 64, 128, 256, 512}, {1}, {0, 1}}) \
      ->ArgsProduct({{2048}, {8192}, {1, 16}, {1}, {0, 1}})                   \
      ->UseRealTime()
LLM_KROWS16_BENCH(Q4_K, DType::kQ4_K);
LLM_KROWS16_BENCH(Q6_K, DType::kQ6_K);
#undef LLM_KROWS16_BENCH

// Args: m, n, k, threads.
void BM_MatMulF32(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  std::vector<float> a(m * k, 0.5f), w(n * k, 0.25f), c(m * n);
  for (auto _ : state) {
    auto s = MatMulF32(a.data(), w.data(), c.data(), m, n, k, threads);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * m * n * k * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MatMulF32)
    ->Args({64, 1536, 576, 1})
    ->Args({128, 1536, 576, 1})
    ->Args({64, 576, 576, 2})
    ->Args({128, 1536, 576, 2})
    ->Args({256, 8192, 2048, 2})  // 1B ffn_up, one 256-row prefill chunk
    ->UseRealTime();

// Args: m, n, k, threads. bf16 weights (a is rounded to bf16 inside).
void BM_MatMulBF16(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  std::vector<float> a(m * k, 0.5f), c(m * n);
  std::vector<uint16_t> w(n * k, F32ToBF16(0.25f));
  for (auto _ : state) {
    auto s = MatMulBF16(a.data(), w.data(), c.data(), m, n, k, threads);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * m * n * k * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MatMulBF16)
    ->Args({64, 1536, 576, 1})
    ->Args({128, 1536, 576, 1})
    ->Args({256, 8192, 2048, 2})
    ->UseRealTime();

// Decode attention of one token over n_kv cached positions (SmolLM2 heads:
// 9 query heads, 3 kv heads, head_dim 64). Args: n_kv, f16 KV (0/1), block
// size in positions of the paged view (0: one contiguous block).
// Bytes = the K and V read.
void BM_AttentionDecode(benchmark::State& state) {
  const int64_t n_kv = state.range(0), n_head = 9, n_head_kv = 3, hd = 64;
  const bool f16 = state.range(1) != 0;
  const int64_t bt = state.range(2) > 0 ? state.range(2) : n_kv;
  const int64_t n_blocks = (n_kv + bt - 1) / bt;
  const size_t row = static_cast<size_t>(n_head_kv * hd);
  const size_t elem = f16 ? 2 : 4;
  const size_t elems = static_cast<size_t>(n_kv) * row;
  // Each block: [bt K rows][bt V rows], blocks in reverse order in one pool.
  const size_t half = static_cast<size_t>(bt) * row * elem;
  std::vector<uint8_t> pool(static_cast<size_t>(n_blocks) * 2 * half);
  for (size_t i = 0; i < pool.size() / elem; ++i) {
    const bool is_v = (i * elem / half) % 2 == 1;
    if (f16) {
      const uint16_t h = F32ToF16(is_v ? 0.02f : 0.01f);
      std::memcpy(pool.data() + i * 2, &h, 2);
    } else {
      const float f = is_v ? 0.02f : 0.01f;
      std::memcpy(pool.data() + i * 4, &f, 4);
    }
  }
  std::vector<const uint8_t*> blocks(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b)
    blocks[b] = pool.data() + static_cast<size_t>(n_blocks - 1 - b) * 2 * half;
  std::vector<float> q(n_head * hd, 0.1f), out(n_head * hd);
  KvView kv;
  kv.blocks = blocks.data();
  kv.block_tokens = bt;
  kv.k_offset = 0;
  kv.v_offset = half;
  kv.f16 = f16;
  kv.n_head_kv = n_head_kv;
  kv.head_dim = hd;
  kv.row_stride = row;
  for (auto _ : state) {
    auto s = Attention(q.data(), 1, n_head, n_kv - 1, kv, out.data(), nullptr);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 *
                          static_cast<int64_t>(elems * elem));
  state.SetLabel(SimdLevelName(ActiveSimdLevel()));
}
BENCHMARK(BM_AttentionDecode)
    ->Args({64, 1, 16})
    ->Args({1024, 1, 0})
    ->Args({1024, 1, 16})
    ->Args({1024, 0, 0})
    ->Args({1024, 0, 16});

// Decode attention of one token per session, sessions' caches read from
// memory as in a batch of sessions' step (each layer's weights evict the
// caches' rows between layers): head_dim 64, f16 KV in blocks laid out as
// the KV pool's (kv/kv_layout.h: 16 positions of all
// 30 layers per block, ~368 KB), n_kv positions per session, the sessions'
// blocks and layers cycled through ~256 MiB. Args: n_kv, huge pages
// (1: the CPU backend's KV slabs, cpu_kv_storage.h; 0: 4 KiB pages),
// n_head, n_head_kv (SmolLM2 9 / 3, TinyLlama 32 / 4), sessions per call
// (one AttentionBatch job each: a batch step's layer), threads.
// Bytes = the K and V read.
void BM_AttentionDecodeFromMemory(benchmark::State& state) {
  const int64_t n_kv = state.range(0), hd = 64;
  const bool huge = state.range(1) != 0;
  const int64_t n_head = state.range(2), n_head_kv = state.range(3);
  const size_t n_seq = static_cast<size_t>(state.range(4));
  const int threads = static_cast<int>(state.range(5));
  ThreadPool thread_pool(threads);
  const KvLayout layout{30, n_head_kv, hd};  // n_layer, n_head_kv, head_dim
  const int64_t bt = KvLayout::block_tokens(KvType::kF16);
  const int64_t n_blocks = (n_kv + bt - 1) / bt;
  const size_t row = static_cast<size_t>(layout.row_elems());
  const size_t block_bytes = layout.block_bytes();
  const size_t copies = (size_t{256} << 20) / (static_cast<size_t>(n_blocks) * block_bytes);
  const size_t bytes = copies * static_cast<size_t>(n_blocks) * block_bytes;
  std::vector<uint8_t> small_pages;
  WeightBuffer huge_pages;
  uint8_t* pool = nullptr;
  if (huge) {
    huge_pages = AllocateWeightBuffer(bytes);
    pool = huge_pages.data.get();
  } else {
    small_pages.resize(bytes);
    pool = small_pages.data();
  }
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < bytes; i += 2) {
    const uint16_t h = F32ToF16(u(rng));
    std::memcpy(pool + i, &h, 2);
  }
  // blocks[c * n_blocks + b]: block b of copy c.
  std::vector<const uint8_t*> blocks(copies * static_cast<size_t>(n_blocks));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = pool + i * block_bytes;
  std::vector<float> q(n_seq * n_head * hd), out(n_seq * n_head * hd);
  for (float& x : q) x = u(rng);
  std::vector<AttentionJob> jobs(n_seq);
  for (size_t s = 0; s < n_seq; ++s) {
    AttentionJob& j = jobs[s];
    j.q = q.data() + s * n_head * hd;
    j.out = out.data() + s * n_head * hd;
    j.n_q = 1;
    j.pos0 = n_kv - 1;
    j.kv.block_tokens = bt;
    j.kv.f16 = true;
    j.kv.n_head_kv = n_head_kv;
    j.kv.head_dim = hd;
    j.kv.row_stride = row;
  }
  // Session s of call i reads copy (i * n_seq + s) % copies, layer
  // (i * n_seq + s) / copies % n_layer: every byte of the pool in turn, so
  // the rows come from memory.
  size_t i = 0;
  for (auto _ : state) {
    for (size_t s = 0; s < n_seq; ++s, ++i) {
      const size_t c = i % copies;
      const int64_t layer = static_cast<int64_t>(i / copies % static_cast<size_t>(layout.n_layer));
      jobs[s].kv.blocks = blocks.data() + c * static_cast<size_t>(n_blocks);
      jobs[s].kv.k_offset = layout.k_offset(KvType::kF16, layer);
      jobs[s].kv.v_offset = layout.v_offset(KvType::kF16, layer);
    }
    auto s = AttentionBatch(jobs, n_head, threads > 1 ? &thread_pool : nullptr);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(n_seq * 2 * n_kv * row * 2));
  state.SetLabel(SimdLevelName(ActiveSimdLevel()));
}
BENCHMARK(BM_AttentionDecodeFromMemory)
    ->ArgsProduct({{96, 512}, {0, 1}, {9}, {3}, {1}, {1}})
    ->ArgsProduct({{96, 512}, {1}, {32}, {4}, {1}, {1}})
    ->ArgsProduct({{96}, {1}, {9}, {3}, {16}, {1, 2}})
    ->ArgsProduct({{96}, {1}, {32}, {4}, {16}, {1, 2}})
    ->UseRealTime();

// Prefill attention of n_q new tokens from position 0 (causal), one thread,
// f16 cache in one block. Args: n_q, n_head, n_head_kv (head_dim 64):
// SmolLM2 9 / 3, TinyLlama 32 / 4. FLOP/s counts q.k and the weighted V sum
// (2 * 2 * head_dim per visible (query, head, position)).
void BM_AttentionPrefill(benchmark::State& state) {
  const int64_t n_q = state.range(0), n_head = state.range(1), n_head_kv = state.range(2);
  const int64_t hd = 64;
  const size_t row = static_cast<size_t>(n_head_kv * hd);
  const size_t half = static_cast<size_t>(n_q) * row;  // elements of K (or V)
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> pool(2 * half);
  for (uint16_t& h : pool) h = F32ToF16(u(rng));
  const uint8_t* block = reinterpret_cast<const uint8_t*>(pool.data());
  std::vector<float> q(static_cast<size_t>(n_q * n_head * hd)), out(q.size());
  for (float& x : q) x = u(rng);
  KvView kv;
  kv.blocks = &block;
  kv.block_tokens = n_q;
  kv.k_offset = 0;
  kv.v_offset = half * 2;
  kv.f16 = true;
  kv.n_head_kv = n_head_kv;
  kv.head_dim = hd;
  kv.row_stride = row;
  for (auto _ : state) {
    auto s = Attention(q.data(), n_q, n_head, 0, kv, out.data(), nullptr);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(out.data());
  }
  const double visible = static_cast<double>(n_q) * (n_q + 1) / 2 * n_head;
  state.counters["FLOP/s"] = benchmark::Counter(
      4.0 * hd * visible * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(SimdLevelName(ActiveSimdLevel()));
}
BENCHMARK(BM_AttentionPrefill)->Args({512, 9, 3})->Args({512, 32, 4})->Args({77, 9, 3});

}  // namespace
}  // namespace llm
