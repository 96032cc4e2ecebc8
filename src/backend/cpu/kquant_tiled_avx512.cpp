// AVX-512 VNNI kernel for batches of Q4_K, Q5_K and Q6_K in llama.cpp's tiled
// order (kquant_kernels.h, "Tiled order"), bit for bit, for AVX-512 machines
// without AMX (kquant_amx.cpp computes the same integers with tiles). The
// order sums each 256-block exactly in integers before any float step:
//   S1 = sum over sub-blocks s of scale_s * sum_e(w_e * q_e)   (int32)
//   S2 = sum over sub-blocks of min_s * bsum_s                  (Q4_K, Q5_K)
//   t = float(S1) * d_w;  t = fma(-dmin_w, float(S2), t);  acc = fma(t, d_x, acc)
// with w the signed weight values (Q4_K / Q5_K codes 0..15 / 0..31, Q6_K
// code - 32).
//
// Layout: lane j of a register is activation row 16t + j (the activations
// arranged once per product into VNNI tiles by ArrangeKTiles, as the AMX
// kernel's B operand, but biased: u8 q + 128), and a weight row's 4 values
// of a group are broadcast to all lanes from an unpacked copy in scratch,
// straight from memory into vpdpbusd (u8 activations x s8 weights). So
//   P_s = sum_e (q_e + 128) * w_e  over sub-block s   (one vpdpbusd per 4 e)
//   S1  = sum_s scale_s * P_s - 128 * sum_s scale_s * sum_e w_e
// where the last term, per weight row and block, is computed at unpack time
// (Weights::corr): per sub-block one vpmulld and one add, per block a few
// float steps, for 16 activation rows at once. The ~14 instructions per
// (weight row, activation row, block) of the one-pair VNNI kernels
// (kquant_avx512.cpp) become ~1.3 per 64 multiply-adds.
//
// Per group of 16 weight rows and chunk of kChunk blocks the weights are
// unpacked once and shared by every activation tile; a tile runs its weight
// rows in two bands of kBand (registers: kBand sub-block sums, S1 sums and
// f32 accumulators). The accumulators (one weight row across 16 activation
// rows each) go through scratch between chunks and are transposed at the end,
// so that each activation row's 16 outputs are one store.
// GCC 12 reports its own _mm512_undefined_*() placeholders inside the
// AVX-512 intrinsic headers as uninitialized (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/kquant_codes_avx512.h"
#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/kquant_scales_avx512.h"
#include "backend/cpu/packed_weight.h"
#include "backend/cpu/quant_blocks.h"
#include "backend/cpu/quant_matmul_kernels.h"
#include "backend/cpu/transpose16x16_avx512.h"
#include "core/half.h"

