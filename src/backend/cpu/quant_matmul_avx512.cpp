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

// Batches (several activation rows), in the same order as the one-row kernel
// (ggml's vec_dot), so every output equals QuantRowTile's bit for bit
// (tests/backend/quant_matmul_test.cpp) at about half of its instructions.
//
// QuantRowTile keeps, per weight row o and activation row a, 8 f32 lane
// accumulators L_g (g = 0..7: elements 4g..4g+3 of every 32-block), each
//   L_g = fma(f32(dw[b]) * f32(da[b]), f32(sum of the 4 products), L_g)
// over the blocks b in order, then hsum_float_8 (L_0 + L_4, ..., their pair
// sums, the total) and Q4_1's separate min-term chain fma(mw[b], sa[b], .).
// This kernel runs the same operations with 16 weight rows side by side:
// lane l of a 512-bit register belongs to weight row o + l, so
//   - one vpdpbusd gives lane g's integer sum for 16 rows at once (the
//     weights rearranged per block: PrepareGroup), the activation's 4 bytes
//     broadcast from memory;
//   - the scale product dw * da is one vmulps per block and activation row
//     for all 8 lanes g (QuantRowTile needs one per lane vector);
//   - hsum_float_8 becomes 7 vertical adds for 16 outputs, stored as one
//     vector (y[a][o .. o + 15] are contiguous).
// That is 3 vector instructions per 16 weight rows, activation row, block
// and lane g (vpdpbusd, vcvtdq2ps, vfmadd) plus 1-2 per block and row.
//   - vpdpbusd wants u8 x s8. The weights enter unsigned (Q4: the nibble,
//     Q8_0: w + 128) and the integer sum starts at -offset * (sum of the 4
//     activations), precomputed per call (Acts::bias). Integer sums are
//     exact, so each lane ends at sum(w * q) as in QuantRowTile.

// Weight rows per group: one 32-bit lane each.
constexpr int kGroupRows = 16;
// The 8 lane vectors g of a 32-block.
constexpr int kLaneGroups = 8;

// Blocks rearranged and run at a time (QuantWideKernel); the scratch
// layout of quant_matmul_kernels.h.
constexpr int64_t kChunkBlocks = qmm::kWideChunkBlocks;
static_assert(qmm::kWideScratchFloats == 16 + kChunkBlocks * (kLaneGroups + 2) * kGroupRows);
static_assert(qmm::kWideScratchPerRow == (kLaneGroups + 1) * 16);

// Blocks b0 .. b1 - 1 of weight rows o .. o + n - 1 (n <= 16) as
// PrepareGroup lays them out, block index b - b0:
//   q [nb][8][16] u32: lane l of vector (b, g) = row o + l's elements
//     32b + 4g .. 32b + 4g + 3 as u8 (Q4: the nibble, Q8_0: w ^ 0x80)
//   d [nb][16] f32: the rows' scales; m [nb][16] f32: Q4_1's mins
struct WideGroup {
  const uint32_t* q = nullptr;
  const float* d = nullptr;
  const float* m = nullptr;
  int n = 0;
};

// Two-source permutes of 32-bit elements (element i of b is i + 16).
inline __m512i Permute2(__m512i a, const int32_t (&idx)[16], __m512i b) {
  return _mm512_permutex2var_epi32(a, _mm512_loadu_si512(idx), b);
}

