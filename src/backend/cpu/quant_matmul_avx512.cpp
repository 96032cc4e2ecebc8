// AVX-512 (F/BW/VL + VNNI) kernels for QuantMatMul (compiled with the AVX-512
// flags; called only when ActiveSimdLevel() == kAvx512).
//
// Q8_0 / Q4_0 / Q4_1 process two 32-blocks per 512-bit register: one vpdpbusd
// gives the 16 partial integer sums of both blocks, one FMA scales them by
// the per-block (d_w * d_x) broadcast to each 256-bit half. An odd last block
// goes through the 256-bit path. Other types use the shared AVX2-style code
// (quant_matmul_simd.inc) with vpdpbusd for the u8 x s8 dot.
// Note: QuantMatMul's dispatcher currently runs Q8_0 / Q4_0 / Q4_1 on the
// AVX2 kernel even on AVX-512 machines, because that one reproduces ggml's
// results bit for bit (see PickKernel in quant_matmul.cpp), so the pair
// kernels here are not dispatched for those types at present.
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

// Weight scales of blocks b, b+1 as f32 lanes [d0, m0, d1, m1] (Q4_1: d and
// m are adjacent f16s) or [d0, 0, d1, 0] (Q8_0, Q4_0): lane-aligned with the
// activations' (d, s) pairs, so one multiply gives both products.
template <typename Block>
inline __m128 WeightScales2(const Block* blk, bool with_min) {
  if (with_min) {
    uint32_t p0, p1;
    __builtin_memcpy(&p0, &blk[0].d, 4);
    __builtin_memcpy(&p1, &blk[1].d, 4);
    return _mm_cvtph_ps(
        _mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(p0)), static_cast<int>(p1), 1));
  }
  return _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(blk[0].d), blk[1].d, 2));
}

// Two consecutive floats p[0], p[1] into lanes 0, 1 (lanes 2, 3 zero).
inline __m128 Load2(const float* p) {
  return _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p)));
}

// Lanes 0..7 = v[0], lanes 8..15 = v[2].
inline __m512 BroadcastLanes02(__m128 v) {
  const __m512i idx = _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

// 64 nibbles of two Q4 blocks as u8 in element order: [lo0 hi0 lo1 hi1].
inline __m512i UnpackNibbles2(const uint8_t* qs0, const uint8_t* qs1) {
  const __m256i v = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)),
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0)));
  const __m256i m = _mm256_set1_epi8(0x0F);
  const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, m)),
                                       _mm256_and_si256(_mm256_srli_epi16(v, 4), m), 1);
  // z = [lo0 lo1 hi0 hi1] (128-bit lanes) -> [lo0 hi0 lo1 hi1]
  return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
}

template <DType T>
struct BlockOf;
template <>
struct BlockOf<DType::kQ8_0> {
  using type = BlockQ8_0;
};
template <>
struct BlockOf<DType::kQ4_0> {
  using type = BlockQ4_0;
};
template <>
struct BlockOf<DType::kQ4_1> {
  using type = BlockQ4_1;
};

// Weights of blocks b, b+1 as the u8 operand (|w| or nibble) and, for the
// signed types, the mask of negative weights (x is negated there).
template <DType T>
inline void LoadPair(const typename BlockOf<T>::type* blk, __m512i* wu, __mmask64* neg) {
  if constexpr (T == DType::kQ8_0) {
    const __m512i w = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[0].qs))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[1].qs)), 1);
    *wu = _mm512_abs_epi8(w);
    *neg = _mm512_movepi8_mask(w);
  } else if constexpr (T == DType::kQ4_0) {
    const __m512i w = _mm512_sub_epi8(UnpackNibbles2(blk[0].qs, blk[1].qs), _mm512_set1_epi8(8));
    *wu = _mm512_abs_epi8(w);
    *neg = _mm512_movepi8_mask(w);
  } else {
    *wu = UnpackNibbles2(blk[0].qs, blk[1].qs);
    *neg = 0;
  }
}

// Single-block (tail) version on 256 bits.
template <DType T>
inline void LoadOne(const typename BlockOf<T>::type* blk, __m256i* wu, __mmask32* neg) {
  if constexpr (T == DType::kQ8_0) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs));
    *wu = _mm256_abs_epi8(w);
    *neg = _mm256_movepi8_mask(w);
  } else if constexpr (T == DType::kQ4_0) {
    const __m256i w = _mm256_sub_epi8(UnpackNibbles(blk->qs), _mm256_set1_epi8(8));
    *wu = _mm256_abs_epi8(w);
    *neg = _mm256_movepi8_mask(w);
  } else {
    *wu = UnpackNibbles(blk->qs);
    *neg = 0;
  }
}

