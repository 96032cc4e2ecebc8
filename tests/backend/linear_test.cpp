// Linear's batch_invariant mode: every row of a 40-row call (above
// kGemvMaxRows, where the default path is oneDNN for these weight types) has
// the bits of the same row multiplied alone, at every SIMD level, with and
// without threads. Without the flag the 40-row result is still the same
// product (within f32 rounding), whichever kernel computes it.
#include "backend/cpu/linear.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "core/dtype.h"
#include "backend/cpu/thread_pool.h"
#include "gtest/gtest.h"
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
      }
    }
  }
}

}  // namespace
}  // namespace llm