// out[k] lane l = 32-bit word k of the 16 bytes at base + row_off[l] (a
// 16 x 4 transpose): rows 4j .. 4j + 3 fill the 128-bit lanes of r[j]; one
// round of permutes gathers words (0, 1) and (2, 3) of 8 rows, a second one
// each word of 16 rows.
inline void Transpose16x4(const char* base, const int64_t* row_off, __m512i out[4]) {
  // Word k of row i (0..7) of the pair (r[0], r[1]) is element 4i + k.
  alignas(64) static const int32_t kWords01[16] = {0, 4, 8, 12, 16, 20, 24, 28,
                                                   1, 5, 9, 13, 17, 21, 25, 29};
  alignas(64) static const int32_t kWords23[16] = {2, 6, 10, 14, 18, 22, 26, 30,
                                                   3, 7, 11, 15, 19, 23, 27, 31};
  // Lanes 0..7 of both (rows 0..7, then 8..15), or lanes 8..15 of both.
  alignas(64) static const int32_t kLow8[16] = {0, 1, 2, 3, 4, 5, 6, 7,
                                                16, 17, 18, 19, 20, 21, 22, 23};
  alignas(64) static const int32_t kHigh8[16] = {8, 9, 10, 11, 12, 13, 14, 15,
                                                 24, 25, 26, 27, 28, 29, 30, 31};
  auto load = [&](int l) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + row_off[l]));
  };
  __m512i r[4];
  for (int j = 0; j < 4; ++j) {
    __m512i v = _mm512_castsi128_si512(load(4 * j));
    v = _mm512_inserti32x4(v, load(4 * j + 1), 1);
    v = _mm512_inserti32x4(v, load(4 * j + 2), 2);
    r[j] = _mm512_inserti32x4(v, load(4 * j + 3), 3);
  }
  const __m512i a01 = Permute2(r[0], kWords01, r[1]);  // rows 0..7: words 0 | 1
  const __m512i a23 = Permute2(r[0], kWords23, r[1]);  // rows 0..7: words 2 | 3
  const __m512i b01 = Permute2(r[2], kWords01, r[3]);  // rows 8..15
  const __m512i b23 = Permute2(r[2], kWords23, r[3]);
  out[0] = Permute2(a01, kLow8, b01);
  out[1] = Permute2(a01, kHigh8, b01);
  out[2] = Permute2(a23, kLow8, b23);
  out[3] = Permute2(a23, kHigh8, b23);
}

// out[k] lane l = 32-bit word k of the 32 bytes at base + row_off[l] (a
// 16 x 8 transpose): rows 2j, 2j + 1 fill the halves of r[j]; three rounds
// of permutes gather words 0..3 / 4..7 of 4 rows, then word pairs of 8
// rows, then single words of 16 rows.
inline void Transpose16x8(const char* base, const int64_t* row_off, __m512i out[8]) {
  // Round 1, half h: lane 4k + i = word 4h + k of row i (0..3).
  alignas(64) static const int32_t kRows4[2][16] = {
      {0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27},
      {4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31}};
  // Round 2, half e: lane 8k + i = word 2e + k of row i (0..7).
  alignas(64) static const int32_t kRows8[2][16] = {
      {0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23},
      {8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31}};
  // Round 3, word k: lane i = word k of row i (0..15).
  alignas(64) static const int32_t kRows16[2][16] = {
      {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
      {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}};
  auto load = [&](int l) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + row_off[l]));
  };
  __m512i r[8];
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_inserti64x4(_mm512_castsi256_si512(load(2 * j)), load(2 * j + 1), 1);
  }
  __m512i x[4][2], y[2][2][2];
  for (int i = 0; i < 4; ++i) {
    for (int h = 0; h < 2; ++h) x[i][h] = Permute2(r[2 * i], kRows4[h], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    for (int h = 0; h < 2; ++h) {
      for (int e = 0; e < 2; ++e) y[i][h][e] = Permute2(x[2 * i][h], kRows8[e], x[2 * i + 1][h]);
    }
  }
  for (int h = 0; h < 2; ++h) {
    for (int e = 0; e < 2; ++e) {
      for (int k = 0; k < 2; ++k) out[4 * h + 2 * e + k] = Permute2(y[0][h][e], kRows16[k], y[1][h][e]);
    }
  }
}

