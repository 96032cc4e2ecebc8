// AVX2 + FMA body of SwiGlu (compiled with the AVX2 flags; called only when
// ActiveSimdLevel() == kAvx2). A transcription of ggml-cpu's ggml_v_expf /
// ggml_v_silu / ggml_vec_swiglu_f32 (vec.h, vec.cpp; the __AVX2__ && __FMA__
// branch, 8 lanes): reproducing what llama.cpp built for AVX2 computes
// matters because the SwiGLU output is quantized to 8 bits before ffn_down,
// where a 1-ulp difference can flip a rounding and, on sensitive models,
// move the logits (tools/exact_forward.py). The AVX-512 build's silu uses
// another exp reconstruction (ops_avx512.cpp), so the two levels give
// different bits, each its own llama.cpp build's.
// No std:: templates or shared inline helpers (an ISA-flagged copy could be
// picked by the linker for the whole program).
#include <immintrin.h>

#include "backend/cpu/ops_kernels.h"

namespace llm {
namespace ops_kernels {
namespace {

#include "backend/cpu/ggml_expf_avx2.inc"

// silu(x) = x / (1 + exp(-x)), as ggml_v_silu (the negation is 0 - x).
inline __m256 Silu(__m256 x) {
  const __m256 neg_x = _mm256_sub_ps(_mm256_setzero_ps(), x);
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1), ExpF(neg_x)));
}

}  // namespace

int64_t SwiGluAvx2(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i,
                     _mm256_mul_ps(Silu(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  }
  return i;
}

}  // namespace ops_kernels
}  // namespace llm
