// AMX-INT8 QuantMatMul kernel for batches of Q4_0 and Q8_0 (quant_matmul_
// kernels.h, AmxKernel): the int8 tile product TDPBSSD gives each 32-block's
// weight x activation sum exactly, 16 activation rows x 16 weight rows per
// instruction, and a float epilogue scales and accumulates it.
//
// Arithmetic per output y[r][o] (the per-block order of llama.cpp's repacked
// and AMX Q4_0 / Q8_0 batch kernels, not ggml's vec_dot order that the
// one-row and VNNI kernels follow; see quant_matmul.h):
//   acc = 0
//   per 32-block b, ascending:
//     S   = sum over the block's 32 elements of w_e * q_e   (int32, exact;
//           w the signed weight values: Q4_0 nibble - 8, Q8_0's int8)
//     acc = fma(f32(d_w[o][b]) * d_x[r][b], float(S), acc)
//   y[r][o] = acc
//
// Data flow, per group of 16 weight rows (rows16, packed_weight.h) and chunk
// of kAmxChunkBlocks blocks: the chunk's quant words become one signed B tile
// per block in scratch (8 rows of 64 bytes: row k holds elements 4k .. 4k + 3
// of each weight row, which is rows16's word k with the Q8_0 flip undone or
// the Q4 nibbles split and re-centred), so the unpacking is paid once per
// chunk and shared by every activation tile. Unpacked (GGUF) weights are first
// packed into rows16 words chunk by chunk (rows16::PackGroup), so both give the
// same bits. Each activation tile (Acts::q_tiles: 16 rows x one block's 32
// bytes, contiguous; zero rows past n_rows, never stored) is then multiplied
// by each block's B tile into C (16 x 16 int32), which is stored and scaled
// row by row into 16 f32 accumulator registers.
//
// Speed (BENCHMARKS.md, "AMX"): one tdpbssd costs the same ~16 cycles for
// K = 32 as for the full K = 64, and each C must be stored (~16 cycles more)
// and converted. On the Xeon of BENCHMARKS.md a block-tile of 8192
// multiply-adds takes ~21 ns in a 512-row product (1 thread): the tile
// instructions alone ~13.5 ns, the float steps alone ~10 ns -- they barely
// overlap -- so the kernel is not the 16x of the VNNI one that the raw tile
// rate suggests.
// GCC 12 reports its own _mm512_undefined_*() placeholders inside the
// AVX-512 intrinsic headers as uninitialized (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/amx_tile_config.h"
#include "backend/cpu/packed_weight.h"
#include "backend/cpu/quant_matmul_kernels.h"

namespace llm {
namespace {

constexpr int kRows = rows16::kRows;  // activation rows per A tile = weight rows per B tile
constexpr int64_t kChunkBlocks = qmm::kAmxChunkBlocks;
constexpr int64_t kBTileBytes = 8 * 64;        // one block's B tile
constexpr int64_t kATileBytes = kRows * 32;    // one block's A tile
constexpr int64_t kCTileInts = kRows * kRows;  // one block's C tile
// Blocks the tile products run ahead of the float steps, and C slots.
constexpr int64_t kAhead = 2;
constexpr int64_t kRing = 4;
// Tile registers: 0 = C, 1 = A, 2 = B, and 3, 4, 5 likewise.
void LoadTileConfig() {
  AmxTileConfig cfg;
  cfg.rows[0] = kRows;  // C: 16 activation rows x 16 int32 (one per weight row)
  cfg.colsb[0] = 64;
  cfg.rows[1] = kRows;  // A: 16 activation rows x one block's 32 int8
  cfg.colsb[1] = 32;
  cfg.rows[2] = 8;  // B: 8 rows x (16 weight rows x 4 int8)
  cfg.colsb[2] = 64;
  for (int t = 3; t < 6; ++t) {  // a second set C, A, B for the next block
    cfg.rows[t] = cfg.rows[t - 3];
    cfg.colsb[t] = cfg.colsb[t - 3];
  }
  _tile_loadconfig(&cfg);
}

// rows16 words of n_blocks blocks (qs: [n_blocks][words][16] u32) -> one
// signed B tile per block (b_tiles: [n_blocks][8][64] int8, 64-byte aligned).
template <DType T>
void UnpackChunk(const uint8_t* qs, int64_t n_blocks, int8_t* b_tiles) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    int8_t* out = b_tiles + b * kBTileBytes;
    if constexpr (T == DType::kQ8_0) {
      const uint8_t* p = qs + b * 8 * 64;
      const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
      for (int k = 0; k < 8; ++k) {
        _mm512_store_si512(out + 64 * k, _mm512_xor_si512(_mm512_loadu_si512(p + 64 * k), flip));
      }
    } else {
      // Word k's low nibbles are elements 4k .. 4k + 3, its high nibbles
      // 16 + 4k .. 16 + 4k + 3, i.e. B rows k and 4 + k.
      const uint8_t* p = qs + b * 4 * 64;
      const __m512i low4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
      for (int k = 0; k < 4; ++k) {
        const __m512i v = _mm512_loadu_si512(p + 64 * k);
        const __m512i lo = _mm512_and_si512(v, low4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(v, 4), low4);
        _mm512_store_si512(out + 64 * k, _mm512_sub_epi8(lo, eight));
        _mm512_store_si512(out + 64 * (4 + k), _mm512_sub_epi8(hi, eight));
      }
    }
  }
}

