// RmsNorm, RopeInPlace, SwiGlu, Softmax vs the float64 references on fresh
// random inputs (seed printed on failure); tolerance 1e-5 relative.
#include "backend/cpu/ops.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/ref/reference_kernels.h"
#include "tests/backend/kernel_test_util.h"

namespace llm {
namespace {

using testing_util::FreshSeed;
using testing_util::RandomVector;

std::vector<double> ToDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST(OpsTest, RmsNormMatchesReference) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int64_t n : {1, 7, 64, 576, 1001}) {
    const std::vector<float> x = RandomVector(rng, n, 0.01f, 3.0f);
    const std::vector<float> w = RandomVector(rng, n, 0.1f, 2.0f);
    std::vector<float> out(n);
    RmsNorm(x.data(), w.data(), n, 1e-5f, out.data());
    std::vector<double> ref(n);
    ref::RefRmsNorm(ToDouble(x).data(), ToDouble(w).data(), n, 1e-5, ref.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(out[i], ref[i], 1e-5 * std::fabs(ref[i])) << n;
    // In place (out aliases x).
    std::vector<float> y = x;
    RmsNorm(y.data(), w.data(), n, 1e-5f, y.data());
    EXPECT_EQ(y, out);
  }
}

TEST(OpsTest, RopeMatchesReferenceBothModes) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  struct Case {
    int64_t n_heads, head_dim, rope_dims, pos;
    float base;
  };
  for (const Case& c : {Case{9, 64, 64, 0, 10000.0f}, Case{9, 64, 64, 1, 10000.0f},
                        Case{3, 64, 64, 8191, 100000.0f}, Case{2, 80, 32, 517, 10000.0f},
                        Case{1, 128, 128, 123456, 500000.0f}, Case{2, 600, 600, 77, 10000.0f}}) {
    for (bool neox : {false, true}) {
      SCOPED_TRACE("neox=" + std::to_string(neox) + " head_dim=" + std::to_string(c.head_dim) +
                   " pos=" + std::to_string(c.pos));
      std::vector<float> x = RandomVector(rng, c.n_heads * c.head_dim);
      std::vector<double> ref = ToDouble(x);
      RopeInPlace(x.data(), c.n_heads, c.head_dim, c.rope_dims, c.pos, c.base, neox);
      ref::RefRope(ref.data(), c.n_heads, c.head_dim, c.rope_dims, c.pos, c.base, neox);
      for (size_t i = 0; i < x.size(); ++i) {
        // Each output is x0*c - x1*s: scale the tolerance by |x0| + |x1| (<= 2).
        ASSERT_NEAR(x[i], ref[i], 1e-5 * 2.0) << "i=" << i;
      }
      // Dims past rope_dims are untouched.
      if (c.rope_dims < c.head_dim) {
        std::vector<double> orig = ref;  // ref only rotated the same dims
        for (int64_t h = 0; h < c.n_heads; ++h)
          for (int64_t d = c.rope_dims; d < c.head_dim; ++d)
            ASSERT_EQ(x[h * c.head_dim + d], static_cast<float>(orig[h * c.head_dim + d]));
      }
    }
  }
}

TEST(OpsTest, RopeRotatesTheDocumentedPairs) {
  // pos 1, base 10000, 4 dims: pair 0 rotates by 1 rad, pair 1 by 0.01 rad.
  float normal[4] = {1, 0, 1, 0};
  RopeInPlace(normal, 1, 4, 4, 1, 10000.0f, false);
  EXPECT_NEAR(normal[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(normal[1], std::sin(1.0), 1e-6);
  EXPECT_NEAR(normal[2], std::cos(0.01), 1e-6);
  EXPECT_NEAR(normal[3], std::sin(0.01), 1e-6);
  float neox[4] = {1, 1, 0, 0};  // pairs (0,2) and (1,3)
  RopeInPlace(neox, 1, 4, 4, 1, 10000.0f, true);
  EXPECT_NEAR(neox[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(neox[2], std::sin(1.0), 1e-6);
  EXPECT_NEAR(neox[1], std::cos(0.01), 1e-6);
  EXPECT_NEAR(neox[3], std::sin(0.01), 1e-6);
}

TEST(OpsTest, SwiGluMatchesReference) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int64_t n : {1, 13, 1536}) {
    const std::vector<float> g = RandomVector(rng, n, 0.01f, 8.0f);
    const std::vector<float> u = RandomVector(rng, n, 0.01f, 4.0f);
    std::vector<float> out(n);
    SwiGlu(g.data(), u.data(), n, out.data());
    std::vector<double> ref(n);
    ref::RefSwiGlu(ToDouble(g).data(), ToDouble(u).data(), n, ref.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(out[i], ref[i], 1e-5 * std::fabs(ref[i]) + 1e-30);
  }
}

TEST(OpsTest, SoftmaxMatchesReference) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int64_t n : {1, 5, 100, 49152}) {
    std::vector<float> x = RandomVector(rng, n, 0.01f, 20.0f);
    std::vector<double> ref = ToDouble(x);
    Softmax(x.data(), n);
    ref::RefSoftmax(ref.data(), n);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(x[i], ref[i], 1e-5 * ref[i] + 1e-30) << "n=" << n << " i=" << i;
      sum += x[i];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

}  // namespace
}  // namespace llm
