// The K-quant / Q5 / IQ4 kernels (backend/cpu/kquant_kernels.h) against an
// independent model of ggml-cpu's x86 AVX2 arithmetic written here from the
// formats (integer lane sums in int64, the float steps with std::fma): the
// AVX2 level (and AVX-512 machines, which run it) must give the same bits.
// Also the Q8_K quantizer against its definition. Fresh random inputs per
// run (seed printed), odd block counts.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/packed_weight.h"
#include "backend/cpu/quant_blocks.h"
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/quant_matmul_kernels.h"
#include "backend/cpu/thread_pool.h"
#include "core/dtype.h"
#include "core/half.h"
#include "gtest/gtest.h"
#include "tests/backend/kernel_test_util.h"

namespace llm {
namespace {

using testing_util::FreshSeed;
using testing_util::RandomVector;
using testing_util::RandomWeights;
using testing_util::SimdLevelGuard;

std::string Name(DType t) { return GetDTypeTraits(static_cast<uint32_t>(t))->name; }

// One 256-element block decoded to integers: value v[e] (before scale), the
// integer scale s[e] of its sub-block, the f16 fields.
struct Decoded {
  int v[256];
  int s[256];
  int mins[16];  // Q2_K: per 16; Q4_K/Q5_K: per 32 (first 8)
  float d = 0, dmin = 0;
};

Decoded DecodeK(DType t, const uint8_t* p) {
  Decoded r{};
  if (t == DType::kQ2_K) {
    BlockQ2_K b;
    std::memcpy(&b, p, sizeof b);
    for (int e = 0; e < 256; ++e) {
      r.v[e] = (b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      r.s[e] = b.scales[e / 16] & 0xF;
    }
    for (int j = 0; j < 16; ++j) r.mins[j] = b.scales[j] >> 4;
    r.d = F16ToF32(b.d);
    r.dmin = F16ToF32(b.dmin);
  } else if (t == DType::kQ3_K) {
    BlockQ3_K b;
    std::memcpy(&b, p, sizeof b);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      r.v[e] = ((b.qs[32 * h + l] >> (2 * k)) & 3) - (((b.hmask[l] >> (4 * h + k)) & 1) ? 0 : 4);
      const int j = e / 16;
      const int low = j < 8 ? (b.scales[j] & 0xF) : (b.scales[j - 8] >> 4);
      const int high = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
      r.s[e] = (low | (high << 4)) - 32;
    }
    r.d = F16ToF32(b.d);
  } else if (t == DType::kQ4_K || t == DType::kQ5_K) {
    const uint8_t* scales = p + 4;
    const uint8_t* qh = p + 16;
    const uint8_t* qs = t == DType::kQ4_K ? p + 16 : p + 48;
    for (int e = 0; e < 256; ++e) {
      const uint8_t q = qs[32 * (e / 64) + e % 32];
      r.v[e] = (e % 64) < 32 ? (q & 0xF) : (q >> 4);
      if (t == DType::kQ5_K) r.v[e] += ((qh[e % 32] >> (e / 32)) & 1) << 4;
      uint8_t sc, m;
      GetScaleMinK4(e / 32, scales, &sc, &m);
      r.s[e] = sc;
      r.mins[e / 32] = m;
    }
    uint16_t h[2];
    std::memcpy(h, p, 4);
    r.d = F16ToF32(h[0]);
    r.dmin = F16ToF32(h[1]);
  } else if (t == DType::kQ6_K) {
    BlockQ6_K b;
    std::memcpy(&b, p, sizeof b);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const uint8_t ql = b.ql[64 * h + 32 * (k % 2) + l];
      const int lo = k < 2 ? (ql & 0xF) : (ql >> 4);
      r.v[e] = lo | (((b.qh[32 * h + l] >> (2 * k)) & 3) << 4);  // unsigned 0..63 (AVX2 form)
      r.s[e] = b.scales[e / 16];
    }
    r.d = F16ToF32(b.d);
  } else {  // IQ4_XS
    BlockIQ4_XS b;
    std::memcpy(&b, p, sizeof b);
    for (int e = 0; e < 256; ++e) {
      const int sb = e / 32, j = e % 32;
      const uint8_t q = b.qs[16 * sb + j % 16];
      r.v[e] = kIq4NlValues[j < 16 ? (q & 0xF) : (q >> 4)];
      r.s[e] =
          (((b.scales_l[sb / 2] >> (4 * (sb % 2))) & 0xF) | (((b.scales_h >> (2 * sb)) & 3) << 4)) -
          32;
    }
    r.d = F16ToF32(b.d);
  }
  return r;
}

// ggml's hsum_float_8 on 8 lanes.
float HSum8(const float* a) {
  float s[4];
  for (int i = 0; i < 4; ++i) s[i] = a[i + 4] + a[i];
  const float p0 = s[0] + s[2], p1 = s[1] + s[3];
  return p0 + p1;
}

// The model of ggml_vec_dot_<t>_q8_K (x86 AVX2) for one weight row.
float ModelDotK(DType t, const uint8_t* row, const int8_t* q, const float* kd, const int16_t* bsum,
                int64_t nkb) {
  const size_t bb = GetDTypeTraits(static_cast<uint32_t>(t))->block_bytes;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, acc_m[4] = {0, 0, 0, 0}, summs = 0;
  for (int64_t i = 0; i < nkb; ++i) {
    const Decoded w = DecodeK(t, row + i * bb);
    const int8_t* qb = q + 256 * i;
    const int16_t* bs = bsum + 16 * i;
    int64_t lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int e = 0; e < 256; ++e) lane[(e % 32) / 4] += int64_t{w.s[e]} * w.v[e] * qb[e];
    const float yd = kd[i];
    if (t == DType::kQ6_K) {
      for (int l = 0; l < 8; ++l)
        lane[l] -=
            32 * (int64_t{bs[2 * l]} * w.s[32 * l] + int64_t{bs[2 * l + 1]} * w.s[32 * l + 16]);
    }
    if (t == DType::kQ2_K) {
      const float dmin = -yd * w.dmin;
      for (int l = 0; l < 8; ++l) {
        const int64_t m =
            int64_t{w.mins[2 * l]} * bs[2 * l] + int64_t{w.mins[2 * l + 1]} * bs[2 * l + 1];
        acc[l] = std::fma(dmin, static_cast<float>(m), acc[l]);
      }
    }
    if (t == DType::kQ4_K || t == DType::kQ5_K) {
      const float dmin = -yd * w.dmin;
      int64_t total = 0;
      for (int k = 0; k < 4; ++k) {
        const int64_t m = int64_t{w.mins[2 * k]} * (bs[4 * k] + bs[4 * k + 1]) +
                          int64_t{w.mins[2 * k + 1]} * (bs[4 * k + 2] + bs[4 * k + 3]);
        acc_m[k] = std::fma(dmin, static_cast<float>(m), acc_m[k]);
        total += m;
      }
      if (t == DType::kQ5_K) summs = std::fma(dmin, static_cast<float>(total), summs);
    }
    const float d = t == DType::kIQ4_XS ? w.d * yd : yd * w.d;
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(d, static_cast<float>(lane[l]), acc[l]);
  }
  const float h = HSum8(acc);
  if (t == DType::kQ4_K) return h + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
  if (t == DType::kQ5_K) return h + summs;
  return h;
}

