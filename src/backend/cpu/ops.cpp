#include "backend/cpu/ops.h"

#include <algorithm>
#include <cmath>

namespace llm {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  if (n <= 0) return;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

void RopeInPlace(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, int64_t pos,
                 float freq_base, bool neox) {
  rope_dims = std::min(rope_dims, head_dim) & ~int64_t{1};
  if (rope_dims <= 0 || n_heads <= 0) return;
  const int64_t half = rope_dims / 2;
  // cos/sin per pair, shared by all heads; a table on the stack for the usual
  // sizes, recomputed per head beyond that (no allocation).
  constexpr int64_t kTable = 256;
  float cos_t[kTable], sin_t[kTable];
  const bool use_table = half <= kTable;
  auto angle = [&](int64_t i) {
    return static_cast<double>(pos) *
           std::pow(static_cast<double>(freq_base), -2.0 * static_cast<double>(i) / rope_dims);
  };
  if (use_table) {
    for (int64_t i = 0; i < half; ++i) {
      const double th = angle(i);
      cos_t[i] = static_cast<float>(std::cos(th));
      sin_t[i] = static_cast<float>(std::sin(th));
    }
  }
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      float c, s;
      if (use_table) {
        c = cos_t[i];
        s = sin_t[i];
      } else {
        const double th = angle(i);
        c = static_cast<float>(std::cos(th));
        s = static_cast<float>(std::sin(th));
      }
      const int64_t i0 = neox ? i : 2 * i;
      const int64_t i1 = neox ? i + half : 2 * i + 1;
      const float x0 = xh[i0], x1 = xh[i1];
      xh[i0] = x0 * c - x1 * s;
      xh[i1] = x0 * s + x1 * c;
    }
  }
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
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
