// Linear's batch_invariant mode: every row of a 40-row call (above
// kGemvMaxRows, where the default path is oneDNN for these weight types) has
// the bits of the same row multiplied alone, at every SIMD level, with and
// without threads. Without the flag the 40-row result is still the same
// product (within f32 rounding), whichever kernel computes it, and the same
// bits where QuantMatMul batches the plain types (AVX2, AVX-512).
#include "backend/cpu/linear.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/dequantize.h"
#include "backend/cpu/quant_matmul.h"
#include "core/dtype.h"
#include "core/half.h"
#include "backend/cpu/thread_pool.h"
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

TEST(LinearTest, BatchInvariantRowsEqualSingleRowsBitExact) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ThreadPool pool(2);
  constexpr int64_t kRows = 40;
  static_assert(kRows > kGemvMaxRows);
  struct Shape {
    DType type;
    int64_t n_out, n_in;
  };
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    SCOPED_TRACE(SimdLevelName(level));
    for (const Shape& s : {Shape{DType::kF16, 37, 200}, Shape{DType::kBF16, 29, 77},
                           Shape{DType::kF32, 33, 131}, Shape{DType::kQ4_K, 19, 256},
                           Shape{DType::kIQ4_NL, 19, 96}}) {
      SCOPED_TRACE("type=" + std::to_string(static_cast<int>(s.type)) +
                   " n_out=" + std::to_string(s.n_out) + " n_in=" + std::to_string(s.n_in));
      const size_t row_bytes = *RowBytes(s.type, static_cast<size_t>(s.n_in));
      const std::vector<uint8_t> wbytes = RandomWeights(rng, s.type, s.n_out, s.n_in, row_bytes);
      Weight w;
      w.type = s.type;
      w.data = wbytes.data();
      w.n_out = s.n_out;
      w.n_in = s.n_in;
      w.row_bytes = row_bytes;
      const std::vector<float> x = RandomVector(rng, kRows * s.n_in);
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        LinearContext ctx;
        ctx.pool = p;
        ctx.n_threads = p != nullptr ? 2 : 1;
        ctx.batch_invariant = true;
        std::vector<float> all(kRows * s.n_out), one(s.n_out);
        ASSERT_TRUE(Linear(w, x.data(), kRows, all.data(), ctx).ok());
        for (int64_t r = 0; r < kRows; ++r) {
          ASSERT_TRUE(Linear(w, x.data() + r * s.n_in, 1, one.data(), ctx).ok());
          ASSERT_EQ(0,
                    std::memcmp(one.data(), all.data() + r * s.n_out, one.size() * sizeof(float)))
              << "row " << r << " threads=" << ctx.n_threads;
        }
        // Default mode (oneDNN for F16/BF16/F32 at 40 rows, QuantMatMul for
        // the quantized types): the same product
        // up to f32 summation order, relative to sum_i |w_i x_i| (bounded
        // here by n_in * max|w| * max|x| = n_in; 1e-5 of that).
        LinearContext dflt;
        dflt.pool = p;
        dflt.n_threads = ctx.n_threads;
        std::vector<float> base(all.size());
        ASSERT_TRUE(Linear(w, x.data(), kRows, base.data(), dflt).ok());
        for (size_t i = 0; i < all.size(); ++i) {
          ASSERT_NEAR(base[i], all[i], 1e-5 * static_cast<double>(s.n_in)) << "i=" << i;
        }
        // Where QuantMatMul batches the plain types at this level (AVX2;
        // AVX-512 up to qmm::kAvx512PlainBatchMaxRows rows), the default mode
        // runs that kernel too: the one-row bits without asking.
        if (QuantMatMulBatchesPlainType(s.type, kRows)) {
          EXPECT_EQ(0, std::memcmp(base.data(), all.data(), all.size() * sizeof(float)));
        }
      }
    }
  }
}

// The opt-in bf16 prefill (LinearContext::prefill_bf16) on F16, BF16 and
// F32 weights, 40 rows: the product of the bf16-rounded weights and
// activations with f32 accumulation, i.e. within 2e-5 of sum |w x| of a
// float64 product of the rounded values -- a bound the default f32 path,
// which multiplies the unrounded values, misses on these shapes.
TEST(LinearTest, Bf16PrefillMultipliesBf16RoundedInputs) {
  if (!CpuHasAvx512Bf16() || ActiveSimdLevel() != SimdLevel::kAvx512) {
    GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  }
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ThreadPool pool(2);
  constexpr int64_t kRows = 40;
  struct Shape {
    DType type;
    int64_t n_out, n_in;
  };
  for (const Shape& s : {Shape{DType::kF16, 37, 1000}, Shape{DType::kBF16, 29, 777},
                         Shape{DType::kF32, 33, 1031}}) {
    SCOPED_TRACE("type=" + std::to_string(static_cast<int>(s.type)));
    const size_t row_bytes = *RowBytes(s.type, static_cast<size_t>(s.n_in));
    const std::vector<uint8_t> wbytes = RandomWeights(rng, s.type, s.n_out, s.n_in, row_bytes);
    Weight w;
    w.type = s.type;
    w.data = wbytes.data();
    w.n_out = s.n_out;
    w.n_in = s.n_in;
    w.row_bytes = row_bytes;
    const std::vector<float> x = RandomVector(rng, kRows * s.n_in);
    std::vector<double> wd(s.n_out * s.n_in), xd(x.size()), want(kRows * s.n_out),
        abs_sum(want.size());
    std::vector<float> row(s.n_in);
    for (int64_t o = 0; o < s.n_out; ++o) {
      ASSERT_TRUE(DequantizeRow(s.type, wbytes.data() + o * row_bytes, s.n_in, row.data()).ok());
      for (int64_t i = 0; i < s.n_in; ++i) wd[o * s.n_in + i] = BF16ToF32(F32ToBF16(row[i]));
    }
    for (size_t i = 0; i < x.size(); ++i) xd[i] = BF16ToF32(F32ToBF16(x[i]));
    ref::RefMatMul(wd.data(), xd.data(), s.n_out, s.n_in, kRows, want.data(), abs_sum.data());
    double worst_f32 = 0.0;
    for (bool bf16 : {true, false}) {
      LinearContext ctx;
      ctx.pool = &pool;
      ctx.n_threads = 2;
      ctx.prefill_bf16 = bf16;
      std::vector<float> y(want.size(), NAN);
      ASSERT_TRUE(Linear(w, x.data(), kRows, y.data(), ctx).ok());
      for (size_t i = 0; i < y.size(); ++i) {
        const double err = std::fabs(y[i] - want[i]) / abs_sum[i];
        if (bf16) {
          ASSERT_LE(err, 2e-5) << "i=" << i << " " << y[i] << " vs " << want[i];
        } else {
          worst_f32 = std::max(worst_f32, err);
        }
      }
    }
    EXPECT_GT(worst_f32, 2e-5) << "the f32 path meets the bf16 bound: the test cannot tell them apart";
  }
}

}  // namespace
}  // namespace llm
