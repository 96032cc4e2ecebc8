// AVX-512 VNNI kernels for Q4_K and Q6_K on their rows16 copy
// (packed_weight.h: 16 weight rows interleaved per 32-bit lane, made at load
// on AVX-512 hosts without AMX), with the same bits as the kernels on GGUF
// rows: products of 1-7 activation rows (and batch-invariant ones) in ggml's
// x86 vec_dot order (kquant_avx512.cpp), products of 8+ rows in llama.cpp's
// tiled order (kquant_kernels.h, "Tiled order"; kquant_tiled_avx512.cpp on
// GGUF rows).
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
//
// Q6_K the same way: its codes 0..63 are built per group from a low-nibble
// word and a high-bits word (one shift and a mask or two for each), the
// 16 int8 scales sign-extended from words 48..51, and the codes' offset of
// 32 taken off as ggml does: vec_dot lane i minus 32 * (scale_2i bsum_2i +
// scale_2i+1 bsum_2i+1) (the 16-element sums), S1 minus 32 * sum_s scale_s
// bsum_s.
// GCC 12 reports its own _mm512_undefined_*() placeholders inside the
// AVX-512 intrinsic headers as uninitialized (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/packed_weight.h"
#include "backend/cpu/quant_matmul_kernels.h"

namespace llm {
namespace {

constexpr int kRows = rows16::kRows;  // weight rows per group (lanes)
constexpr int kBand = 8;              // activation rows per pass of the tiled order
constexpr int64_t kChunk = qmm::kKRows16ChunkBlocks;
// A product reads each weight byte from memory once (one activation row, or
// a batch chunk by chunk): the group's bytes this far ahead are prefetched
// into L2 (times DecodePrefetchScale(), as the other rows16 kernels). Q6_K:
// 8 KB (x 4 on AMD); 4, 16 and 64 KB measured within the noise of it, no
// software prefetch at all ~0.85x.
template <DType T>
constexpr int64_t kPrefetchBytes = T == DType::kQ6_K ? 8192 : 4096;

// Words per block and lane (packed_weight.h): Q4_K 3 of scales + 32 of
// nibbles; Q6_K 32 of low nibbles (ql), 16 of high bits (qh), 4 of scales.
template <DType T>
constexpr int kWords = T == DType::kQ4_K ? 35 : 52;
// f16 vectors per block: d (and Q4_K's dmin).
template <DType T>
constexpr int kHalves = T == DType::kQ4_K ? 2 : 1;

// One block of a group: its words x 16 lanes and its d / dmin halves. (A
// Q6_K group of an odd number of blocks ends half-way into a cache line, so
// the next group's words are read unaligned.)
struct Block {
  const __m512i* words;
  const uint16_t* d;     // [16] f16
  const uint16_t* dmin;  // [16] f16 (Q4_K)
};

// Block b of the group starting at `group` (nb blocks).
template <DType T>
inline Block BlockOf(const uint8_t* group, int64_t nb, int64_t b) {
  const uint8_t* sc = group + nb * kRows * 4 * kWords<T> + b * kHalves<T> * kRows * 2;
  return {reinterpret_cast<const __m512i*>(group + b * kWords<T> * 64),
          reinterpret_cast<const uint16_t*>(sc), reinterpret_cast<const uint16_t*>(sc) + kRows};
}

inline __m512 HalvesToF32(const uint16_t* h) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
}

// Q4_K: the block's 8 scales and 8 mins, for 16 rows, as bytes 0..3 of each
// lane: ggml's get_scale_min_k4 with the 12 bytes as dwords a0, a1, a2
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

// Q4_K: (min 2k, min 2k + 1) of each lane as two int16 (k = 0..3).
inline __m512i MinPair(const ScalesMins& s, int k) {
  const __m512i v = k < 2 ? s.m_lo : s.m_hi;
  const int j = 2 * (k % 2);
  return _mm512_or_si512(ByteOf(v, j), _mm512_slli_epi32(ByteOf(v, j + 1), 16));
}

// Q4_K: scale s (0..7) of each lane as an int32.
inline __m512i ScaleOf(const ScalesMins& sm, int s) {
  return ByteOf(s < 4 ? sm.sc_lo : sm.sc_hi, s % 4);
}

// Q6_K: where GGUF quant word k (ql 0..31, qh 32..47, scales 48..51) lies
// in a block of the copy (packed_weight.h: in the one-row kernel's order).
constexpr int Q6Slot(int k) { return rows16::WordSlot(DType::kQ6_K, k); }

// Q6_K: scale s (0..15, int8) of each lane, sign-extended to an int32.
inline __m512i ScaleQ6(const Block& blk, int s) {
  const __m512i w = _mm512_loadu_si512(blk.words + Q6Slot(48 + s / 4));
  return _mm512_srai_epi32(_mm512_slli_epi32(w, 24 - 8 * (s % 4)), 24);
}

// An int32 (|v| < 2^15) as the int16 pair (v, 0): vpdpwssd against it
// multiplies the low int16 of the other operand by v.
inline __m512i LowHalf(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi32(0xffff)); }