// One activation tile (16 rows) times one chunk of len blocks of a group of
// 16 weight rows: acc[i] (activation row i, lane = weight row) starts at 0
// (first) or acc_in[i], gets every block's (d_w * d_x[i]) * float(C[i]), and
// is stored to out + i * out_stride (lanes in mask) for i < out_rows.
// A function of its own (noinline) so that the 16 accumulators stay in
// registers: written inside TileKernel, GCC kept them on the stack, one load
// and one store per row and block, and the float steps alone took ~18 ns per
// block-tile (8192 x 2048 x 512 rows, 1 thread; ~10 ns now).
// prefetch (null: none): with each block j < prefetch_blocks, the
// kPrefetchLines lines at prefetch + j * kPrefetchLines * 64 are prefetched
// (the next chunk's words).
template <int kPrefetchLines>
__attribute__((noinline)) void TileChunk(const int8_t* a_chunk, const int8_t* b_tiles,
                                         int32_t* c_ring, const uint8_t* sc, const float* d_x,
                                         int64_t len, bool first, const float* acc_in, float* out,
                                         size_t out_stride, __mmask16 mask, int out_rows,
                                         const char* prefetch, int64_t prefetch_blocks) {
  __m512 acc[kRows];
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) {
    acc[i] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc_in + i * 16);
  }
  // Block j's product on tile set j % 2 (C, A, B = 0, 1, 2 or 3, 4, 5), its
  // C stored into ring slot j % kRing.
  auto multiply = [&](int64_t j) {
    int32_t* c = c_ring + (j % kRing) * kCTileInts;
    if (j % 2 == 0) {
      _tile_zero(0);
      _tile_loadd(1, a_chunk + j * kATileBytes, qmm::kActBlock);
      _tile_loadd(2, b_tiles + j * kBTileBytes, 64);
      _tile_dpbssd(0, 1, 2);
      _tile_stored(0, c, 64);
    } else {
      _tile_zero(3);
      _tile_loadd(4, a_chunk + j * kATileBytes, qmm::kActBlock);
      _tile_loadd(5, b_tiles + j * kBTileBytes, 64);
      _tile_dpbssd(3, 4, 5);
      _tile_stored(3, c, 64);
    }
  };
  // Software pipeline: the products run kAhead blocks ahead of the float
  // steps, because a tile store reaches the vector loads only once it has
  // retired (scaling each C right after its store stalled on it: 8192 x 2048
  // x 512 rows, 1 thread, 217 -> 265-275 GMAC/s), and tile registers are not
  // renamed, so consecutive blocks alternate between two sets. The small ring
  // stays hot in L1: tile stores to lines not already owned cost twice as
  // much (a C per block of the chunk was no faster than storing at once).
  for (int64_t j = 0; j < std::min(kAhead, len); ++j) multiply(j);
  for (int64_t j = 0; j < len; ++j) {
    if (j + kAhead < len) multiply(j + kAhead);
    if (prefetch != nullptr && j < prefetch_blocks) {
      for (int k = 0; k < kPrefetchLines; ++k) {
        _mm_prefetch(prefetch + (j * kPrefetchLines + k) * 64, _MM_HINT_T0);
      }
    }
    // acc[i] += (d_w * d_x[i]) * float(C[i]) for activation row i.
    const int32_t* c = c_ring + (j % kRing) * kCTileInts;
    const __m512 d_w =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc + j * 32)));
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) {
      const __m512 scale = _mm512_mul_ps(d_w, _mm512_set1_ps(d_x[j * kRows + i]));
      const __m512 sum = _mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * i));
      acc[i] = _mm512_fmadd_ps(scale, sum, acc[i]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) {
    if (i < out_rows) _mm512_mask_storeu_ps(out + i * out_stride, mask, acc[i]);
  }
}

