// QuantMatMul vs the float64 reference (weights dequantized by DequantizeRow,
// itself bit-exact with the gguf package), on every SIMD level this CPU has.
// Tolerances are relative to sum_i |w_i x_i| of each output:
//   1e-5 for the exact-f32-activation types (F32/F16/BF16),
//   2e-2 for the types whose activations are quantized to 8 bits (Q8_0,
//   Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL per 32; the K-quants and IQ4_XS per 256).
#include "backend/cpu/quant_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/dequantize.h"
#include "backend/cpu/packed_weight.h"
#include "backend/cpu/quant_blocks.h"
#include "backend/cpu/quant_matmul_kernels.h"
#include "backend/cpu/thread_pool.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/status.h"
#include "gtest/gtest.h"
#include "kernels/cpu/ref/reference_kernels.h"
#include "tests/backend/kernel_test_util.h"

namespace llm {
namespace {

using testing_util::FreshSeed;
using testing_util::RandomVector;
using testing_util::RandomWeights;
using testing_util::SimdLevelGuard;
using testing_util::SupportedLevels;

bool QuantizedActs(DType t) { return QuantMatMulQuantizesActivations(t); }

// The types of kquant_kernels.h.
constexpr DType kKTypes[] = {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                             DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS};
constexpr DType k32Types[] = {DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL};

struct Shape {
  DType type;
  int64_t n_out;
  int64_t n_in;
};

std::vector<Shape> TestShapes() {
  std::vector<Shape> s;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    s.push_back({t, 37, 37});  // odd n_in: exercises the SIMD tails
    s.push_back({t, 37, 200});
  }
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    s.push_back({t, 37, 32 * 7});  // odd block count
    s.push_back({t, 5, 576});
  }
  for (DType t : k32Types) {
    s.push_back({t, 37, 32 * 7});  // odd block count (IQ4_NL: the odd last block)
    s.push_back({t, 5, 576});
  }
  for (DType t : kKTypes) {
    s.push_back({t, 37, 256 * 3});
    s.push_back({t, 3, 256});
  }
  return s;
}

std::string Name(DType t) { return GetDTypeTraits(static_cast<uint32_t>(t))->name; }

TEST(QuantMatMulTest, MatchesFloat64ReferenceOnEverySimdLevel) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  std::string ran;
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    ASSERT_EQ(ActiveSimdLevel(), level);
    ran += std::string(SimdLevelName(level)) + " ";
    for (const Shape& sh : TestShapes()) {
      for (int64_t n_rows : {1, 3, 16}) {
        SCOPED_TRACE(std::string(SimdLevelName(level)) + " " + Name(sh.type) +
                     " n_out=" + std::to_string(sh.n_out) + " n_in=" + std::to_string(sh.n_in) +
                     " n_rows=" + std::to_string(n_rows));
        const size_t need = *RowBytes(sh.type, sh.n_in);
        const size_t row_bytes = need + (n_rows == 3 ? 8 : 0);  // padded rows too
        const std::vector<uint8_t> w = RandomWeights(rng, sh.type, sh.n_out, sh.n_in, row_bytes);
        const size_t x_stride = sh.n_in + (n_rows == 3 ? 5 : 0);
        const size_t y_stride = sh.n_out + (n_rows == 3 ? 3 : 0);
        const std::vector<float> x = RandomVector(rng, n_rows * x_stride);
        std::vector<float> y(n_rows * y_stride, NAN);
        ASSERT_TRUE(QuantMatMul(sh.type, w.data(), row_bytes, sh.n_out, sh.n_in, x.data(), x_stride,
                                n_rows, y.data(), y_stride, nullptr)
                        .ok());

        std::vector<double> wd(sh.n_out * sh.n_in), xd(n_rows * sh.n_in);
        std::vector<float> tmp(sh.n_in);
        for (int64_t o = 0; o < sh.n_out; ++o) {
          ASSERT_TRUE(DequantizeRow(sh.type, w.data() + o * row_bytes, sh.n_in, tmp.data()).ok());
          for (int64_t i = 0; i < sh.n_in; ++i) wd[o * sh.n_in + i] = tmp[i];
        }
        for (int64_t r = 0; r < n_rows; ++r)
          for (int64_t i = 0; i < sh.n_in; ++i) xd[r * sh.n_in + i] = x[r * x_stride + i];
        std::vector<double> yr(n_rows * sh.n_out), abs_sum(n_rows * sh.n_out);
        ref::RefMatMul(wd.data(), xd.data(), sh.n_out, sh.n_in, n_rows, yr.data(), abs_sum.data());

        const double tol = QuantizedActs(sh.type) ? 2e-2 : 1e-5;
        double worst = 0.0;
        for (int64_t r = 0; r < n_rows; ++r) {
          for (int64_t o = 0; o < sh.n_out; ++o) {
            const double got = y[r * y_stride + o], want = yr[r * sh.n_out + o];
            const double rel = std::fabs(got - want) / abs_sum[r * sh.n_out + o];
            worst = std::max(worst, rel);
            ASSERT_LE(rel, tol) << "r=" << r << " o=" << o << " got " << got << " want " << want;
          }
          // Padding between rows of y is left alone.
          for (size_t o = sh.n_out; o < y_stride; ++o) ASSERT_TRUE(std::isnan(y[r * y_stride + o]));
        }
        // Quantized activations: the error must also be far from the bound
        // typical (catches e.g. a lost min term hiding under 2e-2).
        if (QuantizedActs(sh.type)) {
          EXPECT_LE(worst, 5e-3);
        }
      }
    }
  }
  std::cout << "[ SIMD ] levels tested: " << ran << "\n";
  RecordProperty("simd_levels", ran);
}

