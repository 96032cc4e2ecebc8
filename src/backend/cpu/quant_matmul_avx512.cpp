// AVX-512 VNNI kernels for QuantMatMul (compiled with the AVX-512 flags;
// called only when ActiveSimdLevel() == kAvx512): the shared AVX2-style code
// (quant_matmul_simd.inc) with vpdpbusd for the u8 x s8 dot.
// Q8_0 / Q4_0 / Q4_1 batches (2+ rows) run on QuantWideKernel below, whose
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

#include <cstdint>
#include <type_traits>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/quant_blocks.h"
#include "backend/cpu/quant_matmul_kernels.h"

namespace llm {
namespace {

// u8 x s8 -> 8 x i32 (each the sum of 4 products), exact (no saturation).
inline __m256i DotU8S8(__m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

#include "backend/cpu/quant_matmul_simd.inc"

// F32 / F16 / BF16 weights (decode, and batches up to kGemvMaxRows rows):
// the AVX2 PlainKernel's row walk (four weight rows side by side, the next
// four prefetched) with 16 lanes per vector; one row at a time with 8
// lanes had left one-row decode of a 1B F16 model at ~50 % of the read
// bandwidth.
// Each output's arithmetic is fixed whatever the grouping, row count or
// thread split: two 16-lane accumulators over 32-element steps, one
// 16-element step into the first, their sum reduced by
// _mm512_reduce_add_ps, then the tail with scalar FMAs in element order.
template <DType T>
inline __m512 Load16(const char* row, int64_t i) {
  if constexpr (T == DType::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else if constexpr (T == DType::kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + i)));
  } else {
    const __m256i h = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// y[0..R) = rows[0..R) . x over n inputs; next: the rows to prefetch (R of
// them, or null).
template <DType T, int R>
void PlainRows16(const char* const* rows, const char* const* next, const float* x, int64_t n,
                 float* y) {
  constexpr int64_t kElemBytes = T == DType::kF32 ? 4 : 2;
  __m512 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
    for (int r = 0; r < R; ++r) {
      if (next != nullptr) {
        for (int64_t b = 0; b < 32 * kElemBytes; b += 64) {
          _mm_prefetch(next[r] + i * kElemBytes + b, _MM_HINT_T1);
        }
      }
      acc0[r] = _mm512_fmadd_ps(Load16<T>(rows[r], i), x0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(Load16<T>(rows[r], i + 16), x1, acc1[r]);
    }
  }
  if (i + 16 <= n) {
    const __m512 x0 = _mm512_loadu_ps(x + i);
    for (int r = 0; r < R; ++r) acc0[r] = _mm512_fmadd_ps(Load16<T>(rows[r], i), x0, acc0[r]);
    i += 16;
  }
  for (int r = 0; r < R; ++r) {
    __m128 sum = _mm_set_ss(_mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r])));
    for (int64_t k = i; k < n; ++k) {
      sum = _mm_fmadd_ss(_mm_set_ss(Load1<T>(rows[r], k)), _mm_set_ss(x[k]), sum);
    }
    y[r] = _mm_cvtss_f32(sum);
  }
}

template <DType T>
void PlainKernel16(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end,
                   const qmm::Acts& a, float* y, size_t y_stride, float* /*scratch*/) {
  WalkPlainRows(
      W, row_bytes, o_begin, o_end, a, y, y_stride,
      [](auto rows_c, const char* const* rows, const char* const* next, const float* x, int64_t n,
         float* out) { PlainRows16<T, decltype(rows_c)::value>(rows, next, x, n, out); });
}

