// AVX-512 body of SwiGlu (compiled with the AVX-512 flags; called only when
// ActiveSimdLevel() == kAvx512). A transcription of ggml-cpu's
// ggml_v_expf / ggml_v_silu / ggml_vec_swiglu_f32 (vec.h, vec.cpp; AVX-512F +
// DQ branch): reproducing llama.cpp's exact f32 results matters because the
// SwiGLU output is quantized to 8 bits before ffn_down, where a 1-ulp
// difference can flip a rounding and, on sensitive models, move the logits.
// No std:: templates or shared inline helpers (an ISA-flagged copy could be
// picked by the linker for the whole program).
// GCC 12 flags its own _mm512_undefined_*() placeholders in the AVX-512
// intrinsic headers as uninitialized (false positive): silenced for this file.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <math.h>

#include "backend/cpu/ops_kernels.h"

namespace llm {
namespace ops_kernels {
namespace {

#include "backend/cpu/ggml_expf_avx512.inc"

// silu(x) = x / (1 + exp(-x)).
inline __m512 Silu(__m512 x) {
  const __m512 neg_x = _mm512_sub_ps(_mm512_setzero_ps(), x);
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1), ExpF(neg_x)));
}

}  // namespace

int64_t SwiGluAvx512(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, _mm512_mul_ps(Silu(_mm512_loadu_ps(gate + i)),
                                            _mm512_loadu_ps(up + i)));
  }
  return i;
}

}  // namespace ops_kernels
}  // namespace llm

#pragma GCC diagnostic pop
