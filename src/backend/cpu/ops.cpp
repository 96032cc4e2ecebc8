#include "backend/cpu/ops.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/ops_kernels.h"

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

// Angles as ggml-cpu computes them (ggml_rope_cache_init, normal and neox
// modes without YaRN / frequency factors): theta_scale = powf(base,
// -2/rope_dims) in f32, theta starts at (float)pos and is multiplied by
// theta_scale once per pair in f32, cos/sin are cosf/sinf. The iterated
// product drifts from the exact angle pos * base^(-2i/d) (~1e-4 rad at
// position 80), but reproducing llama.cpp's angles exactly is what keeps
// sensitive models' logits within 0.1 of it. The rotation likewise uses
// ggml's (compiled) rounding points: x0*c - x1*s = fma(x0, c, -(x1*s)).
void RopeInPlace(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, int64_t pos,
                 float freq_base, bool neox) {
  rope_dims = std::min(rope_dims, head_dim) & ~int64_t{1};
  if (rope_dims <= 0 || n_heads <= 0) return;
  const int64_t half = rope_dims / 2;
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(rope_dims));
  // cos/sin per pair, shared by all heads; a table on the stack for the usual
  // sizes, recomputed per head beyond that (no allocation).
  constexpr int64_t kTable = 256;
  float cos_t[kTable], sin_t[kTable];
  const bool use_table = half <= kTable;
  if (use_table) {
    float theta = static_cast<float>(pos);
    for (int64_t i = 0; i < half; ++i) {
      cos_t[i] = std::cos(theta);
      sin_t[i] = std::sin(theta);
      theta *= theta_scale;
    }
  }
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;
    float theta = static_cast<float>(pos);
    for (int64_t i = 0; i < half; ++i) {
      float c, s;
      if (use_table) {
        c = cos_t[i];
        s = sin_t[i];
      } else {
        c = std::cos(theta);
        s = std::sin(theta);
        theta *= theta_scale;
      }
      const int64_t i0 = neox ? i : 2 * i;
      const int64_t i1 = neox ? i + half : 2 * i + 1;
      const float x0 = xh[i0], x1 = xh[i1];
      // As ggml's compiled rotate_pairs (GCC contracts to vfmsub/vfmadd):
      // one product rounded, the other fused.
      xh[i0] = std::fma(x0, c, -(x1 * s));
      xh[i1] = std::fma(x0, s, x1 * c);
    }
  }
}

// On AVX-512 machines the bulk goes through ggml's vectorized silu (its own
// expf polynomial) so the results are llama.cpp's bit for bit; the tail and
// other machines use ggml's scalar formula x / (1 + expf(-x)) * up.
void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i0 = 0;
  if (n >= 16 && ActiveSimdLevel() == SimdLevel::kAvx512) {
    i0 = ops_kernels::SwiGluAvx512(gate, up, n, out);
  }
  for (int64_t i = i0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
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