// One weight row against activation rows r0 .. r0+R-1. For each row the
// operation sequence is fixed by n_blocks alone (batch invariance).
template <DType T, int R>
void PairRowTile(const char* wrow, const qmm::Acts& a, int64_t r0, int64_t o, float* y,
                 size_t y_stride) {
  using Block = typename BlockOf<T>::type;
  const Block* blk = reinterpret_cast<const Block*>(wrow);
  const int64_t nb = a.n_blocks;
  __m512 acc[R];
  __m128 accm[R];  // Q4_1: sums of m * s in lanes 1 and 3
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm512_setzero_ps();
    accm[r] = _mm_setzero_ps();
  }
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    __m512i wu;
    __mmask64 neg;
    LoadPair<T>(blk + b, &wu, &neg);
    const __m128 wdm = WeightScales2(blk + b, T == DType::kQ4_1);
    for (int r = 0; r < R; ++r) {
      const int64_t row = r0 + r;
      __m512i xq = _mm512_loadu_si512(a.q + row * a.n_in + b * 32);
      if constexpr (T != DType::kQ4_1)
        xq = _mm512_mask_sub_epi8(xq, neg, _mm512_setzero_si512(), xq);
      const __m512i isum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wu, xq);
      // p = [dw0*d0, mw0*s0, dw1*d1, mw1*s1]
      const __m128 p = _mm_mul_ps(wdm, _mm_loadu_ps(a.ds + 2 * (row * nb + b)));
      acc[r] = _mm512_fmadd_ps(BroadcastLanes02(p), _mm512_cvtepi32_ps(isum), acc[r]);
      if constexpr (T == DType::kQ4_1) accm[r] = _mm_add_ps(accm[r], p);  // lanes 1, 3
    }
  }
  __m256 tail[R];
  for (int r = 0; r < R; ++r) tail[r] = _mm256_setzero_ps();
  if (b < nb) {  // odd block count: last block on 256 bits
    __m256i wu;
    __mmask32 neg;
    LoadOne<T>(blk + b, &wu, &neg);
    // [dw, mw, 0, 0] (mw = 0 for the types without a min)
    uint32_t dm = blk[b].d;
    if constexpr (T == DType::kQ4_1) __builtin_memcpy(&dm, &blk[b].d, 4);
    const __m128 wdm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dm)));
    for (int r = 0; r < R; ++r) {
      const int64_t row = r0 + r;
      __m256i xq =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + row * a.n_in + b * 32));
      if constexpr (T != DType::kQ4_1)
        xq = _mm256_mask_sub_epi8(xq, neg, _mm256_setzero_si256(), xq);
      const __m256i isum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), wu, xq);
      const __m128 p = _mm_mul_ps(wdm, Load2(a.ds + 2 * (row * nb + b)));  // [dw*d, mw*s, 0, 0]
      tail[r] = _mm256_mul_ps(_mm256_broadcastss_ps(p), _mm256_cvtepi32_ps(isum));
      if constexpr (T == DType::kQ4_1) accm[r] = _mm_add_ps(accm[r], p);  // lane 1
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m256 s8 = _mm256_add_ps(
        _mm256_add_ps(_mm512_castps512_ps256(acc[r]), _mm512_extractf32x8_ps(acc[r], 1)), tail[r]);
    __m128 total = _mm_set_ss(HSum256(s8));
    if constexpr (T == DType::kQ4_1) {
      // min terms: lanes 1 and 3
      const __m128 m13 = _mm_movehdup_ps(accm[r]);  // [a1, a1, a3, a3]
      total = _mm_add_ss(total, _mm_add_ss(m13, _mm_movehl_ps(m13, m13)));
    }
    y[(r0 + r) * y_stride + o] = _mm_cvtss_f32(total);
  }
}

template <DType T>
void PairKernel(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end, const qmm::Acts& a,
                float* y, size_t y_stride, float* /*scratch*/) {
  // Activation rows in blocks of kRowBlock so that a long batch (prefill in
  // deterministic mode) stays in cache while the weights stream past; the
  // blocking changes no output's arithmetic.
  constexpr int64_t kRowBlock = 64;
  for (int64_t rb = 0; rb < a.n_rows; rb += kRowBlock) {
    const int64_t re = a.n_rows - rb < kRowBlock ? a.n_rows : rb + kRowBlock;
    for (int64_t o = o_begin; o < o_end; ++o) {
      const char* wrow = static_cast<const char*>(W) + o * row_bytes;
      int64_t r = rb;
      for (; r + 4 <= re; r += 4) PairRowTile<T, 4>(wrow, a, r, o, y, y_stride);
      for (; r + 2 <= re; r += 2) PairRowTile<T, 2>(wrow, a, r, o, y, y_stride);
      for (; r < re; ++r) PairRowTile<T, 1>(wrow, a, r, o, y, y_stride);
    }
  }
}

}  // namespace

namespace qmm {
Kernel Avx512Kernel(DType t) {
  switch (t) {
    case DType::kQ8_0:
      return &PairKernel<DType::kQ8_0>;
    case DType::kQ4_0:
      return &PairKernel<DType::kQ4_0>;
    case DType::kQ4_1:
      return &PairKernel<DType::kQ4_1>;
    default:
      return KernelFor(t);
  }
}
}  // namespace qmm
}  // namespace llm

#pragma GCC diagnostic pop
