// AVX-512 VNNI kernels for Q4_K on its rows16 copy (packed_weight.h: 16
// weight rows interleaved per 32-bit lane, made at load on AVX-512 hosts
// without AMX), with the same bits as the kernels on GGUF rows: products of
// 1-7 activation rows (and batch-invariant ones) in ggml's x86 vec_dot order
// (kquant_avx512.cpp), products of 8+ rows in llama.cpp's tiled order
// (kquant_kernels.h, "Tiled order"; kquant_tiled_avx512.cpp on GGUF rows).
//
// Lane l of a register is weight row o + l of a group of 16. Q4_K's codes
// (0..15) are vpdpbusd's unsigned operand as they are, split from a packed
// word by one and / shift, and the activation's Q8_K bytes (signed) its
// broadcast operand, 4 at a time straight from the quantized row
// (Acts::kq). Word 3 + 8c + i of a block holds, per lane, elements 64c + 4i
// .. + 3 (low nibbles, sub-block 2c) and 64c + 32 + 4i .. + 3 (high nibbles,
// sub-block 2c + 1), so one vpdpbusd gives, for 16 weight rows,
//   G = sum of 4 products w_e * q_e   (|G| <= 4 * 15 * 127: fits an int16)
// and the scales (words 0..2, decoded with byte-wise vector steps for all 16
// rows at once) multiply those sums exactly in either order:
//
// * vec_dot order: ggml's int32 lane i of the block is sum_c scale_2c *
//   G(2c, i) + scale_2c+1 * G(2c + 1, i) (i = 0..7, elements 4i .. 4i + 3 of
//   each 32-element sub-block), then per lane acc_i = fma(d, float(lane_i),
//   acc_i) with d = d_x * d_w, the mins lanes m = 0..3 acc_m = fma(-d_x *
//   dmin_w, float(min_2m bsum32_2m + min_2m+1 bsum32_2m+1), acc_m), and at
//   the end hsum_float_8(acc) + ((m0 + m2) + (m1 + m3)). Here each of those
//   f32 lanes is a register across the 16 weight rows (8 + 4 registers), G
//   times its scale added by vpdpwssd (G's int32 is its int16 and a sign
//   word, the scale's int32 the scale and a zero word).
// * tiled order: S1 = sum_s scale_s * P_s (P_s the sub-block's sum of
//   products, 8 vpdpbusd, times its scale by one vpmulld), S2 = sum_s min_s
//   bsum_s, t = float(S1) d_w, t = fma(-dmin_w, float(S2), t), acc = fma(t,
//   d_x, acc), kBand activation rows at a time against each word; each
//   accumulator is one activation row's 16 outputs, so one masked store.
//   On GGUF rows the tiled kernel has the activations in the lanes and must
//   unpack every weight row per call (and form a +128 bias correction):
//   ~25 % of a 16-row batch's time, which the load-time layout removes.
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

