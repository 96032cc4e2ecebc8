// AVX-512 BW + VNNI kernels for Q2_K, Q3_K, Q4_K, Q5_K and Q6_K against Q8_K
// activations: the same outputs as kquant_avx2.cpp (ggml-cpu's x86 AVX2
// vec_dot order, kquant_kernels.h), bit for bit, with fewer and wider integer
// instructions. (IQ4_XS keeps the AVX2 kernel: its values reach 127, so a sum
// of 4 products does not fit the int16 packing below.)
//
// Why the bits cannot move: per 256-block and activation row, the AVX2 kernel
// forms 8 int32 lanes (lane l = sum over the block's elements e with
// (e % 32) / 4 == l of scale * w * q, plus the type's correction) and then
// runs a fixed f32 sequence on them (one FMA per block into 8 f32 lanes, Q4_K
// its 4 mins lanes, Q5_K its scalar mins chain, hsum_float_8 at the end).
// Integer sums are exact in any order, so this file computes the same 8 int32
// lanes its own way and then runs the very same f32 steps:
//   * a 512-bit register holds two 32-element chunks (int32 lanes 0..7: one
//     chunk's elements 4l .. 4l + 3, lanes 8..15: another chunk's), so
//     folding lanes 8..15 onto 0..7 at the end is exact and gives lane l;
//   * VNNI vpdpbusd sums 4 u8 weight x s8 activation products per int32
//     lane (at most 4 * 63 * 127 = 32004 in magnitude: fits an int16; Q3_K's
//     signed weights go in as w + 4, the 4 taken off by starting the sum at
//     -4 * sum(q));
//   * two such registers are packed as the low / high int16 halves of each
//     int32 lane (one masked byte shuffle) and VNNI vpdpwssd multiplies both
//     by their scales and adds them (exact: no saturation).
// Per block that is 4 vpdpbusd + 2 vpdpwssd where the AVX2 kernel runs 8
// maddubs + 8 madd + 8 add.
//
// One activation row (decode): kRowsPerStep (4; Q6_K 2) weight rows are
// walked together, so each activation block is loaded (and rearranged) once
// for all of them and their independent chains overlap. Batches: kBatchStep
// (4; Q6_K 2) weight blocks are unpacked once (6 zmm each) and used by up to
// kRowBlock activation rows, each activation block loaded once for them.
// Compiled with the *_avx512.cpp flags; called only at SimdLevel::kAvx512.

// GCC 12's AVX-512 headers build some intrinsics (broadcast, extract, reduce)
// from a deliberately undefined value and then warn about it.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/kquant_scales_avx512.h"
#include "backend/cpu/quant_blocks.h"

