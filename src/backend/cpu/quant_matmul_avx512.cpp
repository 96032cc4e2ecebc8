// AVX-512 VNNI kernels for QuantMatMul (compiled with the AVX-512 flags;
// called only when ActiveSimdLevel() == kAvx512): the shared AVX2-style code
// (quant_matmul_simd.inc) with vpdpbusd for the u8 x s8 dot.
// Q8_0 / Q4_0 / Q4_1 batches (2+ rows) run on QuantPairKernel below, whose
// outputs equal the AVX2 kernel's (ggml-cpu's vec_dot order) bit for bit;
// single rows keep the AVX2 kernel (PickKernel in quant_matmul.cpp). An
// earlier two-blocks-per-register kernel was faster but broke that
// agreement, so it was removed.
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

// Batches (several activation rows): two rows share one 512-bit register,
// row r in the low 256 bits and row r + 1 in the high 256 bits, and each
// half goes through exactly the per-row sequence of QuantRowTile above
// (the same exact integer lane sums -- vpdpbusd sums the same 4 products per
// lane as maddubs + madd --, the same dw * dx product, one fmadd per lane,
// the same horizontal sum and Q4_1 min-term fma), so every output equals the
// one-row kernel's bit for bit (tests/backend/quant_matmul_test.cpp) while a
// batch needs about half the instructions per row.
template <DType T, int P>  // P pairs of rows: r0 .. r0 + 2P - 1 (P <= 8)
void QuantPairTile(const char* wrow, const qmm::Acts& a, int64_t r0, int64_t o, float* y,
                   size_t y_stride) {
  static_assert(P >= 1 && P <= 8);
  __m512 acc[P];
  for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
  // Q4_1: the min term of row r0 + i accumulates in lane i, one fma per block
  // as in QuantRowTile (there lane 1 of a per-row register).
  __m512 accm = _mm512_setzero_ps();
  const __mmask16 rows_mask = static_cast<__mmask16>((1u << (2 * P)) - 1);
  const int64_t nb = a.n_blocks;
  for (int64_t b = 0; b < nb; ++b) {
    __m256i wu;
    __m256i wsign = _mm256_setzero_si256();
    uint32_t dm;
    if constexpr (T == DType::kQ8_0) {
      const auto* blk = reinterpret_cast<const BlockQ8_0*>(wrow) + b;
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs));
      wu = _mm256_sign_epi8(w, w);
      wsign = w;
      dm = blk->d;
    } else if constexpr (T == DType::kQ4_0) {
      const auto* blk = reinterpret_cast<const BlockQ4_0*>(wrow) + b;
      const __m256i w = _mm256_sub_epi8(UnpackNibbles(blk->qs), _mm256_set1_epi8(8));
      wu = _mm256_sign_epi8(w, w);
      wsign = w;
      dm = blk->d;
    } else {
      const auto* blk = reinterpret_cast<const BlockQ4_1*>(wrow) + b;
      wu = UnpackNibbles(blk->qs);
      __builtin_memcpy(&dm, &blk->d, 4);
    }
    const __m128 wdm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dm)));  // [dw, mw, 0, 0]
    const __m512i wu2 = _mm512_broadcast_i64x4(wu);
    const __m512 wd = _mm512_set1_ps(_mm_cvtss_f32(wdm));
    // The activations' d of rows r0 .. r0 + 2P - 1 at this block.
    const __m512 dx_rows = _mm512_maskz_loadu_ps(rows_mask, a.d_by_block + b * a.n_rows + r0);
    const int8_t* xq = a.q + r0 * a.n_in + b * 32;
    for (int p = 0; p < P; ++p) {
      __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + (2 * p) * a.n_in));
      __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + (2 * p + 1) * a.n_in));
      if constexpr (T != DType::kQ4_1) {
        x0 = _mm256_sign_epi8(x0, wsign);
        x1 = _mm256_sign_epi8(x1, wsign);
      }
      const __m512i xx = _mm512_inserti64x4(_mm512_castsi256_si512(x0), x1, 1);
      const __m512i isum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wu2, xx);
      // [dx(row 2p) x 8 | dx(row 2p+1) x 8], times dw: QuantRowTile's broadcast p.
      const __m512i pick =
          _mm512_inserti64x4(_mm512_set1_epi32(2 * p), _mm256_set1_epi32(2 * p + 1), 1);
      const __m512 dx = _mm512_permutexvar_ps(pick, dx_rows);
      acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(wd, dx), _mm512_cvtepi32_ps(isum), acc[p]);
    }
    if constexpr (T == DType::kQ4_1) {
      const __m512 sx_rows = _mm512_maskz_loadu_ps(rows_mask, a.s_by_block + b * a.n_rows + r0);
      const __m512 mw = _mm512_set1_ps(_mm_cvtss_f32(_mm_movehdup_ps(wdm)));
      accm = _mm512_fmadd_ps(mw, sx_rows, accm);
    }
  }
  alignas(64) float mins[16];
  _mm512_store_ps(mins, accm);
  for (int p = 0; p < P; ++p) {
    const __m256 halves[2] = {_mm512_castps512_ps256(acc[p]), _mm512_extractf32x8_ps(acc[p], 1)};
    for (int h = 0; h < 2; ++h) {
      __m128 total = _mm_set_ss(HSum256(halves[h]));
      if constexpr (T == DType::kQ4_1) total = _mm_add_ss(total, _mm_set_ss(mins[2 * p + h]));
      y[(r0 + 2 * p + h) * y_stride + o] = _mm_cvtss_f32(total);
    }
  }
}