namespace llm {
namespace {

constexpr int kRows = rows16::kRows;  // weight rows per group (lanes)
constexpr int kWords = 35;            // words per block and lane: 3 of scales, 32 of quants
constexpr int kScaleWords = 3;
constexpr int kBand = 8;              // activation rows per pass of the tiled order
// A product reads each weight byte from memory once (one activation row, or
// a batch chunk by chunk): the group's bytes this far ahead are prefetched
// into L2 (times DecodePrefetchScale(), as the other rows16 kernels).
constexpr int64_t kPrefetchBytes = 4096;

// One block of a group: its 35 words x 16 lanes and its d / dmin halves.
struct Block {
  const __m512i* words;  // [kWords]
  const uint16_t* d;     // [16] f16
  const uint16_t* dmin;  // [16] f16
};

// Block b of the group starting at `group` (nb blocks).
inline Block BlockOf(const uint8_t* group, int64_t nb, int64_t b) {
  const uint8_t* sc = group + nb * kRows * 4 * kWords + b * 2 * kRows * 2;
  return {reinterpret_cast<const __m512i*>(group + b * kWords * 64),
          reinterpret_cast<const uint16_t*>(sc), reinterpret_cast<const uint16_t*>(sc) + kRows};
}

// The block's 8 scales and 8 mins, for 16 rows, as bytes 0..3 of each lane:
// ggml's get_scale_min_k4 with the 12 bytes as dwords a0, a1, a2
// (kquant_scales_avx512.h does the same for one row).
struct ScalesMins {
  __m512i sc_lo, sc_hi;  // bytes j: scale j, scale 4 + j
  __m512i m_lo, m_hi;    // bytes j: min j, min 4 + j
};

inline ScalesMins DecodeScalesMins(const Block& blk) {
  const __m512i a0 = _mm512_loadu_si512(blk.words);
  const __m512i a1 = _mm512_loadu_si512(blk.words + 1);
  const __m512i a2 = _mm512_loadu_si512(blk.words + 2);
  const __m512i m6 = _mm512_set1_epi8(0x3f), m4 = _mm512_set1_epi8(0x0f),
                top2 = _mm512_set1_epi8(0x30);
  ScalesMins s;
  s.sc_lo = _mm512_and_si512(a0, m6);
  s.m_lo = _mm512_and_si512(a1, m6);
  // (byte >> 6) << 4 of a0 / a1: the dword shifted right by 2, masked to
  // bits 4..5 of each byte (the bits shifted in from the next byte land
  // in bits 6..7 and are masked off).
  s.sc_hi = _mm512_or_si512(_mm512_and_si512(a2, m4),
                            _mm512_and_si512(_mm512_srli_epi32(a0, 2), top2));
  s.m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a2, 4), m4),
                           _mm512_and_si512(_mm512_srli_epi32(a1, 2), top2));
  return s;
}

// Byte j of each lane as an int32.
inline __m512i ByteOf(__m512i v, int j) {
  return _mm512_and_si512(_mm512_srli_epi32(v, 8 * j), _mm512_set1_epi32(0xff));
}

// (min 2k, min 2k + 1) of each lane as two int16 (k = 0..3).
inline __m512i MinPair(const ScalesMins& s, int k) {
  const __m512i v = k < 2 ? s.m_lo : s.m_hi;
  const int j = 2 * (k % 2);
  return _mm512_or_si512(ByteOf(v, j), _mm512_slli_epi32(ByteOf(v, j + 1), 16));
}

// Scale s (0..7) of each lane as an int32.
inline __m512i ScaleOf(const ScalesMins& sm, int s) {
  return ByteOf(s < 4 ? sm.sc_lo : sm.sc_hi, s % 4);
}

// The 4 activation bytes at x, broadcast into vpdpbusd's signed operand
// against w (u8): GCC 12 would load the broadcast into a register first
// (one more instruction each).
inline __m512i DotGroup(__m512i acc, __m512i w, const int8_t* x) {
  asm("vpdpbusd %[x]%{1to16%}, %[w], %[p]"
      : [p] "+v"(acc)
      : [w] "v"(w), [x] "m"(*reinterpret_cast<const int32_t*>(x)));
  return acc;
}

// ---- vec_dot order: one activation row at a time --------------------------