// A tile of RW weight rows x RA activation rows of a plain-type product:
// out[a * out_stride + r] = sum_i w[r][i] * x[a][i], each output in
// PlainRows16's order (acc0 / acc1 over 32-element steps, one 16-element
// step into acc0, _mm512_reduce_add_ps(acc0 + acc1), the tail with scalar
// FMAs), so a batch gives the one-row kernel's bits. Per 16-element half
// step the RA activation vectors are loaded once and each weight vector
// converted once for them: 4 x 3 is 24 accumulators, 3 activations and 1
// weight in the 32 registers, 4 conversions and 3 loads per 12 fmas, where
// the one-row kernel converts every weight vector for each activation row.
template <DType T, int RW, int RA>
void PlainTile16(const char* w, size_t row_bytes, const float* x, size_t x_stride, int64_t n,
                 float* out, size_t out_stride) {
  __m512 acc0[RW][RA], acc1[RW][RA];
  for (int r = 0; r < RW; ++r) {
    for (int a = 0; a < RA; ++a) acc0[r][a] = acc1[r][a] = _mm512_setzero_ps();
  }
  // acc[r][a] += w[r][i .. i + 15] * x[a][i .. i + 15]
  auto half_step = [&](__m512(&acc)[RW][RA], int64_t i) {
    __m512 xv[RA];
    for (int a = 0; a < RA; ++a) {
      xv[a] = _mm512_loadu_ps(x + a * x_stride + i);
      asm("" : "+v"(xv[a]));  // in a register for the RW fmas
    }
    for (int r = 0; r < RW; ++r) {
      const __m512 wv = Load16<T>(w + r * row_bytes, i);
      for (int a = 0; a < RA; ++a) acc[r][a] = _mm512_fmadd_ps(wv, xv[a], acc[r][a]);
    }
  };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    half_step(acc0, i);
    half_step(acc1, i + 16);
  }
  if (i + 16 <= n) {
    half_step(acc0, i);
    i += 16;
  }
  for (int r = 0; r < RW; ++r) {
    const char* row = w + r * row_bytes;
    for (int a = 0; a < RA; ++a) {
      __m128 sum = _mm_set_ss(_mm512_reduce_add_ps(_mm512_add_ps(acc0[r][a], acc1[r][a])));
      for (int64_t k = i; k < n; ++k) {
        sum = _mm_fmadd_ss(_mm_set_ss(Load1<T>(row, k)), _mm_set_ss(x[a * x_stride + k]), sum);
      }
      out[a * out_stride + r] = _mm_cvtss_f32(sum);
    }
  }
}

// The plain-type batch kernel (2+ activation rows; quant_matmul_kernels.h),
// walked as the AVX2 level's (WalkPlainBatch): PlainTile16's bits whatever
// the tile, which are PlainKernel16's.
template <DType T>
void PlainBatchKernel16(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end,
                        const qmm::Acts& a, float* y, size_t y_stride, float* /*scratch*/) {
  WalkPlainBatch<T>(W, row_bytes, o_begin, o_end, a, y, y_stride,
                    [](auto rw, auto ra, const char* w, size_t rb, const float* x, size_t xs,
                       int64_t n, float* out, size_t os) {
                      PlainTile16<T, decltype(rw)::value, decltype(ra)::value>(w, rb, x, xs, n,
                                                                               out, os);
                    });
}

}  // namespace

namespace qmm {
Kernel Avx512PlainBatchKernel(DType t) {
  switch (t) {
    case DType::kF32:
      return &PlainBatchKernel16<DType::kF32>;
    case DType::kF16:
      return &PlainBatchKernel16<DType::kF16>;
    case DType::kBF16:
      return &PlainBatchKernel16<DType::kBF16>;
    default:
      return nullptr;
  }
}

Kernel Avx512Kernel(DType t) {
  switch (t) {
    case DType::kF32:
      return &PlainKernel16<DType::kF32>;
    case DType::kF16:
      return &PlainKernel16<DType::kF16>;
    case DType::kBF16:
      return &PlainKernel16<DType::kBF16>;
    default: {
      const Kernel k = KernelFor(t);
      return k != nullptr ? k : KQuantAvx512Kernel(t);
    }
  }
}

// QuantizeRowQ8Scalar's arithmetic, 16 lanes at a time: the max is exact in
// any order, x * id is one IEEE product per element either way, roundscale
// NEAREST is round-half-to-even like nearbyint in the default mode, the clamp
// and the integer sum are exact, and the f16 roundings use the hardware
// conversion (RNE), as F32ToF16 does.
namespace {

constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// One 32-block: its q bytes and (f16-rounded d, d * sum) pair.
void QuantizeBlock(const float* xb, int8_t* qb, float* dsb) {
  const __m512 sign_mask = _mm512_set1_ps(-0.0f);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
  // QNaN | +Inf | -Inf | SNaN
  if ((_mm512_fpclass_ps_mask(v0, 0x99) | _mm512_fpclass_ps_mask(v1, 0x99)) != 0) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb), _mm256_setzero_si256());
    dsb[0] = dsb[1] = __builtin_nanf("");
    return;
  }
  const float amax = _mm512_reduce_max_ps(
      _mm512_max_ps(_mm512_andnot_ps(sign_mask, v0), _mm512_andnot_ps(sign_mask, v1)));
  const float db = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  const __m512 vid = _mm512_set1_ps(id);
  __m512i i0 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v0, vid), kNearest));
  __m512i i1 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v1, vid), kNearest));
  i0 = _mm512_min_epi32(hi, _mm512_max_epi32(lo, i0));
  i1 = _mm512_min_epi32(hi, _mm512_max_epi32(lo, i1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qb), _mm512_cvtepi32_epi8(i0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16), _mm512_cvtepi32_epi8(i1));
  const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
  dsb[0] = _cvtsh_ss(_cvtss_sh(db, _MM_FROUND_TO_NEAREST_INT));
  dsb[1] = _cvtsh_ss(_cvtss_sh(db * static_cast<float>(sum), _MM_FROUND_TO_NEAREST_INT));
}