template <DType T>
void QuantPairKernel(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end,
                     const qmm::Acts& a, float* y, size_t y_stride, float* /*scratch*/) {
  constexpr int64_t kRowBlock = 64;  // as QuantKernel: activations stay in cache
  for (int64_t rb = 0; rb < a.n_rows; rb += kRowBlock) {
    const int64_t re = a.n_rows - rb < kRowBlock ? a.n_rows : rb + kRowBlock;
    for (int64_t o = o_begin; o < o_end; ++o) {
      const char* wrow = static_cast<const char*>(W) + o * row_bytes;
      int64_t r = rb;
      for (; r + 16 <= re; r += 16) QuantPairTile<T, 8>(wrow, a, r, o, y, y_stride);
      for (; r + 8 <= re; r += 8) QuantPairTile<T, 4>(wrow, a, r, o, y, y_stride);
      for (; r + 4 <= re; r += 4) QuantPairTile<T, 2>(wrow, a, r, o, y, y_stride);
      for (; r + 2 <= re; r += 2) QuantPairTile<T, 1>(wrow, a, r, o, y, y_stride);
      for (; r < re; ++r) QuantRowTile<T, 1>(wrow, a, r, o, y, y_stride);
    }
  }
}

}  // namespace

namespace qmm {
Kernel Avx512Kernel(DType t) {
  switch (t) {
    case DType::kQ8_0:
      return &QuantPairKernel<DType::kQ8_0>;
    case DType::kQ4_0:
      return &QuantPairKernel<DType::kQ4_0>;
    case DType::kQ4_1:
      return &QuantPairKernel<DType::kQ4_1>;
    default:
      return KernelFor(t);
  }
}

// QuantizeRowQ8Scalar's arithmetic, 16 lanes at a time: the max is exact in
// any order, x * id is one IEEE product per element either way, roundscale
// NEAREST is round-half-to-even like nearbyint in the default mode, the clamp
// and the integer sum are exact, and the f16 roundings use the hardware
// conversion (RNE), as F32ToF16 does.
void QuantizeRowQ8Avx512(const float* x, int64_t n, int8_t* q, float* ds) {
  const __m512 sign_mask = _mm512_set1_ps(-0.0f);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int64_t b = 0; b < n / kActBlock; ++b) {
    const float* xb = x + b * kActBlock;
    int8_t* qb = q + b * kActBlock;
    const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
    // QNaN | +Inf | -Inf | SNaN
    if ((_mm512_fpclass_ps_mask(v0, 0x99) | _mm512_fpclass_ps_mask(v1, 0x99)) != 0) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb), _mm256_setzero_si256());
      ds[2 * b] = ds[2 * b + 1] = __builtin_nanf("");
      continue;
    }
    const float amax = _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_andnot_ps(sign_mask, v0), _mm512_andnot_ps(sign_mask, v1)));
    const float db = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m512 vid = _mm512_set1_ps(id);
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m512i i0 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v0, vid), kNearest));
    __m512i i1 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v1, vid), kNearest));
    i0 = _mm512_min_epi32(hi, _mm512_max_epi32(lo, i0));
    i1 = _mm512_min_epi32(hi, _mm512_max_epi32(lo, i1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qb), _mm512_cvtepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16), _mm512_cvtepi32_epi8(i1));
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
    ds[2 * b] = _cvtsh_ss(_cvtss_sh(db, _MM_FROUND_TO_NEAREST_INT));
    ds[2 * b + 1] = _cvtsh_ss(_cvtss_sh(db * static_cast<float>(sum), _MM_FROUND_TO_NEAREST_INT));
  }
}
}  // namespace qmm
}  // namespace llm

#pragma GCC diagnostic pop