// Each output row is computed with the same operations whatever n_rows, the
// thread count, or the SIMD row tiling: bit-identical results.
TEST(QuantMatMulTest, BatchAndThreadInvariant) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ThreadPool pool2(2);
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                    DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kQ2_K,
                    DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS}) {
      SCOPED_TRACE(std::string(SimdLevelName(level)) + " " + Name(t));
      const bool k_type = GetDTypeTraits(static_cast<uint32_t>(t))->block_elems == 256;
      const bool plain = t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
      // (Plain types: 603 = 18 32-element steps + one 16-element step + an
      // 11-element tail at the AVX-512 level, 75 8-element steps + a
      // 3-element tail at AVX2: every part of their kernels' loops.)
      const int64_t n_in = k_type ? 768 : plain ? 603 : 576;
      // IQ4_NL alone in a one-row call follows llama.cpp's vec_dot order,
      // which differs from its batch order, and the K-quants / IQ4_XS take
      // llama.cpp's tiled order in products of 8+ rows (kquant_kernels.h):
      // the batch-invariant mode keeps one order for every row count (the
      // tiled order's own thread and row-block invariance: kquant_test.cpp).
      // (Q4_0 and Q8_0 take the per-block order at the AVX-512 level for
      // every row count: invariant without asking.)
      const bool bi = t == DType::kIQ4_NL || k_type;
      const int64_t n_out = 301;  // > one parallel task, odd
      const size_t rb = *RowBytes(t, n_in);
      const std::vector<uint8_t> w = RandomWeights(rng, t, n_out, n_in, rb);
      const int64_t n_rows = 16;
      const std::vector<float> x = RandomVector(rng, n_rows * n_in);
      std::vector<float> y16(n_rows * n_out), y16_mt(n_rows * n_out), y1(n_out);
      ASSERT_TRUE(QuantMatMul(t, w.data(), rb, n_out, n_in, x.data(), n_in, n_rows, y16.data(),
                              n_out, nullptr, bi)
                      .ok());
      ASSERT_TRUE(QuantMatMul(t, w.data(), rb, n_out, n_in, x.data(), n_in, n_rows, y16_mt.data(),
                              n_out, &pool2, bi)
                      .ok());
      EXPECT_EQ(0, std::memcmp(y16.data(), y16_mt.data(), y16.size() * sizeof(float)))
          << "1 vs 2 threads differ";
      for (int64_t r = 0; r < n_rows; ++r) {
        ASSERT_TRUE(QuantMatMul(t, w.data(), rb, n_out, n_in, x.data() + r * n_in, n_in, 1,
                                y1.data(), n_out, r % 2 ? &pool2 : nullptr, bi)
                        .ok());
        ASSERT_EQ(0, std::memcmp(y1.data(), y16.data() + r * n_out, n_out * sizeof(float)))
            << "row " << r << ": n_rows=1 differs from n_rows=16";
      }
      // A long batch (several row blocks, odd count) gives the same rows too.
      {
        const int64_t n_long = 131;
        std::vector<float> xl(n_long * n_in), yl(n_long * n_out);
        for (int64_t r = 0; r < n_long; ++r) {
          std::memcpy(xl.data() + r * n_in, x.data() + (r % n_rows) * n_in, n_in * sizeof(float));
        }
        ASSERT_TRUE(QuantMatMul(t, w.data(), rb, n_out, n_in, xl.data(), n_in, n_long, yl.data(),
                                n_out, &pool2, bi)
                        .ok());
        for (int64_t r = 0; r < n_long; ++r) {
          ASSERT_EQ(0, std::memcmp(yl.data() + r * n_out, y16.data() + (r % n_rows) * n_out,
                                   n_out * sizeof(float)))
              << "row " << r << " of a " << n_long << "-row batch";
        }
      }
      // A 3-row batch taken from the middle gives the same rows again.
      std::vector<float> y3(3 * n_out);
      ASSERT_TRUE(QuantMatMul(t, w.data(), rb, n_out, n_in, x.data() + 5 * n_in, n_in, 3, y3.data(),
                              n_out, &pool2, bi)
                      .ok());
      EXPECT_EQ(0, std::memcmp(y3.data(), y16.data() + 5 * n_out, y3.size() * sizeof(float)));
    }
  }
}

