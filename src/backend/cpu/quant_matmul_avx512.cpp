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

#include <array>
#include <utility>

#include "backend/cpu/quant_blocks.h"
#include "backend/cpu/quant_matmul_kernels.h"

namespace llm {
namespace {

// u8 x s8 -> 8 x i32 (each the sum of 4 products), exact (no saturation).
inline __m256i DotU8S8(__m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

#include "backend/cpu/quant_matmul_simd.inc"

// Batches (several activation rows), in the same order as the one-row kernel
// (ggml's vec_dot), so every output equals QuantRowTile's bit for bit
// (tests/backend/quant_matmul_test.cpp) at about a third of its instructions.
//
// A pair of activation rows shares one 512-bit register: row 2p in the low
// and row 2p + 1 in the high 256 bits (Acts::pair_*). Each half goes through
// QuantRowTile's per-row sequence: the same exact integer lane sums, the same
// f32(dw) * f32(dx) product, one fmadd per lane and block, the same horizontal
// sum and Q4_1 min-term fma chain. The work is split so that the inner loop
// costs four vector instructions per weight row, row pair and block:
//   - vpdpbusd wants u8 x s8. Instead of QuantRowTile's sign trick (two
//     vpsignb per row), the weights enter unsigned (Q4: the nibble, Q8_0:
//     w + 128) and the lane accumulator starts at -offset * (sum of the 4
//     activations), precomputed per pair (pair_bias). Integer sums are exact,
//     so each lane ends at sum(w * q) as before.
//   - The weight scales are converted to f32 once per 16 weight rows
//     (ConvertWeightScales), and Q4_1's min terms (a chain of their own) are
//     summed there for all activation rows at once (MinTerms), 16 chains side
//     by side instead of one latency-bound chain per tile.
//   - A tile (QuantPairTile) is R weight rows x P pairs: a weight block is
//     unpacked once per P pairs, a pair's data loaded once per R rows.

// Weight rows whose scales (and Q4_1 min terms) are prepared together.
constexpr int64_t kScaleRows = 16;
// Pairs per pass over the weights: a long batch (prefill) stays in cache.
constexpr int64_t kPairBlock = 32;

// The f16 scales of weight rows o .. o + rows - 1 as f32 (exact conversions,
// as QuantRowTile's cvtph): d into wd [rows][nb], Q4_1's m into wm [rows][nb].
template <DType T>
void ConvertWeightScales(const void* W, size_t row_bytes, int64_t o, int64_t rows, int64_t nb,
                         float* wd, float* wm) {
  constexpr size_t kBlockBytes = T == DType::kQ8_0   ? sizeof(BlockQ8_0)
                                 : T == DType::kQ4_0 ? sizeof(BlockQ4_0)
                                                     : sizeof(BlockQ4_1);
  // The first 4 bytes of 16 blocks in one gather: d in the low half, Q4_1's m
  // in the high half (for the other types, the first quant bytes: unused).
  const __m512i offsets =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(static_cast<int>(kBlockBytes)));
  for (int64_t r = 0; r < rows; ++r) {
    const char* row = static_cast<const char*>(W) + (o + r) * row_bytes;
    for (int64_t b = 0; b < nb; b += 16) {
      const int n = nb - b < 16 ? static_cast<int>(nb - b) : 16;
      const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
      const __m512i dm = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, offsets,
                                                     row + b * kBlockBytes, 1);
      _mm512_mask_storeu_ps(wd + r * nb + b, mask, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm)));
      if constexpr (T == DType::kQ4_1) {
        _mm512_mask_storeu_ps(wm + r * nb + b, mask,
                              _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16))));
      }
    }
  }
}

// Q4_1's min terms: mins[r][i] = sum over blocks b in order of
// fma(wm[r][b], s[b][row0 + i], .) for weight rows r < rows (<= kScaleRows)
// and activation rows row0 .. row0 + n - 1 (n <= 2 * kPairBlock), as
// QuantRowTile's accm; mins has 2 * kPairBlock columns.
void MinTerms(const qmm::Acts& a, const float* wm, int64_t rows, int64_t row0, int64_t n,
              float (*mins)[2 * kPairBlock]) {
  const int64_t nb = a.n_blocks;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i < 16 ? n - i : 16)) - 1);
    __m512 acc[kScaleRows];
