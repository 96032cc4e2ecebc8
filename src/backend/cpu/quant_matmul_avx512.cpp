// AVX-512 (VL + VNNI) kernels for QuantMatMul: the AVX2 structure with the
// u8 x s8 block dot done by one vpdpbusd (compiled with the AVX-512 flags;
// called only when ActiveSimdLevel() == kAvx512).
#include <immintrin.h>

#include "backend/cpu/quant_blocks.h"
#include "backend/cpu/quant_matmul_kernels.h"

namespace llm {
namespace {

// u8 x s8 -> 8 x i32 (each the sum of 4 products), exact (no saturation).
inline __m256i DotU8S8(__m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

#include "backend/cpu/quant_matmul_simd.inc"

}  // namespace

namespace qmm {
Kernel Avx512Kernel(DType t) { return KernelFor(t); }
}  // namespace qmm
}  // namespace llm