// Q6_K: the codes (0..63) of elements 128h + 32k + 4i .. + 3 of each lane
// (words: ql 16h + 8(k % 2) + i, qh 32 + 8h + i; ggml's q1..q4 of a half).
inline __m512i CodesQ6(const Block& blk, int h, int k, int i) {
  const __m512i ql = _mm512_loadu_si512(blk.words + Q6Slot(16 * h + 8 * (k % 2) + i));
  const __m512i qh = _mm512_loadu_si512(blk.words + Q6Slot(32 + 8 * h + i));
  const __m512i lo = _mm512_and_si512(k < 2 ? ql : _mm512_srli_epi16(ql, 4), _mm512_set1_epi8(0x0f));
  // qh bits 2k, 2k + 1 -> bits 4, 5 (the bits shifted across bytes are
  // masked off).
  const __m512i hb = k == 0   ? _mm512_slli_epi16(qh, 4)
                     : k == 1 ? _mm512_slli_epi16(qh, 2)
                     : k == 2 ? qh
                              : _mm512_srli_epi16(qh, 2);
  return _mm512_ternarylogic_epi32(lo, hb, _mm512_set1_epi8(0x30), 0xF8);  // lo | (hb & 0x30)
}

// 4 bytes as an int32 (an activation's pair of int16 sums).
inline int32_t Load32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
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

// ggml's 8 int32 lanes of one block (lane i: elements 4i .. 4i + 3 of every
// 32-element sub-block, times their scale) for 16 weight rows; x: the
// activation's 256 bytes of the block, bsum its 16 sums of 16.
// (sm: Q4_K's scales and mins, decoded once per block.)
// ahead: the same block's words this many bytes further on (nullptr: none):
// its lines are prefetched one or three per step of the loop, spread over
// the block (52 prefetches in a burst stalled on the fill buffers: ~14 % of
// a Q6_K decode step).
template <DType T>
inline void VecDotLanes(const Block& blk, const ScalesMins& sm, const int8_t* x,
                        const int16_t* bsum, const char* ahead, __m512i lanes[8]);

template <>
inline void VecDotLanes<DType::kQ4_K>(const Block& blk, const ScalesMins& sm, const int8_t* x,
                                      const int16_t* /*bsum*/, const char* ahead,
                                      __m512i lanes[8]) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  if (ahead != nullptr) {
    for (int k = 0; k < 3; ++k) _mm_prefetch(ahead + 64 * k, _MM_HINT_T1);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i sc_lo = ScaleOf(sm, 2 * c), sc_hi = ScaleOf(sm, 2 * c + 1);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      if (ahead != nullptr) _mm_prefetch(ahead + 64 * (3 + 8 * c + i), _MM_HINT_T1);
      const __m512i w = _mm512_loadu_si512(blk.words + 3 + 8 * c + i);
      const __m512i g_lo =
          DotGroup(_mm512_setzero_si512(), _mm512_and_si512(w, m4), x + 64 * c + 4 * i);
      const __m512i g_hi = DotGroup(_mm512_setzero_si512(),
                                    _mm512_and_si512(_mm512_srli_epi16(w, 4), m4),
                                    x + 64 * c + 32 + 4 * i);
      lanes[i] = _mm512_dpwssd_epi32(lanes[i], g_lo, sc_lo);
      lanes[i] = _mm512_dpwssd_epi32(lanes[i], g_hi, sc_hi);
    }
  }
}

