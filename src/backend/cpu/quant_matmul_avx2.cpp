// AVX2 + FMA + F16C kernels for QuantMatMul (compiled with -mavx2 -mfma
// -mf16c; called only when ActiveSimdLevel() >= kAvx2).
#include <immintrin.h>

#include <type_traits>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/quant_blocks.h"
#include "backend/cpu/quant_matmul_kernels.h"

namespace llm {
namespace {

// u8 x s8 -> 8 x i32 (each the sum of 4 products). maddubs saturates at
// int16, which |u| <= 128, |s| <= 127 never reaches (2*128*127 < 32767).
inline __m256i DotU8S8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

#include "backend/cpu/quant_matmul_simd.inc"

}  // namespace

namespace qmm {
// QuantizeRowQ8Scalar's arithmetic, 8 lanes at a time (as the AVX-512
// version): the max is exact in any order, x * id is one IEEE product per
// element either way, _mm256_round_ps NEAREST is round-half-to-even like
// nearbyint in the default mode, the clamp and the integer sum are exact, and
// the f16 roundings use the hardware conversion (RNE), as F32ToF16 does.
void QuantizeRowQ8Avx2(const float* x, int64_t n, int8_t* q, float* ds) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 inf = _mm256_set1_ps(__builtin_inff());
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  for (int64_t b = 0; b < n / kActBlock; ++b) {
    const float* xb = x + b * kActBlock;
    int8_t* qb = q + b * kActBlock;
    __m256 v[4], m = _mm256_setzero_ps();
    int non_finite = 0;
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(xb + 8 * k);
      const __m256 a = _mm256_andnot_ps(sign_mask, v[k]);
      // |x| >= inf or NaN (unordered)
      non_finite |= _mm256_movemask_ps(_mm256_cmp_ps(a, inf, _CMP_NLT_UQ));
      m = _mm256_max_ps(m, a);
    }
    if (non_finite != 0) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb), _mm256_setzero_si256());
      ds[2 * b] = ds[2 * b + 1] = __builtin_nanf("");
      continue;
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float db = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i iv[4], sum = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      const __m256 r =
          _mm256_round_ps(_mm256_mul_ps(v[k], vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      iv[k] = _mm256_min_epi32(hi, _mm256_max_epi32(lo, _mm256_cvtps_epi32(r)));
      sum = _mm256_add_epi32(sum, iv[k]);
    }
    // int32 -> int8 (no saturation: clamped above); packs work per 128-bit
    // lane, so the 32-bit groups come out as 0 4 1 5 2 6 3 7 and are put back.
    const __m256i p16 =
        _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(qb),
        _mm256_permutevar8x32_epi32(p16, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
    const int32_t total = _mm_cvtsi128_si32(s4);
    ds[2 * b] = _cvtsh_ss(_cvtss_sh(db, _MM_FROUND_TO_NEAREST_INT));
    ds[2 * b + 1] = _cvtsh_ss(_cvtss_sh(db * static_cast<float>(total), _MM_FROUND_TO_NEAREST_INT));
  }
}

Kernel Avx2PlainBatchKernel(DType t) {
  switch (t) {
    case DType::kF32:
      return &PlainBatchKernel<DType::kF32>;
    case DType::kF16:
      return &PlainBatchKernel<DType::kF16>;
    case DType::kBF16:
      return &PlainBatchKernel<DType::kBF16>;
    default:
      return nullptr;
  }
}

// The K-quant / Q5 / IQ4 kernels live in kquant_avx2.cpp.
Kernel Avx2Kernel(DType t) {
  const Kernel k = KernelFor(t);
  return k != nullptr ? k : KQuantAvx2Kernel(t);
}
}  // namespace qmm
}  // namespace llm