namespace llm {
namespace {

constexpr int kRows = 16;                // weight rows per group, activation rows per tile
constexpr int kBand = 8;                 // weight rows per register band
constexpr int kChunksPerBlock = 4;       // 64-element chunks of a 256-block (ArrangeKTiles)
constexpr int64_t kTileBytes = 16 * 64;  // one chunk of an activation tile
constexpr int64_t kChunk = qmm::kVnniKChunkBlocks;  // 256-blocks unpacked at once

template <DType T>
constexpr bool kHasMin = T == DType::kQ4_K || T == DType::kQ5_K;
// Sub-blocks per 256-block (one scale each).
template <DType T>
constexpr int kSubBlocks = T == DType::kQ6_K ? 16 : 8;

// One chunk of kChunk blocks of 16 weight rows, unpacked.
struct Weights {
  int8_t* w;       // [block][row][256]: the signed values, in element order
  int32_t* scale;  // [block][row][16]: scale of sub-block s
  int32_t* corr;   // [block][row]: 128 * sum_s scale_s * sum_e w_e
  float* d;        // [block][row]
  float* dmin;     // [block][row]
  int32_t* mins;   // [block][pair k][row]: (min_2k, min_2k+1) as two int16
};

// Sum of the 8 int32 lanes of v (exact).
inline int32_t SumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// Bytes 0..15 of the result: byte i0 of v's low 128 bits; bytes 16..31:
// byte i1 of them (v's 16 bytes in both halves, an in-lane shuffle).
inline __m256i SpreadBytes(__m256i v, int i0, int i1) {
  return _mm256_shuffle_epi8(v, _mm256_setr_m128i(_mm_set1_epi8(static_cast<char>(i0)),
                                                  _mm_set1_epi8(static_cast<char>(i1))));
}

// Row `row` (0..15) of block `blk` of the chunk into w. The scales are
// decoded and the correction sum_s scale_s * sum_e w_e formed with vector
// instructions (sum_e w_e * scale(e) by vpdpbusd against each element's
// scale): at one activation tile (a 16-row batch) the unpacking is most of
// the kernel's work.
template <DType T>
void UnpackRow(const typename KBlockOf<T>::type& b, int row, const Weights& w, int64_t blk) {
  int8_t* out = w.w + (blk * kRows + row) * 256;
  int32_t* scale = w.scale + (blk * kRows + row) * 16;
  int32_t corr = 0;
  if constexpr (T == DType::kQ6_K) {
    w.d[blk * kRows + row] = F16ToF32(b.d);
    // The 16 int8 scales, as int32 and, for the correction, per element.
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m512i sc32 = _mm512_cvtepi8_epi32(sc8);
    _mm512_storeu_si512(scale, sc32);
    const __m256i sc_both = _mm256_broadcastsi128_si256(sc8);
    __m256i dot = _mm256_setzero_si256();  // sum_e code_e * scale(e), by lanes
    const __m256i m32 = _mm256_set1_epi8(32);
    for (int hf = 0; hf < 2; ++hf) {
      __m256i codes[4];
      HalfCodesQ6K(b, hf, codes);
      for (int q = 0; q < 4; ++q) {  // elements 128hf + 32q .. + 31: sub-blocks s0, s0 + 1
        const int e0 = 128 * hf + 32 * q, s0 = e0 / 16;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + e0), _mm256_sub_epi8(codes[q], m32));
        dot = _mm256_dpbusd_epi32(dot, codes[q], SpreadBytes(sc_both, s0, s0 + 1));
      }
    }
    // sum_s scale_s * sum_e (code_e - 32) = sum_e code_e scale(e) - 32 * 16 * sum_s scale_s.
    corr = SumI32(dot) - 512 * _mm512_reduce_add_epi32(sc32);
  } else {
    w.d[blk * kRows + row] = F16ToF32(b.d);
    w.dmin[blk * kRows + row] = F16ToF32(b.dmin);
    const __m128i sm = ScalesMinsK4(b.scales);  // bytes 0..7: scales, 8..15: mins
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(scale), _mm256_cvtepu8_epi32(sm));
    // (min_2k, min_2k+1) as int16 pairs: the mins zero-extended to int16.
    alignas(16) int32_t min_pairs[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(min_pairs),
                    _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)));
    for (int k = 0; k < 4; ++k) w.mins[(blk * 4 + k) * kRows + row] = min_pairs[k];
    const __m256i sc_both = _mm256_broadcastsi128_si256(sm);
    __m256i dot = _mm256_setzero_si256();  // sum_e w_e * scale(e), by lanes
    for (int c = 0; c < kChunksPerBlock; ++c) {
      __m256i lo, hi;
      ChunkCodesK45<typename KBlockOf<T>::type, T == DType::kQ5_K>(b, c, &lo, &hi);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * c), lo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * c + 32), hi);
      // Scales <= 63: s8 operands.
      dot = _mm256_dpbusd_epi32(dot, lo, SpreadBytes(sc_both, 2 * c, 2 * c));
      dot = _mm256_dpbusd_epi32(dot, hi, SpreadBytes(sc_both, 2 * c + 1, 2 * c + 1));
    }
    corr = SumI32(dot);
  }
  w.corr[blk * kRows + row] = 128 * corr;
}