template <>
inline void VecDotLanes<DType::kQ6_K>(const Block& blk, const ScalesMins& /*sm*/, const int8_t* x,
                                      const int16_t* bsum, const char* ahead, __m512i lanes[8]) {
  if (ahead != nullptr) {
    for (int k = 48; k < 52; ++k) _mm_prefetch(ahead + 64 * Q6Slot(k), _MM_HINT_T1);
  }
  // Half by half, so that only its 8 scales take registers (with all 16
  // the compiler ran out of the 32 and moved registers around).
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    __m512i sc[8];  // scales 8h .. 8h + 7 as int16 pairs (scale, 0)
    for (int s = 0; s < 8; ++s) sc[s] = LowHalf(ScaleQ6(blk, 8 * h + s));
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      // Elements 128h + 32k + 4i .. + 3, k = 0..3: from two low-nibble
      // words and one high-bits word. |G| <= 4 * 63 * 127 fits an int16 (G's
      // int32 is its int16 and a sign word).
      if (ahead != nullptr) {
        _mm_prefetch(ahead + 64 * Q6Slot(16 * h + i), _MM_HINT_T1);
        _mm_prefetch(ahead + 64 * Q6Slot(16 * h + 8 + i), _MM_HINT_T1);
        _mm_prefetch(ahead + 64 * Q6Slot(32 + 8 * h + i), _MM_HINT_T1);
      }
      // (Slots 4 + 24h + 3i .. + 2: the block is read front to back.)
      const __m512i ql_a = _mm512_loadu_si512(blk.words + Q6Slot(16 * h + i));
      const __m512i ql_b = _mm512_loadu_si512(blk.words + Q6Slot(16 * h + 8 + i));
      const __m512i qh = _mm512_loadu_si512(blk.words + Q6Slot(32 + 8 * h + i));
      const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
      const __m512i codes[4] = {
          _mm512_ternarylogic_epi32(_mm512_and_si512(ql_a, m4), _mm512_slli_epi16(qh, 4), m30, 0xF8),
          _mm512_ternarylogic_epi32(_mm512_and_si512(ql_b, m4), _mm512_slli_epi16(qh, 2), m30, 0xF8),
          _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql_a, 4), m4), qh, m30, 0xF8),
          _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql_b, 4), m4),
                                    _mm512_srli_epi16(qh, 2), m30, 0xF8)};
      for (int k = 0; k < 4; ++k) {
        const __m512i g =
            DotGroup(_mm512_setzero_si512(), codes[k], x + 128 * h + 32 * k + 4 * i);
        lanes[i] = _mm512_dpwssd_epi32(lanes[i], g, sc[2 * k + i / 4]);
      }
    }
    // The codes' offset: lane i minus 32 * (scale_2i bsum_2i + scale_2i+1
    // bsum_2i+1), for lanes 4h .. 4h + 3 (whose scales are this half's;
    // integer sums, so exact in any order).
    for (int j = 0; j < 4; ++j) {
      const int i = 4 * h + j;
      const __m512i pair = _mm512_or_si512(sc[2 * j], _mm512_slli_epi32(sc[2 * j + 1], 16));
      const __m512i sub = _mm512_dpwssd_epi32(_mm512_setzero_si512(), pair,
                                              _mm512_set1_epi32(Load32(bsum + 2 * i)));
      lanes[i] = _mm512_sub_epi32(lanes[i], _mm512_slli_epi32(sub, 5));
    }
  }
}

