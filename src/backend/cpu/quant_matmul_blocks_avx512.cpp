// AVX-512 VNNI QuantMatMul kernel for Q4_0 and Q8_0 in the per-block order
// (quant_matmul_kernels.h, Avx512BlockOrderKernel), for every row count at
// the AVX-512 level: the order of the AMX kernel (quant_matmul_amx.cpp,
// which takes products of 8+ rows where the CPU has AMX), bit for bit. Per
// output y[r][o]:
//   acc = 0
//   per 32-block b, ascending:
//     S   = sum over the block's 32 elements of w_e * q_e   (int32, exact)
//     acc = fma(f32(d_w[o][b]) * d_x[r][b], float(S), acc)
//   y[r][o] = acc
//
// Why not ggml's vec_dot order (the AVX2 level's, and the rows16 kernel's
// for Q4_1 / Q5_0: 8 lane accumulators per output): there every 4 products
// cost a vpdpbusd, a vcvtdq2ps and a vfmadd; here the 8 vpdpbusd of a block
// chain into one int32 sum, so a block costs 8 vpdpbusd and 3 float
// instructions per 16 outputs instead of 8 + 16. llama.cpp's repacked
// kernels (q4_0_8x8, AMX) accumulate per block like this too.
//
// Data flow, per group of 16 weight rows (rows16, packed_weight.h) and chunk
// of kChunkBlocks blocks: every tile of up to 16 activation rows walks the
// chunk's blocks (the chunk's weights stay in L1 for all tiles); lane l of
// the accumulator of activation row r is y[r][o + l]. Per block the quant
// words are split once per tile (rows16::LoadWords: unsigned nibbles, or
// Q8_0's w + 128) and each activation row's sum starts at -offset *
// sum(q) (Acts::block_bias), so that vpdpbusd's u8 x s8 products give
// sum(w * q) exactly. Accumulators are saved between chunks (one vector per
// row). Unpacked (GGUF) weights are first packed into rows16 words chunk by
// chunk (rows16::ChunkOfGroup), so both give the same bits. One activation
// row (decode) reads each weight byte once and prefetches ahead.
// GCC 12 reports its own _mm512_undefined_*() placeholders inside the
// AVX-512 intrinsic headers as uninitialized (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/packed_weight.h"
#include "backend/cpu/quant_matmul_kernels.h"
#include "backend/cpu/rows16_words_avx512.h"

namespace llm {
namespace {

constexpr int kRows = rows16::kRows;  // weight rows per group = activation rows per tile
constexpr int64_t kChunkBlocks = qmm::kBlockOrderChunkBlocks;
// Bytes ahead of the block being read that one activation row (decode)
// prefetches, times DecodePrefetchScale() (cpu_features.h): as the
// vec_dot-order rows16 kernel, which measured 4 KB on a Sapphire Rapids
// Xeon; 16 KB on Zen 4 (1B Q4_0 decode, 2 threads, 5 alternating rounds:
// median 41.3 -> 46.5 tokens/s; 64 KB 45.5).
constexpr int64_t kPrefetchBytes = 4096;

// acc[i] (i < R) += the blocks [0, len) of the chunk (qs / sc: its rows16
// words and scales; global block b0 + j) for activation rows row0 .. row0 +
// R - 1. next (null: none): with each block j < next_len, block j's words
// of the next chunk are prefetched into L1 (a batch's first tile).
template <DType T, int R, bool kOneRow>
inline void TileBlocks(const uint8_t* qs, const uint8_t* sc, int64_t b0, int64_t len,
                       const qmm::Acts& a, int64_t row0, __m512 acc[R], const char* next,
                       int64_t next_len) {
  constexpr int kWords = rows16::kWordsOf<T>;
  const int64_t nb = a.n_blocks;
  const int64_t prefetch_bytes = kOneRow ? kPrefetchBytes * DecodePrefetchScale() : 0;
  for (int64_t j = 0; j < len; ++j) {
    const int64_t b = b0 + j;
    if (kOneRow) {
      // One activation row reads each weight byte once, straight from
      // memory: the copy's bytes kPrefetchBytes ahead into L2 (qs - b0's
      // words: the group's start; a prefetch never faults).
      rows16::PrefetchBlockShare(qs - b0 * kWords * 64, b, rows16::BlockShareBytes(T),
                                 prefetch_bytes);
    } else if (next != nullptr && j < next_len) {
      for (int k = 0; k < kWords; ++k) _mm_prefetch(next + (j * kWords + k) * 64, _MM_HINT_T0);
    }
    __m512i w[8];
    rows16::LoadWords<T>(qs, j, w);
    const __m512 d_w =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc + j * 32)));
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const int64_t row = row0 + i;
      const int8_t* xq = a.q + row * a.n_in + b * qmm::kActBlock;
      __m512i sum = _mm512_set1_epi32(a.block_bias[row * nb + b]);
      // sum += w[k] . (activations 4k .. 4k + 3, broadcast): written out
      // because GCC 12 loads _mm512_set1_epi32 into a register first, one
      // more instruction per vpdpbusd; the embedded broadcast made a
      // 512-row product ~25 % faster (Q4_0 and Q8_0, 8192 x 2048).
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        asm("vpdpbusd %[x]%{1to16%}, %[w], %[s]"
            : [s] "+v"(sum)
            : [w] "v"(w[k]), [x] "m"(*reinterpret_cast<const int32_t*>(xq + 4 * k)));
      }
      const __m512 scale = _mm512_mul_ps(d_w, _mm512_set1_ps(a.ds[2 * (row * nb + b)]));
      acc[i] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(sum), acc[i]);
    }
  }
}

