// AVX-512 VNNI QuantMatMul kernel on weights repacked at load
// (backend/cpu/packed_weight.h, "rows16": 16 weight rows interleaved per
// 32-bit lane), for one activation row (decode) and for batches, in ggml's
// vec_dot order: Q4_1 and Q5_0, whose outputs must equal llama.cpp's (and
// the AVX2 kernels') bit for bit. (Q4_0 and Q8_0 take the per-block order at
// this level: quant_matmul_blocks_avx512.cpp.)
//
// The AVX2 kernels' arithmetic -- ggml-cpu's x86 vec_dot_q4_1_q8_1 /
// q5_0_q8_0 (Q5_0's AVX2 kernel is Kernel32 in kquant_avx2.cpp): per weight
// row o and activation row a, 8 f32 lane accumulators L_g (g = 0..7:
// elements 4g .. 4g + 3 of every 32-block), each
//   L_g = fma(f32(dw[b]) * f32(da[b]), f32(sum of the 4 products), L_g)
// over the blocks b in order, then hsum_float_8's adds ((L0 + L4) + (L2 +
// L6)) + ((L1 + L5) + (L3 + L7)), and for Q4_1 the separate min-term chain
// fma(mw[b], sa[b], .) added last. Lane l of each 512-bit register belongs
// to weight row o + l: one vpdpbusd gives lane g's integer sum for 16 rows,
// the activation's 4 bytes broadcast; Q5_0's weights enter unsigned (the
// value 0..31) and its sums start at -16 * (sum of the 4 activations)
// (Acts::bias). The packed words are split into their two nibbles (Q5_0
// adds the fifth bits) and the f16 scales converted in the loop, so no call
// rearranges anything and one activation row reads each weight byte exactly
// once.
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

constexpr int kGroupRows = rows16::kRows;
constexpr int kLaneGroups = 8;  // 4-element lanes g of a 32-block
// Blocks run per activation-row tile before moving on to the next tile, for
// batches: one chunk of a group's quants (Q8_0: 16 KB) stays in L1 while
// every tile reads it. One row runs all blocks at once.
constexpr int64_t kChunkBlocks = 32;
constexpr int kSaved = kLaneGroups + 1;  // accumulator vectors per row between chunks

// A group's packed arrays (packed_weight.h) and its live row count.
struct PackedGroup {
  const uint8_t* qs = nullptr;  // [nb][words][16] u32
  const uint8_t* sc = nullptr;  // [nb][scales][16] f16
  int n = 0;
};

// One activation row (decode) reads each weight byte once, so the kernel
// waits on memory: the quant words 4 KB ahead are prefetched (1B shape, 2
// threads: Q4_0 decode 29 -> 37 tokens/s, Q8_0 18 -> 23; 2 KB and 8 KB
// gave less or the same), times DecodePrefetchScale() (cpu_features.h: 4
// on AMD). Batches reuse each chunk from L1 and need none.
constexpr int64_t kPrefetchBytes = 4096;

using rows16::kWordsOf;
using rows16::LoadWords;

struct Chunk {
  int64_t b0 = 0, b1 = 0;
  bool first = true, last = true;
  float* acc_buf = nullptr;  // [row][kSaved][16] f32, 64-byte aligned
  // Batches: the chunk's words as LoadWords gives them, [block - b0][8],
  // unpacked once for all tiles (null: each tile unpacks them itself).
  const __m512i* words = nullptr;
  // Batches: the chunk's weight scales in f32, [block - b0][kScales][16]
  // (d, then Q4_1's m), converted once for all tiles (null: each tile
  // converts the f16 ones).
  const float* scales = nullptr;
};

