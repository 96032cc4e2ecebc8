// AVX-512 BW + VNNI kernels for Q4_K, Q5_K and Q6_K against Q8_K activations:
// the same outputs as kquant_avx2.cpp (ggml-cpu's x86 AVX2 vec_dot order,
// kquant_kernels.h), bit for bit, with half the integer instructions.
//
// Why the bits cannot move: per 256-block and activation row, the AVX2 kernel
// forms 8 int32 lanes (lane l = sum over the block's elements e with
// (e % 32) / 4 == l of scale * w * q, plus the type's correction) and then
// runs a fixed f32 sequence on them (one FMA per block into 8 f32 lanes, Q4_K
// its 4 mins lanes, Q5_K its scalar mins chain, hsum_float_8 at the end).
// Integer sums are exact in any order, so this file computes the same 8 int32
// lanes with 512-bit registers -- one register holds two 32-element chunks
// (elements 64k .. 64k + 63: int32 lanes 0..7 of chunk 2k, 8..15 of chunk
// 2k + 1), products by maddubs (u8 weight x s8 activation, no saturation:
// |w| <= 63, |q| <= 127), scaled and summed by VNNI vpdpwssd -- folds the
// upper 8 int32 lanes onto the lower 8 (exact) and then runs the very same
// f32 steps as the AVX2 kernel.
//
// One activation row (decode): kRowsPerStep (4; Q6_K 1) weight rows are
// walked together, so each activation chunk is loaded once for all of them
// and their independent chains overlap. Batches: each weight block is unpacked once
// (8 zmm) and reused for up to kRowBlock activation rows, as the AVX2 kernel
// does. Compiled with the *_avx512.cpp flags; called only at
// SimdLevel::kAvx512.
// GCC 12's AVX-512 headers build some intrinsics (broadcast, extract,
// reduce) from a deliberately undefined value and then warn about it.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/kquant_kernels.h"
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

template <DType T>
struct BlockOf;
template <>
struct BlockOf<DType::kQ4_K> {
  using type = BlockQ4_K;
};
template <>
struct BlockOf<DType::kQ5_K> {
  using type = BlockQ5_K;
};
template <>
struct BlockOf<DType::kQ6_K> {
  using type = BlockQ6_K;
};

// One weight block, unpacked: pair k = elements 64k .. 64k + 63 (chunks 2k,
// 2k + 1) as u8 magnitudes, and the int16 scale of each element pair.
struct Unpacked {
  __m512i w[4];
  __m512i sc[4];
  __m256i extra;  // Q4_K/Q5_K: 8 int16 mins (low 128 bits); Q6_K: 16 int16 scales
  float d, dmin;
};

// Per activation row float state (the AVX2 kernel's KState).
struct State {
  __m256 acc;
  __m128 acc_m;  // Q4_K's mins lanes
  float summs;   // Q5_K's mins chain
};