namespace llm {
namespace {

#define LLM_KQ5_INLINE inline __attribute__((always_inline))

// ggml's hsum_float_8: (high half + low half), then pairs, then the two.
LLM_KQ5_INLINE float HSum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

LLM_KQ5_INLINE float F16(uint16_t h) { return _cvtsh_ss(h); }

// The 32 bytes at p in both 256-bit halves.
LLM_KQ5_INLINE __m512i Broadcast32(const uint8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Lanes 0..7 + lanes 8..15 (the two chunks of a register), exact.
LLM_KQ5_INLINE __m256i Fold(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// Upper 256-bit half of a 512-bit register: int16 lanes 16..31.
constexpr __mmask32 kHigh16 = 0xFFFF0000u;
// Upper half in bytes: lanes 32..63.
constexpr __mmask64 kHigh8 = 0xFFFFFFFF00000000ull;

// One weight block, unpacked into 4 registers of 64 u8 weights (w[2m] and
// w[2m + 1] are multiplied together, see Accumulate) and 2 registers of
// int16 scale pairs.
//   Q4_K / Q5_K: w[2m] = chunks 4m | 4m + 2 (low nibbles of qs[64m ..
//     64m + 63]), w[2m + 1] = chunks 4m + 1 | 4m + 3 (their high nibbles).
//   Q2_K / Q3_K: w[k] = chunks k | 4 + k (qs shifted right by 2k).
//   Q6_K: w[2h] = chunks 4h | 4h + 1 (elements 128h .. 128h + 63),
//     w[2h + 1] = chunks 4h + 2 | 4h + 3.
// (chunk c = elements 32c .. 32c + 31.)
struct Unpacked {
  __m512i w[4];
  __m512i sc[2];
  __m256i extra;  // Q4_K/Q5_K: 8 int16 mins (low 128 bits); Q2_K: 16 int16 mins;
                  // Q6_K: 16 int16 scales
  float d, dmin;
};

// Per activation row float state (the AVX2 kernel's KState).
struct State {
  __m256 acc;
  __m128 acc_m;  // Q4_K's mins lanes
  float summs;   // Q5_K's mins chain
  float tacc;    // tiled order's accumulator (kquant_kernels.h)
};

// Sum of 8 / 4 int32 lanes (exact).
LLM_KQ5_INLINE int32_t HSumI32(__m128i s) {
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}
LLM_KQ5_INLINE int32_t HSumI32(__m256i v) {
  return HSumI32(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

template <DType T>
constexpr bool kTiledHasMin = T == DType::kQ2_K || T == DType::kQ4_K || T == DType::kQ5_K;

// 8 vectors of 8 int32 lanes -> their 8 lane sums (vector k's in lane k).
LLM_KQ5_INLINE __m256i HSum8x8(const __m256i* v) {
  const __m256i a0 = _mm256_hadd_epi32(v[0], v[1]), a1 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i a2 = _mm256_hadd_epi32(v[4], v[5]), a3 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i b0 = _mm256_hadd_epi32(a0, a1), b1 = _mm256_hadd_epi32(a2, a3);
  return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20),
                          _mm256_permute2x128_si256(b0, b1, 0x31));
}

// The tiled order's float steps for one block, as the AVX2 kernel's TiledStep.
template <bool kHasMin>
LLM_KQ5_INLINE float TiledStep(int32_t s1, int32_t s2, float dw, float dmin, float yd, float acc) {
  __m128 t = _mm_mul_ss(_mm_cvtsi32_ss(_mm_setzero_ps(), s1), _mm_set_ss(dw));
  if constexpr (kHasMin) {
    t = _mm_fnmadd_ss(_mm_set_ss(dmin), _mm_cvtsi32_ss(_mm_setzero_ps(), s2), t);
  }
  return _mm_cvtss_f32(_mm_fmadd_ss(t, _mm_set_ss(yd), _mm_set_ss(acc)));
}

// Index vector for vpermw: int16 word j of the result = word idx(j) of the
// source, with idx(j) = lo(j / 2) for even j and hi(j / 2) for odd j (int32
// lane i = j / 2 gets the word pair (lo(i), hi(i))).
template <typename Lo, typename Hi>
LLM_KQ5_INLINE __m512i PairIndex(Lo lo, Hi hi) {
  alignas(64) int16_t idx[32];
  for (int j = 0; j < 32; ++j) idx[j] = static_cast<int16_t>(j % 2 == 0 ? lo(j / 2) : hi(j / 2));
  return _mm512_load_si512(idx);
}

template <DType T>
LLM_KQ5_INLINE void Unpack(const typename KBlockOf<T>::type& b, Unpacked* u) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    u->d = F16(b.d);
    u->dmin = F16(b.dmin);
    // The 8 six-bit scales (bytes 0..7) and mins (8..15) of the block, as
    // ggml's vec_dot unpacks them, in vector registers.
    const __m256i sm = _mm256_cvtepu8_epi16(ScalesMinsK4(b.scales));
    const __m512i sm512 = _mm512_castsi256_si512(sm);
    for (int m = 0; m < 2; ++m) {
      // int32 lanes 0..7: (scale 4m, scale 4m + 1), 8..15: (4m + 2, 4m + 3).
      const __m512i idx = PairIndex([m](int i) { return 4 * m + (i < 8 ? 0 : 2); },
                                    [m](int i) { return 4 * m + (i < 8 ? 1 : 3); });
      u->sc[m] = _mm512_permutexvar_epi16(idx, sm512);
    }
    u->extra = _mm256_castsi128_si256(_mm256_extracti128_si256(sm, 1));
    __m512i hbits = _mm512_setzero_si512();
    if constexpr (T == DType::kQ5_K) hbits = Broadcast32(b.qh);
    for (int m = 0; m < 2; ++m) {
      // qs[32j + l]: low nibble = element 64j + l, high = 64j + 32 + l; so
      // the 64 bytes qs[64m ..] hold chunks 4m, 4m + 1 (first 32 bytes) and
      // 4m + 2, 4m + 3 (next 32).
      const __m512i bits = _mm512_loadu_si512(reinterpret_cast<const void*>(b.qs + 64 * m));
      __m512i lo = _mm512_and_si512(bits, m4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(bits, 4), m4);
      if constexpr (T == DType::kQ5_K) {
        // Fifth bit of element 64j + l: qh[l] bit 2j; of 64j + 32 + l: bit
        // 2j + 1. Chunk c = 2j (+1) takes bit c.
        const auto bit = [](int c_lo, int c_hi) {
          return _mm512_mask_blend_epi8(kHigh8, _mm512_set1_epi8(static_cast<char>(1 << c_lo)),
                                        _mm512_set1_epi8(static_cast<char>(1 << c_hi)));
        };
        const __m512i sixteen = _mm512_set1_epi8(16);
        lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(hbits, bit(4 * m, 4 * m + 2)), lo,
                                  sixteen);
        hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(hbits, bit(4 * m + 1, 4 * m + 3)), hi,
                                  sixteen);
      }
      u->w[2 * m] = lo;
      u->w[2 * m + 1] = hi;
    }
  } else if constexpr (T == DType::kQ2_K || T == DType::kQ3_K) {
    u->d = F16(b.d);
    // Element 128h + 32k + l: bits 2k, 2k + 1 of qs[32h + l] (Q3_K: plus 4
    // where bit 4h + k of hmask[l] is set; the value is that minus 4, the 4
    // is taken off through the activations, see LoadActs). So the 64 bytes
    // of qs shifted right by 2k give w[k] = chunks k | 4 + k.
    const __m512i bits = _mm512_loadu_si512(reinterpret_cast<const void*>(b.qs));
    __m512i hm = _mm512_setzero_si512();
    if constexpr (T == DType::kQ3_K) hm = Broadcast32(b.hmask);
    const __m512i m3 = _mm512_set1_epi8(3);
    for (int k = 0; k < 4; ++k) {
      __m512i w = _mm512_and_si512(_mm512_srli_epi16(bits, 2 * k), m3);
      if constexpr (T == DType::kQ3_K) {
        const __m512i bit =
            _mm512_mask_blend_epi8(kHigh8, _mm512_set1_epi8(static_cast<char>(1 << k)),
                                   _mm512_set1_epi8(static_cast<char>(1 << (4 + k))));
        w = _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(hm, bit), w, _mm512_set1_epi8(4));
      }
      u->w[k] = w;
    }
    // The 16 scales of the 16-element sub-blocks as int16.
    __m256i s16;
    if constexpr (T == DType::kQ2_K) {
      u->dmin = F16(b.dmin);
      const __m128i ms = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
      const __m128i m4x = _mm_set1_epi8(0x0F);
      s16 = _mm256_cvtepu8_epi16(_mm_and_si128(ms, m4x));
      u->extra = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(ms, 4), m4x));
    } else {
      // Scale j (6 bits, minus 32): low 4 bits from scales[j] (j < 8, low
      // nibble) or scales[j - 8] (high nibble), high 2 bits from bits
      // 2 (j / 4), + 1 of scales[8 + j % 4]. 12 bytes: no load past them.
      uint32_t tail;
      std::memcpy(&tail, b.scales + 8, 4);
      const __m128i v = _mm_insert_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales)), static_cast<int>(tail), 2);
      const __m128i m4x = _mm_set1_epi8(0x0F);
      const __m128i lo =
          _mm_unpacklo_epi64(_mm_and_si128(v, m4x), _mm_and_si128(_mm_srli_epi16(v, 4), m4x));
      // Byte j = scales[8 + j % 4], then dword g shifted right by 2g.
      const __m128i hb = _mm_srlv_epi32(_mm_shuffle_epi8(v, _mm_set1_epi32(0x0B0A0908)),
                                        _mm_setr_epi32(0, 2, 4, 6));
      const __m128i hi = _mm_and_si128(hb, _mm_set1_epi8(3));
      const __m128i sc8 = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
      s16 = _mm256_cvtepi8_epi16(sc8);
    }
    // int32 lane i of w[2m] covers chunk 2m (i < 8) or 4 + 2m (i >= 8),
    // elements 4 (i % 8) .. + 3 of it; of w[2m + 1] chunk 2m + 1 or 5 + 2m.
    // Sub-block of chunk c, element e: 2c + e / 16.
    const __m512i s512 = _mm512_castsi256_si512(s16);
    for (int m = 0; m < 2; ++m) {
      const __m512i idx =
          PairIndex([m](int i) { return 2 * (i < 8 ? 2 * m : 4 + 2 * m) + (i % 8) / 4; },
                    [m](int i) { return 2 * (i < 8 ? 2 * m + 1 : 5 + 2 * m) + (i % 8) / 4; });
      u->sc[m] = _mm512_permutexvar_epi16(idx, s512);
    }
  } else {  // Q6_K
    u->d = F16(b.d);
    for (int h = 0; h < 2; ++h) {
      // ql[64h .. 64h + 63]: low nibbles = elements 128h + 0..63 (chunks
      // 4h, 4h + 1), high nibbles = 128h + 64..127 (4h + 2, 4h + 3).
      // qh[32h + l] holds the two high bits of 128h + l (bits 0-1), + 32
      // (2-3), + 64 (4-5), + 96 (6-7).
      const __m512i ql = _mm512_loadu_si512(reinterpret_cast<const void*>(b.ql + 64 * h));
      const __m512i qh = Broadcast32(b.qh + 32 * h);
      const __m512i m30 = _mm512_set1_epi8(0x30);
      // Bits 0-1 to 4-5 in the low half, bits 2-3 to 4-5 in the high half.
      const __m512i hi0 =
          _mm512_and_si512(_mm512_mask_slli_epi16(_mm512_slli_epi16(qh, 4), kHigh16, qh, 2), m30);
      // Bits 4-5 stay in the low half, bits 6-7 to 4-5 in the high half.
      const __m512i hi1 = _mm512_and_si512(_mm512_mask_srli_epi16(qh, kHigh16, qh, 2), m30);
      u->w[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), hi0);
      u->w[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), hi1);
    }
    // int8 scale s[g] of elements 16g .. 16g + 15. int32 lane i of w[2h]
    // covers elements 128h + 4i .. + 3 (scale 8h + i / 4), of w[2h + 1]
    // 128h + 64 + 4i (scale 8h + 4 + i / 4).
    const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m256i s16 = _mm256_cvtepi8_epi16(s8);
    const __m512i s512 = _mm512_castsi256_si512(s16);
    for (int h = 0; h < 2; ++h) {
      const __m512i idx =
          PairIndex([h](int i) { return 8 * h + i / 4; }, [h](int i) { return 8 * h + 4 + i / 4; });
      u->sc[h] = _mm512_permutexvar_epi16(idx, s512);
    }
    u->extra = s16;
  }
}

