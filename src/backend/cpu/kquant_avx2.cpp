// AVX2 + FMA + F16C kernels for the K-quants, IQ4_XS (Q8_K activations) and
// Q5_0, Q5_1, IQ4_NL (32-block activations): ggml-cpu's x86 AVX2 float
// sequence (kquant_kernels.h states it), so outputs equal llama.cpp's bit for
// bit. Compiled with -mavx2 -mfma -mf16c; called only when ActiveSimdLevel()
// >= kAvx2 (AVX-512 machines too: ggml has no AVX-512 variant of these).
//
// Each weight block is unpacked once (Unpack: the weights as u8 magnitudes
// per 32-element chunk, their signs for the signed types, and the int16
// scale of every pair of elements) and then used for every activation row of
// the call (Accumulate), so a batch reads and unpacks the weights once. The
// lanes' integer sums are exact whatever way they are formed; the float steps
// per row are always the same, whatever the number of rows (except IQ4_NL,
// see kquant_kernels.h).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/quant_blocks.h"

namespace llm {
namespace {

// ggml's hsum_float_8: (high half + low half), then pairs, then the two.
inline float HSum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// f16 -> f32 by F16C (no shared inline helpers in ISA-flagged files).
inline float F16(uint16_t h) { return _cvtsh_ss(h); }

// Sum over a 32-element chunk of scale * w * q into 8 int32 lanes (lane l:
// elements 4l..4l+3). w: u8 magnitudes; q: activations, already signed by
// the weights' signs where the weights are signed.
inline __m256i ChunkDot(__m256i w, __m256i q, __m256i scale16) {
  return _mm256_madd_epi16(scale16, _mm256_maddubs_epi16(w, q));
}

// Two int16 scales: elements 0..15 of a chunk (pairs 0..7) get lo, 16..31 hi.
inline __m256i Scales16(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(hi)),
                          _mm_set1_epi16(static_cast<int16_t>(lo)));
}

// Chunk c's pair scales from 16 per-16-element scales (int8 in s16): lanes
// 0..7 get s16[2c], lanes 8..15 s16[2c + 1] (ggml's get_scale_shuffle).
inline __m256i ChunkScales16(__m128i s16, int c) {
  const __m128i pick =
      _mm_set_epi64x(0x0101010101010101LL * (2 * c + 1), 0x0101010101010101LL * (2 * c));
  return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s16, pick));
}

// ---- K-quant blocks (256 elements, Q8_K activations) -----------------------

struct KUnpacked {
  __m256i w[8];    // chunk c = elements 32c .. 32c + 31: u8 magnitudes
  __m256i sgn[8];  // signed types: the signed values (for _mm256_sign_epi8)
  __m256i sc[8];   // int16 scale of each element pair
  __m256i extra;   // Q2_K: 16 int16 mins; Q4_K/Q5_K: 8 int16 mins (low half);
                   // Q6_K: 16 int16 scales
  float d = 0.0f, dmin = 0.0f;
};

// Per-row float state of the K-quant kernels.
struct KState {
  __m256 acc;
  __m128 acc_m;  // Q4_K's mins lanes
  float summs;   // Q5_K's mins chain
  float tacc;    // tiled order's accumulator (kquant_kernels.h)
};