TEST(KQuantTest, Q8KQuantizerFollowsItsDefinition) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  const int64_t n = 256 * 5;
  std::vector<float> x = RandomVector(rng, n);
  for (int j = 0; j < 256; ++j) x[256 * 3 + j] = 0.0f;  // an all-zero block
  x[256 * 4 + 17] = -7.0f;                              // a negative max
  std::vector<int8_t> q(n);
  std::vector<float> d(n / 256);
  std::vector<int16_t> bsum(n / 16);
  qmm::QuantizeRowQ8K(x.data(), n, q.data(), d.data(), bsum.data());
  for (int64_t b = 0; b < n / 256; ++b) {
    float max = 0, amax = 0;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(x[256 * b + j]) > amax) {
        amax = std::fabs(x[256 * b + j]);
        max = x[256 * b + j];
      }
    }
    if (amax == 0) {
      EXPECT_EQ(d[b], 0.0f);
      for (int j = 0; j < 256; ++j) EXPECT_EQ(q[256 * b + j], 0);
      continue;
    }
    const float iscale = -127.0f / max;
    EXPECT_EQ(d[b], 1.0f / iscale) << "block " << b;
    for (int j = 0; j < 256; ++j) {
      const float p = iscale * x[256 * b + j];
      const double r = std::nearbyint(static_cast<double>(p));  // half to even
      ASSERT_EQ(q[256 * b + j], static_cast<int8_t>(std::min(127.0, r))) << b << " " << j;
      ASSERT_LE(std::abs(q[256 * b + j]), 127);
    }
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += q[256 * b + 16 * g + j];
      EXPECT_EQ(bsum[16 * b + g], s);
    }
  }
  // iscale = -127 / max: the largest element always gets q = -127, and d has
  // the opposite sign of max (here max = -7: d = 7 / 127 > 0).
  EXPECT_EQ(q[256 * 4 + 17], -127);
  EXPECT_GT(d[4], 0.0f);
  // Non-finite input: NaN scale (outputs become NaN), no garbage quants.
  x[5] = INFINITY;
  qmm::QuantizeRowQ8K(x.data(), n, q.data(), d.data(), bsum.data());
  EXPECT_TRUE(std::isnan(d[0]));
}