// SIMD levels agree with the portable scalar path up to rounding.
TEST(QuantMatMulTest, SimdLevelsAgreeWithScalar) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kF16, DType::kQ5_0, DType::kQ5_1,
                  DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K,
                  DType::kQ6_K, DType::kIQ4_XS}) {
    const bool k_type = GetDTypeTraits(static_cast<uint32_t>(t))->block_elems == 256;
    const int64_t n_out = 64, n_in = k_type ? 256 * 3 : 32 * 9, n_rows = 2;
    const size_t rb = *RowBytes(t, n_in);
    const std::vector<uint8_t> w = RandomWeights(rng, t, n_out, n_in, rb);
    const std::vector<float> x = RandomVector(rng, n_rows * n_in);
    std::vector<float> ys(n_rows * n_out), yv(n_rows * n_out);
    SetSimdLevelForTesting(SimdLevel::kScalar);
    ASSERT_TRUE(
        QuantMatMul(t, w.data(), rb, n_out, n_in, x.data(), n_in, n_rows, ys.data(), n_out, nullptr)
            .ok());
    for (SimdLevel level : SupportedLevels()) {
      SetSimdLevelForTesting(level);
      ASSERT_TRUE(QuantMatMul(t, w.data(), rb, n_out, n_in, x.data(), n_in, n_rows, yv.data(),
                              n_out, nullptr)
                      .ok());
      // Same integer block sums; only the f32 summation order differs, so
      // the rounding error scales with the partial sums (of the order of the
      // largest output), not with one output that happens to cancel to ~0.
      double max_abs = 0.0;
      for (float v : ys) max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
      for (size_t i = 0; i < ys.size(); ++i) {
        ASSERT_NEAR(yv[i], ys[i], 1e-5 * (1.0 + max_abs))
            << Name(t) << " " << SimdLevelName(level) << " i=" << i;
      }
    }
  }
}