// The activations in the order of Unpacked::w (a[k] multiplies w[k]); for
// Q3_K also a[4 + k] = -4 * (sum of each 4 activations of a[k]): the start
// of w[k]'s vpdpbusd, so that it sums (w + 4 - 4) * q = w * q exactly while
// the weights stay unsigned (computed once per activation block, shared by
// every weight row).
constexpr int kActRegs = 8;
template <DType T>
LLM_KQ5_INLINE void LoadActs(const int8_t* q8, __m512i* a) {
  const auto ld = [q8](int c) {  // chunk c
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 32 * c));
  };
  if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    for (int m = 0; m < 2; ++m) {
      a[2 * m] = _mm512_inserti64x4(_mm512_castsi256_si512(ld(4 * m)), ld(4 * m + 2), 1);
      a[2 * m + 1] = _mm512_inserti64x4(_mm512_castsi256_si512(ld(4 * m + 1)), ld(4 * m + 3), 1);
    }
  } else if constexpr (T == DType::kQ6_K) {
    for (int k = 0; k < 4; ++k) {
      a[k] = _mm512_loadu_si512(reinterpret_cast<const void*>(q8 + 64 * k));
    }
  } else {  // Q2_K, Q3_K: chunks k | 4 + k
    for (int k = 0; k < 4; ++k) {
      a[k] = _mm512_inserti64x4(_mm512_castsi256_si512(ld(k)), ld(4 + k), 1);
    }
    if constexpr (T == DType::kQ3_K) {
      const __m512i four = _mm512_set1_epi8(4);
      for (int k = 0; k < 4; ++k) {
        a[4 + k] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), four, a[k]));
      }
    }
  }
}

