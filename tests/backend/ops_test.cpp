// RmsNorm, RopeInPlace, SwiGlu, Softmax vs the float64 references on fresh
// random inputs (seed printed on failure); tolerance 1e-5 relative. RopeApply
// and F32ToF16Row / F16ToF32Row / BF16ToF32Row bit for bit against the
// scalar code at every SIMD level; SwiGlu at the AVX2 level bit for bit
// against a lane-by-lane model of llama.cpp's AVX2 build.
#include "backend/cpu/ops.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "core/half.h"
#include "gtest/gtest.h"
#include "kernels/cpu/ref/reference_kernels.h"
#include "tests/backend/ggml_avx2_model.h"
#include "tests/backend/kernel_test_util.h"

namespace llm {
namespace {

using testing_util::FreshSeed;
using testing_util::RandomVector;
using testing_util::SimdLevelGuard;
using testing_util::SupportedLevels;

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

TEST(OpsTest, RmsNormRowsIsRmsNormPerRowBitForBit) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int64_t n : {1, 7, 576, 1001}) {
    for (int64_t rows : {1, 7, 8, 9, 17, 24}) {
      const std::vector<float> x = RandomVector(rng, rows * n, 0.01f, 3.0f);
      const std::vector<float> w = RandomVector(rng, n, 0.1f, 2.0f);
      std::vector<float> expected(rows * n), out(rows * n);
      for (int64_t r = 0; r < rows; ++r) {
        RmsNorm(x.data() + r * n, w.data(), n, 1e-5f, expected.data() + r * n);
      }
      RmsNormRows(x.data(), w.data(), rows, n, 1e-5f, out.data());
      EXPECT_EQ(out, expected) << rows << " rows of " << n;
      std::vector<float> y = x;  // in place
      RmsNormRows(y.data(), w.data(), rows, n, 1e-5f, y.data());
      EXPECT_EQ(y, expected) << rows << " rows of " << n << " in place";
    }
  }
}

// float64 rotation of one token by the angles ggml-cpu uses (the contract of
// RopeInPlace): theta_0 = (float)pos, theta_{i+1} = theta_i * theta_scale in
// f32, theta_scale = powf(base, -2 / rope_dims). Only the angles are f32; the
// rotation itself is exact, so the tolerance covers cosf/sinf and the f32
// rotation arithmetic of RopeInPlace.
void GgmlAngleRope(double* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, int64_t pos,
                   float base, bool neox) {
  const int64_t half = rope_dims / 2;
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(rope_dims));
  for (int64_t h = 0; h < n_heads; ++h) {
    double* xh = x + h * head_dim;
    float theta = static_cast<float>(pos);
    for (int64_t i = 0; i < half; ++i) {
      const double th = theta;
      const int64_t i0 = neox ? i : 2 * i;
      const int64_t i1 = neox ? i + half : 2 * i + 1;
      const double x0 = xh[i0], x1 = xh[i1];
      xh[i0] = x0 * std::cos(th) - x1 * std::sin(th);
      xh[i1] = x0 * std::sin(th) + x1 * std::cos(th);
      theta *= theta_scale;
    }
  }
}

struct RopeCase {
  int64_t n_heads, head_dim, rope_dims, pos;
  float base;
};
const RopeCase kRopeCases[] = {{9, 64, 64, 0, 10000.0f},         {9, 64, 64, 1, 10000.0f},
                               {3, 64, 64, 8191, 100000.0f},     {2, 80, 32, 517, 10000.0f},
                               {1, 128, 128, 123456, 500000.0f}, {2, 600, 600, 77, 10000.0f},
                               {3, 40, 38, 300, 10000.0f}};

TEST(OpsTest, RopeMatchesReferenceBothModes) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const RopeCase& c : kRopeCases) {
    for (bool neox : {false, true}) {
      SCOPED_TRACE("neox=" + std::to_string(neox) + " head_dim=" + std::to_string(c.head_dim) +
                   " pos=" + std::to_string(c.pos));
      std::vector<float> x = RandomVector(rng, c.n_heads * c.head_dim);
      std::vector<double> ref = ToDouble(x);
      RopeInPlace(x.data(), c.n_heads, c.head_dim, c.rope_dims, c.pos, c.base, neox);
      GgmlAngleRope(ref.data(), c.n_heads, c.head_dim, c.rope_dims, c.pos, c.base, neox);
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

// RopeAngles + RopeApply (the forward pass's per-position table) give
// RopeInPlace's bits, and the AVX-512 rotation the scalar one's, in both
// modes, with odd pair counts (a scalar tail) and the wide-head fallback.
TEST(OpsTest, RopeApplyEqualsRopeInPlaceAtEveryLevelBitExact) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const RopeCase& c : kRopeCases) {
    for (bool neox : {false, true}) {
      SCOPED_TRACE("neox=" + std::to_string(neox) + " head_dim=" + std::to_string(c.head_dim));
      const std::vector<float> x = RandomVector(rng, c.n_heads * c.head_dim, 0.01f, 4.0f);
      SetSimdLevelForTesting(SimdLevel::kScalar);
      std::vector<float> want = x;
      RopeInPlace(want.data(), c.n_heads, c.head_dim, c.rope_dims, c.pos, c.base, neox);
      const int64_t pairs = RopePairs(c.head_dim, c.rope_dims);
      std::vector<float> cos(static_cast<size_t>(pairs)), sin(cos.size());
      RopeAngles(c.pos, c.head_dim, c.rope_dims, c.base, cos.data(), sin.data());
      for (SimdLevel level : SupportedLevels()) {
        SetSimdLevelForTesting(level);
        SCOPED_TRACE(SimdLevelName(level));
        std::vector<float> got = x, in_place = x;
        RopeApply(got.data(), c.n_heads, c.head_dim, c.rope_dims, cos.data(), sin.data(), neox);
        RopeInPlace(in_place.data(), c.n_heads, c.head_dim, c.rope_dims, c.pos, c.base, neox);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
        ASSERT_EQ(0, std::memcmp(want.data(), in_place.data(), want.size() * sizeof(float)));
      }
    }
  }
}

