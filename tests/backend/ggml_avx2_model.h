// Scalar, lane-by-lane models of the arithmetic llama.cpp's CPU backend
// (ggml-cpu 0.3.36 as vendored by llama-cpp-python) performs when it is built
// for AVX2 + FMA + F16C without AVX-512: the oracle of the bit-for-bit tests
// of the AVX2 kernels that claim to reproduce it (attention_avx2.cpp,
// ops_avx2.cpp). Written from ggml's source (vec.h, vec.cpp,
// simd-mappings.h, llamafile/sgemm.cpp), one lane at a time, with std::fma
// where ggml uses an FMA instruction, so that a kernel that vectorizes
// differently but computes the same roundings gives the same bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace llm {
namespace ggml_avx2_model {

inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ggml_v_expf, AVX2 branch, one lane (the vector version's fast path, taken
// when no lane has |n| > 126, computes the same fma(j, k, k) per lane).
inline float ExpF(float x) {
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const uint32_t e = Bits(z) << 23;
  const float k = FromBits(e + Bits(1.0f));
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, 0x1.ffffecp-1f * b);
  if (!(std::fabs(n) > 126.0f)) return std::fma(j, k, k);
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = FromBits(g + 0x7f000000u);
  const float s2 = FromBits(e - g);
  if (std::fabs(n) > 192.0f) return s1 * s1;
  return std::fma(s2, j, s2) * s1;
}

// llamafile's hsum(__m256), also ggml_vec_soft_max_f32's AVX2 group sum:
// t_i = x_{i+4} + x_i, then (t0 + t2) + (t1 + t3).
inline float HsumTiny(const float* x) {
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = x[i + 4] + x[i];
  return (t[0] + t[2]) + (t[1] + t[3]);
}

// GGML_F32x8_REDUCE for GGML_F32_ARR = 4 accumulators of 8 lanes:
// x = (acc0 + acc2) + (acc1 + acc3) per lane, t_i = x_i + x_{i+4},
// hadd, hadd: (t0 + t1) + (t2 + t3).
inline float Reduce4x8(const float acc[4][8]) {
  float x[8];
  for (int l = 0; l < 8; ++l) x[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = x[i] + x[i + 4];
  return (t[0] + t[1]) + (t[2] + t[3]);
}

// ggml_vec_swiglu_f32 (AVX2): 8 lanes of silu(x) * g with ggml_v_silu
// (x / (1 + ggml_v_expf(0 - x))), the tail with ggml_silu_f32's expf.
inline void SwiGlu(const float* x, const float* g, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int64_t l = i; l < i + 8; ++l) y[l] = x[l] / (1.0f + ExpF(0.0f - x[l])) * g[l];
  }
  for (; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i])) * g[i];
}

}  // namespace ggml_avx2_model
}  // namespace llm
