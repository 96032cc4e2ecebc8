// AVX-512 VNNI kernels for QuantMatMul (compiled with the AVX-512 flags;
// called only when ActiveSimdLevel() == kAvx512): the shared AVX2-style code
// (quant_matmul_simd.inc) with vpdpbusd for the u8 x s8 dot.
// Q8_0 / Q4_0 / Q4_1 are not dispatched here: they run on the AVX2 kernel,
// whose block order reproduces ggml-cpu's results bit for bit (see
// PickKernel in quant_matmul.cpp). An earlier two-blocks-per-register kernel
// was faster but broke that agreement, so it was removed.
// GCC 12 reports its own _mm512_undefined_*() placeholders inside the
// AVX-512 intrinsic headers as uninitialized (a false positive); silence it
// for this file only so -Werror builds pass.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

#pragma GCC diagnostic pop
