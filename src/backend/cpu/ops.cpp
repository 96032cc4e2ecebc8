#include "backend/cpu/ops.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/ops_kernels.h"
#include "core/half.h"

namespace llm {

// ggml-cpu's rms_norm_f32 rounding points: squares in f32, summed in double,
// mean rounded to f32, scale = 1 / sqrtf(mean + eps) in f32, y = x * scale,
// then (llama.cpp's separate ggml_mul) y * weight.
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  if (n <= 0) return;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

void RmsNormRows(const float* x, const float* weight, int64_t n_rows, int64_t n, float eps,
                 float* out) {
  if (n <= 0) return;
  constexpr int kChains = 8;
  int64_t r = 0;
  for (; r + kChains <= n_rows; r += kChains) {
    const float* xr = x + r * n;
    double sum[kChains] = {};
    for (int64_t i = 0; i < n; ++i) {
      for (int k = 0; k < kChains; ++k) {
        const float v = xr[k * n + i];
        sum[k] += static_cast<double>(v * v);
      }
    }
    for (int k = 0; k < kChains; ++k) {
      const float mean = static_cast<float>(sum[k] / static_cast<double>(n));
      const float scale = 1.0f / std::sqrt(mean + eps);
      const float* xk = xr + k * n;
      float* yk = out + (r + k) * n;
      for (int64_t i = 0; i < n; ++i) yk[i] = (xk[i] * scale) * weight[i];
    }
  }
  for (; r < n_rows; ++r) RmsNorm(x + r * n, weight, n, eps, out + r * n);
}

// Angles as ggml-cpu computes them (ggml_rope_cache_init, normal and neox
// modes without YaRN / frequency factors): theta_scale = powf(base,
// -2/rope_dims) in f32, theta starts at (float)pos and is multiplied by
// theta_scale once per pair in f32, cos/sin are cosf/sinf. The iterated
// product drifts from the exact angle pos * base^(-2i/d) (~1e-4 rad at
// position 80), but reproducing llama.cpp's angles exactly is what keeps
// sensitive models' logits within 0.1 of it. The rotation likewise uses
// ggml's (compiled) rounding points: x0*c - x1*s = fma(x0, c, -(x1*s)).
int64_t RopePairs(int64_t head_dim, int64_t rope_dims) {
  return std::max<int64_t>(0, std::min(rope_dims, head_dim) & ~int64_t{1}) / 2;
}

void RopeAngles(int64_t pos, int64_t head_dim, int64_t rope_dims, float freq_base, float* cos_out,
                float* sin_out) {
  const int64_t half = RopePairs(head_dim, rope_dims);
  if (half == 0) return;
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(2 * half));
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < half; ++i) {
    cos_out[i] = std::cos(theta);
    sin_out[i] = std::sin(theta);
    theta *= theta_scale;
  }
}

// ggml_rope_cache_init + rope_yarn with ext_factor 0: the factor divides the
// unscaled angle, freq_scale multiplies the result, attn_factor (mscale)
// multiplies cos and sin.
void RopeAnglesScaled(int64_t pos, int64_t head_dim, int64_t rope_dims, float freq_base,
                      float freq_scale, const float* factors, float attn_factor, float* cos_out,
                      float* sin_out) {
  const int64_t half = RopePairs(head_dim, rope_dims);
  if (half == 0) return;
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(2 * half));
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < half; ++i) {
    const float ff = factors != nullptr ? factors[i] : 1.0f;
    const float t = freq_scale * (theta / ff);
    cos_out[i] = std::cos(t) * attn_factor;
    sin_out[i] = std::sin(t) * attn_factor;
    theta *= theta_scale;
  }
}

void RopeApply(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, const float* cos,
               const float* sin, bool neox) {
  const int64_t half = RopePairs(head_dim, rope_dims);
  if (half == 0 || n_heads <= 0) return;
  int64_t done = 0;  // pairs per head rotated by the AVX-512 body
  if (ActiveSimdLevel() == SimdLevel::kAvx512) {
    done = ops_kernels::RopeApplyAvx512(x, n_heads, head_dim, half, cos, sin, neox);
  }
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;
    for (int64_t i = done; i < half; ++i) {
      const int64_t i0 = neox ? i : 2 * i;
      const int64_t i1 = neox ? i + half : 2 * i + 1;
      const float x0 = xh[i0], x1 = xh[i1];
      // As ggml's compiled rotate_pairs (GCC contracts to vfmsub/vfmadd):
      // one product rounded, the other fused.
      xh[i0] = std::fma(x0, cos[i], -(x1 * sin[i]));
      xh[i1] = std::fma(x0, sin[i], x1 * cos[i]);
    }
  }
}