// Lays out blocks b0 .. b1 - 1 (at most kChunkBlocks) of weight rows
// o .. o + n - 1 as WideGroup describes, into scratch (64-byte aligned). In
// a partial group (n < 16) lanes n..15 repeat row o + n - 1: computed, never
// stored.
template <DType T>
WideGroup PrepareGroup(const void* W, size_t row_bytes, int64_t o, int n, int64_t b0, int64_t b1,
                       float* scratch) {
  constexpr size_t kBlockBytes = T == DType::kQ8_0   ? sizeof(BlockQ8_0)
                                 : T == DType::kQ4_0 ? sizeof(BlockQ4_0)
                                                     : sizeof(BlockQ4_1);
  constexpr size_t kQsOffset = T == DType::kQ4_1 ? 4 : 2;  // after d (and Q4_1's m)
  WideGroup g;
  g.n = n;
  auto* q = reinterpret_cast<uint32_t*>(scratch);
  const int64_t nb = b1 - b0;
  float* d = scratch + nb * kLaneGroups * kGroupRows;
  float* m = d + nb * kGroupRows;
  g.q = q;
  g.d = d;
  g.m = m;
  alignas(64) int64_t row_off[kGroupRows];
  for (int l = 0; l < kGroupRows; ++l) {
    row_off[l] = static_cast<int64_t>(l < n ? l : n - 1) * static_cast<int64_t>(row_bytes);
  }
  const __m512i lo_offsets = _mm512_load_si512(row_off), hi_offsets = _mm512_load_si512(row_off + 8);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const char* base = static_cast<const char*>(W) + o * row_bytes + b0 * kBlockBytes;
  for (int64_t b = 0; b < nb; ++b) {
    const char* blocks = base + b * kBlockBytes;
    // The first 4 bytes of each row's block: f16 d, then Q4_1's f16 m.
    const __m256i dm_lo = _mm512_i64gather_epi32(lo_offsets, blocks, 1);
    const __m256i dm_hi = _mm512_i64gather_epi32(hi_offsets, blocks, 1);
    const __m512i dm = _mm512_inserti64x4(_mm512_castsi256_si512(dm_lo), dm_hi, 1);
    _mm512_store_ps(d + b * kGroupRows, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm)));
    if constexpr (T == DType::kQ4_1) {
      _mm512_store_ps(m + b * kGroupRows,
                      _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16))));
    }
    uint32_t* qb = q + b * kLaneGroups * kGroupRows;
    if constexpr (T == DType::kQ8_0) {
      __m512i words[8];
      Transpose16x8(blocks + kQsOffset, row_off, words);
      for (int k = 0; k < 8; ++k) {
        _mm512_store_si512(qb + k * kGroupRows, _mm512_xor_si512(words[k], flip));
      }
    } else {
      // Byte j of word k holds element 4k + j (low nibble) and 16 + 4k + j.
      __m512i words[4];
      Transpose16x4(blocks + kQsOffset, row_off, words);
      for (int k = 0; k < 4; ++k) {
        _mm512_store_si512(qb + k * kGroupRows, _mm512_and_si512(words[k], low4));
        _mm512_store_si512(qb + (4 + k) * kGroupRows,
                           _mm512_and_si512(_mm512_srli_epi32(words[k], 4), low4));
      }
    }
  }
  return g;
}

// Cache lines a tile prefetches into L2 for the next group of weight rows
// (read once per call, from memory): the n lines of 64 bytes from base,
// per_block of them per block iteration. QuantWideKernel spreads the next
// group over the current group's tiles, so that no burst of prefetches
// fills the miss queues (a burst measured slower than none).
struct TilePrefetch {
  const char* base = nullptr;
  int64_t n = 0;
  int64_t per_block = 0;
};

// The blocks b0 .. b1 - 1 of a tile's products (PrepareGroup's chunk):
// first / last say whether the accumulators start at zero / end in y;
// between chunks they wait in acc_buf, [row][kLaneGroups + 1][16] f32.
struct WideChunk {
  int64_t b0 = 0, b1 = 0;
  bool first = true, last = true;
  float* acc_buf = nullptr;
};