TEST(QuantMatMulTest, RejectsBadArguments) {
  std::vector<uint8_t> w(34 * 4, 0);
  std::vector<float> x(256, 1.0f), y(8, 0.0f);
  // Unsupported types (Q8_K is an activation format only).
  absl::Status s =
      QuantMatMul(DType::kQ8_1, w.data(), 36, 1, 32, x.data(), 32, 1, y.data(), 1, nullptr);
  EXPECT_EQ(ToLlmStatus(s), LLM_ERR_UNSUPPORTED);
  std::vector<uint8_t> wk(292, 0);
  s = QuantMatMul(DType::kQ8_K, wk.data(), 292, 1, 256, x.data(), 256, 1, y.data(), 1, nullptr);
  EXPECT_EQ(ToLlmStatus(s), LLM_ERR_UNSUPPORTED);
  // A K-quant row must be whole 256-blocks.
  s = QuantMatMul(DType::kQ4_K, wk.data(), 144, 1, 32, x.data(), 32, 1, y.data(), 1, nullptr);
  EXPECT_EQ(ToLlmStatus(s), LLM_ERR_INVALID_ARGUMENT);
  // n_in not a whole number of blocks.
  s = QuantMatMul(DType::kQ8_0, w.data(), 34, 1, 33, x.data(), 33, 1, y.data(), 1, nullptr);
  EXPECT_EQ(ToLlmStatus(s), LLM_ERR_INVALID_ARGUMENT);
  // row_bytes too small.
  s = QuantMatMul(DType::kQ8_0, w.data(), 33, 1, 32, x.data(), 32, 1, y.data(), 1, nullptr);
  EXPECT_EQ(ToLlmStatus(s), LLM_ERR_INVALID_ARGUMENT);
  // Null pointers, negative sizes, short strides.
  s = QuantMatMul(DType::kQ8_0, nullptr, 34, 1, 32, x.data(), 32, 1, y.data(), 1, nullptr);
  EXPECT_EQ(ToLlmStatus(s), LLM_ERR_INVALID_ARGUMENT);
  s = QuantMatMul(DType::kQ8_0, w.data(), 34, -1, 32, x.data(), 32, 1, y.data(), 1, nullptr);
  EXPECT_EQ(ToLlmStatus(s), LLM_ERR_INVALID_ARGUMENT);
  s = QuantMatMul(DType::kQ8_0, w.data(), 34, 2, 32, x.data(), 16, 2, y.data(), 2, nullptr);
  EXPECT_EQ(ToLlmStatus(s), LLM_ERR_INVALID_ARGUMENT);
  // Misaligned rows (F32 needs 4-byte, the others 2-byte alignment).
  s = QuantMatMul(DType::kF32, w.data(), 130, 2, 32, x.data(), 32, 1, y.data(), 2, nullptr);
  EXPECT_EQ(ToLlmStatus(s), LLM_ERR_INVALID_ARGUMENT);
  s = QuantMatMul(DType::kQ8_0, w.data() + 1, 34, 1, 32, x.data(), 32, 1, y.data(), 1, nullptr);
  EXPECT_EQ(ToLlmStatus(s), LLM_ERR_INVALID_ARGUMENT);
  // Huge shapes are refused before allocating.
  s = QuantMatMul(DType::kF32, w.data(), 4, 1, int64_t{1} << 40, x.data(), size_t{1} << 40,
                  int64_t{1} << 20, y.data(), 1, nullptr);
  EXPECT_EQ(ToLlmStatus(s), LLM_ERR_INVALID_ARGUMENT);
  // Empty work is fine.
  EXPECT_TRUE(
      QuantMatMul(DType::kQ8_0, w.data(), 34, 0, 32, x.data(), 32, 1, y.data(), 1, nullptr).ok());
}