void RopeInPlace(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, int64_t pos,
                 float freq_base, bool neox) {
  constexpr int64_t kTable = 256;  // on the stack: up to 512 rotated dims
  const int64_t half = RopePairs(head_dim, rope_dims);
  if (half <= kTable) {
    float cos_t[kTable], sin_t[kTable];
    RopeAngles(pos, head_dim, rope_dims, freq_base, cos_t, sin_t);
    RopeApply(x, n_heads, head_dim, rope_dims, cos_t, sin_t, neox);
    return;
  }
  // Wider (no known model): the same angles recomputed per head, so that
  // nothing is allocated.
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(2 * half));
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;
    float theta = static_cast<float>(pos);
    for (int64_t i = 0; i < half; ++i) {
      const float c = std::cos(theta), s = std::sin(theta);
      theta *= theta_scale;
      const int64_t i0 = neox ? i : 2 * i;
      const int64_t i1 = neox ? i + half : 2 * i + 1;
      const float x0 = xh[i0], x1 = xh[i1];
      xh[i0] = std::fma(x0, c, -(x1 * s));
      xh[i1] = std::fma(x0, s, x1 * c);
    }
  }
}

void F32ToF16Row(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  const SimdLevel level = ActiveSimdLevel();
  if (level == SimdLevel::kAvx512) {
    i = ops_kernels::F32ToF16RowAvx512(x, n, out);
  } else if (level == SimdLevel::kAvx2) {
    i = ops_kernels::F32ToF16RowAvx2(x, n, out);
  }
  for (; i < n; ++i) out[i] = F32ToF16(x[i]);
}

void F16ToF32Row(const uint16_t* h, int64_t n, float* out) {
  int64_t i = 0;
  const SimdLevel level = ActiveSimdLevel();
  if (level == SimdLevel::kAvx512) {
    i = ops_kernels::F16ToF32RowAvx512(h, n, out);
  } else if (level == SimdLevel::kAvx2) {
    i = ops_kernels::F16ToF32RowAvx2(h, n, out);
  }
  for (; i < n; ++i) out[i] = F16ToF32(h[i]);
}

void F32ToBF16Row(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  if (ActiveSimdLevel() == SimdLevel::kAvx512) i = ops_kernels::F32ToBF16RowAvx512(x, n, out);
  for (; i < n; ++i) out[i] = F32ToBF16(x[i]);
}

void F16ToBF16Row(const uint16_t* h, int64_t n, uint16_t* out) {
  int64_t i = 0;
  if (ActiveSimdLevel() == SimdLevel::kAvx512) i = ops_kernels::F16ToBF16RowAvx512(h, n, out);
  for (; i < n; ++i) out[i] = F32ToBF16(F16ToF32(h[i]));
}

void BF16ToF32Row(const uint16_t* h, int64_t n, float* out) {
  int64_t i = 0;
  const SimdLevel level = ActiveSimdLevel();
  if (level == SimdLevel::kAvx512) {
    i = ops_kernels::BF16ToF32RowAvx512(h, n, out);
  } else if (level == SimdLevel::kAvx2) {
    i = ops_kernels::BF16ToF32RowAvx2(h, n, out);
  }
  for (; i < n; ++i) out[i] = BF16ToF32(h[i]);
}

// At the AVX-512 and AVX2 levels the bulk goes through ggml's vectorized
// silu as llama.cpp built for that ISA runs it (16 or 8 lanes, each build's
// own expf reconstruction), so the results are that build's bit for bit;
// the tail and the scalar level use ggml's scalar formula
// x / (1 + expf(-x)) * up.
void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i0 = 0;
  const SimdLevel level = ActiveSimdLevel();
  if (level == SimdLevel::kAvx512) {
    i0 = ops_kernels::SwiGluAvx512(gate, up, n, out);
  } else if (level == SimdLevel::kAvx2) {
    i0 = ops_kernels::SwiGluAvx2(gate, up, n, out);
  }
  for (int64_t i = i0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void GeGlu(const float* gate, const float* up, int64_t n, float* out) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    float g;
    if (x <= -10.0f) {
      g = 0.0f;
    } else if (x >= 10.0f) {
      g = x;
    } else {
      // ggml's table entry for x's f16 value: gelu in f32, stored as f16.
      const float xh = F16ToF32(F32ToF16(x));
      const float gelu = 0.5f * xh * (1.0f + std::tanh(kSqrt2OverPi * xh * (1.0f + kCoefA * xh * xh)));
      g = F16ToF32(F32ToF16(gelu));
    }
    out[i] = g * up[i];
  }
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace llm
