// AMX-INT8 kernel for batches of Q4_K, Q5_K and Q6_K in llama.cpp's tiled
// order (kquant_kernels.h, "Tiled order"), bit for bit: the order sums each
// 256-block exactly in integers before any float step, so AMX may compute
// those integers its own way.
//
// Per weight row o and 256-block, S1 = sum over sub-blocks s of scale_s *
// sum(w_e * q_e) is one integer dot product of the activations q with the
// scaled weights w'_e = scale_s(e) * w_e (Q4_K |w'| <= 945, Q5_K <= 1953,
// Q6_K <= 4096), too wide for int8, so w' is split as 64 * H + L with L =
// w' & 63 and H = w' >> 6 (arithmetic: -64 .. 64), both int8, and
// S1 = 64 * (H . q) + (L . q): two tdpbssd per 64 elements, accumulated over
// the whole block in two C tiles, with no per-sub-block step. S2 (types with
// mins) = sum_s min_s * bsum_s comes from vpdpwssd on (min pair, bsum pair)
// int16 lanes. Then the order's float steps per (weight row, activation row):
//   t = float(S1) * d_w;  t = fma(-dmin_w, float(S2), t);  acc = fma(t, d_x, acc).
//
// Here the weights are the A operand (16 weight rows x 64 bytes, one chunk
// of a row per tile row, its elements in qmm::AmxKGroupStart order: the order
// vpacksswb leaves when it packs the int16 w' to bytes) and the activations
// the B operand, rearranged once per product into VNNI tiles by
// ArrangeKTiles (B row k holds the same 4 elements of 16 activation rows).
// C row i is weight row o + i across 16 activation rows, so the f32
// accumulators hold one weight row each and are written out transposed.
// Per group of 16 weight rows and chunk of kChunk blocks the weights are
// unpacked once (codes -> w' -> H, L) and shared by every activation tile.
// GCC 12 reports its own _mm512_undefined_*() placeholders inside the
// AVX-512 intrinsic headers as uninitialized (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/amx_tile_config.h"
#include "backend/cpu/kquant_codes_avx512.h"
#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/quant_blocks.h"
#include "backend/cpu/quant_matmul_kernels.h"
#include "backend/cpu/transpose16x16_avx512.h"
#include "core/half.h"