// acc[i] (weight row row0 + i of the group, lanes: the tile's activation
// rows) += the chunk's blocks [0, len) (global blocks kb0 + j). act: the
// tile's chunks (Acts::kq_tiles of tile t, biased), d_x / bsum pairs: its
// Acts::kd_tiles / kbsum_tiles.
template <DType T>
inline void BandBlocks(const Weights& w, int row0, int64_t kb0, int64_t len, const uint8_t* act,
                       const float* d_x, const int32_t* bsum_pairs, __m512 acc[kBand]) {
  constexpr int kSub = kSubBlocks<T>, kGroups = 256 / kSub / 4;  // 4-element groups per sub-block
  for (int64_t j = 0; j < len; ++j) {
    const int64_t kb = kb0 + j;
    const uint8_t* act_b = act + kb * kChunksPerBlock * kTileBytes;
    const int8_t* wj = w.w + (j * kRows + row0) * 256;
    const int32_t* sj = w.scale + (j * kRows + row0) * 16;
    __m512i s1[kBand];
    for (int i = 0; i < kBand; ++i) s1[i] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int s = 0; s < kSub; ++s) {
      __m512i p[kBand];
      for (int i = 0; i < kBand; ++i) p[i] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g) {
        const int e = s * (256 / kSub) + 4 * g;  // first element of the group
        // Row k = (e % 64) / 4 of chunk e / 64: the group's 4 activations
        // of each of the 16 rows.
        const __m512i av = _mm512_loadu_si512(act_b + (e / 64) * kTileBytes + (e % 64) * 16);
#pragma GCC unroll 8
        for (int i = 0; i < kBand; ++i) {
          // p[i] += av . (weight row i's 4 values, broadcast), the
          // broadcast embedded in vpdpbusd (GCC 12 would load it into a
          // register first: one more instruction each).
          asm("vpdpbusd %[x]%{1to16%}, %[a], %[p]"
              : [p] "+v"(p[i])
              : [a] "v"(av), [x] "m"(*reinterpret_cast<const int32_t*>(wj + i * 256 + e)));
        }
      }
      for (int i = 0; i < kBand; ++i) {
        s1[i] =
            _mm512_add_epi32(s1[i], _mm512_mullo_epi32(p[i], _mm512_set1_epi32(sj[i * 16 + s])));
      }
    }
    const __m512 dx = _mm512_loadu_ps(d_x + kb * kRows);
    const int32_t* bp = bsum_pairs + kb * 4 * kRows;
    for (int i = 0; i < kBand; ++i) {
      const int r = row0 + i;
      const __m512i s1i = _mm512_sub_epi32(s1[i], _mm512_set1_epi32(w.corr[j * kRows + r]));
      __m512 tv = _mm512_mul_ps(_mm512_cvtepi32_ps(s1i), _mm512_set1_ps(w.d[j * kRows + r]));
      if constexpr (kHasMin<T>) {
        __m512i s2 = _mm512_setzero_si512();
        for (int k = 0; k < 4; ++k) {
          s2 = _mm512_dpwssd_epi32(s2, _mm512_loadu_si512(bp + k * kRows),
                                   _mm512_set1_epi32(w.mins[(j * 4 + k) * kRows + r]));
        }
        tv = _mm512_fnmadd_ps(_mm512_set1_ps(w.dmin[j * kRows + r]), _mm512_cvtepi32_ps(s2), tv);
      }
      acc[i] = _mm512_fmadd_ps(tv, dx, acc[i]);
    }
  }
}