// F32ToF16Row (the KV cache store) gives F32ToF16's bits at every level for
// values across the f16 range (subnormals, rounding ties, overflow, +-0,
// +-inf, an odd tail); a NaN stays a NaN.
TEST(OpsTest, F32ToF16RowMatchesScalarConversion) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  std::vector<float> x;
  std::uniform_real_distribution<float> exponent(-30.0f, 17.0f), unit(-1.0f, 1.0f);
  for (int i = 0; i < 997; ++i) x.push_back(unit(rng) * std::exp2(exponent(rng)));
  for (float v :
       {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, 1e9f, -1e9f, 5.96e-8f, 2.98e-8f,
        1.0f + 1.0f / 2048.0f, 1.0f + 3.0f / 2048.0f, std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    x.push_back(v);
  }
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    SCOPED_TRACE(SimdLevelName(level));
    std::vector<uint16_t> got(x.size());
    F32ToF16Row(x.data(), static_cast<int64_t>(x.size()), got.data());
    for (size_t i = 0; i + 1 < x.size(); ++i) ASSERT_EQ(got[i], F32ToF16(x[i])) << "x=" << x[i];
    EXPECT_TRUE(std::isnan(F16ToF32(got.back())));
  }
}

// F32ToBF16Row / F16ToBF16Row (the opt-in bf16 prefill's roundings) give
// F32ToBF16's bits at every level: random values over the whole f32 range,
// rounding ties with an even and an odd bf16 lsb, values that round up to
// inf, +-0, +-inf, subnormals, an odd tail; every f16 bit pattern; a NaN stays
// a NaN.
TEST(OpsTest, ToBF16RowsMatchScalarConversion) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  std::vector<uint32_t> bits;
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2001; ++i) bits.push_back(any(rng));
  for (uint32_t b : {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu,
                     0x7f7fffffu, 0xff7f8000u, 0x7f800000u, 0xff800000u, 0x00000001u,
                     0x807fffffu, 0x7fc00000u, 0xff800001u, 0x7f800001u}) {
    bits.push_back(b);
  }
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * sizeof(float));
  std::vector<uint16_t> h(65536 + 7);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i * 40503u);
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    SCOPED_TRACE(SimdLevelName(level));
    std::vector<uint16_t> got(x.size());
    F32ToBF16Row(x.data(), static_cast<int64_t>(x.size()), got.data());
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) {
        ASSERT_TRUE(std::isnan(BF16ToF32(got[i]))) << "bits=" << bits[i];
      } else {
        ASSERT_EQ(got[i], F32ToBF16(x[i])) << "bits=" << bits[i];
      }
    }
    std::vector<uint16_t> from_half(h.size());
    F16ToBF16Row(h.data(), static_cast<int64_t>(h.size()), from_half.data());
    for (size_t i = 0; i < h.size(); ++i) {
      const float f = F16ToF32(h[i]);
      if (std::isnan(f)) {
        ASSERT_TRUE(std::isnan(BF16ToF32(from_half[i]))) << "f16 bits=" << h[i];
      } else {
        ASSERT_EQ(from_half[i], F32ToBF16(f)) << "f16 bits=" << h[i];
      }
    }
  }
}

// F16ToF32Row / BF16ToF32Row (F16 / BF16 weights dequantized for prefill)
// give F16ToF32's / BF16ToF32's values at every level for all 65536 bit
// patterns, starting at an odd offset so that a 16-wide body and a 15-element
// tail both run; a NaN stays a NaN (the hardware may quiet a signalling one).
TEST(OpsTest, HalfToF32RowsMatchScalarConversion) {
  SimdLevelGuard guard;
  std::vector<uint16_t> h(65536 + 1 + 15);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>((i + 65535) & 0xFFFF);
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    SCOPED_TRACE(SimdLevelName(level));
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE(bf16 ? "bf16" : "f16");
      std::vector<float> got(h.size() - 1, -1.0f);
      const int64_t n = static_cast<int64_t>(got.size());
      if (bf16) {
        BF16ToF32Row(h.data() + 1, n, got.data());
      } else {
        F16ToF32Row(h.data() + 1, n, got.data());
      }
      for (int64_t i = 0; i < n; ++i) {
        const float want = bf16 ? BF16ToF32(h[i + 1]) : F16ToF32(h[i + 1]);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(got[i])) << "bits=" << h[i + 1];
        } else {
          uint32_t a, b;
          std::memcpy(&a, &got[i], 4);
          std::memcpy(&b, &want, 4);
          ASSERT_EQ(a, b) << "bits=" << h[i + 1];
        }
      }
    }
  }
}