namespace llm {
namespace {

constexpr int kRows = 16;                // weight rows per A tile, activation rows per B tile
constexpr int kChunksPerBlock = 4;       // 64-element K chunks per 256-block
constexpr int64_t kTileBytes = 16 * 64;  // every tile here is 16 rows x 64 bytes
constexpr int64_t kChunk = qmm::kAmxKChunkBlocks;  // 256-blocks unpacked at once
constexpr int kRing = 2;                           // C pairs in flight (one block ahead)

template <DType T>
constexpr bool kHasMin = T == DType::kQ4_K || T == DType::kQ5_K;

// One chunk of kChunk blocks of 16 weight rows, unpacked.
struct Weights {
  int8_t* h;      // [block][chunk c][row][64]: H of w'
  int8_t* l;      // the same for L
  float* d;       // [block][row]
  float* dmin;    // [block][row]
  int32_t* mins;  // [block][pair k][row]: (min_2k, min_2k+1) as two int16
};

void LoadTileConfig() {
  AmxTileConfig cfg;
  // 0, 1: C for H and L (16 weight rows x 16 int32); 2 / 5: B (activations),
  // 3 / 6: A for H, 4 / 7: A for L, two sets for alternating chunks.
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = kRows;
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
}

// The 64 w' of one chunk (lo: elements 0..31, hi: 32..63, as int16) -> its
// H and L tile rows. vpacksswb / vpackuswb interleave their two sources by
// 128-bit lane, so the row holds the chunk's elements in qmm::AmxKGroupStart order
// (ArrangeKTiles puts the activations in the same order): 2 shuffle uops
// per 64 bytes, where vpmovwb took 8.
inline void SplitStore(__m512i lo, __m512i hi, int8_t* h, int8_t* l) {
  _mm512_store_si512(h, _mm512_packs_epi16(_mm512_srai_epi16(lo, 6), _mm512_srai_epi16(hi, 6)));
  const __m512i low6 = _mm512_set1_epi16(63);
  _mm512_store_si512(l, _mm512_packus_epi16(_mm512_and_si512(lo, low6), _mm512_and_si512(hi, low6)));
}

// Row `row` (0..15) of block `blk` into w (b: this block's Weights offsets).
template <DType T>
void UnpackRow(const typename KBlockOf<T>::type& b, int row, const Weights& w, int64_t blk) {
  int8_t* h = w.h + blk * kChunksPerBlock * kTileBytes + row * 64;
  int8_t* l = w.l + blk * kChunksPerBlock * kTileBytes + row * 64;
  if constexpr (T == DType::kQ6_K) {
    w.d[blk * kRows + row] = F16ToF32(b.d);
    // The 16 sub-block scales as int16; lanes 0..15 of the index pick
    // sub-block s, lanes 16..31 sub-block s + 1.
    const __m512i scales = _mm512_castsi256_si512(
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales))));
    const __m512i pair = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);
    for (int hf = 0; hf < 2; ++hf) {
      __m256i v[4];
      HalfCodesQ6K(b, hf, v);
      __m512i wq[4];
      for (int q = 0; q < 4; ++q) {  // elements 128hf + 32q .. + 31: sub-blocks 8hf + 2q, + 1
        const __m512i codes = _mm512_sub_epi16(_mm512_cvtepu8_epi16(v[q]), _mm512_set1_epi16(32));
        const __m512i scale = _mm512_permutexvar_epi16(
            _mm512_add_epi16(pair, _mm512_set1_epi16(static_cast<int16_t>(8 * hf + 2 * q))), scales);
        wq[q] = _mm512_mullo_epi16(codes, scale);
      }
      for (int c = 0; c < 2; ++c) {  // chunk 2hf + c: q = 2c (elements 0..31), 2c + 1
        SplitStore(wq[2 * c], wq[2 * c + 1], h + (2 * hf + c) * kTileBytes,
                   l + (2 * hf + c) * kTileBytes);
      }
    }
  } else {
    w.d[blk * kRows + row] = F16ToF32(b.d);
    w.dmin[blk * kRows + row] = F16ToF32(b.dmin);
    uint8_t sc[8], m[8];
    for (int s = 0; s < 8; ++s) GetScaleMinK4(s, b.scales, &sc[s], &m[s]);
    for (int k = 0; k < 4; ++k) {
      w.mins[(blk * 4 + k) * kRows + row] = static_cast<int32_t>(
          static_cast<uint32_t>(m[2 * k]) | (static_cast<uint32_t>(m[2 * k + 1]) << 16));
    }
    for (int c = 0; c < kChunksPerBlock; ++c) {
      __m256i lo, hi;
      ChunkCodesK45<typename KBlockOf<T>::type, T == DType::kQ5_K>(b, c, &lo, &hi);
      SplitStore(_mm512_mullo_epi16(_mm512_cvtepu8_epi16(lo), _mm512_set1_epi16(sc[2 * c])),
                 _mm512_mullo_epi16(_mm512_cvtepu8_epi16(hi), _mm512_set1_epi16(sc[2 * c + 1])),
                 h + c * kTileBytes, l + c * kTileBytes);
    }
  }
}

