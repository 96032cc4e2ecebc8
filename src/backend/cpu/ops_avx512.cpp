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

int64_t RopeApplyAvx512(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cos,
                        const float* sin, bool neox) {
  const int64_t n16 = half - half % 16;
  // Normal mode: pairs (x[2i], x[2i+1]) of 16 pairs in two registers; even /
  // odd lanes gathered and scattered back by two-register permutes.
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;
    for (int64_t i = 0; i < n16; i += 16) {
      const __m512 c = _mm512_loadu_ps(cos + i), s = _mm512_loadu_ps(sin + i);
      __m512 x0, x1;
      if (neox) {
        x0 = _mm512_loadu_ps(xh + i);
        x1 = _mm512_loadu_ps(xh + i + half);
      } else {
        const __m512 a = _mm512_loadu_ps(xh + 2 * i), b = _mm512_loadu_ps(xh + 2 * i + 16);
        x0 = _mm512_permutex2var_ps(a, even, b);
        x1 = _mm512_permutex2var_ps(a, odd, b);
      }
      // fma(x0, c, -(x1 * s)) and fma(x0, s, x1 * c), as the scalar loop.
      const __m512 r0 = _mm512_fmsub_ps(x0, c, _mm512_mul_ps(x1, s));
      const __m512 r1 = _mm512_fmadd_ps(x0, s, _mm512_mul_ps(x1, c));
      if (neox) {
        _mm512_storeu_ps(xh + i, r0);
        _mm512_storeu_ps(xh + i + half, r1);
      } else {
        _mm512_storeu_ps(xh + 2 * i, _mm512_permutex2var_ps(r0, lo, r1));
        _mm512_storeu_ps(xh + 2 * i + 16, _mm512_permutex2var_ps(r0, hi, r1));
      }
    }
  }
  return n16;
}

int64_t F32ToF16RowAvx512(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(out + i),
        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  return i;
}

int64_t F16ToF32RowAvx512(const uint16_t* h, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i,
                     _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
  }
  return i;
}

int64_t BF16ToF32RowAvx512(const uint16_t* h, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i wide =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)));
    _mm512_storeu_si512(out + i, _mm512_slli_epi32(wide, 16));
  }
  return i;
}

namespace {

// 16 floats -> their bf16 bits, as F32ToBF16: + 0x7fff + lsb, then the top
// half; a NaN keeps its top half with the quiet bit set.
inline __m256i RoundToBF16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

}  // namespace

int64_t F32ToBF16RowAvx512(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), RoundToBF16(_mm512_loadu_ps(x + i)));
  }
  return i;
}

int64_t F16ToBF16RowAvx512(const uint16_t* h, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), RoundToBF16(v));
  }
  return i;
}

}  // namespace ops_kernels
}  // namespace llm

#pragma GCC diagnostic pop