// The model of llama.cpp's tiled K-quant matmul (ggml-cpu/tiled/, products of
// 8+ activation rows) for one weight row: per block the exact integer sums
// S1 (scale x value x q; Q6_K's values offset by 32 taken out through the
// bsums) and S2 (mins x bsums), then t = float(S1) * d_w, t = fma(-dmin_w,
// float(S2), t), acc = fma(t, d_x, acc).
float ModelTiledDotK(DType t, const uint8_t* row, const int8_t* q, const float* kd,
                     const int16_t* bsum, int64_t nkb) {
  const size_t bb = GetDTypeTraits(static_cast<uint32_t>(t))->block_bytes;
  float acc = 0.0f;
  for (int64_t i = 0; i < nkb; ++i) {
    const Decoded w = DecodeK(t, row + i * bb);
    const int8_t* qb = q + 256 * i;
    const int16_t* bs = bsum + 16 * i;
    int64_t s1 = 0, s2 = 0;
    for (int e = 0; e < 256; ++e) s1 += int64_t{w.s[e]} * w.v[e] * qb[e];
    if (t == DType::kQ6_K) {
      for (int j = 0; j < 16; ++j) s1 -= 32 * int64_t{w.s[16 * j]} * bs[j];
    }
    if (t == DType::kQ2_K) {
      for (int j = 0; j < 16; ++j) s2 += int64_t{w.mins[j]} * bs[j];
    }
    if (t == DType::kQ4_K || t == DType::kQ5_K) {
      for (int j = 0; j < 16; ++j) s2 += int64_t{w.mins[j / 2]} * bs[j];
    }
    float r = static_cast<float>(s1) * w.d;
    if (t == DType::kQ2_K || t == DType::kQ4_K || t == DType::kQ5_K) {
      r = std::fma(-w.dmin, static_cast<float>(s2), r);
    }
    acc = std::fma(r, kd[i], acc);
  }
  return acc;
}

// AVX2 kernels (one row and batches) against the model above, bit for bit.
TEST(KQuantTest, Avx2EqualsGgmlX86OrderBitForBit) {
  if (DetectSimdLevel() == SimdLevel::kScalar) GTEST_SKIP() << "no AVX2 on this CPU";
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (SimdLevel level : testing_util::SupportedLevels()) {
    if (level == SimdLevel::kScalar) continue;
    SetSimdLevelForTesting(level);
    for (DType t :
         {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS}) {
      SCOPED_TRACE(std::string(SimdLevelName(level)) + " " + Name(t));
      const int64_t n_in = 256 * 3, n_out = 19;
      const size_t rb = *RowBytes(t, n_in);
      const std::vector<uint8_t> w = RandomWeights(rng, t, n_out, n_in, rb);
      for (int64_t n_rows : {1, 5}) {
        const std::vector<float> x = RandomVector(rng, n_rows * n_in);
        std::vector<float> y(n_rows * n_out);
        ASSERT_TRUE(QuantMatMul(t, w.data(), rb, n_out, n_in, x.data(), n_in, n_rows, y.data(),
                                n_out, nullptr)
                        .ok());
        for (int64_t r = 0; r < n_rows; ++r) {
          std::vector<int8_t> q(n_in);
          std::vector<float> d(n_in / 256);
          std::vector<int16_t> bs(n_in / 16);
          qmm::QuantizeRowQ8K(x.data() + r * n_in, n_in, q.data(), d.data(), bs.data());
          for (int64_t o = 0; o < n_out; ++o) {
            const float want =
                ModelDotK(t, w.data() + o * rb, q.data(), d.data(), bs.data(), n_in / 256);
            ASSERT_EQ(y[r * n_out + o], want) << "r=" << r << " o=" << o;
          }
        }
      }
    }
  }
}