// One activation row's contribution of one unpacked block (a: the row's 256
// Q8_K values from LoadActs, yd its scale, bsum its 16 sums of 16) -- the
// AVX2 kernel's AccumulateK, lane for lane. vpdpbusd sums 4 u8 x s8
// products per int32 lane (|sum| <= 4 * 63 * 127 = 32004: an int16), the
// sums of w[2m] and w[2m + 1] are packed as the two int16 halves of each
// int32 lane (one byte shuffle) and vpdpwssd multiplies both by their scales
// and adds them.
template <DType T>
LLM_KQ5_INLINE __m256i IntLanes(const Unpacked& u, const __m512i* a) {
  // Bytes 2, 3 of every dword <- bytes 0, 1 of the same dword of the other
  // (vpshufb indexes within each 128-bit lane).
  const __m512i to_high = _mm512_set4_epi32(0x0D0CFFFF, 0x0908FFFF, 0x0504FFFF, 0x0100FFFF);
  constexpr __mmask64 kHighWords = 0xCCCCCCCCCCCCCCCCull;
  __m512i s = _mm512_setzero_si512();
  for (int m = 0; m < 2; ++m) {
    const __m512i z0 = T == DType::kQ3_K ? a[4 + 2 * m] : _mm512_setzero_si512();
    const __m512i z1 = T == DType::kQ3_K ? a[5 + 2 * m] : _mm512_setzero_si512();
    const __m512i p0 = _mm512_dpbusd_epi32(z0, u.w[2 * m], a[2 * m]);
    const __m512i p1 = _mm512_dpbusd_epi32(z1, u.w[2 * m + 1], a[2 * m + 1]);
    const __m512i packed = _mm512_mask_shuffle_epi8(p0, kHighWords, p1, to_high);
    s = _mm512_dpwssd_epi32(s, packed, u.sc[m]);
  }
  return Fold(s);
}