#pragma GCC unroll 16
    for (int r = 0; r < kScaleRows; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const __m512 s = _mm512_maskz_loadu_ps(mask, a.pair_s + b * a.n_rows + row0 + i);
#pragma GCC unroll 16
      for (int r = 0; r < kScaleRows; ++r) {
        if (r < rows) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(wm[r * nb + b]), s, acc[r]);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < kScaleRows; ++r) {
      if (r < rows) _mm512_mask_storeu_ps(&mins[r][i], mask, acc[r]);
    }
  }
}

// Cache lines a tile prefetches into L2 for the next group of weight rows
// (read once per call, from memory): the n lines of 64 bytes from base,
// per_block of them per block iteration. QuantPairKernel spreads the next
// group over the current group's tiles, so that no burst of prefetches
// fills the miss queues (a burst measured slower than none).
struct TilePrefetch {
  const char* base = nullptr;
  int64_t n = 0;
  int64_t per_block = 0;
};

// y[row][o + r] for weight rows o .. o + R - 1 and the rows of pairs
// p0 .. p0 + P - 1. wd: the rows' f32 scales [R][n_blocks]; mins (Q4_1):
// their min terms, mins[r][0] for row 2 * p0.
template <DType T, int R, int P>
void QuantPairTile(const void* W, size_t row_bytes, int64_t o, const qmm::Acts& a, int64_t p0,
                   const float* wd, const float (*mins)[2 * kPairBlock], TilePrefetch pf, float* y,
                   size_t y_stride) {
  static_assert(R >= 1 && P >= 1);
  __m512 acc[R][P];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  }
  // Q4: the 16 bytes broadcast to 4 lanes of 128 bits; 64-bit lanes of the
  // upper half of each 256 bits shift right by 4 (the high nibbles, elements
  // 16..31), then & 0x0F: [nibbles 0..31 | nibbles 0..31].
  const __m512i nibble_shift = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const char* w0 = static_cast<const char*>(W) + o * row_bytes;
  const int64_t nb = a.n_blocks;
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t i = b * pf.per_block, e = i + pf.per_block; i < e && i < pf.n; ++i) {
      _mm_prefetch(pf.base + 64 * i, _MM_HINT_T1);
    }
    __m512i wq[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const char* wrow = w0 + r * row_bytes;
      if constexpr (T == DType::kQ8_0) {
        const auto* blk = reinterpret_cast<const BlockQ8_0*>(wrow) + b;
        wq[r] = _mm512_xor_si512(
            _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs))),
            flip);
      } else {
        const uint8_t* qs = T == DType::kQ4_0 ? reinterpret_cast<const BlockQ4_0*>(wrow)[b].qs
                                              : reinterpret_cast<const BlockQ4_1*>(wrow)[b].qs;
        const __m512i v =
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
        wq[r] = _mm512_and_si512(_mm512_srlv_epi64(v, nibble_shift), low4);
      }
    }
    const int64_t pair0 = b * a.n_pairs + p0;
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const __m512i xq = _mm512_loadu_si512(a.pair_q + (pair0 + p) * 64);
      const __m512 dx = _mm512_loadu_ps(a.pair_d + (pair0 + p) * 16);
      __m512i bias = _mm512_setzero_si512();
      if constexpr (T != DType::kQ4_1) bias = _mm512_loadu_si512(a.pair_bias + (pair0 + p) * 16);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i isum = _mm512_dpbusd_epi32(bias, wq[r], xq);
        const __m512 d = _mm512_mul_ps(_mm512_set1_ps(wd[r * nb + b]), dx);
        acc[r][p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), acc[r][p]);
      }
    }
  }
  const int64_t rows_left = a.n_rows - 2 * p0;
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const __m256 halves[2] = {_mm512_castps512_ps256(acc[r][p]),
                                _mm512_extractf32x8_ps(acc[r][p], 1)};
      for (int h = 0; h < 2 && 2 * p + h < rows_left; ++h) {
        __m128 total = _mm_set_ss(HSum256(halves[h]));
        if constexpr (T == DType::kQ4_1) total = _mm_add_ss(total, _mm_set_ss(mins[r][2 * p + h]));
        y[(2 * p0 + 2 * p + h) * y_stride + o + r] = _mm_cvtss_f32(total);
      }
    }
  }
}