// The AVX2 and AVX-512 Q8_K quantizers against the scalar one (ggml's
// quantize_row_q8_K_ref), bytes, scales and sums bit for bit: random rows at
// scales 1e-3 .. 1e3, ties for the largest |x| (+a before -a and the
// reverse: the first one sets the sign of d), an all-zero block, a block
// whose only non-zero is tiny, and inf / NaN blocks.
TEST(KQuantTest, SimdQ8KQuantizersEqualScalarBitForBit) {
  if (DetectSimdLevel() == SimdLevel::kScalar) GTEST_SKIP() << "no AVX2 on this CPU";
  const bool avx512 = DetectSimdLevel() == SimdLevel::kAvx512;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t nb = 1 + trial % 7;
    const int64_t n = 256 * nb;
    const float scale = std::pow(10.0f, static_cast<float>(trial % 7) - 3.0f);
    std::vector<float> x = RandomVector(rng, n, 0.0f, scale);
    const int64_t b = static_cast<int64_t>(rng() % nb);
    switch (trial % 8) {
      case 1:  // tie, positive first
        x[256 * b + 3] = 2 * scale;
        x[256 * b + 200] = -2 * scale;
        break;
      case 2:  // tie, negative first
        x[256 * b + 17] = -2 * scale;
        x[256 * b + 18] = 2 * scale;
        break;
      case 3:
        for (int j = 0; j < 256; ++j) x[256 * b + j] = 0.0f;
        break;
      case 4:
        for (int j = 0; j < 256; ++j) x[256 * b + j] = j == 77 ? -1e-30f : 0.0f;
        break;
      case 5:
        x[256 * b + 255] = (rng() & 1) ? INFINITY : -INFINITY;
        break;
      case 6:
        x[256 * b + 128] = std::nanf("");
        break;
      default:
        break;
    }
    std::vector<int8_t> q0(n), q1(n);
    std::vector<float> d0(nb), d1(nb);
    std::vector<int16_t> s0(n / 16), s1(n / 16);
    qmm::QuantizeRowQ8K(x.data(), n, q0.data(), d0.data(), s0.data());
    for (int level = 0; level < (avx512 ? 2 : 1); ++level) {
      SCOPED_TRACE(level == 0 ? "avx2" : "avx512");
      std::fill(q1.begin(), q1.end(), int8_t{99});
      std::fill(s1.begin(), s1.end(), int16_t{999});
      if (level == 0) {
        qmm::QuantizeRowQ8KAvx2(x.data(), n, q1.data(), d1.data(), s1.data());
      } else {
        qmm::QuantizeRowQ8KAvx512(x.data(), n, q1.data(), d1.data(), s1.data());
      }
      ASSERT_EQ(q0, q1) << "trial " << trial;
      ASSERT_EQ(s0, s1) << "trial " << trial;
      for (int64_t i = 0; i < nb; ++i) {
        uint32_t a, c;
        std::memcpy(&a, &d0[i], 4);
        std::memcpy(&c, &d1[i], 4);
        if (std::isnan(d0[i])) {
          ASSERT_TRUE(std::isnan(d1[i])) << "trial " << trial << " block " << i;
        } else {
          ASSERT_EQ(a, c) << "trial " << trial << " block " << i;
        }
      }
    }
  }
}

