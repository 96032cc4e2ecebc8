// AVX2 + FMA + F16C inner loops of Attention (compiled with those flags; used
// when ActiveSimdLevel() == kAvx2, and at kAvx512 for head sizes the AVX-512
// kernel does not take). They reproduce, bit for bit, what llama.cpp's
// default (non-flash) attention computes when llama.cpp is built for AVX2
// (no AVX-512), as attention_avx512.cpp does for its AVX-512 build: on
// sensitive models (SmolLM2) a 1-ulp difference in the attention output
// flips 8-bit activation roundings in the next matmul and moves the logits by
// ~0.2 (tools/exact_forward.py). llama.cpp's AVX2 build differs from its
// AVX-512 build in every sum below (8 lanes instead of 16, other horizontal
// sums) and in its expf, so each level follows its own build.
//   kq  = mul_mat(k, q), q converted to the cache type first (f16: nearest
//         even). F16 cache, a step of n_q >= 2 tokens, head_dim % 8 == 0:
//         llamafile's tinyBLAS<8, __m256>: one 8-lane FMA accumulator over
//         head_dim, then its hsum: (hi128 + lo128), [0+2, 1+3], (0+2)+(1+3).
//         Otherwise (one token: llamafile_sgemm refuses n < 2; or head_dim %
//         8 != 0: tinyBLAS refuses k % 8) ggml_vec_dot_f16: four 8-lane
//         accumulators over 32-element steps, combined (0+2) + (1+3), then
//         GGML_F32x8_REDUCE's (lo128 + hi128), hadd, hadd = (0+1)+(2+3);
//         the head_dim % 32 leftovers are added in double, each product
//         rounded to f32. With an F32 cache ggml uses ggml_vec_dot_f32 at any
//         token count (q's permuted view is not contiguous and already of the
//         vec_dot type, so neither llamafile attempt applies): the same
//         order, and leftovers as llama-cpp-python 0.3.36's build compiles
//         them (f32 sum; groups of 8, then 4, of rounded products added one
//         by one, the last head_dim % 4 with scalar fmas; unused for
//         head_dim % 32 == 0).
//   softmax (ggml_compute_forward_soft_max_f32 / ggml_vec_soft_max_f32,
//         AVX2 branch): s = kq * scale, e = ggml_v_expf(s - max) 8 positions
//         at a time (AVX2 reconstruction, ggml_expf_avx2.inc), the sum over
//         positions in double of each 8-group's f32 hsum (the tinyBLAS
//         order above), probabilities e * (float)(1 / sum), rounded to f16
//         for an f16 cache.
//   kqv = mul_mat(v^T, probs) over the transposed V cache: n_q >= 2 and
//         head_dim % 4 == 0 (tinyBLAS's m % 4): tinyBLAS<8> (f16 or f32),
//         lane class p mod 8, then its hsum; otherwise vec_dot_f16/_f32:
//         lane class p mod 32 (accumulator (p mod 32) / 8, lane p mod 8),
//         reduced as above.
// llama.cpp pads the cache view to a multiple of 256 positions and masks the
// extra ones (scores -inf, exp 0, probabilities 0 times finite V): they add
// exact zeros, so the sums over positions never have vec_dot leftovers and
// the lanes past n_kv are emulated with zeros (exp(-inf) = 0 for the
// softmax). Hence llama.cpp's results, and these kernels', depend on whether
// a token was decoded alone or in a batch: a prompt prefilled at once and
// the same tokens decoded one by one differ in the last bits (unless
// Attention's batch_invariant picks the multi-token kernel always).
// No std:: templates or shared inline helpers here: an ISA-flagged copy of
// an inline function could be picked by the linker for the whole program.
#include <immintrin.h>
#include <math.h>

#include "backend/cpu/attention_kernels.h"

namespace llm {
namespace {

#include "backend/cpu/ggml_expf_avx2.inc"

inline __m256 Load8(const void* base, bool f16, size_t off) {
  if (f16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + off)));
  }
  return _mm256_loadu_ps(static_cast<const float*>(base) + off);
}

// Elements off .. off + n - 1 (n < 8) in lanes 0 .. n - 1, zeros above.
inline __m256 LoadPartial(const void* base, bool f16, size_t off, int64_t n) {
  alignas(32) float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < n; ++i) {
    t[i] = f16 ? _cvtsh_ss(static_cast<const uint16_t*>(base)[off + static_cast<size_t>(i)])
               : static_cast<const float*>(base)[off + static_cast<size_t>(i)];
  }
  return _mm256_load_ps(t);
}

inline float Load1(const void* base, bool f16, size_t off) {
  return f16 ? _cvtsh_ss(static_cast<const uint16_t*>(base)[off])
             : static_cast<const float*>(base)[off];
}

