// AVX2 QuantMatMul kernel for Q4_0 and Q8_0 in the per-block order
// (quant_matmul_kernels.h, Avx2BlockOrderKernel), for every row count at the
// AVX2 level: the bits of the AVX-512 VNNI and AMX kernels
// (quant_matmul_blocks_avx512.cpp), and the order of llama.cpp's repacked
// q4_0_8x8 kernels on AVX2. Per output y[r][o]:
//   acc = 0
//   per 32-block b, ascending:
//     S   = sum over the block's 32 elements of w_e * q_e   (int32, exact)
//     acc = fma(f32(d_w[o][b]) * d_x[r][b], float(S), acc)
//   y[r][o] = acc
//
// Why not ggml's vec_dot order (what this level ran before): there every
// (weight row, activation row) pair costs, per block, two vpsignb, a
// vpmaddubsw, a vpmaddwd, a conversion and an fma for 32 products; here a
// register holds 4 elements of 8 weight rows (the rows16 copy's words,
// packed_weight.h, half a 64-byte vector), so a block of 8 rows x 32
// elements against one activation row is 8 vpmaddubsw and then one float
// step for all 8 outputs.
//   Q4_0: the unsigned nibbles 0..15 are vpmaddubsw's u8 operand against
//     the signed activations q (|q| <= 127): each int16 lane sums 2 products,
//     at most 2 * 15 * 127 in size, so the 8 steps of a block add up in
//     int16 (16 products, <= 30480 < 32767) before one vpmaddwd widens them;
//     the sum starts at -8 * sum(q) (Acts::block_bias) for the nibbles' 8.
//   Q8_0: the copy holds w + 128, which times q could overflow vpmaddubsw's
//     int16 pair sums, so the weights are made signed again (XOR 0x80) and
//     multiplied as |w| (u8) times q with w's sign (vpsignb; |q| <= 127, so
//     nothing overflows, and w = -128 gives |w| = 128 exactly), each step
//     widened by vpmaddwd.
// Data flow, per group of 16 weight rows and chunk of kChunkBlocks blocks
// (the chunk stays in L1 while every activation tile reads it):
//   * batches (kTileRows+ rows, TileUnpacked): the chunk's words are
//     unpacked once into scratch as the operands (UnpackChunk: nibbles, or
//     |w| and w; the scales as f32), then each tile of 4 activation rows
//     runs a 4 x 16 block of sums, both halves per activation broadcast;
//   * one row (decode) and the last 1-3 rows of a batch (Tile): each half of
//     the group (8 rows, 8 f32 lanes) reads the words directly and unpacks
//     them in registers.
// Reading a rows16 copy, the first tile of each chunk prefetches the copy's
// bytes kPrefetchBytes ahead of the words it reads into L2 (the copy's
// groups are contiguous), so that one row, or a batch of sessions' decode
// step, reads each weight byte once from memory without waiting for it.
// Accumulators are saved between chunks (one 16-float slot per activation
// row, as the AVX-512 kernel). Unpacked (GGUF) weights are first packed
// into rows16 words chunk by chunk (rows16::ChunkOfGroup), so both give the
// same bits.
// No std:: templates or shared inline helpers here (ISA-flagged code: a weak
// symbol from this file could be linked in for every CPU).
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/packed_weight.h"
#include "backend/cpu/quant_matmul_kernels.h"