// Non-finite activations propagate as NaN instead of turning into numbers.
TEST(QuantMatMulTest, NonFiniteActivationsGiveNaN) {
  std::mt19937 rng(7);
  for (DType t : {DType::kQ8_0, DType::kQ4_1, DType::kF32, DType::kQ5_1, DType::kQ4_K, DType::kQ6_K,
                  DType::kIQ4_XS}) {
    const size_t rb = *RowBytes(t, 256);
    const std::vector<uint8_t> w = RandomWeights(rng, t, 2, 256, rb);
    std::vector<float> x = RandomVector(rng, 256);
    x[40] = INFINITY;
    std::vector<float> y(2);
    ASSERT_TRUE(QuantMatMul(t, w.data(), rb, 2, 256, x.data(), 256, 1, y.data(), 2, nullptr).ok());
    EXPECT_FALSE(std::isfinite(y[0])) << Name(t);
  }
}

// The AVX2 and AVX-512 activation quantizers must give the scalar one's bytes and
// scales bit for bit (both reproduce ggml's quantize_row_q8_x), on random
// rows of several magnitudes and on the edge cases: exact ties of x * id at
// k + 0.5 (round half to even), zero blocks, -0.0, inf/NaN blocks, values
// whose f16 scale overflows or is subnormal.
TEST(QuantMatMulTest, SimdActivationQuantizersMatchScalarBitForBit) {
  if (DetectSimdLevel() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(FreshSeed());
  std::vector<std::vector<float>> rows;
  // 37 blocks: two 16-block groups (the AVX-512 quantizer's vector path) and
  // a 5-block tail.
  for (float scale : {1e-30f, 1e-6f, 1.0f, 37.5f, 1e6f, 3e38f}) {
    rows.push_back(RandomVector(rng, 32 * 37));
    for (float& v : rows.back()) v *= scale;
  }
  // Ties: amax = 127 -> id = 1, so x * id = x exactly; halves round to even.
  std::vector<float> ties(64);
  for (int j = 0; j < 64; ++j) ties[j] = -15.5f + static_cast<float>(j) * 0.5f;
  ties[0] = 127.0f;
  ties[32] = -127.0f;
  rows.push_back(ties);
  std::vector<float> ties16;  // the same blocks 8 times: one 16-block group
  for (int k = 0; k < 8; ++k) ties16.insert(ties16.end(), ties.begin(), ties.end());
  rows.push_back(ties16);
  std::vector<float> special(32 * 4, 0.0f);
  special[5] = -0.0f;  // block 0: zeros and -0
  for (int j = 32; j < 64; ++j) special[j] = 0.25f * static_cast<float>(j);
  special[40] = INFINITY;  // block 1: inf
  for (int j = 64; j < 96; ++j) special[j] = static_cast<float>(j);
  special[70] = NAN;                                                           // block 2: NaN
  for (int j = 96; j < 128; ++j) special[j] = -1e-3f * static_cast<float>(j);  // block 3
  rows.push_back(special);
  // The special blocks inside a 16-block group (which then goes block by
  // block), after a group with a zero block and a -0.
  std::vector<float> grouped = RandomVector(rng, 32 * 16);
  std::fill(grouped.begin() + 64, grouped.begin() + 96, 0.0f);
  grouped[100] = -0.0f;
  grouped.insert(grouped.end(), special.begin(), special.end());
  const std::vector<float> tail = RandomVector(rng, 32 * 12);
  grouped.insert(grouped.end(), tail.begin(), tail.end());
  rows.push_back(grouped);
  for (const std::vector<float>& x : rows) {
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<int8_t> q_s(n), q_v(n);
    std::vector<float> ds_s(2 * n / 32), ds_v(2 * n / 32);
    qmm::QuantizeRowQ8Scalar(x.data(), n, q_s.data(), ds_s.data());
    using Quantizer = void (*)(const float*, int64_t, int8_t*, float*);
    std::vector<std::pair<const char*, Quantizer>> quantizers = {{"avx2", &qmm::QuantizeRowQ8Avx2}};
    if (DetectSimdLevel() == SimdLevel::kAvx512) {
      quantizers.push_back({"avx512", &qmm::QuantizeRowQ8Avx512});
    }
    for (const auto& [name, quantize] : quantizers) {
      std::fill(q_v.begin(), q_v.end(), int8_t{99});
      std::fill(ds_v.begin(), ds_v.end(), -1.0f);
      quantize(x.data(), n, q_v.data(), ds_v.data());
      EXPECT_EQ(q_v, q_s) << name;
      ASSERT_EQ(std::memcmp(ds_v.data(), ds_s.data(), ds_s.size() * sizeof(float)), 0)
          << name << ", first x " << x[0];
    }
  }
}

// The vec_dot-order kernel (Q4_1) compiled for AVX-512 (VNNI integer sums)
// must give the AVX2 kernel's outputs bit for bit, for every row count and
// weight-row remainder.
TEST(QuantMatMulTest, Avx512VecDotKernelsMatchAvx2BitForBit) {
  if (DetectSimdLevel() != SimdLevel::kAvx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(FreshSeed());
  for (DType t : {DType::kQ4_1}) {
    for (int64_t n_rows : {2, 3, 4, 5, 6, 8, 9, 15, 16, 17, 31, 70}) {
      // Two groups of 16 weight rows, the second one partial, and a
      // different remainder for most row counts; one chunk of blocks, or
      // three (the last one partial).
      const int64_t n_out = 17 + n_rows % 16;
      for (int64_t n_in : {int64_t{32 * 11}, int64_t{32 * 75}}) {
        const size_t rb = *RowBytes(t, static_cast<size_t>(n_in));
        const std::vector<uint8_t> w = RandomWeights(rng, t, n_out, n_in, rb);
        const std::vector<float> x =
            RandomVector(rng, static_cast<size_t>(n_rows * n_in), 0.01f, 3.0f);
        std::vector<int8_t> q(static_cast<size_t>(n_rows * n_in));
        std::vector<float> ds(static_cast<size_t>(2 * n_rows * n_in / 32));
        for (int64_t r = 0; r < n_rows; ++r) {
          qmm::QuantizeRowQ8Scalar(x.data() + r * n_in, n_in, q.data() + r * n_in,
                                   ds.data() + 2 * r * (n_in / 32));
        }
        qmm::Acts acts;
        acts.x = x.data();
        acts.x_stride = static_cast<size_t>(n_in);
        acts.n_rows = n_rows;
        acts.n_in = n_in;
        acts.q = q.data();
        acts.ds = ds.data();
        acts.n_blocks = n_in / 32;
        std::vector<float> y2(static_cast<size_t>(n_rows * n_out)), y5(y2.size()),
            scratch(static_cast<size_t>(qmm::ScratchFloats(n_in, n_rows)));
        qmm::Avx2Kernel(t)(w.data(), rb, 0, n_out, acts, y2.data(), n_out, scratch.data());
        qmm::Avx512Kernel(t)(w.data(), rb, 0, n_out, acts, y5.data(), n_out, scratch.data());
        ASSERT_EQ(std::memcmp(y2.data(), y5.data(), y2.size() * sizeof(float)), 0)
            << Name(t) << " n_rows " << n_rows << " n_in " << n_in;
      }
    }
  }
}

// QuantMatMulShared (a layer's Q/K/V or gate/up in one call): every output
// equals a separate QuantMatMul call bit for bit, with mixed weight types
// (both pair biases, a plain type, one output of 0 rows), at every level,
// with and without threads; a bad output fails the call before anything is
// written.
TEST(QuantMatMulTest, SharedEqualsSeparateCallsBitExact) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ThreadPool pool(2);
  const int64_t n_in = 32 * 9;
  const DType types[] = {DType::kQ4_1, DType::kQ4_0, DType::kQ8_0, DType::kF16, DType::kQ4_1};
  const int64_t n_outs[] = {37, 18, 130, 5, 0};
  std::vector<std::vector<uint8_t>> ws;
  for (int i = 0; i < 5; ++i) {
    ws.push_back(RandomWeights(rng, types[i], std::max<int64_t>(n_outs[i], 1), n_in,
                               *RowBytes(types[i], n_in)));
  }
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    for (int64_t n_rows : {1, 3, 16}) {
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        SCOPED_TRACE(std::string(SimdLevelName(level)) + " n_rows=" + std::to_string(n_rows));
        const std::vector<float> x = RandomVector(rng, n_rows * n_in);
        std::vector<std::vector<float>> want(5), got(5);
        QuantMatMulOutput outs[5];
        for (int i = 0; i < 5; ++i) {
          want[i].assign(static_cast<size_t>(n_rows * std::max<int64_t>(n_outs[i], 1)), 0.0f);
          got[i].assign(want[i].size(), -7.0f);
          const size_t rb = *RowBytes(types[i], n_in);
          ASSERT_TRUE(QuantMatMul(types[i], ws[i].data(), rb, n_outs[i], n_in, x.data(), n_in,
                                  n_rows, want[i].data(), n_outs[i], p)
                          .ok());
          outs[i] = {types[i],  ws[i].data(),  rb,
                     n_outs[i], got[i].data(), static_cast<size_t>(n_outs[i])};
        }
        ASSERT_TRUE(QuantMatMulShared(outs, 5, n_in, x.data(), n_in, n_rows, p).ok());
        for (int i = 0; i < 4; ++i) {
          ASSERT_EQ(0, std::memcmp(want[i].data(), got[i].data(), want[i].size() * sizeof(float)))
              << "output " << i;
        }
        EXPECT_EQ(got[4][0], -7.0f);  // 0 rows: untouched
        for (auto& g : got) std::fill(g.begin(), g.end(), -7.0f);
        outs[3].row_bytes = 1;  // too short
        EXPECT_EQ(ToLlmStatus(QuantMatMulShared(outs, 5, n_in, x.data(), n_in, n_rows, p)),
                  LLM_ERR_INVALID_ARGUMENT);
        for (const auto& g : got) {
          EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](float v) { return v == -7.0f; }));
        }
      }
    }
  }
}