// f32 -> nearest-even f16 -> f32 on 8 lanes.
inline __m256 RoundF16x8(__m256 x) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// llamafile's hsum(__m256) (also ggml_vec_soft_max_f32's AVX2 group sum):
// t = hi128 + lo128, then [t0 + t2, t1 + t3], then (t0 + t2) + (t1 + t3).
inline float HsumTiny(__m256 v) {
  __m128 t = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  t = _mm_add_ps(t, _mm_movehl_ps(t, t));
  t = _mm_add_ss(t, _mm_movehdup_ps(t));
  return _mm_cvtss_f32(t);
}

// GGML_F32x8_REDUCE's last steps: t = lo128 + hi128, hadd, hadd:
// (t0 + t1) + (t2 + t3).
inline float HsumHadd(__m256 v) {
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h = _mm_hadd_ps(t, t);
  return _mm_cvtss_f32(_mm_hadd_ps(h, h));
}

// [t(v[2k]) | t(v[2k+1])] for k = 0..3, t(v) = lo128 + hi128 (4 lanes).
inline void HalfSums8(const __m256* v, __m256* x) {
  for (int k = 0; k < 4; ++k) {
    x[k] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * k], v[2 * k + 1], 0x20),
                         _mm256_permute2f128_ps(v[2 * k], v[2 * k + 1], 0x31));
  }
}