namespace llm {
namespace {

constexpr int kGroupRows = rows16::kRows;  // 16: a rows16 group
constexpr int kHalfRows = 8;               // weight rows per 256-bit register
constexpr int kTileRows = 4;               // activation rows per tile
constexpr int64_t kChunkBlocks = qmm::kAvx2BlockOrderChunkBlocks;
// Bytes ahead of the block being read that the first tile prefetches,
// times DecodePrefetchScale() (as the AVX-512 kernel's one-row path). A
// batch of 16 sessions' rows waited on its weights without it: a 1536 x 576
// Q4_0 product of 16 rows took 36 % longer from memory than from cache,
// mostly in UnpackChunk's first reads of each chunk.
constexpr int64_t kPrefetchBytes = 4096;

template <DType T>
constexpr int kWordsOf = T == DType::kQ8_0 ? 8 : 4;

inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

// Keeps v in a register at this point: GCC otherwise reassociates a tile's
// integer add chains into trees, computing every product first and spilling
// them (measured: 2-3x slower).
inline void Pin(__m256i& v) { asm("" : "+x"(v)); }

// The 4 activation bytes at p in every 32-bit lane.
inline __m256i Broadcast4(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Word k (elements 4k .. 4k + 3) of block j's half h of a group's quants qs
// ([blocks][words][16] u32), for its 8 rows: Q4_0 the nibbles as u8, Q8_0
// the signed weights.
template <DType T>
inline __m256i HalfWord(const uint8_t* qs, int64_t j, int h, int k) {
  constexpr int kWords = kWordsOf<T>;
  if constexpr (T == DType::kQ8_0) {
    const __m256i v =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + (j * kWords + k) * 64 + 32 * h));
    return _mm256_xor_si256(v, _mm256_set1_epi8(static_cast<char>(0x80)));
  } else {
    // Word k's low nibbles are elements 4k .. 4k + 3, its high nibbles
    // 16 + 4k .. 16 + 4k + 3.
    const __m256i v = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(qs + (j * kWords + (k & 3)) * 64 + 32 * h));
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    return k < 4 ? _mm256_and_si256(v, low4) : _mm256_and_si256(_mm256_srli_epi32(v, 4), low4);
  }
}

// The first tile's prefetch: the rows16 copy's group holding the chunk
// (null: none) and the distance; block b's share of the copy's bytes that
// far ahead goes to L2 (rows16::PrefetchBlockShare).
struct Ahead {
  const uint8_t* group = nullptr;
  int64_t bytes = 0;
};

template <DType T>
inline void PrefetchAhead(const Ahead& ahead, int64_t b) {
  if (ahead.group != nullptr) {
    rows16::PrefetchBlockShare(ahead.group, b, rows16::BlockShareBytes(T), ahead.bytes);
  }
}

// acc[i] (i < R) += blocks [0, len) of the chunk (qs / sc: its rows16 words
// and scales; global block b0 + j) for half h of the group and activation
// rows row0 .. row0 + R - 1. ahead: PrefetchAhead's (half 0 touches every
// line of the block; half 1 then finds the chunk in cache).
template <DType T, int R>
inline void HalfBlocks(const uint8_t* qs, const uint8_t* sc, int64_t b0, int64_t len, int h,
                       const qmm::Acts& a, int64_t row0, __m256 acc[R], const Ahead& ahead) {
  const int64_t nb = a.n_blocks;
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t j = 0; j < len; ++j) {
    const int64_t b = b0 + j;
    if (h == 0) PrefetchAhead<T>(ahead, b);
    const int8_t* xq[R];
    for (int i = 0; i < R; ++i) xq[i] = a.q + (row0 + i) * a.n_in + b * qmm::kActBlock;
    // The block's 8 words for this half, unpacked once for the tile's rows
    // (kept in registers; each row then runs its 8 steps as one chain).
    __m256i w[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) w[k] = HalfWord<T>(qs, j, h, k);
    __m256i sum[R];
    for (int i = 0; i < R; ++i) {
      if constexpr (T == DType::kQ4_0) {
        // int16 sums of the 8 steps, widened once.
        __m256i s = _mm256_maddubs_epi16(w[0], Broadcast4(xq[i]));
#pragma GCC unroll 7
        for (int k = 1; k < 8; ++k) {
          s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w[k], Broadcast4(xq[i] + 4 * k)));
        }
        sum[i] = _mm256_add_epi32(_mm256_madd_epi16(s, ones16),
                                  _mm256_set1_epi32(a.block_bias[(row0 + i) * nb + b]));
      } else {
        // |w| (u8; -128 -> 128, exact) times q with w's sign, widened per step.
        __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          const __m256i x = _mm256_sign_epi8(Broadcast4(xq[i] + 4 * k), w[k]);
          s = _mm256_add_epi32(
              s, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w[k]), x), ones16));
        }
        sum[i] = s;
      }
    }
    const __m256 d_w = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + j * 2 * kGroupRows + 16 * h)));
    for (int i = 0; i < R; ++i) {
      const __m256 scale = _mm256_mul_ps(d_w, _mm256_set1_ps(a.ds[2 * ((row0 + i) * nb + b)]));
      acc[i] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(sum[i]), acc[i]);
    }
  }
}