// Outputs o .. o + 15 of activation row x (Q8_K bytes, its d per block and
// 16-element sums) against the group at `group` (nb blocks).
__m512 VecDotGroup(const uint8_t* group, int64_t nb, const int8_t* x, const float* xd,
                   const int16_t* xbsum, int64_t prefetch) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  __m512 acc[8], acc_m[4];
  for (int i = 0; i < 8; ++i) acc[i] = _mm512_setzero_ps();
  for (int m = 0; m < 4; ++m) acc_m[m] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Block blk = BlockOf(group, nb, b);
    if (prefetch > 0) {
      const char* ahead = reinterpret_cast<const char*>(blk.words) + prefetch;
      for (int k = 0; k < kWords; ++k) _mm_prefetch(ahead + 64 * k, _MM_HINT_T1);
    }
    const ScalesMins sm = DecodeScalesMins(blk);
    const int8_t* xb = x + b * 256;
    __m512i lanes[8];
    for (int i = 0; i < 8; ++i) lanes[i] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m512i sc_lo = ScaleOf(sm, 2 * c), sc_hi = ScaleOf(sm, 2 * c + 1);
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m512i w = _mm512_loadu_si512(blk.words + kScaleWords + 8 * c + i);
        const __m512i g_lo =
            DotGroup(_mm512_setzero_si512(), _mm512_and_si512(w, m4), xb + 64 * c + 4 * i);
        const __m512i g_hi = DotGroup(_mm512_setzero_si512(),
                                      _mm512_and_si512(_mm512_srli_epi16(w, 4), m4),
                                      xb + 64 * c + 32 + 4 * i);
        lanes[i] = _mm512_dpwssd_epi32(lanes[i], g_lo, sc_lo);
        lanes[i] = _mm512_dpwssd_epi32(lanes[i], g_hi, sc_hi);
      }
    }
    const __m512 d_w = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.d)));
    const __m512 dmin_w =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.dmin)));
    const __m512 d = _mm512_mul_ps(_mm512_set1_ps(xd[b]), d_w);
    const __m512 dmin = _mm512_mul_ps(_mm512_set1_ps(-xd[b]), dmin_w);
    // The 32-element sums of sub-blocks 2m, 2m + 1 as an int16 pair.
    const int16_t* bs = xbsum + b * 16;
    for (int m = 0; m < 4; ++m) {
      const uint32_t pair =
          static_cast<uint16_t>(bs[4 * m] + bs[4 * m + 1]) |
          static_cast<uint32_t>(static_cast<uint16_t>(bs[4 * m + 2] + bs[4 * m + 3])) << 16;
      const __m512i prod = _mm512_dpwssd_epi32(_mm512_setzero_si512(), MinPair(sm, m),
                                               _mm512_set1_epi32(static_cast<int32_t>(pair)));
      acc_m[m] = _mm512_fmadd_ps(dmin, _mm512_cvtepi32_ps(prod), acc_m[m]);
    }
    for (int i = 0; i < 8; ++i) acc[i] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes[i]), acc[i]);
  }
  // hsum_float_8: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)); the
  // mins: (m0 + m2) + (m1 + m3).
  const __m512 h0 = _mm512_add_ps(acc[4], acc[0]), h1 = _mm512_add_ps(acc[5], acc[1]),
               h2 = _mm512_add_ps(acc[6], acc[2]), h3 = _mm512_add_ps(acc[7], acc[3]);
  const __m512 h = _mm512_add_ps(_mm512_add_ps(h0, h2), _mm512_add_ps(h1, h3));
  const __m512 m =
      _mm512_add_ps(_mm512_add_ps(acc_m[0], acc_m[2]), _mm512_add_ps(acc_m[1], acc_m[3]));
  return _mm512_add_ps(h, m);
}

// W: the rows16 copy; o_begin a multiple of 16. Any number of activation
// rows, each in the vec_dot order (the product's 1-7 rows, or a
// batch-invariant one).
void VecDotKernel(const void* W, size_t /*row_bytes*/, int64_t o_begin, int64_t o_end,
                  const qmm::Acts& a, float* y, size_t y_stride, float* /*scratch*/) {
  const int64_t nb = a.n_kblocks;
  const size_t group_bytes = rows16::GroupBytes(DType::kQ4_K, nb);
  const int64_t prefetch = kPrefetchBytes * DecodePrefetchScale();
  for (int64_t o = o_begin; o < o_end; o += kRows) {
    const uint8_t* group = static_cast<const uint8_t*>(W) + (o / kRows) * group_bytes;
    const int n = static_cast<int>(std::min<int64_t>(kRows, o_end - o));
    const __mmask16 mask = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
    for (int64_t r = 0; r < a.n_rows; ++r) {
      // (The first row reads the group from memory, the others from cache.)
      const __m512 out = VecDotGroup(group, nb, a.kq + r * a.n_in, a.kd + r * nb,
                                     a.kbsum + r * nb * 16, r == 0 ? prefetch : 0);
      _mm512_mask_storeu_ps(y + r * static_cast<int64_t>(y_stride) + o, mask, out);
    }
  }
}

// ---- tiled order: kBand activation rows at a time -------------------------

// A chunk's scales, mins and d / dmin, decoded once for every band of
// activation rows (in scratch).
struct ChunkScales {
  int32_t scale[qmm::kQ4KRows16ChunkBlocks][8][kRows];  // scale s of each lane
  int32_t mins[qmm::kQ4KRows16ChunkBlocks][4][kRows];   // MinPair(k)
  float d[qmm::kQ4KRows16ChunkBlocks][kRows];
  float dmin[qmm::kQ4KRows16ChunkBlocks][kRows];
};

