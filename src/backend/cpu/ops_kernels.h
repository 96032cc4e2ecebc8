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

}  // namespace ops_kernels
}  // namespace llm
