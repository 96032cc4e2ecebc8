// float64 scalar reference kernels: the test oracle for backend/cpu (never
// linked into libllm). Straightforward loops in double, no tricks, so that a
// reader can check them against the math at a glance.
#pragma once

#include <cstdint>
#include <vector>

namespace llm {
namespace ref {

// y[r][o] = sum_i w[o][i] * x[r][i]. w: [n_out][n_in], x: [n_rows][n_in],
// y: [n_rows][n_out] (all dense). Also returns, if abs_sum is non-null,
// abs_sum[r][o] = sum_i |w[o][i] * x[r][i]| (the scale tolerances refer to).
void RefMatMul(const double* w, const double* x, int64_t n_out, int64_t n_in, int64_t n_rows,
               double* y, double* abs_sum);

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i].
void RefRmsNorm(const double* x, const double* weight, int64_t n, double eps, double* out);

// Rotary embedding in place on x [n_heads][head_dim]; see backend/cpu/ops.h.
void RefRope(double* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, int64_t pos,
             double freq_base, bool neox);

// RefRope with rope_ext scaling: theta_i = freq_scale * pos * base^(-2i/d) /
// factors[i] (factors may be null: 1), rotation scaled by attn_factor.
void RefRopeScaled(double* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, int64_t pos,
                   double freq_base, bool neox, double freq_scale, const double* factors,
                   double attn_factor);

// out[i] = gelu(gate[i]) * up[i], gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void RefGeGlu(const double* gate, const double* up, int64_t n, double* out);

// out[i] = gate[i] / (1 + exp(-gate[i])) * up[i].
void RefSwiGlu(const double* gate, const double* up, int64_t n, double* out);

// In-place softmax.
void RefSoftmax(double* x, int64_t n);

// Causal GQA attention; layouts as backend/cpu/attention.h with dense KV:
// q [n_q][n_head][head_dim], k/v [n_kv][n_head_kv][head_dim] (n_kv >= pos0+n_q),
// out [n_q][n_head][head_dim]. If abs_out is non-null it receives
// sum_p softmax_p * |v_p[d]| per output element (a scale for tolerances).
// window > 0: sliding-window attention, llama.cpp's mask (is_masked_swa,
// LLAMA_SWA_TYPE_STANDARD): key position p0 is masked for the query at p1
// when p1 - p0 >= window, so a query sees window keys at most.
void RefAttention(const double* q, int64_t n_q, int64_t n_head, int64_t pos0, const double* k,
                  const double* v, int64_t n_head_kv, int64_t head_dim, double* out,
                  double* abs_out, int64_t window = 0);

// RefAttention with a score scale (0: 1 / sqrt(head_dim)), soft-capping
// (softcap > 0: s = softcap * tanh(s / softcap)) and a sliding window
// (window > 0: query at position p sees [p - window + 1, p]).
void RefAttentionSpec(const double* q, int64_t n_q, int64_t n_head, int64_t pos0, const double* k,
                      const double* v, int64_t n_head_kv, int64_t head_dim, double scale,
                      double softcap, int64_t window, double* out);

}  // namespace ref
}  // namespace llm