// Lane i of the result = HsumTiny(v[i]) for 8 registers at once, with the
// same adds (each add of a pair of lanes is commutative, so only the
// pairing matters).
inline __m256 HsumTiny8(const __m256* v) {
  __m256 x[4], y[2];
  HalfSums8(v, x);
  // y[m], 128-bit half h: [t0 + t2, t1 + t3] of v[4m + h], then of v[4m + 2 + h]
  for (int m = 0; m < 2; ++m) {
    y[m] = _mm256_add_ps(_mm256_shuffle_ps(x[2 * m], x[2 * m + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(x[2 * m], x[2 * m + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // half h: the sums of v[h], v[2 + h], v[4 + h], v[6 + h]
  const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Lane i = HsumHadd(v[i]) for 8 registers at once, with the same adds.
inline __m256 HsumHadd8(const __m256* v) {
  __m256 x[4];
  HalfSums8(v, x);
  // half h: [t0 + t1, t2 + t3] of v[4m + h], then of v[4m + 2 + h]
  const __m256 y0 = _mm256_hadd_ps(x[0], x[1]);
  const __m256 y1 = _mm256_hadd_ps(x[2], x[3]);
  // half h: the sums of v[h], v[2 + h], v[4 + h], v[6 + h]
  const __m256 r = _mm256_hadd_ps(y0, y1);
  return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// How a product of llama.cpp's attention sums its terms (see the header).
enum class Order {
  kTiny,       // tinyBLAS<8>: lane class i mod 8, HsumTiny
  kVecDotF16,  // vec_dot_f16: lane class i mod 32, HsumHadd, leftovers in double
  kVecDotF32,  // vec_dot_f32: lane class i mod 32, HsumHadd, leftovers as compiled
};

// The 8 lanes whose horizontal sum is q . k_row (before leftovers).
inline __m256 KqLanes(Order order, const float* q, const uint8_t* k_row, bool f16, size_t off,
                      int64_t hd) {
  if (order == Order::kTiny) {  // hd % 8 == 0
    __m256 a = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; d += 8) {
      a = _mm256_fmadd_ps(Load8(k_row, f16, off + static_cast<size_t>(d)), _mm256_loadu_ps(q + d),
                          a);
    }
    return a;
  }
  __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                 _mm256_setzero_ps()};
  const int64_t np = hd & ~int64_t{31};
  for (int64_t d = 0; d < np; d += 32) {
    for (int j = 0; j < 4; ++j) {
      a[j] = _mm256_fmadd_ps(Load8(k_row, f16, off + static_cast<size_t>(d + 8 * j)),
                             _mm256_loadu_ps(q + d + 8 * j), a[j]);
    }
  }
  return _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
}

// vec_dot's leftovers (elements hd & ~31 .. hd - 1) added to its reduced sum.
inline float KqLeftovers(Order order, float sum, const float* q, const uint8_t* k_row, bool f16,
                         size_t off, int64_t hd) {
  int64_t i = hd & ~int64_t{31};
  if (order == Order::kTiny || i == hd) return sum;
  if (order == Order::kVecDotF16) {  // double sum of f32 products
    double s = sum;
    for (; i < hd; ++i) {
      const float prod = _mm_cvtss_f32(_mm_mul_ss(
          _mm_set_ss(q[i]), _mm_set_ss(Load1(k_row, f16, off + static_cast<size_t>(i)))));
      s += static_cast<double>(prod);
    }
    return static_cast<float>(s);
  }
  // vec_dot_f32 as compiled: rounded products added one by one while 4 or
  // more are left, then fmas.
  __m128 s = _mm_set_ss(sum);
  const int64_t fused_from = hd - (hd - i) % 4;
  for (; i < fused_from; ++i) {
    s = _mm_add_ss(s, _mm_mul_ss(_mm_set_ss(q[i]),
                                 _mm_set_ss(Load1(k_row, f16, off + static_cast<size_t>(i)))));
  }
  for (; i < hd; ++i) {
    s = _mm_fmadd_ss(_mm_set_ss(q[i]), _mm_set_ss(Load1(k_row, f16, off + static_cast<size_t>(i))),
                     s);
  }
  return _mm_cvtss_f32(s);
}

// scores [n_kv] (s = q.k * scale, max mx) -> probabilities as ggml's AVX2
// soft_max computes them: e = ggml_v_expf(s - mx) 8 positions at a time
// (lanes past n_kv: exp(-inf) = 0, as llama.cpp's masked padding), the f32
// group sums accumulated in double, e * (float)(1 / sum), rounded to f16 for
// an f16 cache.
void Softmax(float* scores, int64_t n_kv, float mx, bool f16) {
  const __m256 vmx = _mm256_set1_ps(mx);
  double sum = 0.0;
  int64_t p = 0;
  for (; p + 8 <= n_kv; p += 8) {
    const __m256 e = ExpF(_mm256_sub_ps(_mm256_loadu_ps(scores + p), vmx));
    _mm256_storeu_ps(scores + p, e);
    sum += static_cast<double>(HsumTiny(e));
  }
  if (p < n_kv) {
    alignas(32) float t[8];
    for (int l = 0; l < 8; ++l) t[l] = p + l < n_kv ? scores[p + l] : -INFINITY;
    const __m256 e = ExpF(_mm256_sub_ps(_mm256_load_ps(t), vmx));
    _mm256_store_ps(t, e);
    for (int l = 0; p + l < n_kv; ++l) scores[p + l] = t[l];
    sum += static_cast<double>(HsumTiny(e));
  }
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  for (p = 0; p + 8 <= n_kv; p += 8) {
    const __m256 pr = _mm256_mul_ps(_mm256_loadu_ps(scores + p), inv);
    _mm256_storeu_ps(scores + p, f16 ? RoundF16x8(pr) : pr);
  }
  if (p < n_kv) {
    alignas(32) float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int l = 0; p + l < n_kv; ++l) t[l] = scores[p + l];
    __m256 pr = _mm256_mul_ps(_mm256_load_ps(t), inv);
    _mm256_store_ps(t, f16 ? RoundF16x8(pr) : pr);
    for (int l = 0; p + l < n_kv; ++l) scores[p + l] = t[l];
  }
}

// V rows of positions p (dims off .. off + 7; the last chunk of a head_dim
// that is not a multiple of 8 zero-padded).
inline __m256 LoadV(const attn::KvRows& kv, int64_t p, size_t off, int64_t dims) {
  return dims == 8 ? Load8(kv.v[p], kv.f16, off) : LoadPartial(kv.v[p], kv.f16, off, dims);
}

// out[d] = sum_p prob[p] * v[p][d] for 8 dims at once (dims of them stored).
// tinyBLAS: lane class p mod 8, then HsumTiny's adds element-wise.
void KqvTiny(const float* probs, int64_t n_kv, const attn::KvRows& kv, size_t off, int64_t dims,
             float* out) {
  __m256 a[8];
  for (int l = 0; l < 8; ++l) a[l] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= n_kv; p += 8) {
    for (int l = 0; l < 8; ++l) {
      a[l] = _mm256_fmadd_ps(LoadV(kv, p + l, off, dims), _mm256_set1_ps(probs[p + l]), a[l]);
    }
  }
  for (int l = 0; p + l < n_kv; ++l) {
    a[l] = _mm256_fmadd_ps(LoadV(kv, p + l, off, dims), _mm256_set1_ps(probs[p + l]), a[l]);
  }
  // hsum per dim: t_l = lane l + lane l + 4, then (t0 + t2) + (t1 + t3).
  const __m256 t0 = _mm256_add_ps(a[4], a[0]), t1 = _mm256_add_ps(a[5], a[1]);
  const __m256 t2 = _mm256_add_ps(a[6], a[2]), t3 = _mm256_add_ps(a[7], a[3]);
  const __m256 r = _mm256_add_ps(_mm256_add_ps(t0, t2), _mm256_add_ps(t1, t3));
  if (dims == 8) {
    _mm256_storeu_ps(out, r);
  } else {
    alignas(32) float t[8];
    _mm256_store_ps(t, r);
    for (int64_t i = 0; i < dims; ++i) out[i] = t[i];
  }
}

// vec_dot_f16/_f32 over positions: accumulator j, lane l sums positions p =
// 32 i + 8 j + l in order of i; per lane (acc0 + acc2) + (acc1 + acc3), then
// GGML_F32x8_REDUCE's (lane l + lane l + 4), (t0 + t1) + (t2 + t3).
// Element-wise over 8 dims: lane l's four accumulators in registers,
// combined into x[l], then the lane reduction.
void KqvVecDot(const float* probs, int64_t n_kv, const attn::KvRows& kv, size_t off, int64_t dims,
               float* out) {
  __m256 x[8];
  for (int l = 0; l < 8; ++l) {
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    int64_t p = l;
    for (; p + 24 < n_kv; p += 32) {  // four independent chains per step
      for (int c = 0; c < 4; ++c) {
        a[c] = _mm256_fmadd_ps(LoadV(kv, p + 8 * c, off, dims), _mm256_set1_ps(probs[p + 8 * c]),
                               a[c]);
      }
    }
    for (int c = 0; c < 3 && p + 8 * c < n_kv; ++c) {
      a[c] =
          _mm256_fmadd_ps(LoadV(kv, p + 8 * c, off, dims), _mm256_set1_ps(probs[p + 8 * c]), a[c]);
    }
    x[l] = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
  }
  const __m256 t0 = _mm256_add_ps(x[0], x[4]), t1 = _mm256_add_ps(x[1], x[5]);
  const __m256 t2 = _mm256_add_ps(x[2], x[6]), t3 = _mm256_add_ps(x[3], x[7]);
  const __m256 r = _mm256_add_ps(_mm256_add_ps(t0, t1), _mm256_add_ps(t2, t3));
  if (dims == 8) {
    _mm256_storeu_ps(out, r);
  } else {
    alignas(32) float t[8];
    _mm256_store_ps(t, r);
    for (int64_t i = 0; i < dims; ++i) out[i] = t[i];
  }
}

// One (query, head). one_token: llama.cpp's one-token step (vec_dot
// orders); otherwise its multi-token step (tinyBLAS where it applies).
void Attend(const float* qh, int64_t n_kv, int64_t g, const attn::KvRows& kv, float scale,
            float* scores, float* qr, float* out, bool one_token) {
  const int64_t hd = kv.head_dim;
  const size_t head_off = static_cast<size_t>(g * hd);
  // q in the cache's precision (qr is scratch).
  int64_t d = 0;
  for (; d + 8 <= hd; d += 8) {
    const __m256 v = _mm256_loadu_ps(qh + d);
    _mm256_storeu_ps(qr + d, kv.f16 ? RoundF16x8(v) : v);
  }
  if (d < hd) {
    alignas(32) float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = d; i < hd; ++i) t[i - d] = qh[i];
    __m256 v = _mm256_load_ps(t);
    _mm256_store_ps(t, kv.f16 ? RoundF16x8(v) : v);
    for (int64_t i = d; i < hd; ++i) qr[i] = t[i - d];
  }
  const Order kq =
      kv.f16 ? (!one_token && hd % 8 == 0 ? Order::kTiny : Order::kVecDotF16) : Order::kVecDotF32;
  const bool kqv_tiny = !one_token && hd % 4 == 0;
  // scores = dot * scale, 8 positions per vector reduction; the running max
  // as mx = s > mx ? s : mx (per lane, then across lanes: the same maximum).
  const __m256 vscale = _mm256_set1_ps(scale);
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  const bool leftovers = kq != Order::kTiny && hd % 32 != 0;
  int64_t p = 0;
  for (; p + 8 <= n_kv; p += 8) {
    __m256 v[8];
    if (kq == Order::kTiny) {
      // KqLanes' chains of the 8 positions side by side (the same fmas per
      // position): one chain at a time waited on each fma's latency.
      for (int i = 0; i < 8; ++i) v[i] = _mm256_setzero_ps();
      for (int64_t dd = 0; dd < hd; dd += 8) {
        const __m256 q8 = _mm256_loadu_ps(qr + dd);
        for (int i = 0; i < 8; ++i) {
          v[i] = _mm256_fmadd_ps(Load8(kv.k[p + i], kv.f16, head_off + static_cast<size_t>(dd)), q8,
                                 v[i]);
        }
      }
    } else {
      for (int i = 0; i < 8; ++i) v[i] = KqLanes(kq, qr, kv.k[p + i], kv.f16, head_off, hd);
    }
    __m256 sums = kq == Order::kTiny ? HsumTiny8(v) : HsumHadd8(v);
    if (leftovers) {
      alignas(32) float t[8];
      _mm256_store_ps(t, sums);
      for (int i = 0; i < 8; ++i)
        t[i] = KqLeftovers(kq, t[i], qr, kv.k[p + i], kv.f16, head_off, hd);
      sums = _mm256_load_ps(t);
    }
    const __m256 s = _mm256_mul_ps(sums, vscale);
    _mm256_storeu_ps(scores + p, s);
    vmax = _mm256_max_ps(s, vmax);
  }
  alignas(32) float m8[8];
  _mm256_store_ps(m8, vmax);
  float mx = m8[0];
  for (int i = 1; i < 8; ++i) mx = m8[i] > mx ? m8[i] : mx;
  for (; p < n_kv; ++p) {
    const __m256 lanes = KqLanes(kq, qr, kv.k[p], kv.f16, head_off, hd);
    const float dot = KqLeftovers(kq, kq == Order::kTiny ? HsumTiny(lanes) : HsumHadd(lanes), qr,
                                  kv.k[p], kv.f16, head_off, hd);
    const float s = dot * scale;
    scores[p] = s;
    mx = s > mx ? s : mx;
  }
  Softmax(scores, n_kv, mx, kv.f16);
  for (d = 0; d < hd; d += 8) {
    const int64_t dims = hd - d < 8 ? hd - d : 8;
    if (kqv_tiny) {
      KqvTiny(scores, n_kv, kv, head_off + static_cast<size_t>(d), dims, out + d);
    } else {
      KqvVecDot(scores, n_kv, kv, head_off + static_cast<size_t>(d), dims, out + d);
    }
  }
}

// A step of several query tokens (or any step with batch_invariant).
void AttendMulti(const float* qh, int64_t n_kv, int64_t g, const attn::KvRows& kv, float scale,
                 float* scores, float* acc, float* out) {
  Attend(qh, n_kv, g, kv, scale, scores, acc, out, false);
}

// A step of one query token.
void AttendOneToken(const float* qh, int64_t n_kv, int64_t g, const attn::KvRows& kv, float scale,
                    float* scores, float* acc, float* out) {
  Attend(qh, n_kv, g, kv, scale, scores, acc, out, true);
}

// ---- several query rows at once, AttendMulti's order ------------------------
// Rows r < R (query tokens and heads that read kv head g) share every K and V
// row load and f16 conversion; each row gets the instructions AttendMulti
// runs for it alone, on the same values in the same order (see
// attention_avx512.cpp's rows kernel: positions run to the rows' largest
// n_kv, and a row's probabilities past its own n_kv are 0, which leaves its
// accumulators as they were). For an f16 cache with head_dim % 8 == 0
// (tinyBLAS orders for q.k and the V sum); other caches and head sizes run
// AttendMulti per row.

// scores[r][p] = (q_r . k_p) * scale for p < n_max (q_r = qr + r * hd,
// rounded to f16): tinyBLAS's one 8-lane chain per (row, position), 8
// positions per HsumTiny8. scores: [R][n_max].
template <int R>
void RowScoresTiny(const float* qr, int64_t n_max, size_t head_off, const attn::KvRows& kv,
                   float scale, float* scores) {
  const int64_t hd = kv.head_dim;
  const __m256 vscale = _mm256_set1_ps(scale);
  for (int64_t p = 0; p < n_max; p += 8) {
    const int64_t count = n_max - p < 8 ? n_max - p : 8;
    __m256 lanes[R][8];
    for (int i = 0; i < 8; ++i) {
      __m256 a[R];
      for (int r = 0; r < R; ++r) a[r] = _mm256_setzero_ps();
      if (i < count) {
        const uint8_t* k_row = kv.k[p + i];
        for (int64_t d = 0; d < hd; d += 8) {
          const __m256 k = Load8(k_row, true, head_off + static_cast<size_t>(d));
          for (int r = 0; r < R; ++r) {
            a[r] = _mm256_fmadd_ps(k, _mm256_loadu_ps(qr + r * hd + d), a[r]);
          }
        }
      }
      for (int r = 0; r < R; ++r) lanes[r][i] = a[r];
    }
    for (int r = 0; r < R; ++r) {
      alignas(32) float t[8];
      _mm256_store_ps(t, _mm256_mul_ps(HsumTiny8(lanes[r]), vscale));
      for (int64_t i = 0; i < count; ++i) scores[r * n_max + p + i] = t[i];
    }
  }
}

// Attend's running maximum of scores[0 .. n): per lane over whole 8-position
// groups, across the lanes in order, then the tail one by one.
float RowMaxTiny(const float* scores, int64_t n) {
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  int64_t p = 0;
  for (; p + 8 <= n; p += 8) vmax = _mm256_max_ps(_mm256_loadu_ps(scores + p), vmax);
  alignas(32) float m8[8];
  _mm256_store_ps(m8, vmax);
  float mx = m8[0];
  for (int i = 1; i < 8; ++i) mx = m8[i] > mx ? m8[i] : mx;
  for (; p < n; ++p) mx = scores[p] > mx ? scores[p] : mx;
  return mx;
}

// out_r[d0 .. d0 + 8 C) = sum_p prob_r[p] * v[p][...] for p < n_max in
// KqvTiny's order: lane class p mod 8 per 8 dims, the classes of R rows x C
// chunks in registers, then KqvTiny's adds. probs: [R][n_max].
template <int R, int C>
void RowsKqvTiny(const float* probs, int64_t n_max, size_t off, const attn::KvRows& kv,
                 float* const* out, int64_t d0) {
  __m256 classes[R][C][8];
  for (int l = 0; l < 8; ++l) {
    __m256 a[R][C];
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) a[r][c] = _mm256_setzero_ps();
    }
    for (int64_t p = l; p < n_max; p += 8) {
      __m256 v[C];
      for (int c = 0; c < C; ++c) v[c] = Load8(kv.v[p], true, off + 8 * c);
      for (int r = 0; r < R; ++r) {
        const __m256 w = _mm256_set1_ps(probs[r * n_max + p]);
        for (int c = 0; c < C; ++c) a[r][c] = _mm256_fmadd_ps(v[c], w, a[r][c]);
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) classes[r][c][l] = a[r][c];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      const __m256* a = classes[r][c];
      const __m256 t0 = _mm256_add_ps(a[4], a[0]), t1 = _mm256_add_ps(a[5], a[1]);
      const __m256 t2 = _mm256_add_ps(a[6], a[2]), t3 = _mm256_add_ps(a[7], a[3]);
      _mm256_storeu_ps(out[r] + d0 + 8 * c,
                       _mm256_add_ps(_mm256_add_ps(t0, t2), _mm256_add_ps(t1, t3)));
    }
  }
}

// RowsKqvTiny<R, chunks> for chunks = 1..4 chunks of 8 dims.
template <int R>
void RowsKqvTinyChunks(int64_t chunks, const float* probs, int64_t n_max, size_t off,
                       const attn::KvRows& kv, float* const* out, int64_t d0) {
  switch (chunks) {
    case 1:
      RowsKqvTiny<R, 1>(probs, n_max, off, kv, out, d0);
      break;
    case 2:
      RowsKqvTiny<R, 2>(probs, n_max, off, kv, out, d0);
      break;
    case 3:
      RowsKqvTiny<R, 3>(probs, n_max, off, kv, out, d0);
      break;
    default:
      RowsKqvTiny<R, 4>(probs, n_max, off, kv, out, d0);
      break;
  }
}

// R rows (f16 cache, head_dim % 8 == 0): scores: R * max n_kv floats, qr:
// R * head_dim floats of scratch.
template <int R>
void AttendRowsTiny(const float* const* q, const int64_t* n_kv, float* const* out, int64_t g,
                    const attn::KvRows& kv, float scale, float* scores, float* qr) {
  const int64_t hd = kv.head_dim;
  const size_t head_off = static_cast<size_t>(g * hd);
  int64_t n_max = 0;
  for (int r = 0; r < R; ++r) n_max = n_kv[r] > n_max ? n_kv[r] : n_max;
  for (int r = 0; r < R; ++r) {
    for (int64_t d = 0; d < hd; d += 8) {
      _mm256_storeu_ps(qr + r * hd + d, RoundF16x8(_mm256_loadu_ps(q[r] + d)));
    }
  }
  RowScoresTiny<R>(qr, n_max, head_off, kv, scale, scores);
  for (int r = 0; r < R; ++r) {
    float* s = scores + r * n_max;
    Softmax(s, n_kv[r], RowMaxTiny(s, n_kv[r]), true);
    for (int64_t p = n_kv[r]; p < n_max; ++p) s[p] = 0.0f;
  }
  // Two rows x 4 chunks of 8 dims of accumulators (of 16 registers).
  for (int r0 = 0; r0 < R; r0 += 2) {
    const float* probs = scores + r0 * n_max;
    for (int64_t d0 = 0; d0 < hd; d0 += 32) {
      const int64_t chunks = hd - d0 >= 32 ? 4 : (hd - d0) / 8;
      const size_t off = head_off + static_cast<size_t>(d0);
      if (R - r0 == 1) {
        RowsKqvTinyChunks<1>(chunks, probs, n_max, off, kv, out + r0, d0);
      } else {
        RowsKqvTinyChunks<2>(chunks, probs, n_max, off, kv, out + r0, d0);
      }
    }
  }
}

// n rows, 4 at a time for the q.k pass.
void AttendRowsAvx2(const float* const* q, const int64_t* n_kv, float* const* out, int64_t n,
                    int64_t g, const attn::KvRows& kv, float scale, float* scores, float* qr) {
  if (!kv.f16 || kv.head_dim % 8 != 0) {
    for (int64_t i = 0; i < n; ++i) AttendMulti(q[i], n_kv[i], g, kv, scale, scores, qr, out[i]);
    return;
  }
  for (int64_t i = 0; i < n; i += 4) {
    switch (n - i < 4 ? n - i : 4) {
      case 1:
        AttendRowsTiny<1>(q + i, n_kv + i, out + i, g, kv, scale, scores, qr);
        break;
      case 2:
        AttendRowsTiny<2>(q + i, n_kv + i, out + i, g, kv, scale, scores, qr);
        break;
      case 3:
        AttendRowsTiny<3>(q + i, n_kv + i, out + i, g, kv, scale, scores, qr);
        break;
      default:
        AttendRowsTiny<4>(q + i, n_kv + i, out + i, g, kv, scale, scores, qr);
        break;
    }
  }
}

// ---- one query token, several heads of one kv head ---------------------------
// Heads that read kv head g (GQA), N (1..3) at a time: each head's output is
// what AttendOneToken computes for it alone (vec_dot orders for q.k and the
// V sum, the same instructions on the same values in the same order), but
// each K and V row is loaded and converted once for the N heads instead of
// once per head. head_dim % 32 == 0, so q.k has no vec_dot leftovers.
// q [N][head_dim], out [N][head_dim]; scores: N * n_kv floats, qr: N *
// head_dim floats of scratch. 3 heads' accumulators (12) and a row fill the
// 16 registers.
template <int N>
void AttendHeadsOneToken(const float* q, int64_t n_kv, int64_t g, const attn::KvRows& kv,
                         float scale, float* scores, float* qr, float* out) {
  const int64_t hd = kv.head_dim;
  const size_t head_off = static_cast<size_t>(g * hd);
  for (int64_t i = 0; i < N * hd; i += 8) {  // q in the cache's precision
    const __m256 v = _mm256_loadu_ps(q + i);
    _mm256_storeu_ps(qr + i, kv.f16 ? RoundF16x8(v) : v);
  }
  // K rows kKvPrefetchAhead positions ahead, V rows with their K rows
  // (attention_kernels.h).
  for (int64_t p = 0; p < n_kv && p < attn::kKvPrefetchAhead; ++p)
    attn::PrefetchHeadRow(kv, kv.k[p], g);
  // lanes[h] = KqLanes(kVecDot..., head h's q, k_p): four 8-lane
  // accumulators over 32-element steps, combined (0 + 2) + (1 + 3).
  auto lane_sums = [&](int64_t p, __m256* lanes) {
    if (p + attn::kKvPrefetchAhead < n_kv)
      attn::PrefetchHeadRow(kv, kv.k[p + attn::kKvPrefetchAhead], g);
    attn::PrefetchHeadRow(kv, kv.v[p], g);
    if (kv.next != nullptr) attn::StepNextRows(kv.next);
    const uint8_t* k_row = kv.k[p];
    __m256 a[N][4];
    for (int h = 0; h < N; ++h) {
      for (int j = 0; j < 4; ++j) a[h][j] = _mm256_setzero_ps();
    }
    for (int64_t d = 0; d < hd; d += 32) {
      for (int j = 0; j < 4; ++j) {
        const __m256 k = Load8(k_row, kv.f16, head_off + static_cast<size_t>(d + 8 * j));
        for (int h = 0; h < N; ++h) {
          a[h][j] = _mm256_fmadd_ps(k, _mm256_loadu_ps(qr + h * hd + d + 8 * j), a[h][j]);
        }
      }
    }
    for (int h = 0; h < N; ++h) {
      lanes[h] = _mm256_add_ps(_mm256_add_ps(a[h][0], a[h][2]), _mm256_add_ps(a[h][1], a[h][3]));
    }
  };
  // scores = dot * scale, 8 positions per HsumHadd8; the running max as
  // Attend keeps it (per lane, then lane by lane, then the tail).
  const __m256 vscale = _mm256_set1_ps(scale);
  __m256 vmax[N];
  for (int h = 0; h < N; ++h) vmax[h] = _mm256_set1_ps(-INFINITY);
  int64_t p = 0;
  for (; p + 8 <= n_kv; p += 8) {
    __m256 v[N][8], lanes[N];
    for (int i = 0; i < 8; ++i) {
      lane_sums(p + i, lanes);
      for (int h = 0; h < N; ++h) v[h][i] = lanes[h];
    }
    for (int h = 0; h < N; ++h) {
      const __m256 s = _mm256_mul_ps(HsumHadd8(v[h]), vscale);
      _mm256_storeu_ps(scores + h * n_kv + p, s);
      vmax[h] = _mm256_max_ps(s, vmax[h]);
    }
  }
  float mx[N];
  for (int h = 0; h < N; ++h) {
    alignas(32) float m8[8];
    _mm256_store_ps(m8, vmax[h]);
    mx[h] = m8[0];
    for (int i = 1; i < 8; ++i) mx[h] = m8[i] > mx[h] ? m8[i] : mx[h];
  }
  for (; p < n_kv; ++p) {
    __m256 lanes[N];
    lane_sums(p, lanes);
    for (int h = 0; h < N; ++h) {
      const float s = HsumHadd(lanes[h]) * scale;
      scores[h * n_kv + p] = s;
      mx[h] = s > mx[h] ? s : mx[h];
    }
  }
  for (int h = 0; h < N; ++h) Softmax(scores + h * n_kv, n_kv, mx[h], kv.f16);
  // KqvVecDot per head and 8 dims: lane class p mod 32 (accumulator
  // (p mod 32) / 8, lane p mod 8), each V row converted once for N heads.
  for (int64_t d = 0; d < hd; d += 8) {
    const size_t off = head_off + static_cast<size_t>(d);
    __m256 x[N][8];
    for (int l = 0; l < 8; ++l) {
      __m256 a[N][4];
      for (int h = 0; h < N; ++h) {
        for (int c = 0; c < 4; ++c) a[h][c] = _mm256_setzero_ps();
      }
      auto add = [&](int64_t p, int c) {
        const __m256 v = Load8(kv.v[p], kv.f16, off);
        for (int h = 0; h < N; ++h) {
          a[h][c] = _mm256_fmadd_ps(v, _mm256_set1_ps(scores[h * n_kv + p]), a[h][c]);
        }
      };
      int64_t p = l;
      for (; p + 24 < n_kv; p += 32) {  // four independent chains per step
        add(p, 0);
        add(p + 8, 1);
        add(p + 16, 2);
        add(p + 24, 3);
      }
      for (int c = 0; c < 3 && p + 8 * c < n_kv; ++c) add(p + 8 * c, c);
      for (int h = 0; h < N; ++h) {
        x[h][l] = _mm256_add_ps(_mm256_add_ps(a[h][0], a[h][2]), _mm256_add_ps(a[h][1], a[h][3]));
      }
    }
    for (int h = 0; h < N; ++h) {
      const __m256 t0 = _mm256_add_ps(x[h][0], x[h][4]), t1 = _mm256_add_ps(x[h][1], x[h][5]);
      const __m256 t2 = _mm256_add_ps(x[h][2], x[h][6]), t3 = _mm256_add_ps(x[h][3], x[h][7]);
      _mm256_storeu_ps(out + h * hd + d,
                       _mm256_add_ps(_mm256_add_ps(t0, t1), _mm256_add_ps(t2, t3)));
    }
  }
}

// n heads sharing kv head g, in passes of up to 3 (4 as 2 + 2).
void AttendHeadsOneTokenAvx2(const float* q, int64_t n, int64_t n_kv, int64_t g,
                             const attn::KvRows& kv, float scale, float* scores, float* qr,
                             float* out) {
  const int64_t hd = kv.head_dim;
  for (int64_t h = 0; h < n;) {
    const int64_t left = n - h;
    const int64_t take = left == 4 ? 2 : (left < 3 ? left : 3);
    const int64_t at = h * hd;
    float* s = scores + h * n_kv;
    switch (take) {
      case 1:
        AttendHeadsOneToken<1>(q + at, n_kv, g, kv, scale, s, qr, out + at);
        break;
      case 2:
        AttendHeadsOneToken<2>(q + at, n_kv, g, kv, scale, s, qr, out + at);
        break;
      default:
        AttendHeadsOneToken<3>(q + at, n_kv, g, kv, scale, s, qr, out + at);
        break;
    }
    h += take;
  }
}

}  // namespace

namespace attn {
AttendFn Avx2Attend() { return &AttendMulti; }
AttendRowsFn Avx2AttendRows() { return &AttendRowsAvx2; }
AttendFn Avx2AttendOneToken() { return &AttendOneToken; }
AttendHeadsFn Avx2AttendOneTokenHeads() { return &AttendHeadsOneTokenAvx2; }
}  // namespace attn
}  // namespace llm