void DecodeChunk(const uint8_t* group, int64_t nb, int64_t b0, int64_t len, ChunkScales* cs) {
  for (int64_t j = 0; j < len; ++j) {
    const Block blk = BlockOf(group, nb, b0 + j);
    const ScalesMins sm = DecodeScalesMins(blk);
    for (int s = 0; s < 8; ++s) _mm512_store_si512(cs->scale[j][s], ScaleOf(sm, s));
    for (int k = 0; k < 4; ++k) _mm512_store_si512(cs->mins[j][k], MinPair(sm, k));
    _mm512_store_ps(cs->d[j],
                    _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.d))));
    _mm512_store_ps(cs->dmin[j], _mm512_cvtph_ps(_mm256_loadu_si256(
                                     reinterpret_cast<const __m256i*>(blk.dmin))));
  }
}

// s1[i] += scale * P for activation row i (x[i]: its bytes from the block's
// first element) and sub-block 2c + kHigh: the block's words 3 + 8c .. + 7,
// their low (kHigh 0) or high nibbles.
template <int kHigh>
inline void AddSubBlock(const Block& blk, int c, const int32_t* scale, const int8_t* const x[kBand],
                        int64_t e0, __m512i s1[kBand]) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  __m512i p[kBand];
  for (int i = 0; i < kBand; ++i) p[i] = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    __m512i w = _mm512_loadu_si512(blk.words + kScaleWords + 8 * c + k);
    w = _mm512_and_si512(kHigh ? _mm512_srli_epi16(w, 4) : w, m4);
    const int64_t e = e0 + 64 * c + 32 * kHigh + 4 * k;  // the group's first element
#pragma GCC unroll 8
    for (int i = 0; i < kBand; ++i) p[i] = DotGroup(p[i], w, x[i] + e);
  }
  const __m512i sc = _mm512_load_si512(scale);
  for (int i = 0; i < kBand; ++i) s1[i] = _mm512_add_epi32(s1[i], _mm512_mullo_epi32(p[i], sc));
}

// acc[i] (activation row r0 + i, lanes: the group's 16 weight rows) += blocks
// [b0, b0 + len) of the group (cs: their scales). x[i]: activation row r0 +
// i's Q8_K bytes; d_x / bsum_pairs: Acts::kd_tiles / kbsum_tiles at that
// row's tile and lane (index b * 16 / b * 64 + k * 16 from there).
void TiledBand(const uint8_t* group, int64_t nb, int64_t b0, int64_t len, const ChunkScales& cs,
               const int8_t* const x[kBand], const float* const d_x[kBand],
               const int32_t* const bsum_pairs[kBand], __m512 acc[kBand]) {
  for (int64_t j = 0; j < len; ++j) {
    const int64_t b = b0 + j;
    const Block blk = BlockOf(group, nb, b);
    __m512i s1[kBand];
    for (int i = 0; i < kBand; ++i) s1[i] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int c = 0; c < 4; ++c) {  // sub-blocks 2c, 2c + 1
      AddSubBlock<0>(blk, c, cs.scale[j][2 * c], x, b * 256, s1);
      AddSubBlock<1>(blk, c, cs.scale[j][2 * c + 1], x, b * 256, s1);
    }
    const __m512 d = _mm512_load_ps(cs.d[j]);
    const __m512 dmin = _mm512_load_ps(cs.dmin[j]);
#pragma GCC unroll 8
    for (int i = 0; i < kBand; ++i) {
      const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(s1[i]), d);
      __m512i s2 = _mm512_setzero_si512();
      for (int k = 0; k < 4; ++k) {
        s2 = _mm512_dpwssd_epi32(s2, _mm512_load_si512(cs.mins[j][k]),
                                 _mm512_set1_epi32(bsum_pairs[i][b * 64 + k * 16]));
      }
      const __m512 tm = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(s2), t);
      acc[i] = _mm512_fmadd_ps(tm, _mm512_set1_ps(d_x[i][b * 16]), acc[i]);
    }
  }
}