// Outputs o .. o + 15 of activation row x (Q8_K bytes, its d per block and
// 16-element sums) against the group at `group` (nb blocks).
template <DType T>
__m512 VecDotGroup(const uint8_t* group, int64_t nb, const int8_t* x, const float* xd,
                   const int16_t* xbsum, int64_t prefetch) {
  __m512 acc[8], acc_m[4];
  for (int i = 0; i < 8; ++i) acc[i] = _mm512_setzero_ps();
  for (int m = 0; m < 4; ++m) acc_m[m] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Block blk = BlockOf<T>(group, nb, b);
    const char* ahead =
        prefetch > 0 ? reinterpret_cast<const char*>(blk.words) + prefetch : nullptr;
    // The words' stream skips the scales' share of each group (packed_weight.h,
    // PrefetchBlockShare): the block's scales' line as far ahead covers it.
    if (ahead != nullptr) {
      _mm_prefetch(reinterpret_cast<const char*>(blk.d) + prefetch, _MM_HINT_T1);
    }
    ScalesMins sm;
    if constexpr (T == DType::kQ4_K) sm = DecodeScalesMins(blk);
    __m512i lanes[8];
    for (int i = 0; i < 8; ++i) lanes[i] = _mm512_setzero_si512();
    VecDotLanes<T>(blk, sm, x + b * 256, xbsum + b * 16, ahead, lanes);
    const __m512 d = _mm512_mul_ps(_mm512_set1_ps(xd[b]), HalvesToF32(blk.d));
    if constexpr (T == DType::kQ4_K) {
      // Mins lane m: min_2m bsum32_2m + min_2m+1 bsum32_2m+1 (the sums of
      // 32: pairs of the 16-element sums), times -d_x dmin_w.
      const __m512 dmin = _mm512_mul_ps(_mm512_set1_ps(-xd[b]), HalvesToF32(blk.dmin));
      const int16_t* bs = xbsum + b * 16;
      for (int m = 0; m < 4; ++m) {
        const uint32_t pair =
            static_cast<uint16_t>(bs[4 * m] + bs[4 * m + 1]) |
            static_cast<uint32_t>(static_cast<uint16_t>(bs[4 * m + 2] + bs[4 * m + 3])) << 16;
        const __m512i prod = _mm512_dpwssd_epi32(_mm512_setzero_si512(), MinPair(sm, m),
                                                 _mm512_set1_epi32(static_cast<int32_t>(pair)));
        acc_m[m] = _mm512_fmadd_ps(dmin, _mm512_cvtepi32_ps(prod), acc_m[m]);
      }
    }
    for (int i = 0; i < 8; ++i) acc[i] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes[i]), acc[i]);
  }
  // hsum_float_8: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)); Q4_K's
  // mins then added: (m0 + m2) + (m1 + m3).
  const __m512 h0 = _mm512_add_ps(acc[4], acc[0]), h1 = _mm512_add_ps(acc[5], acc[1]),
               h2 = _mm512_add_ps(acc[6], acc[2]), h3 = _mm512_add_ps(acc[7], acc[3]);
  const __m512 h = _mm512_add_ps(_mm512_add_ps(h0, h2), _mm512_add_ps(h1, h3));
  if constexpr (T != DType::kQ4_K) return h;
  const __m512 m =
      _mm512_add_ps(_mm512_add_ps(acc_m[0], acc_m[2]), _mm512_add_ps(acc_m[1], acc_m[3]));
  return _mm512_add_ps(h, m);
}

// W: the rows16 copy; o_begin a multiple of 16. Any number of activation
// rows, each in the vec_dot order (the product's 1-7 rows, or a
// batch-invariant one).
template <DType T>
void VecDotKernel(const void* W, size_t /*row_bytes*/, int64_t o_begin, int64_t o_end,
                  const qmm::Acts& a, float* y, size_t y_stride, float* /*scratch*/) {
  const int64_t nb = a.n_kblocks;
  const size_t group_bytes = rows16::GroupBytes(T, nb);
  const int64_t prefetch = kPrefetchBytes<T> * DecodePrefetchScale();
  for (int64_t o = o_begin; o < o_end; o += kRows) {
    const uint8_t* group = static_cast<const uint8_t*>(W) + (o / kRows) * group_bytes;
    const int n = static_cast<int>(std::min<int64_t>(kRows, o_end - o));
    const __mmask16 mask = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
    for (int64_t r = 0; r < a.n_rows; ++r) {
      // (The first row reads the group from memory, the others from cache.)
      const __m512 out = VecDotGroup<T>(group, nb, a.kq + r * a.n_in, a.kd + r * nb,
                                        a.kbsum + r * nb * 16, r == 0 ? prefetch : 0);
      _mm512_mask_storeu_ps(y + r * static_cast<int64_t>(y_stride) + o, mask, out);
    }
  }
}