// One tile of R activation rows over one chunk, both halves of the group: loads
// (or zeroes) the rows' accumulators, runs the blocks, then saves them or,
// after the last chunk, stores y[row][o .. o + n - 1]. ahead: PrefetchAhead's.
template <DType T, int R>
void Tile(const uint8_t* qs, const uint8_t* sc, int64_t b0, int64_t len, bool first, bool last,
          const qmm::Acts& a, int64_t row0, float* saved, float* y, size_t y_stride, int64_t o,
          int n, const Ahead& ahead) {
  for (int h = 0; h < 2 && kHalfRows * h < n; ++h) {
    __m256 acc[R];
    for (int i = 0; i < R; ++i) {
      acc[i] = first ? _mm256_setzero_ps() : _mm256_load_ps(saved + (row0 + i) * 16 + 8 * h);
    }
    HalfBlocks<T, R>(qs, sc, b0, len, h, a, row0, acc, ahead);
    const int live = n - kHalfRows * h;  // outputs of this half to store
    for (int i = 0; i < R; ++i) {
      if (!last) {
        _mm256_store_ps(saved + (row0 + i) * 16 + 8 * h, acc[i]);
      } else if (live >= kHalfRows) {
        _mm256_storeu_ps(y + (row0 + i) * y_stride + o + 8 * h, acc[i]);
      } else {
        const __m256i mask =
            _mm256_cmpgt_epi32(_mm256_set1_epi32(live), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(y + (row0 + i) * y_stride + o + 8 * h, mask, acc[i]);
      }
    }
  }
}

// Batches (kTileRows or more activation rows): the chunk's weights as the
// tiles' operands, unpacked once per group and chunk, both halves side by
// side, so that each activation broadcast serves 16 weight rows:
//   ops [len][8 words][16 lanes] u32: Q4_0 the nibbles (u8), Q8_0 |w| (u8)
//   signs (Q8_0) [len][8][16] u32: w (s8), vpsignb's operand
//   d_w [len][16] f32: the blocks' scales
template <DType T>
void UnpackChunk(const uint8_t* qs, const uint8_t* sc, int64_t len, uint8_t* ops, uint8_t* signs,
                 float* d_w) {
  for (int64_t j = 0; j < len; ++j) {
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 8; ++k) {
        const __m256i w = HalfWord<T>(qs, j, h, k);
        uint8_t* at = ops + (j * 8 + k) * 64 + 32 * h;
        if constexpr (T == DType::kQ8_0) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), _mm256_abs_epi8(w));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(signs + (at - ops)), w);
        } else {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), w);
        }
      }
      _mm256_storeu_ps(d_w + j * 16 + 8 * h,
                       _mm256_cvtph_ps(_mm_loadu_si128(
                           reinterpret_cast<const __m128i*>(sc + j * 2 * kGroupRows + 16 * h))));
    }
  }
}