// W: GGUF rows (row o at W + o * row_bytes); o_begin a multiple of 16.
template <DType T>
void KTileKernel(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end,
                 const qmm::Acts& a, float* y, size_t y_stride, float* scratch) {
  using Block = typename KBlockOf<T>::type;
  const int64_t nkb = a.n_kblocks;
  const int64_t n_tiles = (a.n_rows + kRows - 1) / kRows;
  const int64_t n_chunks = a.n_in / 64;
  // scratch, 64-byte aligned: H and L of a chunk of blocks, the C ring, the
  // chunk's d / dmin / mins, then the accumulators between chunks
  // ([n_tiles][16 weight rows][16] f32).
  uint8_t* base =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  Weights w;
  w.h = reinterpret_cast<int8_t*>(base);
  w.l = w.h + kChunk * kChunksPerBlock * kTileBytes;
  int32_t* c_ring = reinterpret_cast<int32_t*>(w.l + kChunk * kChunksPerBlock * kTileBytes);
  w.d = reinterpret_cast<float*>(c_ring + kRing * 2 * kRows * kRows);
  w.dmin = w.d + kChunk * kRows;
  w.mins = reinterpret_cast<int32_t*>(w.dmin + kChunk * kRows);
  float* saved = reinterpret_cast<float*>(w.mins + kChunk * 4 * kRows);
  static_assert(qmm::kAmxKScratchFloats * 4 >= 64 + 2 * kChunk * kChunksPerBlock * kTileBytes +
                                                   kRing * 2 * kRows * kRows * 4 +
                                                   kChunk * kRows * 4 * 6,
                "kAmxKScratchFloats too small");

  LoadTileConfig();
  for (int64_t o = o_begin; o < o_end; o += kRows) {
    const int n = static_cast<int>(std::min<int64_t>(kRows, o_end - o));  // live weight rows
    for (int64_t kb0 = 0; kb0 < nkb; kb0 += kChunk) {
      const int64_t len = std::min(kChunk, nkb - kb0);
      qmm::UnpackGroupChunk<T>(W, row_bytes, o, o_end, kb0, len, kChunk, nkb,
                               [&](const Block& b, int r, int64_t j) { UnpackRow<T>(b, r, w, j); });
      const bool first = kb0 == 0, last = kb0 + len == nkb;
      for (int64_t t = 0; t < n_tiles; ++t) {
        __m512 acc[kRows];  // weight row i, lanes: activation rows 16t ..
        for (int i = 0; i < kRows; ++i) {
          acc[i] = first ? _mm512_setzero_ps() : _mm512_load_ps(saved + (t * kRows + i) * 16);
        }
        // Block j: C_H, C_L over its 4 chunks, on two alternating sets of
        // A / B tile registers, stored into ring slot j % kRing.
        auto multiply = [&](int64_t j) {
          const int8_t* b_tiles =
              a.kq_tiles + (t * n_chunks + (kb0 + j) * kChunksPerBlock) * kTileBytes;
          const int8_t* h = w.h + j * kChunksPerBlock * kTileBytes;
          const int8_t* l = w.l + j * kChunksPerBlock * kTileBytes;
          _tile_zero(0);
          _tile_zero(1);
          for (int c = 0; c < kChunksPerBlock; c += 2) {
            _tile_loadd(2, b_tiles + c * kTileBytes, 64);
            _tile_loadd(3, h + c * kTileBytes, 64);
            _tile_loadd(4, l + c * kTileBytes, 64);
            _tile_dpbssd(0, 3, 2);
            _tile_dpbssd(1, 4, 2);
            _tile_loadd(5, b_tiles + (c + 1) * kTileBytes, 64);
            _tile_loadd(6, h + (c + 1) * kTileBytes, 64);
            _tile_loadd(7, l + (c + 1) * kTileBytes, 64);
            _tile_dpbssd(0, 6, 5);
            _tile_dpbssd(1, 7, 5);
          }
          int32_t* slot = c_ring + (j % kRing) * 2 * kRows * kRows;
          _tile_stored(0, slot, 64);
          _tile_stored(1, slot + kRows * kRows, 64);
        };
        // The order's float steps for block j (kquant_kernels.h).
        auto accumulate = [&](int64_t j) {
          const int32_t* ch = c_ring + (j % kRing) * 2 * kRows * kRows;
          const int32_t* cl = ch + kRows * kRows;
          const int64_t kb = kb0 + j;
          const __m512 d_x = _mm512_loadu_ps(a.kd_tiles + (t * nkb + kb) * kRows);
          const int32_t* bsum_pairs = a.kbsum_tiles + (t * nkb + kb) * 4 * kRows;
          for (int i = 0; i < kRows; ++i) {
            const __m512i s1 =
                _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(ch + 16 * i), 6),
                                 _mm512_load_si512(cl + 16 * i));
            __m512 tv = _mm512_mul_ps(_mm512_cvtepi32_ps(s1), _mm512_set1_ps(w.d[j * kRows + i]));
            if constexpr (kHasMin<T>) {
              __m512i s2 = _mm512_setzero_si512();
              for (int k = 0; k < 4; ++k) {
                s2 = _mm512_dpwssd_epi32(s2, _mm512_loadu_si512(bsum_pairs + k * kRows),
                                         _mm512_set1_epi32(w.mins[(j * 4 + k) * kRows + i]));
              }
              tv = _mm512_fnmadd_ps(_mm512_set1_ps(w.dmin[j * kRows + i]), _mm512_cvtepi32_ps(s2),
                                    tv);
            }
            acc[i] = _mm512_fmadd_ps(tv, d_x, acc[i]);
          }
        };
        multiply(0);
        for (int64_t j = 0; j < len; ++j) {
          if (j + 1 < len) multiply(j + 1);
          accumulate(j);
        }
        if (!last) {
          for (int i = 0; i < kRows; ++i) _mm512_store_ps(saved + (t * kRows + i) * 16, acc[i]);
          continue;
        }
        // acc row i holds weight row o + i across the tile's activation
        // rows: transposed, each activation row's 16 outputs are one store.
        Transpose16x16(acc);
        const int64_t rows = std::min<int64_t>(kRows, a.n_rows - t * kRows);
        const __mmask16 mask = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
        for (int64_t r = 0; r < rows; ++r) {
          _mm512_mask_storeu_ps(y + (t * kRows + r) * static_cast<int64_t>(y_stride) + o, mask,
                                acc[r]);
        }
      }
    }
  }
  _tile_release();
}

}  // namespace

namespace qmm {
Kernel KQuantAmxKernel(DType t) {
  switch (t) {
    case DType::kQ4_K:
      return &KTileKernel<DType::kQ4_K>;
    case DType::kQ5_K:
      return &KTileKernel<DType::kQ5_K>;
    case DType::kQ6_K:
      return &KTileKernel<DType::kQ6_K>;
    default:
      return nullptr;
  }
}

}  // namespace qmm
}  // namespace llm

#pragma GCC diagnostic pop