// ---- tiled order: kBand activation rows at a time -------------------------

// A chunk's scales (and Q4_K's mins) and d / dmin, decoded once for every
// band of activation rows (in scratch).
struct ChunkScales {
  int32_t scale[kChunk][16][kRows];  // scale s of each lane (Q4_K: s < 8)
  int32_t mins[kChunk][4][kRows];    // Q4_K: MinPair(k)
  float d[kChunk][kRows];
  float dmin[kChunk][kRows];
  // Q6_K: CodesQ6(h, k, i) at [32 h + 8 k + i]: built once per chunk
  // (~6 instructions per 16 rows' group, which every band of 8 activation
  // rows would otherwise repeat: 0.75 per vpdpbusd).
  uint32_t codes[kChunk][64][kRows];
};

template <DType T>
void DecodeChunk(const uint8_t* group, int64_t nb, int64_t b0, int64_t len, ChunkScales* cs) {
  for (int64_t j = 0; j < len; ++j) {
    const Block blk = BlockOf<T>(group, nb, b0 + j);
    _mm512_store_ps(cs->d[j], HalvesToF32(blk.d));
    if constexpr (T == DType::kQ4_K) {
      const ScalesMins sm = DecodeScalesMins(blk);
      for (int s = 0; s < 8; ++s) _mm512_store_si512(cs->scale[j][s], ScaleOf(sm, s));
      for (int k = 0; k < 4; ++k) _mm512_store_si512(cs->mins[j][k], MinPair(sm, k));
      _mm512_store_ps(cs->dmin[j], HalvesToF32(blk.dmin));
    } else {
      for (int s = 0; s < 16; ++s) _mm512_store_si512(cs->scale[j][s], ScaleQ6(blk, s));
      for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < 4; ++k) {
          for (int i = 0; i < 8; ++i) {
            _mm512_store_si512(cs->codes[j][32 * h + 8 * k + i], CodesQ6(blk, h, k, i));
          }
        }
      }
    }
  }
}

// s1[i] += scale_s * P_s for activation row i (x[i]: its bytes from the
// block's first element) and sub-block s = 2c + kHigh of a Q4_K block: the
// words 3 + 8c .. + 7, their low (kHigh 0) or high nibbles.
template <int kHigh>
inline void AddSubBlockQ4K(const Block& blk, const ChunkScales& cs, int64_t j, int c,
                           const int8_t* const x[kBand], int64_t e0, __m512i s1[kBand]) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  __m512i p[kBand];
  for (int i = 0; i < kBand; ++i) p[i] = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    __m512i w = _mm512_loadu_si512(blk.words + 3 + 8 * c + k);
    w = _mm512_and_si512(kHigh ? _mm512_srli_epi16(w, 4) : w, m4);
    const int64_t e = e0 + 64 * c + 32 * kHigh + 4 * k;  // the group's first element
#pragma GCC unroll 8
    for (int i = 0; i < kBand; ++i) p[i] = DotGroup(p[i], w, x[i] + e);
  }
  const __m512i sc = _mm512_load_si512(cs.scale[j][2 * c + kHigh]);
  for (int i = 0; i < kBand; ++i) s1[i] = _mm512_add_epi32(s1[i], _mm512_mullo_epi32(p[i], sc));
}

