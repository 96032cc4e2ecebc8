// Private to backend/cpu: ISA-specific bodies behind ops.h.
#pragma once

#include <cstdint>

namespace llm {
namespace ops_kernels {

// SwiGlu on AVX-512F/DQ (ops_avx512.cpp): ggml-cpu's ggml_vec_swiglu_f32 for
// the first n - n % 16 elements (ggml_v_silu with its ggml_v_expf polynomial,
// bit for bit); returns how many elements it wrote. The caller finishes the
// tail with the scalar formula, as ggml does.
int64_t SwiGluAvx512(const float* gate, const float* up, int64_t n, float* out);

// SwiGlu on AVX2 + FMA (ops_avx2.cpp): ggml-cpu's ggml_vec_swiglu_f32 as
// llama.cpp built for AVX2 runs it, for the first n - n % 8 elements (its
// 8-lane ggml_v_silu / ggml_v_expf, bit for bit); returns how many elements
// it wrote. The caller finishes the tail with the scalar formula, as ggml
// does.
int64_t SwiGluAvx2(const float* gate, const float* up, int64_t n, float* out);

// RopeApply's rotation for the first half - half % 16 pairs of every head
// (the same products and fmas, 16 pairs at a time); returns that count. The
// caller rotates the remaining pairs.
int64_t RopeApplyAvx512(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cos,
                        const float* sin, bool neox);

// F32ToF16Row for the first n - n % 16 elements (vcvtps2ph, nearest even);
// returns that count.
int64_t F32ToF16RowAvx512(const float* x, int64_t n, uint16_t* out);

// F16ToF32Row / BF16ToF32Row for the first n - n % 16 elements (vcvtph2ps
// and a 16-bit shift: both exact); return that count.
int64_t F16ToF32RowAvx512(const uint16_t* h, int64_t n, float* out);
int64_t BF16ToF32RowAvx512(const uint16_t* h, int64_t n, float* out);

// F32ToBF16Row / F16ToBF16Row for the first n - n % 16 elements (integer
// round to nearest even on the f32 bits, NaN quieted, as F32ToBF16: no
// AVX512_BF16 instruction needed); return that count.
int64_t F32ToBF16RowAvx512(const float* x, int64_t n, uint16_t* out);
int64_t F16ToBF16RowAvx512(const uint16_t* h, int64_t n, uint16_t* out);

// The same three conversions on AVX2 + F16C, 8 elements at a time
// (convert_avx2.cpp): for the first n - n % 8 elements; return that count.
int64_t F32ToF16RowAvx2(const float* x, int64_t n, uint16_t* out);
int64_t F16ToF32RowAvx2(const uint16_t* h, int64_t n, float* out);
int64_t BF16ToF32RowAvx2(const uint16_t* h, int64_t n, float* out);

}  // namespace ops_kernels
}  // namespace llm
