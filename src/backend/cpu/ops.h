// Small per-row CPU ops of the transformer block. Fixed-order scalar code
// (the compiler may vectorize independent lanes, never reassociate), so results
// are the same for every batch size and thread count. None allocates or throws.
#pragma once

#include <cstdint>

#include "backend/cpu/attention.h"

namespace llm {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i] for one row of n, with
// ggml's rounding points (f32 squares summed in double, f32 mean, f32
// 1/sqrtf, x * scale then * weight). out may alias x. n >= 1.
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);

// RmsNorm of n_rows rows of n (x, out: [n_rows][n]; out may alias x), each
// row's bits exactly RmsNorm's. The sum of squares is one chain of dependent
// double additions per row (ggml's order), so a batch's rows run 8 chains
// side by side: one row at a time waited ~4 cycles per element (16 SmolLM2
// sessions: ~2 % of a decode step, with the other core idle).
void RmsNormRows(const float* x, const float* weight, int64_t n_rows, int64_t n, float eps,
                 float* out);

// Rotary position embedding of one token, in place. x: [n_heads][head_dim].
// Only the first rope_dims (even, <= head_dim; else clamped) dims of each head
// rotate, by theta_i = pos * freq_base^(-2i / rope_dims), i < rope_dims/2:
//   normal (llama) mode: pairs (x[2i], x[2i+1]);
//   neox mode:           pairs (x[i], x[i + rope_dims/2]).
// Angles are computed as ggml-cpu does (to reproduce llama.cpp's logits):
// theta_0 = (float)pos, theta_{i+1} = theta_i * powf(freq_base, -2/rope_dims)
// in f32, then cosf/sinf. This differs from the exact angle by up to about
// pos * (i + 2) * 2^-23 rad.
void RopeInPlace(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, int64_t pos,
                 float freq_base, bool neox);

// RopeInPlace in two steps, for callers that rotate many rows at one position
// (every layer of a forward pass): RopeAngles writes cos / sin of theta_i for
// i < RopePairs(head_dim, rope_dims), RopeApply rotates with them. Together
// they give RopeInPlace's bits (AVX-512 included: the same products and fmas).
int64_t RopePairs(int64_t head_dim, int64_t rope_dims);
void RopeAngles(int64_t pos, int64_t head_dim, int64_t rope_dims, float freq_base, float* cos_out,
                float* sin_out);
// RopeAngles with ggml's rope_ext scaling (no YaRN extrapolation): theta_i as
// above, divided by factors[i] (nullptr: 1; Llama 3 / LongRoPE frequency
// factors), times freq_scale (linear scaling: 1 / factor), then
// cos = cosf(theta) * attn_factor, sin = sinf(theta) * attn_factor. With
// factors == nullptr, freq_scale == attn_factor == 1 it is RopeAngles bit for
// bit.
void RopeAnglesScaled(int64_t pos, int64_t head_dim, int64_t rope_dims, float freq_base,
                      float freq_scale, const float* factors, float attn_factor, float* cos_out,
                      float* sin_out);
void RopeApply(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, const float* cos,
               const float* sin, bool neox);

// out[i] = f16(x[i]), round to nearest even (F32ToF16's results; a NaN
// becomes a quiet NaN of the same sign).
void F32ToF16Row(const float* x, int64_t n, uint16_t* out);

// out[i] = f32(h[i]) for f16 / bf16 bit patterns (exact conversions; the
// results of core/half.h's F16ToF32 / BF16ToF32). Vectorized on AVX-512.
void F16ToF32Row(const uint16_t* h, int64_t n, float* out);
void BF16ToF32Row(const uint16_t* h, int64_t n, float* out);

// out[i] = bf16(x[i]) / bf16(f32(h[i])), round to nearest even (core/half.h's
// F32ToBF16; a NaN stays a NaN). Vectorized on AVX-512.
void F32ToBF16Row(const float* x, int64_t n, uint16_t* out);
void F16ToBF16Row(const uint16_t* h, int64_t n, uint16_t* out);

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)), in f32 with
// ggml-cpu's exp (its ggml_v_expf polynomial on AVX-512, expf elsewhere), so
// the results match llama.cpp's bit for bit. out may alias gate or up.
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);

// out[i] = gelu(gate[i]) * up[i] with ggml-cpu's GELU (tanh approximation
// 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))) looked up at x rounded
// to f16 and rounded to f16 itself, as its GGML_GELU_FP16 table does; 0 for
// x <= -10, x for x >= 10). out may alias gate or up.
void GeGlu(const float* gate, const float* up, int64_t n, float* out);

// In-place softmax of one row of n >= 1 (max-subtracted, sum in double).
void Softmax(float* x, int64_t n);

}  // namespace llm