// The same for sub-block s of a Q6_K block: elements 128h + 32k + 16q .. +
// 15 (h = s / 8, k = (s % 8) / 2, q = s % 2), the chunk's codes; P_s starts
// at start[i][s] = -32 * bsum_s (the codes' offset; as a vpdpwssd of scale
// pairs against bsum pairs per row and block it cost ~15 % of a 512-row
// batch).
inline void AddSubBlockQ6K(const ChunkScales& cs, int64_t j, int s, const int8_t* const x[kBand],
                           int64_t e0, const int32_t (*start)[16], __m512i s1[kBand]) {
  const int h = s / 8, k = (s % 8) / 2, q = s % 2;
  const uint32_t(*codes)[kRows] = cs.codes[j] + 32 * h + 8 * k + 4 * q;
  const int64_t e1 = e0 + 128 * h + 32 * k + 16 * q;
  __m512i p[kBand];
  for (int i = 0; i < kBand; ++i) p[i] = _mm512_set1_epi32(start[i][s]);
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m512i w = _mm512_load_si512(codes[g]);
#pragma GCC unroll 8
    for (int i = 0; i < kBand; ++i) p[i] = DotGroup(p[i], w, x[i] + e1 + 4 * g);
  }
  const __m512i sc = _mm512_load_si512(cs.scale[j][s]);
  for (int i = 0; i < kBand; ++i) s1[i] = _mm512_add_epi32(s1[i], _mm512_mullo_epi32(p[i], sc));
}

// acc[i] (activation row r0 + i, lanes: the group's 16 weight rows) += blocks
// [b0, b0 + len) of the group (cs: their scales). x[i] / xd[i] / xbsum[i]:
// activation row r0 + i's Q8_K bytes, scales and 16-element sums; bsum_pairs
// (Q4_K): Acts::kbsum_tiles at that row's tile and lane (index b * 64 + k *
// 16 from there).
template <DType T>
void TiledBand(const uint8_t* group, int64_t nb, int64_t b0, int64_t len, const ChunkScales& cs,
               const int8_t* const x[kBand], const float* const xd[kBand],
               const int16_t* const xbsum[kBand], const int32_t* const bsum_pairs[kBand],
               __m512 acc[kBand]) {
  for (int64_t j = 0; j < len; ++j) {
    const int64_t b = b0 + j;
    const Block blk = BlockOf<T>(group, nb, b);
    __m512i s1[kBand];
    for (int i = 0; i < kBand; ++i) s1[i] = _mm512_setzero_si512();
    if constexpr (T == DType::kQ4_K) {
#pragma GCC unroll 1
      for (int c = 0; c < 4; ++c) {  // sub-blocks 2c, 2c + 1
        AddSubBlockQ4K<0>(blk, cs, j, c, x, b * 256, s1);
        AddSubBlockQ4K<1>(blk, cs, j, c, x, b * 256, s1);
      }
    } else {
      alignas(64) int32_t start[kBand][16];  // -32 * the row's 16-element sums
      for (int i = 0; i < kBand; ++i) {
        const __m512i bs = _mm512_cvtepi16_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xbsum[i] + b * 16)));
        _mm512_store_si512(start[i], _mm512_sub_epi32(_mm512_setzero_si512(),
                                                      _mm512_slli_epi32(bs, 5)));
      }
#pragma GCC unroll 1
      for (int sb = 0; sb < 16; ++sb) AddSubBlockQ6K(cs, j, sb, x, b * 256, start, s1);
    }
    const __m512 d = _mm512_load_ps(cs.d[j]);
#pragma GCC unroll 8
    for (int i = 0; i < kBand; ++i) {
      if constexpr (T == DType::kQ4_K) {
        const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(s1[i]), d);
        __m512i s2 = _mm512_setzero_si512();
        for (int k = 0; k < 4; ++k) {
          s2 = _mm512_dpwssd_epi32(s2, _mm512_load_si512(cs.mins[j][k]),
                                   _mm512_set1_epi32(bsum_pairs[i][b * 64 + k * 16]));
        }
        const __m512 tm = _mm512_fnmadd_ps(_mm512_load_ps(cs.dmin[j]), _mm512_cvtepi32_ps(s2), t);
        acc[i] = _mm512_fmadd_ps(tm, _mm512_set1_ps(xd[i][b]), acc[i]);
      } else {
        const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(s1[i]), d);
        acc[i] = _mm512_fmadd_ps(t, _mm512_set1_ps(xd[i][b]), acc[i]);
      }
    }
  }
}