// W: GGUF rows (row o at W + o * row_bytes); o_begin a multiple of 16.
// scratch: qmm::ScratchFloats(n_in, n_rows) floats.
template <DType T, bool kPacked = false>
void KTiledKernel(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end,
                  const qmm::Acts& a, float* y, size_t y_stride, float* scratch) {
  using Block = typename KBlockOf<T>::type;
  const int64_t nkb = a.n_kblocks;
  const int64_t n_tiles = (a.n_rows + kRows - 1) / kRows;
  const int64_t n_chunks = a.n_in / 64;
  // scratch, 64-byte aligned: the chunk's unpacked weights, then the
  // accumulators ([n_tiles][16 weight rows][16] f32).
  uint8_t* base =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  Weights w;
  w.w = reinterpret_cast<int8_t*>(base);
  w.scale = reinterpret_cast<int32_t*>(w.w + kChunk * kRows * 256);
  w.corr = w.scale + kChunk * kRows * 16;
  w.d = reinterpret_cast<float*>(w.corr + kChunk * kRows);
  w.dmin = w.d + kChunk * kRows;
  w.mins = reinterpret_cast<int32_t*>(w.dmin + kChunk * kRows);
  // W a rows16 copy (kPacked): each chunk's GGUF blocks, rebuilt.
  uint8_t* rows = reinterpret_cast<uint8_t*>(w.mins + kChunk * 4 * kRows);
  float* saved = reinterpret_cast<float*>(rows + (kPacked ? kChunk * kRows * sizeof(Block) : 0));
  static_assert(qmm::kVnniKScratchFloats * 4 >= 64 + kChunk * kRows * (256 + 16 * 4 + 3 * 4 + 4 * 4 +
                                                                    sizeof(BlockQ6_K)),
                "kVnniKScratchFloats too small");

  for (int64_t o = o_begin; o < o_end; o += kRows) {
    const int n = static_cast<int>(std::min<int64_t>(kRows, o_end - o));  // live weight rows
    for (int64_t kb0 = 0; kb0 < nkb; kb0 += kChunk) {
      const int64_t len = std::min(kChunk, nkb - kb0);
      if constexpr (kPacked) {
        // The chunk's 16 rows as GGUF blocks (a few % of a 256-row batch),
        // the copy's next chunk prefetched meanwhile.
        rows16::UnpackGroup(T, static_cast<const uint8_t*>(W), nkb, o, kb0, len, rows);
        const rows16::NextChunk next = rows16::NextChunkOfGroup(T, W, o, o_end, nkb, kb0, len, kChunk);
        for (int64_t off = 0; off < next.len * rows16::Words(T) * 64; off += 64) {
          __builtin_prefetch(next.at.qs + off, 0, 2);
        }
        for (int r = 0; r < kRows; ++r) {
          const Block* blocks = reinterpret_cast<const Block*>(rows) + r * len;
          for (int64_t j = 0; j < len; ++j) UnpackRow<T>(blocks[j], r, w, j);
        }
      } else {
        qmm::UnpackGroupChunk<T>(
            W, row_bytes, o, o_end, kb0, len, kChunk, nkb,
            [&](const Block& b, int r, int64_t j) { UnpackRow<T>(b, r, w, j); });
      }
      const bool first = kb0 == 0, last = kb0 + len == nkb;
      for (int64_t t = 0; t < n_tiles; ++t) {
        const uint8_t* act =
            reinterpret_cast<const uint8_t*>(a.kq_tiles) + t * n_chunks * kTileBytes;
        const float* d_x = a.kd_tiles + t * nkb * kRows;
        const int32_t* bsum_pairs = a.kbsum_tiles + t * nkb * 4 * kRows;
        float* tile_saved = saved + t * kRows * 16;
        for (int row0 = 0; row0 < kRows; row0 += kBand) {
          __m512 acc[kBand];
          for (int i = 0; i < kBand; ++i) {
            acc[i] = first ? _mm512_setzero_ps() : _mm512_load_ps(tile_saved + (row0 + i) * 16);
          }
          BandBlocks<T>(w, row0, kb0, len, act, d_x, bsum_pairs, acc);
          for (int i = 0; i < kBand; ++i) _mm512_store_ps(tile_saved + (row0 + i) * 16, acc[i]);
        }
        if (!last) continue;
        // Row i of the tile's accumulators holds weight row o + i across its
        // activation rows: transposed, each activation row's 16 outputs are
        // one store.
        __m512 out[kRows];
        for (int i = 0; i < kRows; ++i) out[i] = _mm512_load_ps(tile_saved + i * 16);
        Transpose16x16(out);
        const int64_t rows = std::min<int64_t>(kRows, a.n_rows - t * kRows);
        const __mmask16 mask = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
        for (int64_t r = 0; r < rows; ++r) {
          _mm512_mask_storeu_ps(y + (t * kRows + r) * static_cast<int64_t>(y_stride) + o, mask,
                                out[r]);
        }
      }
    }
  }
}

}  // namespace

namespace qmm {
Kernel KQuantTiledAvx512PackedKernel(DType t) {
  return t == DType::kQ6_K ? &KTiledKernel<DType::kQ6_K, true> : nullptr;
}

Kernel KQuantTiledAvx512Kernel(DType t) {
  switch (t) {
    case DType::kQ4_K:
      return &KTiledKernel<DType::kQ4_K>;
    case DType::kQ5_K:
      return &KTiledKernel<DType::kQ5_K>;
    case DType::kQ6_K:
      return &KTiledKernel<DType::kQ6_K>;
    default:
      return nullptr;
  }
}
}  // namespace qmm
}  // namespace llm

#pragma GCC diagnostic pop