// Against the exact angles pos * base^(-2i/d) (float64 RefRope): the f32
// iterated angle of pair i is off by at most ~(i + 2) f32 roundings of a value
// <= pos (powf and the i multiplies), i.e. |dtheta| <= pos * (i + 2) * 2^-23;
// the rotation error is at most (|x0| + |x1|) * |dtheta| (<= 2 |dtheta|).
// Meaningful only for moderate positions, so the long-position cases are left
// to the test above.
TEST(OpsTest, RopeAnglesStayCloseToExact) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const RopeCase& c : kRopeCases) {
    if (c.pos > 1000) continue;
    for (bool neox : {false, true}) {
      SCOPED_TRACE("neox=" + std::to_string(neox) + " head_dim=" + std::to_string(c.head_dim) +
                   " pos=" + std::to_string(c.pos));
      std::vector<float> x = RandomVector(rng, c.n_heads * c.head_dim);
      std::vector<double> ref = ToDouble(x);
      RopeInPlace(x.data(), c.n_heads, c.head_dim, c.rope_dims, c.pos, c.base, neox);
      ref::RefRope(ref.data(), c.n_heads, c.head_dim, c.rope_dims, c.pos, c.base, neox);
      const int64_t half = c.rope_dims / 2;
      for (int64_t h = 0; h < c.n_heads; ++h) {
        for (int64_t d = 0; d < c.rope_dims; ++d) {
          const int64_t pair = neox ? d % half : d / 2;
          const double dtheta = static_cast<double>(c.pos) * (pair + 2) * std::ldexp(1.0, -23);
          const size_t i = static_cast<size_t>(h * c.head_dim + d);
          ASSERT_NEAR(x[i], ref[i], 2.0 * (1e-5 + dtheta)) << "i=" << i;
        }
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
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    SCOPED_TRACE(SimdLevelName(level));
    // 37 = two 16-lane AVX-512 steps (four 8-lane AVX2 steps) plus a scalar
    // tail; 7: the tail only.
    for (int64_t n : {1, 7, 13, 37, 1536}) {
      const std::vector<float> g = RandomVector(rng, n, 0.01f, 8.0f);
      const std::vector<float> u = RandomVector(rng, n, 0.01f, 4.0f);
      std::vector<float> out(n);
      SwiGlu(g.data(), u.data(), n, out.data());
      std::vector<double> ref(n);
      ref::RefSwiGlu(ToDouble(g).data(), ToDouble(u).data(), n, ref.data());
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(out[i], ref[i], 1e-5 * std::fabs(ref[i]) + 1e-30) << "n=" << n << " i=" << i;
      }
    }
  }
}

// At the AVX2 level SwiGlu gives, bit for bit, what llama.cpp built for AVX2
// computes (ggml_vec_swiglu_f32: 8 lanes of ggml_v_silu with the AVX2
// ggml_v_expf, the tail with expf), modelled lane by lane in
// ggml_avx2_model.h: random gates in +-[0.01, 12] and +-[12, 120] (exp's slow
// path above |x| = 87.3: overflow to inf, results flushed to -0, subnormal
// exps), plus exact zeros, at lengths around the 8-lane steps.
TEST(OpsTest, SwiGluAvx2EqualsLlamaCppAvx2ModelBitExact) {
  bool has_avx2 = false;
  for (SimdLevel l : SupportedLevels()) has_avx2 |= l == SimdLevel::kAvx2;
  if (!has_avx2) GTEST_SKIP() << "this CPU has no AVX2";
  SimdLevelGuard guard;
  SetSimdLevelForTesting(SimdLevel::kAvx2);
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int64_t n : {1, 7, 8, 9, 13, 37, 1536, 1537}) {
    std::vector<float> g = RandomVector(rng, n, 0.01f, 12.0f);
    const std::vector<float> big = RandomVector(rng, n, 12.0f, 120.0f);
    for (int64_t i = 0; i < n; i += 3) g[i] = big[i];
    for (int64_t i = 5; i < n; i += 11) g[i] = 0.0f;
    const std::vector<float> u = RandomVector(rng, n, 0.01f, 4.0f);
    std::vector<float> out(n), want(n);
    SwiGlu(g.data(), u.data(), n, out.data());
    ggml_avx2_model::SwiGlu(g.data(), u.data(), n, want.data());
    for (int64_t i = 0; i < n; ++i) {
      uint32_t a, b;
      std::memcpy(&a, &out[i], 4);
      std::memcpy(&b, &want[i], 4);
      ASSERT_EQ(a, b) << "n=" << n << " i=" << i << " gate=" << g[i] << ": " << out[i] << " vs "
                      << want[i];
    }
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
