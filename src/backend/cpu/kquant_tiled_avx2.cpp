// AVX2 kernel for batches of Q4_K, Q5_K and Q6_K in llama.cpp's tiled order
// (kquant_kernels.h, "Tiled order"), bit for bit: the AVX2 level's
// counterpart of the AMX and VNNI tile kernels (kquant_amx.cpp,
// kquant_tiled_avx512.cpp), which compute the same integers. The order sums
// each 256-block exactly in integers before any float step:
//   S1 = sum over sub-blocks s of scale_s * sum_e(w_e * q_e)   (int32)
//   S2 = sum over sub-blocks of min_s * bsum_s                  (Q4_K, Q5_K)
//   t = float(S1) * d_w;  t = fma(-dmin_w, float(S2), t);  acc = fma(t, d_x, acc)
// with w the signed weight values (Q4_K / Q5_K codes 0..15 / 0..31, Q6_K
// code - 32).
//
// Layout: lane l of a register is weight row o + 8h + l (two halves h of a
// group of 16 rows), and an activation row's 4 values of a group are
// broadcast to every lane, as in the per-block Q4_0 kernel
// (quant_matmul_blocks_avx2.cpp): vpmaddubsw multiplies the weights' unsigned
// codes (u8) by the activations q (s8, |q| <= 127), each int16 lane summing
// two products, and the int16 sums of a few groups are widened by one
// vpmaddwd against the sub-block's scale (held in both int16 halves of each
// lane), which also multiplies by it:
//   P = sum over groups of maddubs(codes, q)   (int16; Q4_K: 8 groups, at
//       most 16 * 15 * 127 = 30480; Q5_K: 4 groups, 31496; Q6_K: 2 groups,
//       32004 -- then the chain is widened and restarted)
//   S1 += madd(P, scale_s)
// Q6_K's codes are code = w + 32, so S1 -= 32 * sum_s scale_s * bsum_s (the
// activations' 16-element sums, Acts::kbsum, against the scales as int16
// pairs); Q4_K / Q5_K's S2 pairs the mins with the 32-element sums likewise.
// Per group of 16 weight rows and chunk of kChunk blocks the weights are
// unpacked once (codes as [group of 4 elements][16 rows] u32 words, scales,
// mins, d) and every tile of 4 activation rows runs them as a 4 x 16 block of
// sums; the accumulators go through scratch between chunks. Activations are
// read as quantized (Acts::kq, kd, kbsum): no rearrangement per call.
// No std:: templates or shared out-of-line helpers here (ISA-flagged code: a
// weak symbol from this file could be linked in for every CPU;
// llm_isa_objects_have_no_shared_symbols checks).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/quant_blocks.h"
#include "backend/cpu/quant_matmul_kernels.h"
#include "core/half.h"

namespace llm {
namespace {

constexpr int kRows = 16;                           // weight rows per group (two halves of 8 lanes)
constexpr int kTileRows = 4;                        // activation rows per tile
constexpr int kGroups = 64;                         // groups of 4 elements per 256-block
constexpr int64_t kChunk = qmm::kAvx2KChunkBlocks;  // 256-blocks unpacked at once

template <DType T>
constexpr bool kHasMin = T == DType::kQ4_K || T == DType::kQ5_K;
// Sub-blocks per 256-block (one scale each) and groups per sub-block.
template <DType T>
constexpr int kSubBlocks = T == DType::kQ6_K ? 16 : 8;
template <DType T>
constexpr int kSubGroups = kGroups / kSubBlocks<T>;
// Groups per int16 chain (see the header comment).
template <DType T>
constexpr int kChain = T == DType::kQ6_K   ? 2
                       : T == DType::kQ5_K ? 4
                                           : 8;
// int16 pairs per block: Q4_K / Q5_K the mins (min_2k, min_2k+1), Q6_K the
// scales (scale_2k, scale_2k+1).
template <DType T>
constexpr int kPairs = T == DType::kQ6_K ? 8 : 4;

inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

// Keeps v in a register at this point: GCC otherwise reassociates a tile's
// integer add chains into trees, computing every product first and spilling
// them.
inline void Pin(__m256i& v) { asm("" : "+x"(v)); }

inline int32_t Pair16(int a, int b) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(a)) |
                              (static_cast<uint32_t>(static_cast<uint16_t>(b)) << 16));
}

// One chunk of kChunk blocks of 16 weight rows, unpacked.
struct Weights {
  uint32_t* codes;  // [block][group g][row]: the codes of elements 4g .. 4g + 3
  int32_t* scale;   // [block][sub-block][row]: the scale in both int16 halves
  int32_t* pairs;   // [block][pair k][row]: see kPairs
  float* d;         // [block][row]
  float* dmin;      // [block][row]
};