template <DType T, int R>
void PackedTile(const PackedGroup& g, const qmm::Acts& a, int64_t row0, int64_t o, const Chunk& c,
                float* y, size_t y_stride) {
  constexpr int kScales = T == DType::kQ4_1 ? 2 : 1;
  const int64_t nb = a.n_blocks;
  __m512 acc[R][kLaneGroups];
  __m512 accm[R];  // Q4_1: the min terms
  for (int r = 0; r < R; ++r) {
    const float* saved = c.acc_buf + (row0 + r) * kSaved * 16;
    accm[r] = c.first ? _mm512_setzero_ps() : _mm512_load_ps(saved + kLaneGroups * 16);
    for (int k = 0; k < kLaneGroups; ++k) {
      acc[r][k] = c.first ? _mm512_setzero_ps() : _mm512_load_ps(saved + k * 16);
    }
  }
  // (Once per tile: DecodePrefetchScale() is an out-of-line call.)
  const int64_t prefetch_bytes = kPrefetchBytes * DecodePrefetchScale();
  for (int64_t b = c.b0; b < c.b1; ++b) {
    if (R == 1 && a.n_rows == 1) {
      // g.qs is the group's start; a prefetch never faults.
      rows16::PrefetchBlockShare(g.qs, b, rows16::BlockShareBytes(T), prefetch_bytes);
    }
    __m512i w[kLaneGroups];
    if (c.words != nullptr) {
      for (int k = 0; k < kLaneGroups; ++k) w[k] = _mm512_load_si512(c.words + (b - c.b0) * 8 + k);
    } else {
      LoadWords<T>(g.qs, b, w);
    }
    __m512 wd, wm = _mm512_setzero_ps();
    if (c.scales != nullptr) {
      const float* f = c.scales + (b - c.b0) * kScales * 16;
      wd = _mm512_load_ps(f);
      if constexpr (T == DType::kQ4_1) wm = _mm512_load_ps(f + 16);
    } else {
      const uint8_t* sc = g.sc + b * kScales * 32;
      wd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc)));
      if constexpr (T == DType::kQ4_1) {
        wm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc + 32)));
      }
    }
    for (int r = 0; r < R; ++r) {
      const int64_t row = row0 + r;
      const float* ds = a.ds + 2 * (row * nb + b);
      const __m512 scale = _mm512_mul_ps(wd, _mm512_set1_ps(ds[0]));
      if constexpr (T == DType::kQ4_1)
        accm[r] = _mm512_fmadd_ps(wm, _mm512_set1_ps(ds[1]), accm[r]);
      const int8_t* xq = a.q + row * a.n_in + b * qmm::kActBlock;
      const int32_t* bias =
          T == DType::kQ4_1 ? nullptr : a.bias + row * (a.n_in / 4) + b * kLaneGroups;
#pragma GCC unroll 8
      for (int k = 0; k < kLaneGroups; ++k) {
        int32_t x4;
        __builtin_memcpy(&x4, xq + 4 * k, 4);
        const __m512i start =
            T == DType::kQ4_1 ? _mm512_set1_epi32(qmm::kFloatSumStart) : _mm512_set1_epi32(bias[k]);
        const __m512i isum = _mm512_dpbusd_epi32(start, w[k], _mm512_set1_epi32(x4));
        const __m512 fsum =
            _mm512_sub_ps(_mm512_castsi512_ps(isum), _mm512_set1_ps(qmm::kFloatSumOffset));
        acc[r][k] = _mm512_fmadd_ps(scale, fsum, acc[r][k]);
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
    const __m512 s0 = _mm512_add_ps(acc[r][0], acc[r][4]), s1 = _mm512_add_ps(acc[r][1], acc[r][5]);
    const __m512 s2 = _mm512_add_ps(acc[r][2], acc[r][6]), s3 = _mm512_add_ps(acc[r][3], acc[r][7]);
    __m512 total = _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3));
    if constexpr (T == DType::kQ4_1) total = _mm512_add_ps(total, accm[r]);
    _mm512_mask_storeu_ps(y + (row0 + r) * y_stride + o, mask, total);
  }
}