// W: the rows16 copy; o_begin a multiple of 16; 8+ activation rows (any
// count works). scratch: qmm::ScratchFloats(n_in, n_rows) floats (a chunk's
// ChunkScales, then the accumulators between chunks of blocks: [rows rounded
// up to kBand][16]).
template <DType T>
void TiledKernel(const void* W, size_t /*row_bytes*/, int64_t o_begin, int64_t o_end,
                 const qmm::Acts& a, float* y, size_t y_stride, float* scratch) {
  const int64_t nb = a.n_kblocks;
  const size_t group_bytes = rows16::GroupBytes(T, nb);
  ChunkScales* cs =
      reinterpret_cast<ChunkScales*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  float* saved = reinterpret_cast<float*>(cs + 1);
  const int64_t prefetch = kPrefetchBytes<T> * DecodePrefetchScale();
  static_assert(sizeof(ChunkScales) % 64 == 0 &&
                    16 + sizeof(ChunkScales) / 4 <= qmm::kKRows16ScratchFloats,
                "kKRows16ScratchFloats too small");
  static_assert(qmm::kAmxScratchPerRow >= 16 && qmm::kAmxTileRows >= kBand,
                "the saved accumulators must fit the per-row scratch");
  for (int64_t o = o_begin; o < o_end; o += kRows) {
    const uint8_t* group = static_cast<const uint8_t*>(W) + (o / kRows) * group_bytes;
    const int n = static_cast<int>(std::min<int64_t>(kRows, o_end - o));  // live weight rows
    const __mmask16 mask = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
    // A chunk of the group's blocks (2 x 2.3 / 3.4 KB) stays in L1 while
    // every band of activation rows runs it.
    for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
      const int64_t len = std::min(kChunk, nb - b0);
      const bool first = b0 == 0, last = b0 + len == nb;
      // The batch reads every weight once, from memory: the bytes a few
      // chunks ahead (on into the next group) go to L2 while this one runs.
      const Block first_block = BlockOf<T>(group, nb, b0);
      const char* ahead = reinterpret_cast<const char*>(first_block.words) + prefetch;
      for (int64_t k = 0; k < len * kWords<T>; ++k) _mm_prefetch(ahead + 64 * k, _MM_HINT_T1);
      // (and the scales' share, which the words' stream skips, as VecDotGroup)
      const char* sc_ahead = reinterpret_cast<const char*>(first_block.d) + prefetch;
      for (int64_t l = 0; l < (len * kHalves<T> * kRows * 2 + 63) / 64; ++l) {
        _mm_prefetch(sc_ahead + 64 * l, _MM_HINT_T1);
      }
      DecodeChunk<T>(group, nb, b0, len, cs);
      for (int64_t r0 = 0; r0 < a.n_rows; r0 += kBand) {
        // Rows past n_rows repeat the last one (computed, never stored).
        const int8_t* x[kBand];
        const float* xd[kBand];
        const int16_t* xbsum[kBand];
        const int32_t* bsum_pairs[kBand];
        for (int i = 0; i < kBand; ++i) {
          const int64_t r = std::min(r0 + i, a.n_rows - 1), t = r / 16, lane = r % 16;
          x[i] = a.kq + r * a.n_in;
          xd[i] = a.kd + r * nb;
          xbsum[i] = a.kbsum + r * nb * 16;
          bsum_pairs[i] = a.kbsum_tiles + t * nb * 64 + lane;
        }
        float* band_saved = saved + r0 * 16;
        __m512 acc[kBand];
        for (int i = 0; i < kBand; ++i) {
          acc[i] = first ? _mm512_setzero_ps() : _mm512_load_ps(band_saved + i * 16);
        }
        TiledBand<T>(group, nb, b0, len, *cs, x, xd, xbsum, bsum_pairs, acc);
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
Kernel KRows16Avx512Kernel(DType t) {
  switch (t) {
    case DType::kQ4_K:
      return &VecDotKernel<DType::kQ4_K>;
    case DType::kQ6_K:
      return &VecDotKernel<DType::kQ6_K>;
    default:
      return nullptr;
  }
}
Kernel KRows16TiledAvx512Kernel(DType t) {
  switch (t) {
    case DType::kQ4_K:
      return &TiledKernel<DType::kQ4_K>;
    case DType::kQ6_K:
      return &TiledKernel<DType::kQ6_K>;
    default:
      return nullptr;
  }
}
}  // namespace qmm
}  // namespace llm

#pragma GCC diagnostic pop
