#include "kernels/cpu/ref/reference_kernels.h"

#include <algorithm>
#include <cmath>

namespace llm {
namespace ref {

void RefMatMul(const double* w, const double* x, int64_t n_out, int64_t n_in, int64_t n_rows,
               double* y, double* abs_sum) {
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t o = 0; o < n_out; ++o) {
      double s = 0.0, a = 0.0;
      for (int64_t i = 0; i < n_in; ++i) {
        const double p = w[o * n_in + i] * x[r * n_in + i];
        s += p;
        a += std::fabs(p);
      }
      y[r * n_out + o] = s;
      if (abs_sum != nullptr) abs_sum[r * n_out + o] = a;
    }
  }
}

void RefRmsNorm(const double* x, const double* weight, int64_t n, double eps, double* out) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void RefRope(double* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, int64_t pos,
             double freq_base, bool neox) {
  const int64_t half = rope_dims / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    double* xh = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const double theta = static_cast<double>(pos) * std::pow(freq_base, -2.0 * i / rope_dims);
      const int64_t i0 = neox ? i : 2 * i;
      const int64_t i1 = neox ? i + half : 2 * i + 1;
      const double x0 = xh[i0], x1 = xh[i1];
      xh[i0] = x0 * std::cos(theta) - x1 * std::sin(theta);
      xh[i1] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
  }
}

void RefRopeScaled(double* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, int64_t pos,
                   double freq_base, bool neox, double freq_scale, const double* factors,
                   double attn_factor) {
  const int64_t half = rope_dims / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    double* xh = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const double ff = factors != nullptr ? factors[i] : 1.0;
      const double theta = freq_scale * static_cast<double>(pos) *
                           std::pow(freq_base, -2.0 * i / rope_dims) / ff;
      const double c = std::cos(theta) * attn_factor, sn = std::sin(theta) * attn_factor;
      const int64_t i0 = neox ? i : 2 * i;
      const int64_t i1 = neox ? i + half : 2 * i + 1;
      const double x0 = xh[i0], x1 = xh[i1];
      xh[i0] = x0 * c - x1 * sn;
      xh[i1] = x0 * sn + x1 * c;
    }
  }
}

void RefGeGlu(const double* gate, const double* up, int64_t n, double* out) {
  const double k = std::sqrt(2.0 / std::acos(-1.0));
  for (int64_t i = 0; i < n; ++i) {
    const double x = gate[i];
    out[i] = 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x))) * up[i];
  }
}

void RefSwiGlu(const double* gate, const double* up, int64_t n, double* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
}

void RefSoftmax(double* x, int64_t n) {
  double mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - mx);
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i] - mx) / sum;
}

void RefAttention(const double* q, int64_t n_q, int64_t n_head, int64_t pos0, const double* k,
                  const double* v, int64_t n_head_kv, int64_t head_dim, double* out,
                  double* abs_out, int64_t window) {
  const int64_t group = n_head / n_head_kv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  for (int64_t t = 0; t < n_q; ++t) {
    const int64_t n_kv = pos0 + t + 1;
    for (int64_t h = 0; h < n_head; ++h) {
      const int64_t g = h / group;
      const double* qh = q + (t * n_head + h) * head_dim;
      std::vector<double> s(static_cast<size_t>(n_kv));
      for (int64_t p = 0; p < n_kv; ++p) {
        const double* kp = k + (p * n_head_kv + g) * head_dim;
        double d = 0.0;
        for (int64_t i = 0; i < head_dim; ++i) d += qh[i] * kp[i];
        s[static_cast<size_t>(p)] = d * scale;
        const int64_t p1 = pos0 + t;  // the query's position
        if (window > 0 && p1 - p >= window) s[static_cast<size_t>(p)] = -INFINITY;
      }
      RefSoftmax(s.data(), n_kv);
      double* oh = out + (t * n_head + h) * head_dim;
      for (int64_t i = 0; i < head_dim; ++i) {
        double acc = 0.0, aacc = 0.0;
        for (int64_t p = 0; p < n_kv; ++p) {
          const double vv = v[(p * n_head_kv + g) * head_dim + i];
          acc += s[static_cast<size_t>(p)] * vv;
          aacc += s[static_cast<size_t>(p)] * std::fabs(vv);
        }
        oh[i] = acc;
        if (abs_out != nullptr) abs_out[(t * n_head + h) * head_dim + i] = aacc;
      }
    }
  }
}

void RefAttentionSpec(const double* q, int64_t n_q, int64_t n_head, int64_t pos0, const double* k,
                      const double* v, int64_t n_head_kv, int64_t head_dim, double scale,
                      double softcap, int64_t window, double* out) {
  const int64_t group = n_head / n_head_kv;
  if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  for (int64_t t = 0; t < n_q; ++t) {
    const int64_t p_end = pos0 + t + 1;
    const int64_t p_first = window > 0 ? std::max<int64_t>(0, p_end - window) : 0;
    const int64_t n = p_end - p_first;
    for (int64_t h = 0; h < n_head; ++h) {
      const int64_t g = h / group;
      const double* qh = q + (t * n_head + h) * head_dim;
      std::vector<double> s(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) {
        const double* kp = k + ((p_first + j) * n_head_kv + g) * head_dim;
        double d = 0.0;
        for (int64_t i = 0; i < head_dim; ++i) d += qh[i] * kp[i];
        d *= scale;
        if (softcap > 0.0) d = softcap * std::tanh(d / softcap);
        s[static_cast<size_t>(j)] = d;
      }
      RefSoftmax(s.data(), n);
      double* oh = out + (t * n_head + h) * head_dim;
      for (int64_t i = 0; i < head_dim; ++i) {
        double acc = 0.0;
        for (int64_t j = 0; j < n; ++j) {
          acc += s[static_cast<size_t>(j)] * v[((p_first + j) * n_head_kv + g) * head_dim + i];
        }
        oh[i] = acc;
      }
    }
  }
}

}  // namespace ref
}  // namespace llm