template <DType T>
LLM_KQ5_INLINE void Unpack(const typename BlockOf<T>::type& b, Unpacked* u) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    u->d = F16(b.d);
    u->dmin = F16(b.dmin);
    // The 8 six-bit scales (bytes 0..7) and mins (8..15) of the block, as
    // ggml's vec_dot unpacks them (get_scale_min_k4 for all 8 at once), in
    // vector registers. With the 12 scale bytes as dwords a0, a1, a2:
    //   scales = a0 & 0x3f.., (a2 & 0x0f..) | ((a0 >> 6) & 0x03..) << 4
    //   mins   = a1 & 0x3f.., ((a2 >> 4) & 0x0f..) | ((a1 >> 6) & 0x03..) << 4
    // (the 16-byte load reads 4 bytes past the scales: still inside the block).
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m128i p = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)),
                                     _mm_set_epi32(4, 0, 0, 0));  // a0, a2, a1, a2 >> 4
    const __m128i lo6 = _mm_and_si128(
        p, _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    const __m128i hi2 = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 2),
                                      _mm_set_epi32(0x30303030, 0, 0x30303030, 0));
    const __m128i aux = _mm_or_si128(lo6, hi2);
    const __m256i sm =
        _mm256_cvtepu8_epi16(aux);
    const __m512i sm512 = _mm512_castsi256_si512(sm);
    for (int k = 0; k < 4; ++k) {
      // int16 lanes 0..15: scale 2k, 16..31: scale 2k + 1.
      const __m512i idx = _mm512_mask_blend_epi16(kHigh16, _mm512_set1_epi16(static_cast<short>(2 * k)),
                                                  _mm512_set1_epi16(static_cast<short>(2 * k + 1)));
      u->sc[k] = _mm512_permutexvar_epi16(idx, sm512);
    }
    u->extra = _mm256_castsi128_si256(_mm256_extracti128_si256(sm, 1));
    __m512i hbits = _mm512_setzero_si512();
    if constexpr (T == DType::kQ5_K) hbits = Broadcast32(b.qh);
    for (int k = 0; k < 4; ++k) {
      // qs[32k .. 32k + 31]: low nibbles = elements 64k + l (chunk 2k), high
      // nibbles = 64k + 32 + l (chunk 2k + 1).
      const __m512i bits = Broadcast32(b.qs + 32 * k);
      __m512i w = _mm512_and_si512(_mm512_mask_srli_epi16(bits, kHigh16, bits, 4), m4);
      if constexpr (T == DType::kQ5_K) {
        // Fifth bit: qh[l] bit 2k (chunk 2k), bit 2k + 1 (chunk 2k + 1).
        const __m512i bit = _mm512_mask_blend_epi8(
            kHigh8, _mm512_set1_epi8(static_cast<char>(1 << (2 * k))),
            _mm512_set1_epi8(static_cast<char>(1 << (2 * k + 1))));
        const __mmask64 set = _mm512_test_epi8_mask(hbits, bit);
        w = _mm512_mask_add_epi8(w, set, w, _mm512_set1_epi8(16));
      }
      u->w[k] = w;
    }
  } else {  // Q6_K
    u->d = F16(b.d);
    for (int h = 0; h < 2; ++h) {
      // ql[64h .. 64h + 63]: low nibbles = elements 128h + 0..63 (pair 2h),
      // high nibbles = 128h + 64..127 (pair 2h + 1). qh[32h + l] holds the
      // two high bits of 128h + l (bits 0-1), + 32 (2-3), + 64 (4-5), + 96
      // (6-7).
      const __m512i ql =
          _mm512_loadu_si512(reinterpret_cast<const void*>(b.ql + 64 * h));
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
    // int8 scale s of each 16 elements: pair k's 128-bit lane j gets s[4k + j].
    const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m256i s16 = _mm256_cvtepi8_epi16(s8);
    const __m512i s512 = _mm512_castsi256_si512(s16);
    const __m512i lane = _mm512_srli_epi16(
        _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14,
                         13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        3);  // 0,0,..,1,..,2,..,3 (8 int16 per 128-bit lane)
    for (int k = 0; k < 4; ++k) {
      u->sc[k] = _mm512_permutexvar_epi16(
          _mm512_add_epi16(lane, _mm512_set1_epi16(static_cast<short>(4 * k))), s512);
    }
    u->extra = s16;
  }
}

// One activation row's contribution of one unpacked block (q8: the row's 256
// Q8_K values, yd its scale, bsum its 16 sums of 16) -- the AVX2 kernel's
// AccumulateK, lane for lane.
template <DType T>
LLM_KQ5_INLINE void Accumulate(const Unpacked& u, const int8_t* q8, float yd, const int16_t* bsum,
                               State* st) {
  __m512i s = _mm512_setzero_si512();
  for (int k = 0; k < 4; ++k) {
    const __m512i q = _mm512_loadu_si512(reinterpret_cast<const void*>(q8 + 64 * k));
    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(u.w[k], q), u.sc[k]);
  }
  __m256i sumi = Fold(s);
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
  } else {  // Q6_K: minus 32 * (bsum * scale) of sub-blocks 2l, 2l + 1 in lane l
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsum));
    const __m256i sub = _mm256_slli_epi32(_mm256_madd_epi16(bs, u.extra), 5);
    sumi = _mm256_sub_epi32(sumi, sub);
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(yd * u.d), _mm256_cvtepi32_ps(sumi), st->acc);
  }
}