// The tiled order's whole-block integer sums as lanes (kquant_kernels.h):
// s1's 8 lanes sum to S1, s2's to S2 (types with mins; else zero).
template <DType T>
LLM_KQ5_INLINE void TiledLanes(const Unpacked& u, const __m512i* a, const int16_t* bsum,
                               __m256i* s1, __m256i* s2) {
  __m256i sumi = IntLanes<T>(u, a);
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsum));
  *s2 = _mm256_setzero_si256();
  if constexpr (T == DType::kQ2_K) {
    *s2 = _mm256_madd_epi16(u.extra, bs);
  } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    const __m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    *s2 = _mm256_zextsi128_si256(_mm_madd_epi16(_mm256_castsi256_si128(u.extra), q8s));
  } else if constexpr (T == DType::kQ6_K) {
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(_mm256_madd_epi16(bs, u.extra), 5));
  }
  *s1 = sumi;
}

template <DType T, bool Tiled = false>
LLM_KQ5_INLINE void Accumulate(const Unpacked& u, const __m512i* a, float yd, const int16_t* bsum,
                               State* st) {
  if constexpr (Tiled) {  // one (row, weight row) pair at a time (tails)
    __m256i s1, s2;
    TiledLanes<T>(u, a, bsum, &s1, &s2);
    st->tacc = TiledStep<kTiledHasMin<T>>(HSumI32(s1), HSumI32(s2), u.d, u.dmin, yd, st->tacc);
    return;
  }
  __m256i sumi = IntLanes<T>(u, a);
  if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    const float d = yd * u.d;
    const float dmin = -yd * u.dmin;
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsum));
    const __m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    const __m128i prod = _mm_madd_epi16(_mm256_castsi256_si128(u.extra), q8s);
    if constexpr (T == DType::kQ4_K) {
      st->acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), st->acc_m);
    } else {
      const __m128i h =
          _mm_hadd_epi32(_mm_hadd_epi32(prod, _mm_setzero_si128()), _mm_setzero_si128());
      const float total = static_cast<float>(_mm_cvtsi128_si32(h));
      st->summs =
          _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(dmin), _mm_set_ss(total), _mm_set_ss(st->summs)));
    }
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), st->acc);
  } else if constexpr (T == DType::kQ2_K) {  // the mins lane first, as the AVX2 kernel
    const float d = yd * u.d;
    const float dmin = -yd * u.dmin;
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsum));
    const __m256i prod = _mm256_madd_epi16(u.extra, bs);
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), st->acc);
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), st->acc);
  } else if constexpr (T == DType::kQ3_K) {
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(yd * u.d), _mm256_cvtepi32_ps(sumi), st->acc);
  } else {  // Q6_K: minus 32 * (bsum * scale) of sub-blocks 2l, 2l + 1 in lane l
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsum));
    const __m256i sub = _mm256_slli_epi32(_mm256_madd_epi16(bs, u.extra), 5);
    sumi = _mm256_sub_epi32(sumi, sub);
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(yd * u.d), _mm256_cvtepi32_ps(sumi), st->acc);
  }
}