// Row `row` (0..15) of block `blk` of the chunk: its codes in element order
// into stage ([block][row][256] u8; Interleave then lays them out by group),
// the rest into w.
template <DType T>
void UnpackRow(const typename KBlockOf<T>::type& b, int row, const Weights& w, uint8_t* stage,
               int64_t blk) {
  uint8_t* codes = stage + (blk * kRows + row) * 256;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  int scales[16], mins[8] = {0};
  if constexpr (T == DType::kQ6_K) {
    const __m256i low2 = _mm256_set1_epi8(3);
    for (int n = 0; n < 2; ++n) {  // halves of 128 elements
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * n));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * n + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * n));
      // Element 128n + 32q + l: a nibble of ql (q = 0, 1: the low ones of
      // ql0 / ql1; q = 2, 3: the high ones), bits 2q, 2q + 1 of qh[l] above.
      const __m256i lo[4] = {_mm256_and_si256(ql0, low4), _mm256_and_si256(ql1, low4),
                             _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                             _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4)};
      for (int q = 0; q < 4; ++q) {
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * q), low2);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 128 * n + 32 * q),
                            _mm256_or_si256(lo[q], _mm256_slli_epi16(hi, 4)));
      }
    }
    for (int s = 0; s < 16; ++s) scales[s] = b.scales[s];
    w.d[blk * kRows + row] = F16ToF32(b.d);
  } else {
    __m256i qh = _mm256_setzero_si256();
    if constexpr (T == DType::kQ5_K) {
      qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
    }
    const __m256i one = _mm256_set1_epi8(1);
    for (int c = 0; c < 4; ++c) {  // chunks of 64 elements
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
      __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      if constexpr (T == DType::kQ5_K) {
        // Element 64c + l adds bit 2c of qh[l] as 16, 64c + 32 + l bit 2c + 1.
        const __m256i b0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one);
        const __m256i b1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(b0, 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(b1, 4));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 64 * c), lo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 64 * c + 32), hi);
    }
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      GetScaleMinK4(s, b.scales, &sc, &m);
      scales[s] = sc;
      mins[s] = m;
    }
    w.d[blk * kRows + row] = F16ToF32(b.d);
    w.dmin[blk * kRows + row] = F16ToF32(b.dmin);
  }
  for (int s = 0; s < kSubBlocks<T>; ++s) {
    w.scale[(blk * 16 + s) * kRows + row] = Pair16(scales[s], scales[s]);
  }
  for (int k = 0; k < kPairs<T>; ++k) {
    w.pairs[(blk * 8 + k) * kRows + row] = T == DType::kQ6_K
                                               ? Pair16(scales[2 * k], scales[2 * k + 1])
                                               : Pair16(mins[2 * k], mins[2 * k + 1]);
  }
}

// The staged codes of blocks [0, len) into w.codes ([block][group][16 rows]
// u32): per half of 8 rows and 8 groups, an 8 x 8 transpose of 32-bit words.
inline void Interleave(const uint8_t* stage, int64_t len, const Weights& w) {
  for (int64_t blk = 0; blk < len; ++blk) {
    for (int h = 0; h < 2; ++h) {
      const uint8_t* rows = stage + (blk * kRows + 8 * h) * 256;
      for (int q = 0; q < 8; ++q) {  // groups 8q .. 8q + 7
        __m256i v[8];
        for (int r = 0; r < 8; ++r) {
          v[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + r * 256 + 32 * q));
        }
        // Word g of v[r] goes to word r of group 8q + g's vector.
        __m256i t[8], u[8];
        for (int r = 0; r < 8; r += 2) {
          t[r] = _mm256_unpacklo_epi32(v[r], v[r + 1]);
          t[r + 1] = _mm256_unpackhi_epi32(v[r], v[r + 1]);
        }
        for (int r = 0; r < 8; r += 4) {
          u[r] = _mm256_unpacklo_epi64(t[r], t[r + 2]);
          u[r + 1] = _mm256_unpackhi_epi64(t[r], t[r + 2]);
          u[r + 2] = _mm256_unpacklo_epi64(t[r + 1], t[r + 3]);
          u[r + 3] = _mm256_unpackhi_epi64(t[r + 1], t[r + 3]);
        }
        uint32_t* out = w.codes + (blk * kGroups + 8 * q) * kRows + 8 * h;
        for (int g = 0; g < 4; ++g) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + g * kRows),
                              _mm256_permute2x128_si256(u[g], u[g + 4], 0x20));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (g + 4) * kRows),
                              _mm256_permute2x128_si256(u[g], u[g + 4], 0x31));
        }
      }
    }
  }
}