// A tile function in a type of this file's anonymous namespace, so that the
// std::array code below is instantiated for this file only (see
// quant_matmul_simd.inc on ISA flags and ODR).
struct PairTileFn {
  void (*run)(const void*, size_t, int64_t, const qmm::Acts&, int64_t, const float*,
              const float (*)[2 * kPairBlock], TilePrefetch, float*, size_t);
};

// Tiles of up to kTileRows weight rows x kTilePairs pairs (16 accumulators,
// the fastest shape measured on Sapphire Rapids); the remainders take smaller
// instantiations: kPairTiles<T>[rows - 1][pairs - 1].
constexpr int kTileRows = 4, kTilePairs = 4;
static_assert(kScaleRows % kTileRows == 0 && kPairBlock % kTilePairs == 0);

template <DType T, int R, int... P>
constexpr std::array<PairTileFn, sizeof...(P)> PairTileRow(std::integer_sequence<int, P...>) {
  return {PairTileFn{&QuantPairTile<T, R, P + 1>}...};
}
template <DType T, int... R>
constexpr std::array<std::array<PairTileFn, kTilePairs>, sizeof...(R)> PairTileTable(
    std::integer_sequence<int, R...>) {
  return {PairTileRow<T, R + 1>(std::make_integer_sequence<int, kTilePairs>())...};
}
template <DType T>
constexpr auto kPairTiles = PairTileTable<T>(std::make_integer_sequence<int, kTileRows>());

// scratch: n_in floats = the scales of kScaleRows weight rows (2 x 16 x n_in / 32).
template <DType T>
void QuantPairKernel(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end,
                     const qmm::Acts& a, float* y, size_t y_stride, float* scratch) {
  const int64_t nb = a.n_blocks;
  float* wd = scratch;
  float* wm = scratch + kScaleRows * nb;
  alignas(64) float mins[kScaleRows][2 * kPairBlock];
  for (int64_t pb = 0; pb < a.n_pairs; pb += kPairBlock) {
    const int64_t pe = a.n_pairs - pb < kPairBlock ? a.n_pairs : pb + kPairBlock;
    const int64_t pb_rows = a.n_rows - 2 * pb < 2 * kPairBlock ? a.n_rows - 2 * pb : 2 * kPairBlock;
    for (int64_t oc = o_begin; oc < o_end; oc += kScaleRows) {
      const int64_t oc_rows = o_end - oc < kScaleRows ? o_end - oc : kScaleRows;
      // The next group's weights, prefetched by this group's tiles.
      const int64_t next_rows =
          o_end - (oc + oc_rows) < kScaleRows ? o_end - (oc + oc_rows) : kScaleRows;
      const int64_t next_lines = (next_rows * static_cast<int64_t>(row_bytes) + 63) / 64;
      const int64_t n_tiles =
          (oc_rows + kTileRows - 1) / kTileRows * ((pe - pb + kTilePairs - 1) / kTilePairs);
      const int64_t tile_lines = (next_lines + n_tiles - 1) / n_tiles;
      TilePrefetch pf;
      pf.per_block = (tile_lines + nb - 1) / nb;
      const char* next = static_cast<const char*>(W) + (oc + oc_rows) * row_bytes;
      int64_t tile = 0;
      ConvertWeightScales<T>(W, row_bytes, oc, oc_rows, nb, wd, wm);
      if constexpr (T == DType::kQ4_1) MinTerms(a, wm, oc_rows, 2 * pb, pb_rows, mins);
      for (int64_t o = oc; o < oc + oc_rows; o += kTileRows) {
        const int64_t rows = oc + oc_rows - o < kTileRows ? oc + oc_rows - o : kTileRows;
        for (int64_t p = pb; p < pe; p += kTilePairs) {
          const int64_t pairs = pe - p < kTilePairs ? pe - p : kTilePairs;
          const auto* tile_mins =
              reinterpret_cast<const float(*)[2 * kPairBlock]>(&mins[o - oc][2 * (p - pb)]);
          pf.base = next + 64 * tile * tile_lines;
          const int64_t left = next_lines - tile * tile_lines;
          pf.n = left < 0 ? 0 : left < tile_lines ? left : tile_lines;
          ++tile;
          kPairTiles<T>[rows - 1][pairs - 1].run(W, row_bytes, o, a, p, wd + (o - oc) * nb,
                                                 tile_mins, pf, y, y_stride);
        }
      }
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