// y[row][o .. o + g.n - 1] for activation rows row0 .. row0 + R - 1, over
// the chunk's blocks.
template <DType T, int R>
void WideTile(const WideGroup& g, const qmm::Acts& a, int64_t row0, int64_t o, const WideChunk& c,
              const TilePrefetch& pf, float* y, size_t y_stride) {
  const int64_t nb = a.n_blocks;
  constexpr int kSaved = kLaneGroups + 1;  // vectors per row in acc_buf
  __m512 acc[R][kLaneGroups];
  __m512 accm[R];  // Q4_1: the min terms
  for (int r = 0; r < R; ++r) {
    const float* saved = c.acc_buf + (row0 + r) * kSaved * 16;
    accm[r] = c.first ? _mm512_setzero_ps() : _mm512_load_ps(saved + kLaneGroups * 16);
    for (int k = 0; k < kLaneGroups; ++k) {
      acc[r][k] = c.first ? _mm512_setzero_ps() : _mm512_load_ps(saved + k * 16);
    }
  }
  for (int64_t b = c.b0; b < c.b1; ++b) {
    for (int64_t i = (b - c.b0) * pf.per_block, e = i + pf.per_block; i < e && i < pf.n; ++i) {
      _mm_prefetch(pf.base + 64 * i, _MM_HINT_T1);
    }
    const __m512 wd = _mm512_load_ps(g.d + (b - c.b0) * kGroupRows);
    const uint32_t* wq = g.q + (b - c.b0) * kLaneGroups * kGroupRows;
    for (int r = 0; r < R; ++r) {
      const int64_t row = row0 + r;
      const float* ds = a.ds + 2 * (row * nb + b);
      const __m512 scale = _mm512_mul_ps(wd, _mm512_set1_ps(ds[0]));
      if constexpr (T == DType::kQ4_1) {
        accm[r] = _mm512_fmadd_ps(_mm512_load_ps(g.m + (b - c.b0) * kGroupRows),
                                  _mm512_set1_ps(ds[1]), accm[r]);
      }
      const int8_t* xq = a.q + row * a.n_in + b * qmm::kActBlock;
      const int32_t* bias =
          T == DType::kQ4_1 ? nullptr : a.bias + row * (a.n_in / 4) + b * kLaneGroups;
#pragma GCC unroll 8
      for (int k = 0; k < kLaneGroups; ++k) {
        int32_t x4;
        __builtin_memcpy(&x4, xq + 4 * k, 4);
        const __m512i start =
            T == DType::kQ4_1 ? _mm512_setzero_si512() : _mm512_set1_epi32(bias[k]);
        const __m512i isum = _mm512_dpbusd_epi32(start, _mm512_load_si512(wq + k * kGroupRows),
                                                 _mm512_set1_epi32(x4));
        acc[r][k] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(isum), acc[r][k]);
      }
    }
  }
  if (!c.last) {
    for (int r = 0; r < R; ++r) {
      float* saved = c.acc_buf + (row0 + r) * kSaved * 16;
      for (int k = 0; k < kLaneGroups; ++k) _mm512_store_ps(saved + k * 16, acc[r][k]);
      _mm512_store_ps(saved + kLaneGroups * 16, accm[r]);
    }
    return;
  }
  const __mmask16 mask = static_cast<__mmask16>(g.n >= 16 ? 0xFFFF : (1u << g.n) - 1);
  for (int r = 0; r < R; ++r) {
    // hsum_float_8 with the lanes g as vectors (HSum256's adds, in order).
    const __m512 s0 = _mm512_add_ps(acc[r][0], acc[r][4]), s1 = _mm512_add_ps(acc[r][1], acc[r][5]);
    const __m512 s2 = _mm512_add_ps(acc[r][2], acc[r][6]), s3 = _mm512_add_ps(acc[r][3], acc[r][7]);
    __m512 total = _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3));
    if constexpr (T == DType::kQ4_1) total = _mm512_add_ps(total, accm[r]);
    _mm512_mask_storeu_ps(y + (row0 + r) * y_stride + o, mask, total);
  }
}