// Sum of 8 int32 lanes (exact).
inline int32_t HSumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}
inline int32_t HSumI32(__m128i s) {
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// The tiled order's float steps for one block (kquant_kernels.h): t =
// float(s1) * d_w, minus dmin_w * float(s2) fused, then acc += t * yd fused.
template <bool kHasMin>
inline float TiledStep(int32_t s1, int32_t s2, float dw, float dmin, float yd, float acc) {
  __m128 t = _mm_mul_ss(_mm_cvtsi32_ss(_mm_setzero_ps(), s1), _mm_set_ss(dw));
  if constexpr (kHasMin) {
    t = _mm_fnmadd_ss(_mm_set_ss(dmin), _mm_cvtsi32_ss(_mm_setzero_ps(), s2), t);
  }
  return _mm_cvtss_f32(_mm_fmadd_ss(t, _mm_set_ss(yd), _mm_set_ss(acc)));
}

template <DType T>
constexpr bool kSignedK = T == DType::kQ3_K || T == DType::kIQ4_XS;

inline __m256i Load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

#define LLM_KQ_INLINE inline __attribute__((always_inline))

template <DType T>
LLM_KQ_INLINE void UnpackK(const typename KBlockOf<T>::type& b, KUnpacked* u) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m3 = _mm256_set1_epi8(3);
  if constexpr (T == DType::kQ2_K) {
    u->d = F16(b.d);
    u->dmin = F16(b.dmin);
    const __m128i ms = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m128i sc4 = _mm_and_si128(ms, _mm_set1_epi8(0x0F));  // 0..15, also as int8
    for (int h = 0; h < 2; ++h) {
      const __m256i bits = Load32(b.qs + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const int c = 4 * h + k;
        u->w[c] = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
        u->sc[c] = ChunkScales16(sc4, c);
      }
    }
    u->extra = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(ms, 4), _mm_set1_epi8(0x0F)));
  } else if constexpr (T == DType::kQ3_K) {
    u->d = F16(b.d);
    int sc[16];
    for (int j = 0; j < 16; ++j) {
      const int low = j < 8 ? (b.scales[j] & 0xF) : (b.scales[j - 8] >> 4);
      const int high = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
      sc[j] = (low | (high << 4)) - 32;
    }
    const __m256i hm = Load32(b.hmask);
    const __m256i zero = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i bits = Load32(b.qs + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const int c = 4 * h + k;
        const __m256i low = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
        // 4 where the element's hmask bit (4h + k) is clear.
        const __m256i clear = _mm256_cmpeq_epi8(
            _mm256_and_si256(hm, _mm256_set1_epi8(static_cast<char>(1 << (4 * h + k)))), zero);
        const __m256i q = _mm256_sub_epi8(low, _mm256_and_si256(clear, _mm256_set1_epi8(4)));
        u->sgn[c] = q;
        u->w[c] = _mm256_abs_epi8(q);
        u->sc[c] = Scales16(sc[2 * c], sc[2 * c + 1]);
      }
    }
  } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    u->d = F16(b.d);
    u->dmin = F16(b.dmin);
    // The 8 six-bit scales (bytes 0..7) and mins (8..15) of the block, as
    // ggml's vec_dot unpacks them (get_scale_min_k4 for all 8 at once).
    uint32_t aux[4];
    std::memcpy(aux, b.scales, 12);
    aux[3] = ((aux[2] >> 4) & 0x0f0f0f0f) | (((aux[1] >> 6) & 0x03030303) << 4);
    const uint32_t mins_lo = aux[1] & 0x3f3f3f3f;
    aux[1] = (aux[2] & 0x0f0f0f0f) | (((aux[0] >> 6) & 0x03030303) << 4);
    aux[2] = mins_lo;
    aux[0] &= 0x3f3f3f3f;
    const __m256i sm = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(aux)));
    const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
    for (int j = 0; j < 8; ++j) {
      // Every int16 lane = scale j (bytes 2j, 2j + 1 of the 8 int16 scales).
      const __m256i pick = _mm256_set1_epi16(static_cast<int16_t>((2 * j) | ((2 * j + 1) << 8)));
      u->sc[j] = _mm256_shuffle_epi8(scales, pick);
    }
    u->extra = _mm256_castsi128_si256(_mm256_extracti128_si256(sm, 1));
    __m256i hbits = _mm256_setzero_si256();
    if constexpr (T == DType::kQ5_K) hbits = Load32(b.qh);
    for (int j = 0; j < 4; ++j) {
      const __m256i bits = Load32(b.qs + 32 * j);
      __m256i lo = _mm256_and_si256(bits, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
      if constexpr (T == DType::kQ5_K) {
        const __m256i one = _mm256_set1_epi8(1);
        lo = _mm256_or_si256(
            lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), one), 4));
        hi = _mm256_or_si256(
            hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), one), 4));
      }
      u->w[2 * j] = lo;
      u->w[2 * j + 1] = hi;
    }
  } else if constexpr (T == DType::kQ6_K) {
    u->d = F16(b.d);
    for (int h = 0; h < 2; ++h) {
      const __m256i q1 = Load32(b.ql + 64 * h);
      const __m256i q2 = Load32(b.ql + 64 * h + 32);
      const __m256i qh = Load32(b.qh + 32 * h);
      const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4);
      const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(12)), 2);
      const __m256i h2 = _mm256_and_si256(qh, _mm256_set1_epi8(48));
      const __m256i h3 =
          _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(static_cast<char>(0xC0))), 2);
      u->w[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(q1, m4), h0);
      u->w[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(q2, m4), h1);
      u->w[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q1, 4), m4), h2);
      u->w[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q2, 4), m4), h3);
    }
    const __m128i s16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    for (int c = 0; c < 8; ++c) u->sc[c] = ChunkScales16(s16, c);
    u->extra = _mm256_cvtepi8_epi16(s16);
  } else {  // IQ4_XS
    u->d = F16(b.d);
    const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues));
    const __m128i m4b = _mm_set1_epi8(0x0F);
    for (int s = 0; s < 8; ++s) {
      const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * s));
      const __m256i v =
          _mm256_set_m128i(_mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(bits, 4), m4b)),
                           _mm_shuffle_epi8(values, _mm_and_si128(bits, m4b)));
      u->sgn[s] = v;
      u->w[s] = _mm256_abs_epi8(v);
      const int ls =
          ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b.scales_h >> (2 * s)) & 3) << 4);
      u->sc[s] = _mm256_set1_epi16(static_cast<int16_t>(ls - 32));
    }
  }
}