// One tile of kTileRows activation rows over one chunk, both halves at once,
// from the unpacked operands: as Tile, the same bits. ahead: PrefetchAhead's.
template <DType T>
void TileUnpacked(const uint8_t* ops, const uint8_t* signs, const float* d_w, int64_t b0,
                  int64_t len, bool first, bool last, const qmm::Acts& a, int64_t row0,
                  float* saved, float* y, size_t y_stride, int64_t o, int n, const Ahead& ahead) {
  constexpr int R = kTileRows;
  const int64_t nb = a.n_blocks;
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256 acc[R][2];
  for (int i = 0; i < R; ++i) {
    for (int h = 0; h < 2; ++h) {
      acc[i][h] = first ? _mm256_setzero_ps() : _mm256_load_ps(saved + (row0 + i) * 16 + 8 * h);
    }
  }
  const int8_t* xq[R];
  for (int i = 0; i < R; ++i) xq[i] = a.q + (row0 + i) * a.n_in;
  for (int64_t j = 0; j < len; ++j) {
    const int64_t b = b0 + j;
    PrefetchAhead<T>(ahead, b);
    const uint8_t* opj = ops + j * 8 * 64;
    // A 4 x 16 block of sums: each word's two operand vectors are loaded
    // once and serve the tile's 4 rows, each activation broadcast serves 16
    // weight rows.
    __m256i sum[R][2];
    if constexpr (T == DType::kQ4_0) {
      __m256i s[R][2];  // int16 sums of the 8 words, widened once
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(opj + k * 64));
        const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(opj + k * 64 + 32));
        for (int i = 0; i < R; ++i) {
          const __m256i x = Broadcast4(xq[i] + b * qmm::kActBlock + 4 * k);
          const __m256i p0 = _mm256_maddubs_epi16(w0, x), p1 = _mm256_maddubs_epi16(w1, x);
          s[i][0] = k == 0 ? p0 : _mm256_add_epi16(s[i][0], p0);
          s[i][1] = k == 0 ? p1 : _mm256_add_epi16(s[i][1], p1);
          Pin(s[i][0]);
          Pin(s[i][1]);
        }
      }
      for (int i = 0; i < R; ++i) {
        const __m256i bias = _mm256_set1_epi32(a.block_bias[(row0 + i) * nb + b]);
        for (int h = 0; h < 2; ++h) {
          sum[i][h] = _mm256_add_epi32(_mm256_madd_epi16(s[i][h], ones16), bias);
        }
      }
    } else {
      const uint8_t* sgj = signs + j * 8 * 64;
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const __m256i wa0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(opj + k * 64));
        const __m256i wa1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(opj + k * 64 + 32));
        const __m256i ws0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(sgj + k * 64));
        const __m256i ws1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(sgj + k * 64 + 32));
        for (int i = 0; i < R; ++i) {
          const __m256i x = Broadcast4(xq[i] + b * qmm::kActBlock + 4 * k);
          const __m256i p0 =
              _mm256_madd_epi16(_mm256_maddubs_epi16(wa0, _mm256_sign_epi8(x, ws0)), ones16);
          const __m256i p1 =
              _mm256_madd_epi16(_mm256_maddubs_epi16(wa1, _mm256_sign_epi8(x, ws1)), ones16);
          sum[i][0] = k == 0 ? p0 : _mm256_add_epi32(sum[i][0], p0);
          sum[i][1] = k == 0 ? p1 : _mm256_add_epi32(sum[i][1], p1);
          Pin(sum[i][0]);
          Pin(sum[i][1]);
        }
      }
    }
    for (int i = 0; i < R; ++i) {
      const __m256 dx = _mm256_set1_ps(a.ds[2 * ((row0 + i) * nb + b)]);
      for (int h = 0; h < 2; ++h) {
        const __m256 scale = _mm256_mul_ps(_mm256_load_ps(d_w + j * 16 + 8 * h), dx);
        acc[i][h] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(sum[i][h]), acc[i][h]);
      }
    }
  }
  for (int h = 0; h < 2 && kHalfRows * h < n; ++h) {
    const int live = n - kHalfRows * h;  // outputs of this half to store
    for (int i = 0; i < R; ++i) {
      if (!last) {
        _mm256_store_ps(saved + (row0 + i) * 16 + 8 * h, acc[i][h]);
      } else if (live >= kHalfRows) {
        _mm256_storeu_ps(y + (row0 + i) * y_stride + o + 8 * h, acc[i][h]);
      } else {
        const __m256i mask =
            _mm256_cmpgt_epi32(_mm256_set1_epi32(live), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(y + (row0 + i) * y_stride + o + 8 * h, mask, acc[i][h]);
      }
    }
  }
}

