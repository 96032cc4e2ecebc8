// MatMulF32 (oneDNN) vs the float64 reference: rel 1e-5 of sum_k |a w|.
#include "backend/cpu/matmul.h"

#include <cmath>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "gtest/gtest.h"
#include "kernels/cpu/ref/reference_kernels.h"
#include "tests/backend/kernel_test_util.h"

namespace llm {
namespace {

using testing_util::FreshSeed;
using testing_util::RandomVector;

void CheckShape(std::mt19937& rng, int64_t m, int64_t n, int64_t k, int threads) {
  SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
               " threads=" + std::to_string(threads));
  const std::vector<float> a = RandomVector(rng, m * k), w = RandomVector(rng, n * k);
  std::vector<float> c(m * n, NAN);
  ASSERT_TRUE(MatMulF32(a.data(), w.data(), c.data(), m, n, k, threads).ok());
  const std::vector<double> ad(a.begin(), a.end()), wd(w.begin(), w.end());
  std::vector<double> ref(m * n), abs_sum(m * n);
  // RefMatMul computes y[r][o] = sum_i w[o][i] x[r][i]: rows of a are x.
  ref::RefMatMul(wd.data(), ad.data(), n, k, m, ref.data(), abs_sum.data());
  for (int64_t i = 0; i < m * n; ++i) {
    ASSERT_LE(std::fabs(c[i] - ref[i]), 1e-5 * abs_sum[i])
        << "i=" << i << " got " << c[i] << " want " << ref[i];
  }
}

TEST(MatMulF32Test, MatchesFloat64Reference) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  CheckShape(rng, 1, 1, 1, 1);
  CheckShape(rng, 7, 37, 33, 1);
  CheckShape(rng, 64, 576, 576, 2);
  CheckShape(rng, 13, 1536, 576, 2);
  CheckShape(rng, 7, 37, 33, 1);  // cached primitive, fresh data
}

TEST(MatMulF32Test, ConcurrentCallersShareTheCache) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::vector<std::thread> threads;
  std::vector<int> ok(3, 0);
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(seed + t);
      const int64_t m = 5, n = 17, k = 40;
      const std::vector<float> a = RandomVector(rng, m * k), w = RandomVector(rng, n * k);
      std::vector<float> c(m * n);
      bool good = true;
      for (int rep = 0; rep < 20 && good; ++rep) {
        good = MatMulF32(a.data(), w.data(), c.data(), m, n, k, 1).ok();
        for (int64_t i = 0; i < m && good; ++i)
          for (int64_t j = 0; j < n && good; ++j) {
            double s = 0, as = 0;
            for (int64_t x = 0; x < k; ++x) {
              s += double(a[i * k + x]) * w[j * k + x];
              as += std::fabs(double(a[i * k + x]) * w[j * k + x]);
            }
            good = std::fabs(c[i * n + j] - s) <= 1e-5 * as;
          }
      }
      ok[t] = good;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(3, 1));
}

TEST(MatMulF32Test, RejectsBadArguments) {
  float a[4] = {1, 2, 3, 4}, c[4];
  EXPECT_EQ(ToLlmStatus(MatMulF32(a, a, c, -1, 2, 2, 1)), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ToLlmStatus(MatMulF32(a, a, c, 2, 2, 0, 1)), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ToLlmStatus(MatMulF32(nullptr, a, c, 2, 2, 2, 1)), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ToLlmStatus(MatMulF32(a, a, c, 2, 2, 2, 0)), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MatMulF32(a, a, c, 0, 2, 2, 1).ok());
}

}  // namespace
}  // namespace llm

namespace llm {
namespace {

// bf16 weights and bf16-rounded activations: the reference multiplies the
// same rounded values in double, so only accumulation error remains.
TEST(MatMulBF16Test, MatchesFloat64ReferenceOfRoundedInputs) {
  const uint32_t seed = testing_util::FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (auto [m, n, k] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {7, 37, 33}, {64, 576, 576}}) {
    SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
    const std::vector<float> a = testing_util::RandomVector(rng, m * k);
    const std::vector<float> wf = testing_util::RandomVector(rng, n * k);
    std::vector<uint16_t> w(n * k);
    for (size_t i = 0; i < w.size(); ++i) w[i] = F32ToBF16(wf[i]);
    std::vector<float> c(m * n, NAN);
    const absl::Status s = MatMulBF16(a.data(), w.data(), c.data(), m, n, k, 1);
    if (ToLlmStatus(s) == LLM_ERR_UNSUPPORTED) GTEST_SKIP() << s.message();
    ASSERT_TRUE(s.ok()) << s.message();
    std::vector<double> ad(m * k), wd(n * k), ref(m * n), abs_sum(m * n);
    for (size_t i = 0; i < ad.size(); ++i) ad[i] = BF16ToF32(F32ToBF16(a[i]));
    for (size_t i = 0; i < wd.size(); ++i) wd[i] = BF16ToF32(w[i]);
    ref::RefMatMul(wd.data(), ad.data(), n, k, m, ref.data(), abs_sum.data());
    for (int64_t i = 0; i < m * n; ++i) {
      ASSERT_LE(std::fabs(c[i] - ref[i]), 1e-5 * abs_sum[i]) << "i=" << i;
    }
  }
}

}  // namespace
}  // namespace llm