// The 8 int32 lanes of scale * w * q of one block (before the types'
// corrections).
template <DType T>
LLM_KQ_INLINE __m256i IntLanesK(const KUnpacked& u, const int8_t* q8) {
  __m256i sumi = _mm256_setzero_si256();
  for (int c = 0; c < 8; ++c) {
    __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 32 * c));
    if constexpr (kSignedK<T>) q = _mm256_sign_epi8(q, u.sgn[c]);
    sumi = _mm256_add_epi32(sumi, ChunkDot(u.w[c], q, u.sc[c]));
  }
  return sumi;
}

template <DType T>
constexpr bool kTiledHasMin = T == DType::kQ2_K || T == DType::kQ4_K || T == DType::kQ5_K;

// The tiled order's whole-block integer sums as lanes (kquant_kernels.h):
// s1's 8 lanes sum to S1, s2's to S2 (types with mins; else zero).
template <DType T>
LLM_KQ_INLINE void TiledLanesK(const KUnpacked& u, const int8_t* q8, const int16_t* bsum,
                               __m256i* s1, __m256i* s2) {
  __m256i sumi = IntLanesK<T>(u, q8);
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

// 8 vectors of 8 int32 lanes -> their 8 lane sums (vector k's in lane k).
inline __m256i HSum8x8(const __m256i* v) {
  const __m256i a0 = _mm256_hadd_epi32(v[0], v[1]), a1 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i a2 = _mm256_hadd_epi32(v[4], v[5]), a3 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i b0 = _mm256_hadd_epi32(a0, a1), b1 = _mm256_hadd_epi32(a2, a3);
  return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20),
                          _mm256_permute2x128_si256(b0, b1, 0x31));
}