template <DType T, bool Tiled = false>
LLM_KQ5_INLINE float Finish(const State& st) {
  if constexpr (Tiled) {
    return st.tacc;
  } else if constexpr (T == DType::kQ4_K) {
    __m128 m = _mm_add_ps(st.acc_m, _mm_movehl_ps(st.acc_m, st.acc_m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return HSum8(st.acc) + _mm_cvtss_f32(m);
  } else if constexpr (T == DType::kQ5_K) {
    return HSum8(st.acc) + st.summs;
  } else {
    return HSum8(st.acc);
  }
}

LLM_KQ5_INLINE void Reset(State* st) {
  st->acc = _mm256_setzero_ps();
  st->acc_m = _mm_setzero_ps();
  st->summs = 0.0f;
  st->tacc = 0.0f;
}

// Weight rows walked together for one activation row (measured on a
// Sapphire Rapids-class Xeon with tools/time_kquant_kernels.py: 4 rows beat
// 1 by ~10 % for Q4_K / Q5_K, whose per-block scale unpacking then overlaps;
// Q6_K's larger unpacked block gains little past 2).
template <DType T>
constexpr int kRowsPerStep = T == DType::kQ6_K ? 2 : 4;
// Weight rows per batch step (their unpacked blocks, 6 zmm each, stay in
// registers while every activation row of the pass uses them; measured as
// kRowsPerStep).
template <DType T>
constexpr int kBatchStep = T == DType::kQ6_K ? 2 : 4;
// Activation rows per pass over a weight row in batches (states stay in L1).
constexpr int64_t kRowBlock = 32;

// How far ahead one row prefetches: qmm::kDecodePrefetchBlocks (kquant_kernels.h).

// R weight rows o .. o + R - 1 against activation row `row`.
template <DType T, int R>
LLM_KQ5_INLINE void OneRowStep(const char* W, size_t row_bytes, int64_t o, const qmm::Acts& a,
                               int64_t row, float* y) {
  using Block = typename KBlockOf<T>::type;
  const Block* blocks[R];
  State st[R];
  for (int r = 0; r < R; ++r) {
    blocks[r] = reinterpret_cast<const Block*>(W + (o + r) * row_bytes);
    Reset(&st[r]);
  }
  const int8_t* q8 = a.kq + row * a.n_in;
  const float* kd = a.kd + row * a.n_kblocks;
  const int16_t* bsum = a.kbsum + row * a.n_kblocks * 16;
  const int64_t prefetch_scale = DecodePrefetchScale();
  for (int64_t i = 0; i < a.n_kblocks; ++i) {
    __m512i act[kActRegs];
    LoadActs<T>(q8 + 256 * i, act);
    for (int r = 0; r < R; ++r) {
      // (Past the matrix's last row this points beyond it: a prefetch never
      // faults.)
      const int64_t ahead = i + qmm::kDecodePrefetchBlocks<T> * prefetch_scale;
      const char* p = ahead < a.n_kblocks
                          ? reinterpret_cast<const char*>(&blocks[r][ahead])
                          : W + (o + R + r) * row_bytes + (ahead - a.n_kblocks) * sizeof(Block);
      for (size_t off = 0; off < sizeof(Block); off += 64) _mm_prefetch(p + off, _MM_HINT_T1);
    }
    for (int r = 0; r < R; ++r) {
      Unpacked u;
      Unpack<T>(blocks[r][i], &u);
      Accumulate<T>(u, act, kd[i], bsum + 16 * i, &st[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[o + r] = Finish<T>(st[r]);
}

// Batches: R weight rows o .. o + R - 1 against activation rows rb ..
// rb + nr - 1. Each weight block is unpacked once for all nr rows, and each
// activation block is loaded once for the R weight rows.
template <DType T, int R, bool Tiled>
LLM_KQ5_INLINE void BatchStep(const char* W, size_t row_bytes, int64_t o, const qmm::Acts& a,
                              int64_t rb, int64_t nr, float* y, size_t y_stride) {
  using Block = typename KBlockOf<T>::type;
  const Block* blocks[R];
  State st[R][kRowBlock];
  for (int j = 0; j < R; ++j) {
    blocks[j] = reinterpret_cast<const Block*>(W + (o + j) * row_bytes);
    for (int64_t r = 0; r < nr; ++r) Reset(&st[j][r]);
  }
  Unpacked u[R];
  for (int64_t i = 0; i < a.n_kblocks; ++i) {
    for (int j = 0; j < R; ++j) Unpack<T>(blocks[j][i], &u[j]);
    for (int64_t r = 0; r < nr; ++r) {
      const int64_t row = rb + r;
      __m512i act[kActRegs];
      LoadActs<T>(a.kq + row * a.n_in + 256 * i, act);
      const float yd = a.kd[row * a.n_kblocks + i];
      const int16_t* bsum = a.kbsum + (row * a.n_kblocks + i) * 16;
      for (int j = 0; j < R; ++j) Accumulate<T, Tiled>(u[j], act, yd, bsum, &st[j][r]);
    }
  }
  for (int j = 0; j < R; ++j) {
    for (int64_t r = 0; r < nr; ++r) y[(rb + r) * y_stride + o + j] = Finish<T, Tiled>(st[j][r]);
  }
}

// Batches in the tiled order: as BatchStep, with the integer lanes of 8
// (activation row, weight row) pairs summed together (HSum8x8) and the three
// float steps done for the 8 at once; lane k's steps are the scalar ones
// (TiledStep), so a row's bits do not depend on its group. Rows past the last
// full group of 8 / R take the one-pair path.
template <DType T, int R>
LLM_KQ5_INLINE void BatchStepTiled(const char* W, size_t row_bytes, int64_t o, const qmm::Acts& a,
                                   int64_t rb, int64_t nr, float* y, size_t y_stride) {
  using Block = typename KBlockOf<T>::type;
  constexpr int G = 8 / R;  // activation rows per group of 8 pairs
  const Block* blocks[R];
  State st[R];                           // only tacc of the tails' pairs is used
  alignas(32) float acc[kRowBlock * R];  // [row][weight row]
  for (int j = 0; j < R; ++j) blocks[j] = reinterpret_cast<const Block*>(W + (o + j) * row_bytes);
  for (int64_t k = 0; k < nr * R; ++k) acc[k] = 0.0f;
  Unpacked u[R];
  for (int64_t i = 0; i < a.n_kblocks; ++i) {
    for (int j = 0; j < R; ++j) Unpack<T>(blocks[j][i], &u[j]);
    alignas(32) float dw8[8], dmin8[8];
    for (int k = 0; k < 8; ++k) {
      dw8[k] = u[k % R].d;
      dmin8[k] = u[k % R].dmin;
    }
    int64_t r = 0;
    for (; r + G <= nr; r += G) {
      __m256i s1[8], s2[8];
      alignas(32) float yd8[8];
      for (int g = 0; g < G; ++g) {
        const int64_t row = rb + r + g;
        __m512i act[kActRegs];
        LoadActs<T>(a.kq + row * a.n_in + 256 * i, act);
        const float yd = a.kd[row * a.n_kblocks + i];
        const int16_t* bsum = a.kbsum + (row * a.n_kblocks + i) * 16;
        for (int j = 0; j < R; ++j) {
          TiledLanes<T>(u[j], act, bsum, &s1[g * R + j], &s2[g * R + j]);
          yd8[g * R + j] = yd;
        }
      }
      __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(HSum8x8(s1)), _mm256_load_ps(dw8));
      if constexpr (kTiledHasMin<T>) {
        t = _mm256_fnmadd_ps(_mm256_load_ps(dmin8), _mm256_cvtepi32_ps(HSum8x8(s2)), t);
      }
      float* accp = acc + r * R;
      _mm256_store_ps(accp, _mm256_fmadd_ps(t, _mm256_load_ps(yd8), _mm256_load_ps(accp)));
    }
    for (; r < nr; ++r) {
      const int64_t row = rb + r;
      __m512i act[kActRegs];
      LoadActs<T>(a.kq + row * a.n_in + 256 * i, act);
      const float yd = a.kd[row * a.n_kblocks + i];
      const int16_t* bsum = a.kbsum + (row * a.n_kblocks + i) * 16;
      for (int j = 0; j < R; ++j) {
        st[j].tacc = acc[r * R + j];
        Accumulate<T, true>(u[j], act, yd, bsum, &st[j]);
        acc[r * R + j] = st[j].tacc;
      }
    }
  }
  for (int j = 0; j < R; ++j) {
    for (int64_t r = 0; r < nr; ++r) y[(rb + r) * y_stride + o + j] = acc[r * R + j];
  }
}

// Weight rows per tiled batch step: 4 for every type, Q6_K included (2 or 1
// were 5-25 % slower for Q6_K here, 16 rows, tools/time_kquant_kernels.py).
template <DType T>
constexpr int kTiledStep = 4;

// Batches, in the vec_dot or the tiled order (kquant_kernels.h).
template <DType T, bool Tiled>
void Batches(const char* w, size_t row_bytes, int64_t o_begin, int64_t o_end, const qmm::Acts& a,
             float* y, size_t y_stride) {
  for (int64_t rb = 0; rb < a.n_rows; rb += kRowBlock) {
    const int64_t nr = a.n_rows - rb < kRowBlock ? a.n_rows - rb : kRowBlock;
    int64_t o = o_begin;
    if constexpr (Tiled) {
      for (; o + kTiledStep<T> <= o_end; o += kTiledStep<T>) {
        BatchStepTiled<T, kTiledStep<T>>(w, row_bytes, o, a, rb, nr, y, y_stride);
      }
      for (; o < o_end; ++o) BatchStepTiled<T, 1>(w, row_bytes, o, a, rb, nr, y, y_stride);
    } else {
      for (; o + kBatchStep<T> <= o_end; o += kBatchStep<T>) {
        BatchStep<T, kBatchStep<T>, false>(w, row_bytes, o, a, rb, nr, y, y_stride);
      }
      for (; o < o_end; ++o) BatchStep<T, 1, false>(w, row_bytes, o, a, rb, nr, y, y_stride);
    }
  }
}

template <DType T>
void KernelK512(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end, const qmm::Acts& a,
                float* y, size_t y_stride, float* /*scratch*/) {
  const char* w = static_cast<const char*>(W);
  if (a.n_rows == 1) {
    int64_t o = o_begin;
    for (; o + kRowsPerStep<T> <= o_end; o += kRowsPerStep<T>) {
      OneRowStep<T, kRowsPerStep<T>>(w, row_bytes, o, a, 0, y);
    }
    for (; o < o_end; ++o) OneRowStep<T, 1>(w, row_bytes, o, a, 0, y);
    return;
  }
  if (qmm::KQuantTiled(a)) {
    Batches<T, true>(w, row_bytes, o_begin, o_end, a, y, y_stride);
  } else {
    Batches<T, false>(w, row_bytes, o_begin, o_end, a, y, y_stride);
  }
}

}  // namespace

namespace qmm {
Kernel KQuantAvx512Kernel(DType t) {
  switch (t) {
    case DType::kQ2_K:
      return &KernelK512<DType::kQ2_K>;
    case DType::kQ3_K:
      return &KernelK512<DType::kQ3_K>;
    case DType::kQ4_K:
      return &KernelK512<DType::kQ4_K>;
    case DType::kQ5_K:
      return &KernelK512<DType::kQ5_K>;
    case DType::kQ6_K:
      return &KernelK512<DType::kQ6_K>;
    default:
      return nullptr;
  }
}
}  // namespace qmm
}  // namespace llm
