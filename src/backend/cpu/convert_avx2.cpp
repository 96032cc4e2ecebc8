// AVX2 + F16C bodies of the f16 / bf16 row conversions behind ops.h
// (F32ToF16Row, F16ToF32Row, BF16ToF32Row; compiled with the AVX2 flags,
// called only when ActiveSimdLevel() >= kAvx2): 8 elements per instruction,
// the same bits as the scalar conversions (vcvtps2ph rounds to nearest even
// as F32ToF16 does; vcvtph2ps and the bf16 shift are exact). F16 / BF16
// prefill converts every weight matrix per pass (linear.cpp): the scalar loop
// was ~15 % of a 1B F16 pp512 on Zen 3.
// No std:: templates or shared inline helpers (ISA-flagged code).
#include <immintrin.h>

#include "backend/cpu/ops_kernels.h"

namespace llm {
namespace ops_kernels {

int64_t F32ToF16RowAvx2(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(out + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  return i;
}

int64_t F16ToF32RowAvx2(const uint16_t* h, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  }
  return i;
}

int64_t BF16ToF32RowAvx2(const uint16_t* h, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_slli_epi32(wide, 16));
  }
  return i;
}

}  // namespace ops_kernels
}  // namespace llm