// One activation row's contribution of one unpacked block (q8: the row's 256
// Q8_K values, yd its scale, bsum its 16 block sums). Tiled: the whole
// sums S1, S2 and the tiled order's steps for this one pair (the batch path
// does 8 pairs at once, KernelKTiled).
template <DType T, bool Tiled>
LLM_KQ_INLINE void AccumulateK(const KUnpacked& u, const int8_t* q8, float yd, const int16_t* bsum,
                               KState* st) {
  if constexpr (Tiled) {
    __m256i s1, s2;
    TiledLanesK<T>(u, q8, bsum, &s1, &s2);
    st->tacc = TiledStep<kTiledHasMin<T>>(HSumI32(s1), HSumI32(s2), u.d, u.dmin, yd, st->tacc);
    return;
  }
  __m256i sumi = IntLanesK<T>(u, q8);
  if constexpr (T == DType::kQ2_K) {
    const float d = yd * u.d;
    const float dmin = -yd * u.dmin;
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsum));
    const __m256i prod = _mm256_madd_epi16(u.extra, bs);
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), st->acc);
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), st->acc);
  } else if constexpr (T == DType::kQ3_K) {
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(yd * u.d), _mm256_cvtepi32_ps(sumi), st->acc);
  } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
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
  } else if constexpr (T == DType::kQ6_K) {
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsum));
    const __m256i sub = _mm256_slli_epi32(_mm256_madd_epi16(bs, u.extra), 5);
    sumi = _mm256_sub_epi32(sumi, sub);
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(yd * u.d), _mm256_cvtepi32_ps(sumi), st->acc);
  } else {  // IQ4_XS
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(u.d * yd), _mm256_cvtepi32_ps(sumi), st->acc);
  }
}

