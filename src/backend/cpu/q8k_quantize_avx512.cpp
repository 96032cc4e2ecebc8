// QuantizeRowQ8K's arithmetic (ggml's quantize_row_q8_K_ref), 16 lanes at a
// time, bit for bit: per 256-block the largest |x| is exact in any order and
// its first occurrence is found by position (as the scalar loop's strict >
// keeps the first); iscale = -127 / max and d = 1 / iscale are the same
// scalar IEEE operations; iscale * x is one IEEE product per element either
// way; the explicit round-to-nearest-even conversion equals ggml's
// nearest_int (the 1.5 * 2^23 trick) for |v| <= 2^22 (here |v| <= 127 up to
// one rounding); the min with 127 and the int sums are exact. Called only at
// SimdLevel::kAvx512 (compiled with the *_avx512.cpp flags).

// GCC 12's AVX-512 headers build some intrinsics (broadcast, extract,
// reduce) from a deliberately undefined value and then warn about it.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/kquant_kernels.h"

namespace llm {
namespace qmm {

void QuantizeRowQ8KAvx512(const float* x, int64_t n, int8_t* q, float* d, int16_t* bsum) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512i i127 = _mm512_set1_epi32(127);
  for (int64_t b = 0; b < n / 256; ++b, x += 256, q += 256, bsum += 16) {
    __m512 v[16];
    __mmask16 bad = 0;
    __m512 amax = _mm512_setzero_ps();
    for (int i = 0; i < 16; ++i) {
      v[i] = _mm512_loadu_ps(x + 16 * i);
      bad |= _mm512_fpclass_ps_mask(v[i], 0x99);  // QNaN | +Inf | -Inf | SNaN
      amax = _mm512_max_ps(amax, _mm512_andnot_ps(sign, v[i]));
    }
    const float am = _mm512_reduce_max_ps(amax);
    if (bad != 0 || am == 0.0f) {
      std::memset(q, 0, 256);
      std::memset(bsum, 0, 16 * sizeof(int16_t));
      d[b] = bad != 0 ? __builtin_nanf("") : 0.0f;
      continue;
    }
    // The first element whose |x| is the maximum (the scalar loop's max).
    const __m512 amv = _mm512_set1_ps(am);
    float max = 0.0f;
    for (int i = 0; i < 16; ++i) {
      const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, v[i]), amv, _CMP_EQ_OQ);
      if (hit != 0) {
        max = x[16 * i + __builtin_ctz(static_cast<unsigned>(hit))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 is = _mm512_set1_ps(iscale);
    for (int i = 0; i < 16; ++i) {
      const __m512i qi =
          _mm512_min_epi32(_mm512_cvt_roundps_epi32(_mm512_mul_ps(is, v[i]),
                                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                           i127);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * i), _mm512_cvtepi32_epi8(qi));
      bsum[i] = static_cast<int16_t>(_mm512_reduce_add_epi32(qi));
    }
    d[b] = 1.0f / iscale;
  }
}

}  // namespace qmm
}  // namespace llm