// scratch: qmm::ScratchFloats(n_in, n_rows) floats. A group's blocks go in
// chunks of kChunkBlocks, each rearranged and then run for every activation
// row: the rearranged chunk (20 KB), a tile's activations and the saved
// accumulators stay in L1 even for long rows (Q4_0 8192 x 2048 at 16 rows:
// 6.2 -> 5.6 ms, best of 12).
template <DType T>
void QuantWideKernel(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end,
                     const qmm::Acts& a, float* y, size_t y_stride, float* scratch) {
  // PrepareGroup's aligned stores: scratch rounded up to 64 bytes.
  auto* aligned =
      reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  const int64_t nb = a.n_blocks, n_tiles = (a.n_rows + 1) / 2;
  const int64_t n_chunks = (nb + kChunkBlocks - 1) / kChunkBlocks;
  WideChunk c;
  c.acc_buf = aligned + kChunkBlocks * (kLaneGroups + 2) * kGroupRows;
  for (int64_t o = o_begin; o < o_end; o += kGroupRows) {
    const int n = o_end - o < kGroupRows ? static_cast<int>(o_end - o) : kGroupRows;
    // The next group's rows, a share per (chunk, tile) and block.
    const int64_t next_rows = o_end - (o + n) < kGroupRows ? o_end - (o + n) : kGroupRows;
    const int64_t next_lines = (next_rows * static_cast<int64_t>(row_bytes) + 63) / 64;
    const int64_t slot_lines = (next_lines + n_chunks * n_tiles - 1) / (n_chunks * n_tiles);
    const char* next = static_cast<const char*>(W) + (o + n) * row_bytes;
    for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
      c.b0 = chunk * kChunkBlocks;
      c.b1 = nb - c.b0 < kChunkBlocks ? nb : c.b0 + kChunkBlocks;
      c.first = chunk == 0;
      c.last = chunk == n_chunks - 1;
      const WideGroup g = PrepareGroup<T>(W, row_bytes, o, n, c.b0, c.b1, aligned);
      TilePrefetch pf;
      pf.per_block = (slot_lines + (c.b1 - c.b0) - 1) / (c.b1 - c.b0);
      for (int64_t r = 0, tile = 0; r < a.n_rows; r += 2, ++tile) {
        const int64_t slot = chunk * n_tiles + tile;
        pf.base = next + 64 * slot * slot_lines;
        const int64_t left = next_lines - slot * slot_lines;
        pf.n = left < 0 ? 0 : left < slot_lines ? left : slot_lines;
        if (r + 2 <= a.n_rows) {
          WideTile<T, 2>(g, a, r, o, c, pf, y, y_stride);
        } else {
          WideTile<T, 1>(g, a, r, o, c, pf, y, y_stride);
        }
      }
    }
  }
}

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
    return _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + i)));
  } else {
    const __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + i));
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
  WalkPlainRows(W, row_bytes, o_begin, o_end, a, y, y_stride,
                [](auto rows_c, const char* const* rows, const char* const* next, const float* x,
                   int64_t n, float* out) {
                  PlainRows16<T, decltype(rows_c)::value>(rows, next, x, n, out);
                });
}

}  // namespace

namespace qmm {
Kernel Avx512Kernel(DType t) {
  switch (t) {
    case DType::kQ8_0:
      return &QuantWideKernel<DType::kQ8_0>;
    case DType::kQ4_0:
      return &QuantWideKernel<DType::kQ4_0>;
    case DType::kQ4_1:
      return &QuantWideKernel<DType::kQ4_1>;
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