// W: the rows16 copy of the matrix (kPacked) or its GGUF rows (row o at W +
// o * row_bytes). o_begin is a multiple of 16. scratch:
// qmm::ScratchFloats(n_in, n_rows) floats.
template <DType T, bool kPacked>
void BlockOrderKernel(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end,
                      const qmm::Acts& a, float* y, size_t y_stride, float* scratch) {
  constexpr int kWords = kWordsOf<T>;
  const int64_t nb = a.n_blocks;
  // scratch, 64-byte aligned: the chunk's rows16 words and scales (unpacked
  // weights only), then the accumulators of every activation row between
  // chunks ([n_rows][16] f32).
  uint8_t* base =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  uint8_t* chunk_qs = base;
  uint8_t* chunk_sc = chunk_qs + kChunkBlocks * kWords * 64;
  uint8_t* ops = chunk_sc + kChunkBlocks * kGroupRows * 2;
  uint8_t* signs = ops + kChunkBlocks * 8 * 64;
  float* d_w = reinterpret_cast<float*>(signs + kChunkBlocks * 8 * 64);
  float* saved = d_w + kChunkBlocks * kGroupRows;
  static_assert(qmm::kAvx2BlockOrderScratchFloats * 4 >=
                    64 + kChunkBlocks * (8 * 64 + kGroupRows * 2 + 2 * 8 * 64 + kGroupRows * 4),
                "kAvx2BlockOrderScratchFloats too small");
  const bool unpack = a.n_rows >= kTileRows;
  const int64_t prefetch_bytes = kPrefetchBytes * DecodePrefetchScale();

  for (int64_t o = o_begin; o < o_end; o += kGroupRows) {
    const int n = static_cast<int>(Min(kGroupRows, o_end - o));
    for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
      const int64_t len = Min(kChunkBlocks, nb - b0);
      const rows16::GroupChunk chunk =
          rows16::ChunkOfGroup(T, W, kPacked, row_bytes, o, o_end, nb, b0, len, chunk_qs, chunk_sc);
      const bool first = b0 == 0, last = b0 + len == nb;
      if (unpack) UnpackChunk<T>(chunk.qs, chunk.sc, len, ops, signs, d_w);
      // The first tile's prefetch (a scratch chunk of GGUF rows has none;
      // chunk.qs less b0's words: the group's start).
      Ahead ahead;
      if (kPacked) ahead = {chunk.qs - b0 * kWords * 64, prefetch_bytes};
      int64_t r = 0;
      for (; r + kTileRows <= a.n_rows; r += kTileRows, ahead = Ahead{}) {
        TileUnpacked<T>(ops, signs, d_w, b0, len, first, last, a, r, saved, y, y_stride, o, n,
                        ahead);
      }
      if (r + 2 <= a.n_rows) {
        Tile<T, 2>(chunk.qs, chunk.sc, b0, len, first, last, a, r, saved, y, y_stride, o, n,
                   ahead);
        r += 2;
        ahead = Ahead{};
      }
      if (r < a.n_rows) {
        Tile<T, 1>(chunk.qs, chunk.sc, b0, len, first, last, a, r, saved, y, y_stride, o, n,
                   ahead);
      }
    }
  }
}

}  // namespace

namespace qmm {
Kernel Avx2BlockOrderKernel(DType t, bool packed) {
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