// W: the rows16 copy; o_begin a multiple of 16; 8+ activation rows (any
// count works). scratch: qmm::ScratchFloats(n_in, n_rows) floats (a chunk's
// ChunkScales, then the accumulators between chunks of blocks: [rows rounded
// up to kBand][16]).
void TiledKernel(const void* W, size_t /*row_bytes*/, int64_t o_begin, int64_t o_end,
                 const qmm::Acts& a, float* y, size_t y_stride, float* scratch) {
  const int64_t nb = a.n_kblocks;
  const size_t group_bytes = rows16::GroupBytes(DType::kQ4_K, nb);
  ChunkScales* cs =
      reinterpret_cast<ChunkScales*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  float* saved = reinterpret_cast<float*>(cs + 1);
  const int64_t prefetch = kPrefetchBytes * DecodePrefetchScale();
  static_assert(sizeof(ChunkScales) % 64 == 0 &&
                    16 + sizeof(ChunkScales) / 4 <= qmm::kVnniKScratchFloats,
                "ScratchFloats leaves room for the chunk's scales");
  static_assert(qmm::kAmxScratchPerRow >= 16 && qmm::kAmxTileRows >= kBand,
                "the saved accumulators must fit the per-row scratch");
  for (int64_t o = o_begin; o < o_end; o += kRows) {
    const uint8_t* group = static_cast<const uint8_t*>(W) + (o / kRows) * group_bytes;
    const int n = static_cast<int>(std::min<int64_t>(kRows, o_end - o));  // live weight rows
    const __mmask16 mask = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
    // A chunk of the group's blocks (2 x 2.3 KB) stays in L1 while every band
    // of activation rows runs it.
    for (int64_t b0 = 0; b0 < nb; b0 += qmm::kQ4KRows16ChunkBlocks) {
      const int64_t len = std::min(qmm::kQ4KRows16ChunkBlocks, nb - b0);
      const bool first = b0 == 0, last = b0 + len == nb;
      // The batch reads every weight once, from memory: the bytes a few
      // chunks ahead (on into the next group) go to L2 while this one runs.
      const char* ahead = reinterpret_cast<const char*>(BlockOf(group, nb, b0).words) + prefetch;
      for (int64_t k = 0; k < len * kWords; ++k) _mm_prefetch(ahead + 64 * k, _MM_HINT_T1);
      DecodeChunk(group, nb, b0, len, cs);
      for (int64_t r0 = 0; r0 < a.n_rows; r0 += kBand) {
        // Rows past n_rows repeat the last one's bytes (computed, never
        // stored); their tile entries are the zero padding.
        const int8_t* x[kBand];
        const float* d_x[kBand];
        const int32_t* bsum_pairs[kBand];
        for (int i = 0; i < kBand; ++i) {
          const int64_t r = r0 + i, t = r / 16, lane = r % 16;
          x[i] = a.kq + std::min(r, a.n_rows - 1) * a.n_in;
          d_x[i] = a.kd_tiles + t * nb * 16 + lane;
          bsum_pairs[i] = a.kbsum_tiles + t * nb * 64 + lane;
        }
        float* band_saved = saved + r0 * 16;
        __m512 acc[kBand];
        for (int i = 0; i < kBand; ++i) {
          acc[i] = first ? _mm512_setzero_ps() : _mm512_load_ps(band_saved + i * 16);
        }
        TiledBand(group, nb, b0, len, *cs, x, d_x, bsum_pairs, acc);
        if (!last) {
          for (int i = 0; i < kBand; ++i) _mm512_store_ps(band_saved + i * 16, acc[i]);
          continue;
        }
        const int64_t rows = std::min<int64_t>(kBand, a.n_rows - r0);
        for (int64_t i = 0; i < rows; ++i) {
          _mm512_mask_storeu_ps(y + (r0 + i) * static_cast<int64_t>(y_stride) + o, mask, acc[i]);
        }
      }
    }
  }
}

}  // namespace

namespace qmm {
Kernel Q4KRows16Avx512Kernel() { return &VecDotKernel; }
Kernel Q4KRows16TiledAvx512Kernel() { return &TiledKernel; }
}  // namespace qmm
}  // namespace llm

#pragma GCC diagnostic pop