// The AVX-512 kernels (Q4_K, Q5_K, Q6_K: their own; the other Q8_K types: the
// AVX2 ones) give the AVX2 level's outputs bit for bit: one row (2 weight
// rows per step plus an odd tail, tasks starting at multiples of 16) and
// batches of 2, 3 and 33 rows (more than one 32-row pass), odd block counts.
TEST(KQuantTest, Avx512EqualsAvx2BitForBit) {
  if (DetectSimdLevel() != SimdLevel::kAvx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (DType t :
       {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS}) {
    for (int64_t n_in : {256, 256 * 5}) {
      SCOPED_TRACE(Name(t) + " n_in=" + std::to_string(n_in));
      const int64_t n_out = 37;
      const size_t rb = *RowBytes(t, n_in);
      const std::vector<uint8_t> w = RandomWeights(rng, t, n_out, n_in, rb);
      for (int64_t n_rows : {1, 2, 3, 33}) {
        std::vector<float> x = RandomVector(rng, n_rows * n_in, 0.0f, 3.0f);
        std::vector<float> y2(n_rows * n_out), y5(n_rows * n_out);
        SetSimdLevelForTesting(SimdLevel::kAvx2);
        ASSERT_TRUE(QuantMatMul(t, w.data(), rb, n_out, n_in, x.data(), n_in, n_rows, y2.data(),
                                n_out, nullptr)
                        .ok());
        SetSimdLevelForTesting(SimdLevel::kAvx512);
        ASSERT_TRUE(QuantMatMul(t, w.data(), rb, n_out, n_in, x.data(), n_in, n_rows, y5.data(),
                                n_out, nullptr)
                        .ok());
        for (int64_t i = 0; i < n_rows * n_out; ++i) {
          uint32_t a, c;
          std::memcpy(&a, &y2[i], 4);
          std::memcpy(&c, &y5[i], 4);
          ASSERT_EQ(a, c) << "rows=" << n_rows << " i=" << i << " " << y2[i] << " vs " << y5[i];
        }
      }
    }
  }
}

// Products of 8+ rows at every level (scalar too) against the tiled model,
// bit for bit: 8 rows (the threshold), 9, and 41 (a 32-row pass plus 9),
// odd block counts, with and without a thread pool; 7 rows and a
// batch-invariant product of 8 rows keep the vec_dot order (AVX2 model).
TEST(KQuantTest, TiledOrderForEightOrMoreRowsAtEveryLevel) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ThreadPool pool(3);
  for (SimdLevel level : testing_util::SupportedLevels()) {
    SetSimdLevelForTesting(level);
    for (DType t :
         {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS}) {
      for (int64_t n_in : {256, 256 * 3}) {
        SCOPED_TRACE(std::string(SimdLevelName(level)) + " " + Name(t) +
                     " n_in=" + std::to_string(n_in));
        const int64_t n_out = 37;
        const size_t rb = *RowBytes(t, n_in);
        const std::vector<uint8_t> w = RandomWeights(rng, t, n_out, n_in, rb);
        for (int64_t n_rows : {7, 8, 9, 41}) {
          for (bool invariant : {false, true}) {
            if (invariant && n_rows != 8) continue;
            const std::vector<float> x = RandomVector(rng, n_rows * n_in, 0.0f, 3.0f);
            std::vector<float> y(n_rows * n_out);
            ASSERT_TRUE(QuantMatMul(t, w.data(), rb, n_out, n_in, x.data(), n_in, n_rows, y.data(),
                                    n_out, n_rows == 41 ? &pool : nullptr, invariant)
                            .ok());
            const bool tiled = n_rows >= 8 && !invariant;
            // The vec_dot order's model is the x86 one (the scalar level
            // follows ggml's generic order there: not checked here).
            if (!tiled && level == SimdLevel::kScalar) continue;
            for (int64_t r = 0; r < n_rows; ++r) {
              std::vector<int8_t> q(n_in);
              std::vector<float> d(n_in / 256);
              std::vector<int16_t> bs(n_in / 16);
              qmm::QuantizeRowQ8K(x.data() + r * n_in, n_in, q.data(), d.data(), bs.data());
              for (int64_t o = 0; o < n_out; ++o) {
                const uint8_t* row = w.data() + o * rb;
                const float want =
                    tiled ? ModelTiledDotK(t, row, q.data(), d.data(), bs.data(), n_in / 256)
                          : ModelDotK(t, row, q.data(), d.data(), bs.data(), n_in / 256);
                uint32_t a, c;
                std::memcpy(&a, &y[r * n_out + o], 4);
                std::memcpy(&c, &want, 4);
                ASSERT_EQ(a, c) << "rows=" << n_rows << " invariant=" << invariant << " r=" << r
                                << " o=" << o << " " << y[r * n_out + o] << " vs " << want;
              }
            }
          }
        }
      }
    }
  }
}

