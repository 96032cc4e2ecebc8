// AVX2 + FMA + F16C kernels for QuantMatMul (compiled with -mavx2 -mfma
// -mf16c; called only when ActiveSimdLevel() >= kAvx2).
#include <immintrin.h>

#include <type_traits>

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
// The K-quant / Q5 / IQ4 kernels live in kquant_avx2.cpp.
Kernel Avx2Kernel(DType t) {
  const Kernel k = KernelFor(t);
  return k != nullptr ? k : KQuantAvx2Kernel(t);
}
}  // namespace qmm
}  // namespace llm