template <DType T, bool Tiled>
inline float FinishK(const KState& st) {
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

// Activation rows per pass over a weight row: their states stay in L1 while
// the weight blocks are unpacked once for all of them.
constexpr int64_t kRowBlock = 32;

template <DType T, bool Tiled>
void KernelKT(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end, const qmm::Acts& a,
              float* y, size_t y_stride) {
  using Block = typename KBlockOf<T>::type;
  KState st[kRowBlock];
  KUnpacked u;
  const int64_t prefetch_blocks = qmm::kDecodePrefetchBlocks<T> * DecodePrefetchScale();
  for (int64_t rb = 0; rb < a.n_rows; rb += kRowBlock) {
    const int64_t nr = a.n_rows - rb < kRowBlock ? a.n_rows - rb : kRowBlock;
    for (int64_t o = o_begin; o < o_end; ++o) {
      const Block* blocks =
          reinterpret_cast<const Block*>(static_cast<const char*>(W) + o * row_bytes);
      if (nr == 1) {
        // One row (decode): the unpacked block lives in registers only (the
        // same operations, fused by the compiler).
        KState one;
        one.acc = _mm256_setzero_ps();
        one.acc_m = _mm_setzero_ps();
        one.summs = 0.0f;
        one.tacc = 0.0f;
        for (int64_t i = 0; i < a.n_kblocks; ++i) {
          // The block kDecodePrefetchBlocks ahead into L2, in the next row
          // near this one's end (past the matrix's last row this points
          // beyond it: a prefetch never faults).
          const int64_t ahead = i + prefetch_blocks;
          const char* p = ahead < a.n_kblocks ? reinterpret_cast<const char*>(&blocks[ahead])
                                              : reinterpret_cast<const char*>(blocks) + row_bytes +
                                                    (ahead - a.n_kblocks) * sizeof(Block);
          for (size_t off = 0; off < sizeof(Block); off += 64) _mm_prefetch(p + off, _MM_HINT_T1);
          KUnpacked u1;
          UnpackK<T>(blocks[i], &u1);
          AccumulateK<T, Tiled>(u1, a.kq + rb * a.n_in + 256 * i, a.kd[rb * a.n_kblocks + i],
                                a.kbsum + (rb * a.n_kblocks + i) * 16, &one);
        }
        y[rb * y_stride + o] = FinishK<T, Tiled>(one);
        continue;
      }
      for (int64_t r = 0; r < nr; ++r) {
        st[r].acc = _mm256_setzero_ps();
        st[r].acc_m = _mm_setzero_ps();
        st[r].summs = 0.0f;
        st[r].tacc = 0.0f;
      }
      for (int64_t i = 0; i < a.n_kblocks; ++i) {
        UnpackK<T>(blocks[i], &u);
        for (int64_t r = 0; r < nr; ++r) {
          const int64_t row = rb + r;
          AccumulateK<T, Tiled>(u, a.kq + row * a.n_in + 256 * i, a.kd[row * a.n_kblocks + i],
                                a.kbsum + (row * a.n_kblocks + i) * 16, &st[r]);
        }
      }
      for (int64_t r = 0; r < nr; ++r) y[(rb + r) * y_stride + o] = FinishK<T, Tiled>(st[r]);
    }
  }
}

// The tiled order for batches (8+ rows): each weight block unpacked once,
// the integer lanes of 8 activation rows summed together (HSum8x8) and the
// float steps done for the 8 at once, lane k's steps being TiledStep's; rows
// past the last full group take the one-pair path.
template <DType T>
void KernelKTiled(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end,
                  const qmm::Acts& a, float* y, size_t y_stride) {
  using Block = typename KBlockOf<T>::type;
  alignas(32) float acc[kRowBlock];
  KUnpacked u;
  for (int64_t rb = 0; rb < a.n_rows; rb += kRowBlock) {
    const int64_t nr = a.n_rows - rb < kRowBlock ? a.n_rows - rb : kRowBlock;
    for (int64_t o = o_begin; o < o_end; ++o) {
      const Block* blocks =
          reinterpret_cast<const Block*>(static_cast<const char*>(W) + o * row_bytes);
      for (int64_t r = 0; r < nr; ++r) acc[r] = 0.0f;
      for (int64_t i = 0; i < a.n_kblocks; ++i) {
        UnpackK<T>(blocks[i], &u);
        int64_t r = 0;
        for (; r + 8 <= nr; r += 8) {
          __m256i s1[8], s2[8];
          alignas(32) float yd8[8];
          for (int g = 0; g < 8; ++g) {
            const int64_t row = rb + r + g;
            TiledLanesK<T>(u, a.kq + row * a.n_in + 256 * i, a.kbsum + (row * a.n_kblocks + i) * 16,
                           &s1[g], &s2[g]);
            yd8[g] = a.kd[row * a.n_kblocks + i];
          }
          __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(HSum8x8(s1)), _mm256_set1_ps(u.d));
          if constexpr (kTiledHasMin<T>) {
            t = _mm256_fnmadd_ps(_mm256_set1_ps(u.dmin), _mm256_cvtepi32_ps(HSum8x8(s2)), t);
          }
          _mm256_store_ps(acc + r,
                          _mm256_fmadd_ps(t, _mm256_load_ps(yd8), _mm256_load_ps(acc + r)));
        }
        for (; r < nr; ++r) {
          const int64_t row = rb + r;
          KState st;
          st.tacc = acc[r];
          AccumulateK<T, true>(u, a.kq + row * a.n_in + 256 * i, a.kd[row * a.n_kblocks + i],
                               a.kbsum + (row * a.n_kblocks + i) * 16, &st);
          acc[r] = st.tacc;
        }
      }
      for (int64_t r = 0; r < nr; ++r) y[(rb + r) * y_stride + o] = acc[r];
    }
  }
}

// vec_dot order, or the tiled order for products of 8+ rows (kquant_kernels.h).
template <DType T>
void KernelK(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end, const qmm::Acts& a,
             float* y, size_t y_stride, float* /*scratch*/) {
  if (qmm::KQuantTiled(a)) {
    KernelKTiled<T>(W, row_bytes, o_begin, o_end, a, y, y_stride);
  } else {
    KernelKT<T, false>(W, row_bytes, o_begin, o_end, a, y, y_stride);
  }
}

// ---- Q5_0, Q5_1, IQ4_NL (32-element blocks, q / ds activations) ------------