// Rows row0 .. row0 + R - 1 of the activations against the chunk's blocks
// [0, len) (global kb0 + j): acc[i][h] += their products.
template <DType T, int R>
inline void TileBlocks(const Weights& w, int64_t kb0, int64_t len, const qmm::Acts& a, int64_t row0,
                       __m256 acc[R][2]) {
  constexpr int kSub = kSubBlocks<T>, kSubG = kSubGroups<T>, kLen = kChain<T>;
  const int64_t nkb = a.n_kblocks;
  for (int64_t j = 0; j < len; ++j) {
    const int64_t kb = kb0 + j;
    const uint32_t* cj = w.codes + j * kGroups * kRows;
    const int8_t* xq[R];
    for (int i = 0; i < R; ++i) xq[i] = a.kq + (row0 + i) * a.n_in + 256 * kb;
    __m256i s1[R][2];
    for (int i = 0; i < R; ++i) s1[i][0] = s1[i][1] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int s = 0; s < kSub; ++s) {
      const __m256i* sc = reinterpret_cast<const __m256i*>(w.scale + (j * 16 + s) * kRows);
      const __m256i sc0 = _mm256_load_si256(sc), sc1 = _mm256_load_si256(sc + 1);
#pragma GCC unroll 4
      for (int c0 = 0; c0 < kSubG; c0 += kLen) {
        __m256i p[R][2];
#pragma GCC unroll 8
        for (int c = 0; c < kLen; ++c) {
          const int g = s * kSubG + c0 + c;
          const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(cj + g * kRows));
          const __m256i w1 =
              _mm256_load_si256(reinterpret_cast<const __m256i*>(cj + g * kRows + 8));
          for (int i = 0; i < R; ++i) {
            int32_t x4;
            std::memcpy(&x4, xq[i] + 4 * g, 4);
            const __m256i x = _mm256_set1_epi32(x4);
            const __m256i m0 = _mm256_maddubs_epi16(w0, x), m1 = _mm256_maddubs_epi16(w1, x);
            p[i][0] = c == 0 ? m0 : _mm256_add_epi16(p[i][0], m0);
            p[i][1] = c == 0 ? m1 : _mm256_add_epi16(p[i][1], m1);
            Pin(p[i][0]);
            Pin(p[i][1]);
          }
        }
        for (int i = 0; i < R; ++i) {
          s1[i][0] = _mm256_add_epi32(s1[i][0], _mm256_madd_epi16(p[i][0], sc0));
          s1[i][1] = _mm256_add_epi32(s1[i][1], _mm256_madd_epi16(p[i][1], sc1));
        }
      }
    }
    // The pair terms: Q6_K's 32 * sum_s scale_s * bsum16_s (bsum16 pairs as
    // stored), Q4_K / Q5_K's S2 = sum_s min_s * bsum32_s.
    const __m256i* pr = reinterpret_cast<const __m256i*>(w.pairs + j * 8 * kRows);
    for (int i = 0; i < R; ++i) {
      const int64_t row = row0 + i;
      const int16_t* bs = a.kbsum + (row * nkb + kb) * 16;
      alignas(16) int32_t bpair[8];
      if constexpr (T == DType::kQ6_K) {
        std::memcpy(bpair, bs, 32);
      } else {
        for (int k = 0; k < 4; ++k) {
          bpair[k] = Pair16(bs[4 * k] + bs[4 * k + 1], bs[4 * k + 2] + bs[4 * k + 3]);
        }
      }
      __m256i t2[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      for (int k = 0; k < kPairs<T>; ++k) {
        const __m256i bk = _mm256_set1_epi32(bpair[k]);
        for (int h = 0; h < 2; ++h) {
          t2[h] = _mm256_add_epi32(t2[h], _mm256_madd_epi16(_mm256_load_si256(pr + 2 * k + h), bk));
        }
      }
      const __m256 dx = _mm256_set1_ps(a.kd[row * nkb + kb]);
      for (int h = 0; h < 2; ++h) {
        __m256i s1h = s1[i][h];
        if constexpr (T == DType::kQ6_K) s1h = _mm256_sub_epi32(s1h, _mm256_slli_epi32(t2[h], 5));
        __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(s1h), _mm256_load_ps(w.d + j * kRows + 8 * h));
        if constexpr (kHasMin<T>) {
          t = _mm256_fnmadd_ps(_mm256_load_ps(w.dmin + j * kRows + 8 * h),
                               _mm256_cvtepi32_ps(t2[h]), t);
        }
        acc[i][h] = _mm256_fmadd_ps(t, dx, acc[i][h]);
      }
    }
  }
}