// One tile of R activation rows over one chunk: loads (or zeroes) the rows'
// accumulators, runs the blocks, then saves them or, after the last chunk,
// stores the outputs y[row][o .. o + n - 1] (mask).
// next / next_len: the words to prefetch (TileBlocks).
template <DType T, int R>
void Tile(const uint8_t* qs, const uint8_t* sc, int64_t b0, int64_t len, bool first, bool last,
          const qmm::Acts& a, int64_t row0, float* saved, float* y, size_t y_stride, int64_t o,
          __mmask16 mask, const char* next = nullptr, int64_t next_len = 0) {
  __m512 acc[R];
  for (int i = 0; i < R; ++i) {
    acc[i] = first ? _mm512_setzero_ps() : _mm512_load_ps(saved + (row0 + i) * 16);
  }
  if (R == 1 && a.n_rows == 1) {
    TileBlocks<T, R, true>(qs, sc, b0, len, a, row0, acc, nullptr, 0);
  } else {
    TileBlocks<T, R, false>(qs, sc, b0, len, a, row0, acc, next, next_len);
  }
  for (int i = 0; i < R; ++i) {
    if (last) {
      _mm512_mask_storeu_ps(y + (row0 + i) * y_stride + o, mask, acc[i]);
    } else {
      _mm512_store_ps(saved + (row0 + i) * 16, acc[i]);
    }
  }
}