// Q4_K's and Q6_K's rows16 copies (AVX-512 without AMX, made at load) run
// their own kernels: the vec_dot order for 1-7 rows and batch-invariant
// products, the tiled order for 8+; each must give the GGUF rows' kernels'
// outputs bit for bit (those are checked against the models above). Partial
// groups of 16 weight rows, several chunks of blocks, partial bands of
// activation rows, one thread and several, and a batch large enough for
// Q6_K's copy to take the GGUF-row kernel.
TEST(KQuantTest, KRows16CopyGivesTheGgufRowsBits) {
  if (DetectSimdLevel() != SimdLevel::kAvx512) GTEST_SKIP() << "needs AVX-512";
  SimdLevelGuard guard;
  SetSimdLevelForTesting(SimdLevel::kAvx512);
  struct AmxOff {
    AmxOff() { SetAmxForTesting(false); }
    ~AmxOff() { SetAmxForTesting(std::nullopt); }
  } amx_off;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ThreadPool pool(3);
  for (DType t : {DType::kQ4_K, DType::kQ6_K})
  for (int64_t n_in : {256, 256 * 5}) {
    SCOPED_TRACE(Name(t));
    ASSERT_TRUE(QuantMatMulReadsRows16(t));
    for (int64_t n_out : {16, 37, 83}) {
      const size_t rb = *RowBytes(t, n_in);
      const std::vector<uint8_t> w = RandomWeights(rng, t, n_out, n_in, rb);
      const rows16::PackedBuffer packed = rows16::MakePacked(t, w.data(), rb, n_out, n_in, &pool);
      // (257 rows: Q6_K's copy then runs the GGUF-row kernel on rebuilt
      // blocks, qmm::kQ6KRows16MaxLanesRows.)
      for (int64_t n_rows : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{8}, int64_t{9},
                             int64_t{17}, int64_t{41}, qmm::kQ6KRows16MaxLanesRows + 1}) {
        for (bool invariant : {false, true}) {
          if (invariant && n_rows != 9) continue;
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            if (n_rows > 41 && (p == nullptr || n_out != 37)) continue;  // (time)
            SCOPED_TRACE("n_in=" + std::to_string(n_in) + " n_out=" + std::to_string(n_out) +
                         " n_rows=" + std::to_string(n_rows) +
                         " invariant=" + std::to_string(invariant) +
                         " threads=" + std::to_string(p != nullptr));
            const std::vector<float> x = RandomVector(rng, n_rows * n_in, 0.0f, 3.0f);
            std::vector<float> want(n_rows * n_out, NAN), got(n_rows * n_out, NAN);
            ASSERT_TRUE(QuantMatMul(t, w.data(), rb, n_out, n_in, x.data(), n_in, n_rows,
                                    want.data(), n_out, p, invariant)
                            .ok());
            QuantMatMulOutput out;
            out.wtype = t;
            out.W = w.data();
            out.row_bytes = rb;
            out.n_out = n_out;
            out.y = got.data();
            out.y_stride = static_cast<size_t>(n_out);
            out.packed = packed.data.get();
            ASSERT_TRUE(QuantMatMulShared(&out, 1, n_in, x.data(), n_in, n_rows, p, invariant).ok());
            for (size_t i = 0; i < want.size(); ++i) {
              uint32_t a, b;
              std::memcpy(&a, &got[i], 4);
              std::memcpy(&b, &want[i], 4);
              ASSERT_EQ(a, b) << "output " << i << ": " << got[i] << " vs " << want[i];
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace llm