// The per-block-order kernels -- AMX (quant_matmul_amx.cpp) where the CPU
// has it, the VNNI one (quant_matmul_blocks_avx512.cpp) at the AVX-512 level,
// the AVX2 one (quant_matmul_blocks_avx2.cpp) at the AVX2 level -- against a
// scalar model of the order, bit for bit: per output, acc = fma(f32(d_w) *
// d_x, float(S), acc) over the 32-blocks in order, S the exact integer block
// sum. Through QuantMatMul on the GGUF rows and QuantMatMulShared on the
// rows16 copy, for one row (decode), a few, and row counts around the
// 16-row tile (partial tail tiles of every piece size, AVX2's 4/2/1 too), a
// partial last group of weight rows (5 rows: half of AVX2's 8-row halves;
// 13: one and a half), one chunk of blocks or three (the last partial), 1
// and 2 threads. With batch_invariant the batch keeps the one-row order.
TEST(QuantMatMulTest, PerBlockOrderKernelsMatchTheirModelBitForBit) {
  if (DetectSimdLevel() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 level here";
  struct Setting {
    SimdLevel level;
    bool amx;
  };
  std::vector<Setting> settings = {{SimdLevel::kAvx2, false}};
  if (DetectSimdLevel() == SimdLevel::kAvx512) settings.push_back({SimdLevel::kAvx512, false});
  if (AmxActive()) settings.push_back({SimdLevel::kAvx512, true});
  struct Guard {
    ~Guard() {
      SetAmxForTesting(std::nullopt);
      SetSimdLevelForTesting(std::nullopt);
    }
  } guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ThreadPool pool(2);
  for (const Setting& setting : settings) {
    SetSimdLevelForTesting(setting.level);
    SetAmxForTesting(setting.amx);
    SCOPED_TRACE(setting.amx                           ? "AMX kernel"
                 : setting.level == SimdLevel::kAvx512 ? "VNNI kernel"
                                                       : "AVX2 kernel");
    for (DType t : {DType::kQ4_0, DType::kQ8_0}) {
      for (int64_t n_in :
           {int64_t{32 * 7},
            32 * (2 * std::max(qmm::kAmxChunkBlocks, qmm::kBlockOrderChunkBlocks) + 5)}) {
        const int64_t nb = n_in / 32;
        const int64_t n_out = n_in == 32 * 7 ? 37 : 45;
        const size_t rb = *RowBytes(t, static_cast<size_t>(n_in));
        const std::vector<uint8_t> w = RandomWeights(rng, t, n_out, n_in, rb);
        const rows16::PackedBuffer packed =
            rows16::MakePacked(t, w.data(), rb, n_out, n_in, nullptr);
        for (int64_t n_rows : {int64_t{1}, int64_t{3}, qmm::kAmxMinRows, int64_t{16}, int64_t{17},
                               int64_t{31}, int64_t{45}}) {
          SCOPED_TRACE(Name(t) + " n_in=" + std::to_string(n_in) +
                       " n_rows=" + std::to_string(n_rows));
          const std::vector<float> x = RandomVector(rng, static_cast<size_t>(n_rows * n_in));
          std::vector<int8_t> q(static_cast<size_t>(n_in));
          std::vector<float> ds(static_cast<size_t>(2 * nb));
          std::vector<float> want(static_cast<size_t>(n_rows * n_out));
          for (int64_t r = 0; r < n_rows; ++r) {
            qmm::QuantizeRowQ8Scalar(x.data() + r * n_in, n_in, q.data(), ds.data());
            for (int64_t o = 0; o < n_out; ++o) {
              const uint8_t* row = w.data() + o * rb;
              float acc = 0.0f;
              for (int64_t b = 0; b < nb; ++b) {
                int32_t sum = 0;
                uint16_t d_bits;
                if (t == DType::kQ4_0) {
                  BlockQ4_0 blk;
                  std::memcpy(&blk, row + b * sizeof blk, sizeof blk);
                  d_bits = blk.d;
                  for (int e = 0; e < 32; ++e) {
                    const int v = (e < 16 ? blk.qs[e] & 0x0F : blk.qs[e - 16] >> 4) - 8;
                    sum += v * q[b * 32 + e];
                  }
                } else {
                  BlockQ8_0 blk;
                  std::memcpy(&blk, row + b * sizeof blk, sizeof blk);
                  d_bits = blk.d;
                  for (int e = 0; e < 32; ++e) sum += blk.qs[e] * q[b * 32 + e];
                }
                const float scale = F16ToF32(d_bits) * ds[2 * b];
                acc = std::fma(scale, static_cast<float>(sum), acc);
              }
              want[r * n_out + o] = acc;
            }
          }
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            std::vector<float> got(want.size(), NAN), got_packed(want.size(), NAN);
            ASSERT_TRUE(QuantMatMul(t, w.data(), rb, n_out, n_in, x.data(), n_in, n_rows,
                                    got.data(), n_out, p)
                            .ok());
            EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
                << "GGUF rows";
            QuantMatMulOutput out;
            out.wtype = t;
            out.W = w.data();
            out.row_bytes = rb;
            out.n_out = n_out;
            out.y = got_packed.data();
            out.y_stride = static_cast<size_t>(n_out);
            out.packed = packed.data.get();
            ASSERT_TRUE(QuantMatMulShared(&out, 1, n_in, x.data(), n_in, n_rows, p).ok());
            EXPECT_EQ(0, std::memcmp(got_packed.data(), want.data(), want.size() * sizeof(float)))
                << "rows16 copy";
          }
          // batch_invariant: every row as a one-row call computes it.
          std::vector<float> bi(want.size()), one(static_cast<size_t>(n_out));
          ASSERT_TRUE(QuantMatMul(t, w.data(), rb, n_out, n_in, x.data(), n_in, n_rows, bi.data(),
                                  n_out, &pool, true)
                          .ok());
          for (int64_t r = 0; r < n_rows; r += 7) {
            ASSERT_TRUE(QuantMatMul(t, w.data(), rb, n_out, n_in, x.data() + r * n_in, n_in, 1,
                                    one.data(), n_out, nullptr)
                            .ok());
            EXPECT_EQ(0, std::memcmp(one.data(), bi.data() + r * n_out, n_out * sizeof(float)))
                << "row " << r;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace llm
