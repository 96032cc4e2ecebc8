// QuantizeRowQ8K's arithmetic (ggml's quantize_row_q8_K_ref), 8 lanes at a
// time, bit for bit (the reasoning of q8k_quantize_avx512.cpp): the largest
// |x| is exact in any order and its first occurrence is found by position;
// iscale = -127 / max and d = 1 / iscale are the same scalar operations;
// iscale * x is one IEEE product per element; _mm256_round_ps(NEAREST) is
// round-half-to-even like ggml's nearest_int for |v| <= 2^22, and the
// conversion of the rounded value is exact; the min with 127 and the sums
// are exact. Called at SimdLevel::kAvx2 (compiled with -mavx2 -mfma -mf16c).
#include <immintrin.h>

#include <cfloat>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kquant_kernels.h"

namespace llm {
namespace qmm {

void QuantizeRowQ8KAvx2(const float* x, int64_t n, int8_t* q, float* d, int16_t* bsum) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 fmax = _mm256_set1_ps(FLT_MAX);
  const __m256i i127 = _mm256_set1_epi32(127);
  // packs_epi32 / packs_epi16 interleave 128-bit lanes; this restores order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < n / 256; ++b, x += 256, q += 256, bsum += 16) {
    __m256 amax = _mm256_setzero_ps();
    int bad = 0;
    for (int i = 0; i < 32; ++i) {
      const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i));
      bad |= _mm256_movemask_ps(_mm256_cmp_ps(a, fmax, _CMP_NLE_UQ));  // inf or NaN
      amax = _mm256_max_ps(amax, a);
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float am = _mm_cvtss_f32(m);
    if (bad != 0 || am == 0.0f) {
      std::memset(q, 0, 256);
      std::memset(bsum, 0, 16 * sizeof(int16_t));
      d[b] = bad != 0 ? __builtin_nanf("") : 0.0f;
      continue;
    }
    // The first element whose |x| is the maximum (the scalar loop's max).
    const __m256 amv = _mm256_set1_ps(am);
    float max = 0.0f;
    for (int i = 0; i < 32; ++i) {
      const int hit = _mm256_movemask_ps(
          _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)), amv, _CMP_EQ_OQ));
      if (hit != 0) {
        max = x[8 * i + __builtin_ctz(static_cast<unsigned>(hit))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 is = _mm256_set1_ps(iscale);
    for (int g = 0; g < 8; ++g) {  // 32 elements
      __m256i v[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 p = _mm256_mul_ps(is, _mm256_loadu_ps(x + 32 * g + 8 * k));
        v[k] = _mm256_min_epi32(
            _mm256_cvttps_epi32(_mm256_round_ps(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
            i127);
      }
      for (int h = 0; h < 2; ++h) {
        __m256i s = _mm256_add_epi32(v[2 * h], v[2 * h + 1]);
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        t = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 1));
        bsum[2 * g + h] = static_cast<int16_t>(_mm_cvtsi128_si32(t));
      }
      const __m256i p16 =
          _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * g),
                          _mm256_permutevar8x32_epi32(p16, order));
    }
    d[b] = 1.0f / iscale;
  }
}

}  // namespace qmm
}  // namespace llm