// W: the rows16 copy of the matrix (kPacked) or its GGUF rows (row o at W +
// o * row_bytes). o_begin is a multiple of 16. scratch:
// qmm::ScratchFloats(n_in, n_rows) floats.
template <DType T, bool kPacked>
void TileKernel(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end, const qmm::Acts& a,
                float* y, size_t y_stride, float* scratch) {
  constexpr int kWords = T == DType::kQ8_0 ? 8 : 4;  // rows16::Words(T)
  const int64_t nb = a.n_blocks;
  const int64_t n_tiles = (a.n_rows + kRows - 1) / kRows;
  // scratch, 64-byte aligned: the chunk's B tiles, the C ring, its rows16
  // words and scales (unpacked weights only), the accumulators of every
  // activation row between chunks ([n_tiles * 16][16] f32).
  uint8_t* base =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  int8_t* b_tiles = reinterpret_cast<int8_t*>(base);
  int32_t* c_ring = reinterpret_cast<int32_t*>(base + kChunkBlocks * kBTileBytes);
  uint8_t* chunk_qs = base + kChunkBlocks * kBTileBytes + kRing * kCTileInts * 4;
  uint8_t* chunk_sc = chunk_qs + kChunkBlocks * kWords * 64;
  float* saved = reinterpret_cast<float*>(chunk_sc + kChunkBlocks * kRows * 2);
  static_assert(qmm::kAmxScratchFloats * 4 >= 64 + kChunkBlocks * kBTileBytes +
                                                  kRing * kCTileInts * 4 + kChunkBlocks * 8 * 64 +
                                                  kChunkBlocks * kRows * 2 + kRows * kRows * 4,
                "kAmxScratchFloats too small");

  // A batch of sessions' decode steps (one or two activation tiles) reads
  // each weight byte about once, as one decode row does, and waited on the
  // loads of the words (16 SmolLM2 sessions: ~35 % of this kernel's time).
  // So while a chunk's tiles run, the next chunk's words (the next group's
  // first chunk after a group's last; none past this task's groups) are
  // prefetched with the first tile's blocks, its scales before it: 16
  // SmolLM2-135M-Instruct sessions (its output matrix is Q8_0) +6 %.
  // (Prefetching 4 KB ahead of the unpacking reached the chunk's own later
  // blocks, too late.)
  // Larger batches spend their time in the tiles, where the words are in
  // cache.
  const bool prefetch = kPacked && n_tiles <= 2;
  LoadTileConfig();
  for (int64_t o = o_begin; o < o_end; o += kRows) {
    const int n = static_cast<int>(std::min<int64_t>(kRows, o_end - o));
    const __mmask16 mask = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
    for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
      const int64_t len = std::min(kChunkBlocks, nb - b0);
      const rows16::GroupChunk chunk =
          rows16::ChunkOfGroup(T, W, kPacked, row_bytes, o, o_end, nb, b0, len, chunk_qs, chunk_sc);
      const uint8_t* qs = chunk.qs;
      const uint8_t* sc = chunk.sc;
      UnpackChunk<T>(qs, len, b_tiles);
      const bool first = b0 == 0, last = b0 + len == nb;
      const rows16::NextChunk next =
          prefetch ? rows16::NextChunkOfGroup(T, W, o, o_end, nb, b0, len, kChunkBlocks)
                   : rows16::NextChunk{};
      const char* next_words = reinterpret_cast<const char*>(next.at.qs);
      const int64_t next_len = next.len;
      if (next_len > 0) {
        const char* next_sc = reinterpret_cast<const char*>(next.at.sc);
        for (int64_t l = 0; l < (next_len * kRows * 2 + 63) / 64; ++l) {
          _mm_prefetch(next_sc + 64 * l, _MM_HINT_T0);
        }
        // Blocks the first tile's loop does not reach.
        for (int64_t l = len * kWords; l < next_len * kWords; ++l) {
          _mm_prefetch(next_words + 64 * l, _MM_HINT_T0);
        }
      }
      for (int64_t t = 0; t < n_tiles; ++t) {
        const int64_t m0 = t * kRows;
        // Block j's A tile: 16 rows x 32 bytes, contiguous.
        const int8_t* a_chunk = a.q_tiles + (t * nb + b0) * kRows * qmm::kActBlock;
        const float* d_x = a.d_tiles + (t * nb + b0) * kRows;  // [block][row of the tile]
        float* acc_rows = saved + m0 * 16;
        // The first tile prefetches the next chunk's words, min(len,
        // next_len) blocks of them.
        const char* pf = t == 0 && next_len > 0 ? next_words : nullptr;
        const int64_t pf_len = pf != nullptr ? std::min(len, next_len) : len;
        if (!last) {
          TileChunk<kWords>(a_chunk, b_tiles, c_ring, sc, d_x, len, first, acc_rows, acc_rows, 16,
                            0xFFFF, kRows, pf, pf_len);
        } else {
          const int rows = static_cast<int>(std::min<int64_t>(kRows, a.n_rows - m0));
          TileChunk<kWords>(a_chunk, b_tiles, c_ring, sc, d_x, len, first, acc_rows,
                            y + m0 * y_stride + o, y_stride, mask, rows, pf, pf_len);
        }
      }
    }
  }
  _tile_release();
}

}  // namespace

namespace qmm {
Kernel AmxKernel(DType t, bool packed) {
  switch (t) {
    case DType::kQ8_0:
      return packed ? &TileKernel<DType::kQ8_0, true> : &TileKernel<DType::kQ8_0, false>;
    case DType::kQ4_0:
      return packed ? &TileKernel<DType::kQ4_0, true> : &TileKernel<DType::kQ4_0, false>;
    default:
      return nullptr;
  }
}
}  // namespace qmm
}  // namespace llm

#pragma GCC diagnostic pop