template <DType T>
LLM_KQ5_INLINE float Finish(const State& st) {
  if constexpr (T == DType::kQ4_K) {
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
}

// Weight rows walked together for one activation row (measured on a
// Sapphire Rapids-class Xeon, tools/time_kquant_kernels.py: Q4_K / Q5_K gain
// from overlapping 4 rows' scale unpacking and chains, Q6_K's larger
// unpacked block is fastest alone).
template <DType T>
constexpr int kRowsPerStep = T == DType::kQ6_K ? 1 : 4;
// Activation rows per pass over a weight row in batches (states stay in L1).
constexpr int64_t kRowBlock = 32;

// R weight rows o .. o + R - 1 against activation row `row`.
template <DType T, int R>
LLM_KQ5_INLINE void OneRowStep(const char* W, size_t row_bytes, int64_t o, const qmm::Acts& a,
                               int64_t row, float* y) {
  using Block = typename BlockOf<T>::type;
  const Block* blocks[R];
  State st[R];
  for (int r = 0; r < R; ++r) {
    blocks[r] = reinterpret_cast<const Block*>(W + (o + r) * row_bytes);
    Reset(&st[r]);
  }
  const int8_t* q8 = a.kq + row * a.n_in;
  const float* kd = a.kd + row * a.n_kblocks;
  const int16_t* bsum = a.kbsum + row * a.n_kblocks * 16;
  for (int64_t i = 0; i < a.n_kblocks; ++i) {
    for (int r = 0; r < R; ++r) {
      Unpacked u;
      Unpack<T>(blocks[r][i], &u);
      Accumulate<T>(u, q8 + 256 * i, kd[i], bsum + 16 * i, &st[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[o + r] = Finish<T>(st[r]);
}

template <DType T>
void KernelK512(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end, const qmm::Acts& a,
            float* y, size_t y_stride, float* /*scratch*/) {
  using Block = typename BlockOf<T>::type;
  const char* w = static_cast<const char*>(W);
  if (a.n_rows == 1) {
    int64_t o = o_begin;
    for (; o + kRowsPerStep<T> <= o_end; o += kRowsPerStep<T>) {
      OneRowStep<T, kRowsPerStep<T>>(w, row_bytes, o, a, 0, y);
    }
    for (; o < o_end; ++o) OneRowStep<T, 1>(w, row_bytes, o, a, 0, y);
    return;
  }
  State st[kRowBlock];
  Unpacked u;
  for (int64_t rb = 0; rb < a.n_rows; rb += kRowBlock) {
    const int64_t nr = a.n_rows - rb < kRowBlock ? a.n_rows - rb : kRowBlock;
    for (int64_t o = o_begin; o < o_end; ++o) {
      const Block* blocks = reinterpret_cast<const Block*>(w + o * row_bytes);
      for (int64_t r = 0; r < nr; ++r) Reset(&st[r]);
      for (int64_t i = 0; i < a.n_kblocks; ++i) {
        Unpack<T>(blocks[i], &u);
        for (int64_t r = 0; r < nr; ++r) {
          const int64_t row = rb + r;
          Accumulate<T>(u, a.kq + row * a.n_in + 256 * i, a.kd[row * a.n_kblocks + i],
                        a.kbsum + (row * a.n_kblocks + i) * 16, &st[r]);
        }
      }
      for (int64_t r = 0; r < nr; ++r) y[(rb + r) * y_stride + o] = Finish<T>(st[r]);
    }
  }
}

}  // namespace

namespace qmm {
Kernel KQuantAvx512Kernel(DType t) {
  switch (t) {
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