// W: the rows16 copy (packed_weight.h) of an n_out x n_in matrix; o_begin is
// a multiple of 16 (QuantMatMul's tasks are whole groups). row_bytes (the
// GGUF rows', which may be padded) is not used: the copy is dense.
// scratch: qmm::ScratchFloats floats.
template <DType T>
void PackedKernel(const void* W, size_t /*row_bytes*/, int64_t o_begin, int64_t o_end,
                  const qmm::Acts& a, float* y, size_t y_stride, float* scratch) {
  const int64_t nb = a.n_blocks;
  constexpr int kWords = kWordsOf<T>;
  constexpr int kScales = T == DType::kQ4_1 ? 2 : 1;  // rows16::Scales(T)
  const size_t qs_bytes = static_cast<size_t>(nb) * kGroupRows * 4 * kWords;
  // rows16::GroupBytes(T, nb)
  const size_t group_bytes = qs_bytes + static_cast<size_t>(nb) * kGroupRows * 2 * kScales;
  // scratch, 64-byte aligned: a chunk's unpacked words and f32 scales
  // (batches), then the accumulators.
  __m512i* words =
      reinterpret_cast<__m512i*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  float* scales = reinterpret_cast<float*>(words + kChunkBlocks * 8);
  static_assert(kChunkBlocks * (8 + 2) * 16 <= qmm::kAvx2PackedOpsFloats, "scratch too small");
  Chunk c;
  c.acc_buf = reinterpret_cast<float*>(words) + qmm::kAvx2PackedOpsFloats;
  const bool batch = a.n_rows > 2;
  const int64_t chunk_blocks = batch ? kChunkBlocks : nb;
  for (int64_t o = o_begin; o < o_end; o += kGroupRows) {
    PackedGroup g;
    g.qs = static_cast<const uint8_t*>(W) + (o / kGroupRows) * group_bytes;
    g.sc = g.qs + qs_bytes;
    g.n = o_end - o < kGroupRows ? static_cast<int>(o_end - o) : kGroupRows;
    for (int64_t b0 = 0; b0 < nb; b0 += chunk_blocks) {
      c.b0 = b0;
      c.b1 = nb - b0 < chunk_blocks ? nb : b0 + chunk_blocks;
      c.first = b0 == 0;
      c.last = c.b1 == nb;
      if (batch) {
        // Unpacked once here, not once per tile of 2 rows: the nibble and
        // fifth-bit splitting was ~40 % of a tile's instructions.
        for (int64_t b = c.b0; b < c.b1; ++b) {
          LoadWords<T>(g.qs, b, words + (b - c.b0) * 8);
          for (int k = 0; k < kScales; ++k) {
            _mm512_store_ps(scales + ((b - c.b0) * kScales + k) * 16,
                            _mm512_cvtph_ps(_mm256_loadu_si256(
                                reinterpret_cast<const __m256i*>(g.sc + (b * kScales + k) * 32))));
          }
        }
        c.words = words;
        c.scales = scales;
      }
      // Batches read each weight byte once, in the unpacking above, from L3
      // or memory: a 16-session SmolLM2 step waited there ~11 % of its
      // time. So the next chunk's words and scales (the next group's first
      // chunk after a group's last; none past this task's groups) are
      // prefetched into L1 while the tiles run, a slice before each: 16
      // SmolLM2-135M-Instruct Q4_1 sessions 741-803 -> 859-882 tokens/s
      // (into L2 instead: about half the gain).
      const rows16::NextChunk next =
          batch ? rows16::NextChunkOfGroup(T, W, o, o_end, nb, c.b0, c.b1 - c.b0, chunk_blocks)
                : rows16::NextChunk{};
      const char* next_words = reinterpret_cast<const char*>(next.at.qs);
      const char* next_scales = reinterpret_cast<const char*>(next.at.sc);
      const int64_t word_lines = next.len * kWords;
      const int64_t lines = word_lines + (next.len * kScales + 1) / 2;
      const int64_t tiles = (a.n_rows + 1) / 2;
      const int64_t lines_per_tile = (lines + tiles - 1) / tiles;
      int64_t line = 0;
      auto prefetch_slice = [&] {
        for (const int64_t end = std::min(line + lines_per_tile, lines); line < end; ++line) {
          const char* at =
              line < word_lines ? next_words + 64 * line : next_scales + 64 * (line - word_lines);
          _mm_prefetch(at, _MM_HINT_T0);
        }
      };
      int64_t r = 0;
      for (; r + 2 <= a.n_rows; r += 2) {
        prefetch_slice();
        PackedTile<T, 2>(g, a, r, o, c, y, y_stride);
      }
      if (r < a.n_rows) {
        prefetch_slice();
        PackedTile<T, 1>(g, a, r, o, c, y, y_stride);
      }
    }
  }
}

}  // namespace

namespace qmm {
Kernel Avx512PackedKernel(DType t) {
  switch (t) {
    case DType::kQ4_1:
      return &PackedKernel<DType::kQ4_1>;
    case DType::kQ5_0:
      return &PackedKernel<DType::kQ5_0>;
    default:
      return nullptr;
  }
}
}  // namespace qmm
}  // namespace llm

#pragma GCC diagnostic pop