// v[0..15] -> lane j = op over the 16 lanes of v[j], for an op whose result
// does not depend on the order (max, integer add): 15 ops for 16
// reductions instead of 64, each step combining two registers' partials.
template <typename Op>
__m512 Reduce16(const __m512* v, Op op) {
  __m512 t[8], u[4], w[2];
  for (int k = 0; k < 8; ++k) {  // t[k]: [v[2k] lo (op) hi | v[2k+1] lo (op) hi]
    t[k] = op(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
              _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  for (int m = 0; m < 4; ++m) {  // u[m], 128-bit group c: v[4m + c]'s 4 partials
    u[m] = op(_mm512_shuffle_f32x4(t[2 * m], t[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)),
              _mm512_shuffle_f32x4(t[2 * m], t[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  for (int n = 0; n < 2; ++n) {  // w[n], group c: lanes 0-1 v[8n + c], 2-3 v[8n + 4 + c]
    w[n] = op(_mm512_shuffle_ps(u[2 * n], u[2 * n + 1], _MM_SHUFFLE(1, 0, 1, 0)),
              _mm512_shuffle_ps(u[2 * n], u[2 * n + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // group c, lane j: v[4j + c]; permuted to lane 4j + c
  const __m512 r = op(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                      _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  return _mm512_permutexvar_ps(order, r);
}

// 16 blocks as QuantizeBlock would, with the per-block maxima, scales and
// sums as vectors (one division each for 16 blocks, not two per block);
// false, with nothing written, if a block holds Inf or NaN.
bool Quantize16Blocks(const float* x, int8_t* q, float* ds) {
  const __m512 sign_mask = _mm512_set1_ps(-0.0f);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  __m512 m[16];
  __mmask16 special = 0;
  for (int j = 0; j < 16; ++j) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * j), v1 = _mm512_loadu_ps(x + 32 * j + 16);
    special |= _mm512_fpclass_ps_mask(v0, 0x99) | _mm512_fpclass_ps_mask(v1, 0x99);
    m[j] = _mm512_max_ps(_mm512_andnot_ps(sign_mask, v0), _mm512_andnot_ps(sign_mask, v1));
  }
  if (special != 0) return false;
  const __m512 amax = Reduce16(m, [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); });
  const __m512 db = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
  const __mmask16 nonzero = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_OQ);
  alignas(64) float ids[16];
  _mm512_store_ps(ids, _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(127.0f), amax));
  __m512 sums[16];
  for (int j = 0; j < 16; ++j) {
    const __m512 vid = _mm512_set1_ps(ids[j]);
    const __m512 v0 = _mm512_loadu_ps(x + 32 * j), v1 = _mm512_loadu_ps(x + 32 * j + 16);
    __m512i i0 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v0, vid), kNearest));
    __m512i i1 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v1, vid), kNearest));
    i0 = _mm512_min_epi32(hi, _mm512_max_epi32(lo, i0));
    i1 = _mm512_min_epi32(hi, _mm512_max_epi32(lo, i1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * j), _mm512_cvtepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * j + 16), _mm512_cvtepi32_epi8(i1));
    sums[j] = _mm512_castsi512_ps(_mm512_add_epi32(i0, i1));
  }
  const __m512i sum = _mm512_castps_si512(Reduce16(sums, [](__m512 a, __m512 b) {
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
  }));
  alignas(64) float d[16], s[16];
  _mm512_store_ps(d, _mm512_cvtph_ps(_mm512_cvtps_ph(db, kNearest)));
  _mm512_store_ps(
      s, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(db, _mm512_cvtepi32_ps(sum)), kNearest)));
  for (int j = 0; j < 16; ++j) {
    ds[2 * j] = d[j];
    ds[2 * j + 1] = s[j];
  }
  return true;
}

}  // namespace

// 16 blocks at a time where no block holds Inf or NaN (~2x faster than
// block by block, whose two scalar divisions and horizontal reductions per
// block were ~4 % of a SmolLM2 prefill), the rest block by block.
void QuantizeRowQ8Avx512(const float* x, int64_t n, int8_t* q, float* ds) {
  const int64_t nb = n / kActBlock;
  int64_t b = 0;
  for (; b + 16 <= nb; b += 16) {
    if (Quantize16Blocks(x + b * kActBlock, q + b * kActBlock, ds + 2 * b)) continue;
    for (int64_t j = b; j < b + 16; ++j) {
      QuantizeBlock(x + j * kActBlock, q + j * kActBlock, ds + 2 * j);
    }
  }
  for (; b < nb; ++b) QuantizeBlock(x + b * kActBlock, q + b * kActBlock, ds + 2 * b);
}
}  // namespace qmm
}  // namespace llm

#pragma GCC diagnostic pop