// 32 nibbles of a block as u8 in element order (low nibbles = 0..15).
inline __m256i Nibbles(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

// The 32 bits at p as 32 bytes 0xFF (set) / 0x00 (ggml's bytes_from_bits_32).
inline __m256i BitsToBytes(const uint8_t* p) {
  uint32_t x32;
  std::memcpy(&x32, p, 4);
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101,
                                         0x0000000000000000);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x32)), shuf);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

// u8 x s8 -> 8 x i32 sums of 4 products (exact: no int16 saturation for
// these weights).
inline __m256i DotU8S8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

struct Unpacked32 {
  __m256i w;    // u8 magnitudes (Q5_1: the values)
  __m256i sgn;  // signed values (Q5_0, IQ4_NL)
  float d = 0.0f, m = 0.0f;
};

template <DType T>
inline void Unpack32(const char* wrow, int64_t b, Unpacked32* u) {
  if constexpr (T == DType::kQ5_0) {
    const auto* blk = reinterpret_cast<const BlockQ5_0*>(wrow) + b;
    // nibble - 16 where the high bit is clear (ggml: or with 0xF0).
    const __m256i hi =
        _mm256_andnot_si256(BitsToBytes(blk->qh), _mm256_set1_epi8(static_cast<char>(0xF0)));
    u->sgn = _mm256_or_si256(Nibbles(blk->qs), hi);
    u->w = _mm256_sign_epi8(u->sgn, u->sgn);
    u->d = F16(blk->d);
  } else if constexpr (T == DType::kQ5_1) {
    const auto* blk = reinterpret_cast<const BlockQ5_1*>(wrow) + b;
    const __m256i hi = _mm256_and_si256(BitsToBytes(blk->qh), _mm256_set1_epi8(0x10));
    u->w = _mm256_or_si256(Nibbles(blk->qs), hi);
    u->d = F16(blk->d);
    u->m = F16(blk->m);
  } else {  // IQ4_NL
    const auto* blk = reinterpret_cast<const BlockIQ4_NL*>(wrow) + b;
    const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues));
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
    const __m128i m4b = _mm_set1_epi8(0x0F);
    u->sgn = _mm256_set_m128i(_mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(bits, 4), m4b)),
                              _mm_shuffle_epi8(values, _mm_and_si128(bits, m4b)));
    u->w = _mm256_sign_epi8(u->sgn, u->sgn);
    u->d = F16(blk->d);
  }
}

// Per-row state: acc (ggml's accumulator; IQ4_NL one row: the even blocks'),
// acc2 (IQ4_NL one row: the odd blocks'), summs (Q5_1's min term).
struct State32 {
  __m256 acc, acc2;
  float summs;
};

template <DType T>
inline __m256 BlockProducts(const Unpacked32& u, const int8_t* q) {
  __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
  if constexpr (T != DType::kQ5_1) x = _mm256_sign_epi8(x, u.sgn);
  return _mm256_cvtepi32_ps(DotU8S8(u.w, x));
}