// One tile of R activation rows over one chunk: loads (or zeroes) the rows'
// accumulators, runs the blocks, then saves them or, after the last chunk,
// stores y[row][o .. o + n - 1].
template <DType T, int R>
void Tile(const Weights& w, int64_t kb0, int64_t len, bool first, bool last, const qmm::Acts& a,
          int64_t row0, float* saved, float* y, size_t y_stride, int64_t o, int n) {
  __m256 acc[R][2];
  for (int i = 0; i < R; ++i) {
    for (int h = 0; h < 2; ++h) {
      acc[i][h] = first ? _mm256_setzero_ps() : _mm256_load_ps(saved + (row0 + i) * 16 + 8 * h);
    }
  }
  TileBlocks<T, R>(w, kb0, len, a, row0, acc);
  for (int h = 0; h < 2 && 8 * h < n; ++h) {
    const int live = n - 8 * h;  // outputs of this half to store
    for (int i = 0; i < R; ++i) {
      if (!last) {
        _mm256_store_ps(saved + (row0 + i) * 16 + 8 * h, acc[i][h]);
      } else if (live >= 8) {
        _mm256_storeu_ps(y + (row0 + i) * y_stride + o + 8 * h, acc[i][h]);
      } else {
        const __m256i mask =
            _mm256_cmpgt_epi32(_mm256_set1_epi32(live), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(y + (row0 + i) * y_stride + o + 8 * h, mask, acc[i][h]);
      }
    }
  }
}

// W: GGUF rows (row o at W + o * row_bytes); o_begin a multiple of 16.
// scratch: qmm::ScratchFloats(n_in, n_rows) floats.
template <DType T>
void KTiledKernel(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end,
                  const qmm::Acts& a, float* y, size_t y_stride, float* scratch) {
  using Block = typename KBlockOf<T>::type;
  const int64_t nkb = a.n_kblocks;
  // scratch, 64-byte aligned: the chunk's unpacked weights, then the
  // accumulators of every activation row between chunks ([n_rows][16] f32).
  uint8_t* base =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  Weights w;
  w.codes = reinterpret_cast<uint32_t*>(base);
  w.scale = reinterpret_cast<int32_t*>(w.codes + kChunk * kGroups * kRows);
  w.pairs = w.scale + kChunk * 16 * kRows;
  w.d = reinterpret_cast<float*>(w.pairs + kChunk * 8 * kRows);
  w.dmin = w.d + kChunk * kRows;
  uint8_t* stage = reinterpret_cast<uint8_t*>(w.dmin + kChunk * kRows);
  float* saved = reinterpret_cast<float*>(stage + kChunk * kRows * 256);
  static_assert(qmm::kAvx2KScratchFloats * 4 >=
                    64 + kChunk * kRows * (4 * kGroups + 4 * 16 + 4 * 8 + 8 + 256),
                "kAvx2KScratchFloats too small");

  for (int64_t o = o_begin; o < o_end; o += kRows) {
    const int n = static_cast<int>(Min(kRows, o_end - o));  // live weight rows
    for (int64_t kb0 = 0; kb0 < nkb; kb0 += kChunk) {
      const int64_t len = Min(kChunk, nkb - kb0);
      qmm::UnpackGroupChunk<T>(
          W, row_bytes, o, o_end, kb0, len, kChunk, nkb,
          [&](const Block& b, int r, int64_t j) { UnpackRow<T>(b, r, w, stage, j); });
      Interleave(stage, len, w);
      const bool first = kb0 == 0, last = kb0 + len == nkb;
      int64_t r = 0;
      for (; r + kTileRows <= a.n_rows; r += kTileRows) {
        Tile<T, kTileRows>(w, kb0, len, first, last, a, r, saved, y, y_stride, o, n);
      }
      if (r + 2 <= a.n_rows) {
        Tile<T, 2>(w, kb0, len, first, last, a, r, saved, y, y_stride, o, n);
        r += 2;
      }
      if (r < a.n_rows) Tile<T, 1>(w, kb0, len, first, last, a, r, saved, y, y_stride, o, n);
    }
  }
}

}  // namespace

namespace qmm {
Kernel KQuantTiledAvx2Kernel(DType t) {
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