// W: the rows16 copy of the matrix (kPacked) or its GGUF rows (row o at W +
// o * row_bytes). o_begin is a multiple of 16. scratch:
// qmm::ScratchFloats(n_in, n_rows) floats.
template <DType T, bool kPacked>
void BlockOrderKernel(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end,
                      const qmm::Acts& a, float* y, size_t y_stride, float* scratch) {
  constexpr int kWords = rows16::kWordsOf<T>;
  const int64_t nb = a.n_blocks;
  // scratch, 64-byte aligned: the chunk's rows16 words and scales (unpacked
  // weights only), then the accumulators of every activation row between
  // chunks ([n_rows][16] f32).
  uint8_t* base =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  uint8_t* chunk_qs = base;
  uint8_t* chunk_sc = chunk_qs + kChunkBlocks * kWords * 64;
  float* saved = reinterpret_cast<float*>(chunk_sc + kChunkBlocks * kRows * 2);
  static_assert(
      qmm::kBlockOrderScratchFloats * 4 >= 64 + kChunkBlocks * 8 * 64 + kChunkBlocks * kRows * 2,
      "kBlockOrderScratchFloats too small");

  // A batch of sessions' decode steps (up to two tiles) reads each weight
  // byte about once, in its first tile, from L3 or memory, and waited on
  // those loads (16 sessions of a SmolLM2-shape Q4_0 file on Zen 4, where
  // no AMX kernel takes Q4_0 batches: the 16-row tile ~55 % of the step's
  // CPU time against ~35 % with the weights in L2). So, as the AMX kernel
  // does, the next chunk (the next group's first after a group's last;
  // none past this task's groups) is prefetched into L1 while this one
  // runs: its scales first, its words block by block in the first tile.
  // Larger batches spend their time in the tiles, with the words in cache.
  const bool prefetch = kPacked && a.n_rows > 1 && a.n_rows <= 2 * kRows;
  for (int64_t o = o_begin; o < o_end; o += kRows) {
    const int n = static_cast<int>(std::min<int64_t>(kRows, o_end - o));
    const __mmask16 mask = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
    for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
      const int64_t len = std::min(kChunkBlocks, nb - b0);
      const rows16::GroupChunk chunk =
          rows16::ChunkOfGroup(T, W, kPacked, row_bytes, o, o_end, nb, b0, len, chunk_qs, chunk_sc);
      const uint8_t* qs = chunk.qs;
      const uint8_t* sc = chunk.sc;
      const bool first = b0 == 0, last = b0 + len == nb;
      const rows16::NextChunk next =
          prefetch ? rows16::NextChunkOfGroup(T, W, o, o_end, nb, b0, len, kChunkBlocks)
                   : rows16::NextChunk{};
      const char* next_words = reinterpret_cast<const char*>(next.at.qs);
      if (next.len > 0) {
        const char* next_sc = reinterpret_cast<const char*>(next.at.sc);
        for (int64_t l = 0; l < (next.len * kRows * 2 + 63) / 64; ++l) {
          _mm_prefetch(next_sc + 64 * l, _MM_HINT_T0);
        }
        // Blocks the first tile's loop does not reach.
        for (int64_t l = len * kWords; l < next.len * kWords; ++l) {
          _mm_prefetch(next_words + 64 * l, _MM_HINT_T0);
        }
      }
      // The first tile (whichever piece it is) prefetches the next chunk's
      // words; the others read this chunk again, from L1.
      const char* pf = next_words;
      auto tile_prefetch = [&] {
        const char* p = pf;
        pf = nullptr;
        return p;
      };
      int64_t r = 0;
      for (; r + 16 <= a.n_rows; r += 16)
        Tile<T, 16>(qs, sc, b0, len, first, last, a, r, saved, y, y_stride, o, mask,
                    tile_prefetch(), next.len);
      // The tail tile in pieces of 8, 4, 2, 1 rows.
      if (r + 8 <= a.n_rows) {
        Tile<T, 8>(qs, sc, b0, len, first, last, a, r, saved, y, y_stride, o, mask,
                   tile_prefetch(), next.len);
        r += 8;
      }
      if (r + 4 <= a.n_rows) {
        Tile<T, 4>(qs, sc, b0, len, first, last, a, r, saved, y, y_stride, o, mask,
                   tile_prefetch(), next.len);
        r += 4;
      }
      if (r + 2 <= a.n_rows) {
        Tile<T, 2>(qs, sc, b0, len, first, last, a, r, saved, y, y_stride, o, mask,
                   tile_prefetch(), next.len);
        r += 2;
      }
      if (r < a.n_rows)
        Tile<T, 1>(qs, sc, b0, len, first, last, a, r, saved, y, y_stride, o, mask,
                   tile_prefetch(), next.len);
    }
  }
}

}  // namespace

namespace qmm {
Kernel Avx512BlockOrderKernel(DType t, bool packed) {
  switch (t) {
    case DType::kQ8_0:
      return packed ? &BlockOrderKernel<DType::kQ8_0, true>
                    : &BlockOrderKernel<DType::kQ8_0, false>;
    case DType::kQ4_0:
      return packed ? &BlockOrderKernel<DType::kQ4_0, true>
                    : &BlockOrderKernel<DType::kQ4_0, false>;
    default:
      return nullptr;
  }
}
}  // namespace qmm
}  // namespace llm

#pragma GCC diagnostic pop