template <DType T>
void Kernel32(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end, const qmm::Acts& a,
              float* y, size_t y_stride, float* /*scratch*/) {
  // IQ4_NL alone in a call of one row: ggml_vec_dot_iq4_nl_q8_0's order
  // (blocks alternate between two accumulators, an odd last block is added
  // in scalar); otherwise tinyBLAS's single accumulator.
  const bool two_acc = T == DType::kIQ4_NL && a.n_rows == 1 && !a.batch_invariant;
  const int64_t nb = a.n_blocks;
  const int64_t nb_vec = two_acc ? nb / 2 * 2 : nb;
  State32 st[kRowBlock];
  for (int64_t rb = 0; rb < a.n_rows; rb += kRowBlock) {
    const int64_t nr = a.n_rows - rb < kRowBlock ? a.n_rows - rb : kRowBlock;
    for (int64_t o = o_begin; o < o_end; ++o) {
      const char* wrow = static_cast<const char*>(W) + o * row_bytes;
      for (int64_t r = 0; r < nr; ++r) {
        st[r].acc = _mm256_setzero_ps();
        st[r].acc2 = _mm256_setzero_ps();
        st[r].summs = 0.0f;
      }
      Unpacked32 u;
      for (int64_t b = 0; b < nb_vec; ++b) {
        Unpack32<T>(wrow, b, &u);
        for (int64_t r = 0; r < nr; ++r) {
          const int64_t row = rb + r;
          const __m256 p = BlockProducts<T>(u, a.q + row * a.n_in + 32 * b);
          const float xd = a.ds[2 * (row * nb + b)];
          if constexpr (T == DType::kQ5_1) {
            const float xs = a.ds[2 * (row * nb + b) + 1];
            st[r].summs = _mm_cvtss_f32(
                _mm_fmadd_ss(_mm_set_ss(u.m), _mm_set_ss(xs), _mm_set_ss(st[r].summs)));
            st[r].acc = _mm256_fmadd_ps(p, _mm256_mul_ps(_mm256_set1_ps(u.d), _mm256_set1_ps(xd)),
                                        st[r].acc);
          } else if constexpr (T == DType::kIQ4_NL) {
            const __m256 d = _mm256_set1_ps(xd * u.d);
            if (two_acc && (b & 1)) {
              st[r].acc2 = _mm256_fmadd_ps(d, p, st[r].acc2);
            } else {
              st[r].acc = _mm256_fmadd_ps(d, p, st[r].acc);
            }
          } else {
            st[r].acc = _mm256_fmadd_ps(_mm256_set1_ps(u.d * xd), p, st[r].acc);
          }
        }
      }
      for (int64_t r = 0; r < nr; ++r) {
        float out;
        if constexpr (T == DType::kQ5_1) {
          out = HSum8(st[r].acc) + st[r].summs;
        } else if constexpr (T == DType::kIQ4_NL) {
          if (two_acc) {
            out = HSum8(_mm256_add_ps(st[r].acc, st[r].acc2));
            if (nb_vec < nb) {  // the odd last block, as ggml's scalar tail: fma(d, sumi, sum)
              Unpack32<T>(wrow, nb - 1, &u);
              const int64_t row = rb + r;
              __m256i x = _mm256_loadu_si256(
                  reinterpret_cast<const __m256i*>(a.q + row * a.n_in + 32 * (nb - 1)));
              const __m256i lanes = DotU8S8(u.w, _mm256_sign_epi8(x, u.sgn));
              __m128i s =
                  _mm_add_epi32(_mm256_castsi256_si128(lanes), _mm256_extracti128_si256(lanes, 1));
              s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
              s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
              const float d = a.ds[2 * (row * nb + nb - 1)] * u.d;
              out = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(d),
                                               _mm_set_ss(static_cast<float>(_mm_cvtsi128_si32(s))),
                                               _mm_set_ss(out)));
            }
          } else {
            out = HSum8(st[r].acc);
          }
        } else {
          out = HSum8(st[r].acc);
        }
        y[(rb + r) * y_stride + o] = out;
      }
    }
  }
}

}  // namespace

namespace qmm {
Kernel KQuantAvx2Kernel(DType t) {
  switch (t) {
    case DType::kQ2_K:
      return &KernelK<DType::kQ2_K>;
    case DType::kQ3_K:
      return &KernelK<DType::kQ3_K>;
    case DType::kQ4_K:
      return &KernelK<DType::kQ4_K>;
    case DType::kQ5_K:
      return &KernelK<DType::kQ5_K>;
    case DType::kQ6_K:
      return &KernelK<DType::kQ6_K>;
    case DType::kIQ4_XS:
      return &KernelK<DType::kIQ4_XS>;
    case DType::kQ5_0:
      return &Kernel32<DType::kQ5_0>;
    case DType::kQ5_1:
      return &Kernel32<DType::kQ5_1>;
    case DType::kIQ4_NL:
      return &Kernel32<DType::kIQ4_NL>;
    default:
      return nullptr;
  }
}
}  // namespace qmm
}  // namespace llm
