// AVX-512 inner loop of Attention (compiled with the AVX-512 flags; used when
// ActiveSimdLevel() == kAvx512 and head_dim % 16 == 0). It reproduces, bit for
// bit, what llama.cpp's default (non-flash) attention computes on an AVX-512
// CPU, because on sensitive models (SmolLM2) a 1-ulp difference in the
// attention output flips 8-bit activation roundings in the next matmul and
// moves the logits by ~0.2 (tools/exact_forward.py):
//   kq  = mul_mat(k, q), q converted to the cache type first (f16: nearest
//         even). For a multi-token batch (n_q >= 2) ggml runs llamafile's
//         tinyBLAS<16, __m512>: one 16-lane FMA accumulator over head_dim,
//         then _mm512_reduce_add_ps. For one token (llamafile_sgemm refuses
//         n < 2) it runs ggml_vec_dot_f16/_f32: four 16-lane accumulators over
//         64-element steps, summed (0+2) + (1+3), then _mm512_reduce_add_ps.
//         With an f32 cache ggml uses vec_dot_f32 for kq at any token count
//         (q needs no conversion, and its permuted view is not contiguous,
//         so neither llamafile attempt applies).
//   softmax (ggml_compute_forward_soft_max_f32 / ggml_vec_soft_max_f32):
//         s = kq * scale, e = ggml_v_expf(s - max) 16 lanes at a time, the
//         sum over positions in double of each 16-group's f32
//         _mm512_reduce_add_ps, probabilities e * (float)(1 / sum).
//   kqv = mul_mat(v^T, probs): probabilities converted to the cache type
//         (f16: nearest even). Multi-token: tinyBLAS, lane class p mod 16;
//         one token: vec_dot, lane class p mod 64 reduced as above.
// So llama.cpp's own results depend on whether a token was decoded alone or
// in a batch; this kernel follows it (the caller passes which), and is
// therefore not prefill/decode invariant, unlike the AVX2 and scalar ones --
// unless Attention's batch_invariant picks the multi-token variant always.
// Positions past n_kv (llama.cpp pads the cache view) would only add exact
// zeros, so they are not needed. The lane-wise reductions are emulated with
// one register per lane class, so the same bits come out for every d.
// No std:: templates or shared inline helpers here (ISA-flagged code).
// GCC 12 flags its own _mm512_undefined_*() placeholders in the AVX-512
// intrinsic headers as uninitialized (false positive): silenced for this file.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <math.h>

#include "backend/cpu/attention_kernels.h"

namespace llm {
namespace {

#include "backend/cpu/ggml_expf_avx512.inc"

inline __m512 Load16(const void* base, bool f16, size_t off) {
  if (f16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + off)));
  }
  return _mm512_loadu_ps(static_cast<const float*>(base) + off);
}

inline __m512 RoundF16x16(__m512 x) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// _mm512_reduce_add_ps's order (GCC's avx512fintrin.h) applied element-wise to
// 16 registers holding lane classes 0..15: halves, quarters, then pairs.
inline __m512 ReduceLaneClasses(const __m512* a) {
  __m512 t3[8], t6[4];
  for (int j = 0; j < 8; ++j) t3[j] = _mm512_add_ps(a[8 + j], a[j]);
  for (int m = 0; m < 4; ++m) t6[m] = _mm512_add_ps(t3[4 + m], t3[m]);
  return _mm512_add_ps(_mm512_add_ps(t6[0], t6[2]), _mm512_add_ps(t6[1], t6[3]));
}

// Lane i = _mm512_reduce_add_ps(v[i]) for 16 registers at once, with the
// same adds: GCC's reduce (avx512fintrin.h) sums lanes i + (i + 8), then
// i + (i + 4), then i + (i + 2), then 0 + 1; here each step combines two
// registers' partial sums per instruction (15 adds for 16 reductions
// instead of 64).
inline __m512 ReduceAdd16(const __m512* v) {
  __m512 t[8], u[4], w[2];
  // t[k]: 256-bit halves [v[2k] lo + hi | v[2k+1] lo + hi] (8 lanes each)
  for (int k = 0; k < 8; ++k) {
    t[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // u[m], 128-bit group c: the 4-lane sum of v[4m + c]
  for (int m = 0; m < 4; ++m) {
    u[m] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * m], t[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(t[2 * m], t[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // w[n], group c: lanes 0-1 from v[8n + c], lanes 2-3 from v[8n + 4 + c]
  for (int n = 0; n < 2; ++n) {
    w[n] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * n], u[2 * n + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(u[2 * n], u[2 * n + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // group c, lane j: the sum of v[4j + c]; permuted to lane 4j + c
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  return _mm512_permutexvar_ps(order, r);
}

// scores [n_kv] (s = q.k * scale, max mx) -> probabilities as ggml's
// soft_max computes them: e = ggml_v_expf(s - mx) 16 positions at a time
// (masked lanes: exp(-inf) = 0), the f32 group sums accumulated in double,
// e * (float)(1 / sum), rounded to f16 for an f16 cache.
void Softmax(float* scores, int64_t n_kv, float mx, bool f16) {
  const __m512 vmx = _mm512_set1_ps(mx);
  double sum = 0.0;
  for (int64_t p = 0; p < n_kv; p += 16) {
    const int64_t left = n_kv - p;
    const __mmask16 m =
        left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
    const __m512 x = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, scores + p);
    const __m512 e = ExpF(_mm512_sub_ps(x, vmx));
    _mm512_mask_storeu_ps(scores + p, m, e);
    sum += static_cast<double>(_mm512_reduce_add_ps(e));
  }
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / sum));
  for (int64_t p = 0; p < n_kv; p += 16) {
    const int64_t left = n_kv - p;
    const __mmask16 m =
        left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
    __m512 pr = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, scores + p), inv);
    if (f16) pr = RoundF16x16(pr);
    _mm512_mask_storeu_ps(scores + p, m, pr);
  }
}

// A step of several query tokens, one (query, head) per call: tinyBLAS's
// kq (or vec_dot's with an f32 cache), kqv lane class p mod 16.
void AttendAvx512(const float* qh, int64_t n_kv, int64_t g, const attn::KvRows& kv, float scale,
                  float* scores, float* acc, float* out) {
  const int64_t hd = kv.head_dim;  // multiple of 16 (checked by the caller)
  const size_t head_off = static_cast<size_t>(g * hd);
  // q in the cache's precision (acc is scratch until the V pass).
  for (int64_t d = 0; d < hd; d += 16) {
    const __m512 v = _mm512_loadu_ps(qh + d);
    _mm512_storeu_ps(acc + d, kv.f16 ? RoundF16x16(v) : v);
  }
  // ggml_vec_dot order for kq with an f32 cache (q is not contiguous and
  // already of the vec_dot type, so ggml skips llamafile there). Needs
  // hd % 64 == 0; otherwise the tinyBLAS order is used.
  const bool vec_dot_kq = hd % 64 == 0 && !kv.f16;
  // The 16 lanes whose _mm512_reduce_add_ps is position p's q.k: vec_dot's
  // four accumulators combined (0 + 2) + (1 + 3), or tinyBLAS's one.
  auto lane_sums = [&](int64_t p) {
    const uint8_t* k_row = kv.k[p];
    if (vec_dot_kq) {
      __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
      for (int64_t d = 0; d < hd; d += 64)
        for (int j = 0; j < 4; ++j)
          a[j] = _mm512_fmadd_ps(Load16(k_row, kv.f16, head_off + d + 16 * j),
                                 _mm512_loadu_ps(acc + d + 16 * j), a[j]);
      return _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3]));
    }
    __m512 a = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; d += 16)
      a = _mm512_fmadd_ps(Load16(k_row, kv.f16, head_off + d), _mm512_loadu_ps(acc + d), a);
    return a;
  };
  // scores = dot * scale, 16 positions per reduction; the running max as
  // mx = s > mx ? s : mx (per lane, then across lanes: the same maximum).
  const __m512 vscale = _mm512_set1_ps(scale);
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  int64_t p = 0;
  for (; p + 16 <= n_kv; p += 16) {
    __m512 v[16];
    for (int i = 0; i < 16; ++i) v[i] = lane_sums(p + i);
    const __m512 s = _mm512_mul_ps(ReduceAdd16(v), vscale);
    _mm512_storeu_ps(scores + p, s);
    vmax = _mm512_max_ps(s, vmax);
  }
  float mx = _mm512_reduce_max_ps(vmax);
  for (; p < n_kv; ++p) {
    const float s = _mm512_reduce_add_ps(lane_sums(p)) * scale;
    scores[p] = s;
    mx = s > mx ? s : mx;
  }
  Softmax(scores, n_kv, mx, kv.f16);
  // out[d] = sum_p prob[p] * v[p][d], lane class p % 16, 16 dims at a time.
  for (int64_t d = 0; d < hd; d += 16) {
    __m512 a[16];
    for (int l = 0; l < 16; ++l) a[l] = _mm512_setzero_ps();
    const size_t off = head_off + d;
    int64_t p = 0;
    for (; p + 16 <= n_kv; p += 16) {
      for (int l = 0; l < 16; ++l)
        a[l] =
            _mm512_fmadd_ps(Load16(kv.v[p + l], kv.f16, off), _mm512_set1_ps(scores[p + l]), a[l]);
    }
    for (int l = 0; p + l < n_kv; ++l)
      a[l] = _mm512_fmadd_ps(Load16(kv.v[p + l], kv.f16, off), _mm512_set1_ps(scores[p + l]), a[l]);
    _mm512_storeu_ps(out + d, ReduceLaneClasses(a));
  }
}

// ---- several query rows at once, AttendAvx512's order ----------------------
// Rows r < R (query tokens and heads that read kv head g) share every K and V
// row load and f16 conversion: each row's scores, probabilities and output
// are the instructions AttendAvx512 runs for it alone, on the same values in
// the same order. Positions run to the rows' largest n_kv; a row's scores
// past its own n_kv are computed and then dropped (probability 0). Adding
// 0 * v to an accumulator leaves it as it was: accumulators start at +0 and
// every product of an f16 probability and an f16 value is 0 or at least
// 2^-48 in magnitude, so none becomes -0.

// scores[r][p] = (q_r . k_p) * scale for p < n_max, q_r = qr + r * hd
// (already in the cache's precision): per (row, position) the 16 lanes
// AttendAvx512 sums (tinyBLAS's one accumulator over head_dim, or vec_dot's
// four), reduced 16 positions at a time. scores: [R][n_max].
template <int R>
void RowScores(const float* qr, int64_t n_max, int64_t g, const attn::KvRows& kv, float scale,
               float* scores) {
  const int64_t hd = kv.head_dim;
  const size_t head_off = static_cast<size_t>(g * hd);
  const __m512 vscale = _mm512_set1_ps(scale);
  // AttendAvx512's vec_dot order for an f32 cache (four accumulators over
  // 64-element steps, summed (0 + 2) + (1 + 3)).
  const bool vec_dot_kq = hd % 64 == 0 && !kv.f16;
  for (int64_t p = 0; p < n_max; p += 16) {
    const int64_t count = n_max - p < 16 ? n_max - p : 16;
    __m512 lanes[R][16];
    for (int i = 0; i < 16; ++i) {
      __m512 a[R];
      for (int r = 0; r < R; ++r) a[r] = _mm512_setzero_ps();
      if (i < count && vec_dot_kq) {
        __m512 b[R][4];
        for (int r = 0; r < R; ++r) {
          for (int j = 0; j < 4; ++j) b[r][j] = _mm512_setzero_ps();
        }
        const uint8_t* k_row = kv.k[p + i];
        for (int64_t d = 0; d < hd; d += 64) {
          for (int j = 0; j < 4; ++j) {
            const __m512 k = Load16(k_row, false, head_off + d + 16 * j);
            for (int r = 0; r < R; ++r) {
              b[r][j] = _mm512_fmadd_ps(k, _mm512_loadu_ps(qr + r * hd + d + 16 * j), b[r][j]);
            }
          }
        }
        for (int r = 0; r < R; ++r) {
          a[r] = _mm512_add_ps(_mm512_add_ps(b[r][0], b[r][2]), _mm512_add_ps(b[r][1], b[r][3]));
        }
      } else if (i < count) {
        const uint8_t* k_row = kv.k[p + i];
        for (int64_t d = 0; d < hd; d += 16) {
          const __m512 k = Load16(k_row, kv.f16, head_off + d);
          for (int r = 0; r < R; ++r)
            a[r] = _mm512_fmadd_ps(k, _mm512_loadu_ps(qr + r * hd + d), a[r]);
        }
      }
      for (int r = 0; r < R; ++r) lanes[r][i] = a[r];
    }
    const __mmask16 m =
        count == 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
    for (int r = 0; r < R; ++r) {
      _mm512_mask_storeu_ps(scores + r * n_max + p, m,
                            _mm512_mul_ps(ReduceAdd16(lanes[r]), vscale));
    }
  }
}

// AttendAvx512's running maximum of scores[0 .. n): per lane over whole
// 16-position groups, across the lanes, then the tail one by one.
float RowMax(const float* scores, int64_t n) {
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  int64_t p = 0;
  for (; p + 16 <= n; p += 16) vmax = _mm512_max_ps(_mm512_loadu_ps(scores + p), vmax);
  float mx = _mm512_reduce_max_ps(vmax);
  for (; p < n; ++p) mx = scores[p] > mx ? scores[p] : mx;
  return mx;
}

// out_r[d0 .. d0 + 16 C) = sum_p prob_r[p] * v[p][...] for p < n_max, lane
// class p mod 16 per 16 dims (AttendAvx512's V pass): class l of every row
// and chunk in registers (R * C accumulators), then ReduceLaneClasses over
// the 16 classes. probs: [R][n_max].
template <int R, int C>
void RowsWeightedV(const float* probs, int64_t n_max, size_t off, const attn::KvRows& kv,
                   float* const* out, int64_t d0) {
  __m512 classes[R][C][16];
  for (int l = 0; l < 16; ++l) {
    __m512 a[R][C];
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) a[r][c] = _mm512_setzero_ps();
    }
    for (int64_t p = l; p < n_max; p += 16) {
      __m512 v[C];
      for (int c = 0; c < C; ++c) v[c] = Load16(kv.v[p], kv.f16, off + 16 * c);
      for (int r = 0; r < R; ++r) {
        const __m512 w = _mm512_set1_ps(probs[r * n_max + p]);
        for (int c = 0; c < C; ++c) a[r][c] = _mm512_fmadd_ps(v[c], w, a[r][c]);
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) classes[r][c][l] = a[r][c];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c)
      _mm512_storeu_ps(out[r] + d0 + 16 * c, ReduceLaneClasses(classes[r][c]));
  }
}

// R rows: q[r] [head_dim] -> out[r] [head_dim] over positions 0 .. n_kv[r]-1.
// scores: R * max n_kv floats, qr: R * head_dim floats of scratch.
template <int R>
void AttendRows(const float* const* q, const int64_t* n_kv, float* const* out, int64_t g,
                const attn::KvRows& kv, float scale, float* scores, float* qr) {
  const int64_t hd = kv.head_dim;
  int64_t n_max = 0;
  for (int r = 0; r < R; ++r) n_max = n_kv[r] > n_max ? n_kv[r] : n_max;
  for (int r = 0; r < R; ++r) {
    for (int64_t d = 0; d < hd; d += 16) {
      const __m512 v = _mm512_loadu_ps(q[r] + d);
      _mm512_storeu_ps(qr + r * hd + d, kv.f16 ? RoundF16x16(v) : v);
    }
  }
  RowScores<R>(qr, n_max, g, kv, scale, scores);
  for (int r = 0; r < R; ++r) {
    float* s = scores + r * n_max;
    Softmax(s, n_kv[r], RowMax(s, n_kv[r]), kv.f16);
    for (int64_t p = n_kv[r]; p < n_max; ++p) s[p] = 0.0f;
  }
  const size_t head_off = static_cast<size_t>(g * hd);
  for (int64_t d0 = 0; d0 < hd; d0 += 64) {
    switch (hd - d0 >= 64 ? 4 : (hd - d0) / 16) {
      case 1:
        RowsWeightedV<R, 1>(scores, n_max, head_off + d0, kv, out, d0);
        break;
      case 2:
        RowsWeightedV<R, 2>(scores, n_max, head_off + d0, kv, out, d0);
        break;
      case 3:
        RowsWeightedV<R, 3>(scores, n_max, head_off + d0, kv, out, d0);
        break;
      default:
        RowsWeightedV<R, 4>(scores, n_max, head_off + d0, kv, out, d0);
        break;
    }
  }
}

// n rows, 4 at a time (4 rows x 4 chunks of accumulators fill the registers).
void AttendRowsAvx512(const float* const* q, const int64_t* n_kv, float* const* out, int64_t n,
                      int64_t g, const attn::KvRows& kv, float scale, float* scores, float* qr) {
  for (int64_t i = 0; i < n; i += 4) {
    switch (n - i < 4 ? n - i : 4) {
      case 1:
        AttendRows<1>(q + i, n_kv + i, out + i, g, kv, scale, scores, qr);
        break;
      case 2:
        AttendRows<2>(q + i, n_kv + i, out + i, g, kv, scale, scores, qr);
        break;
      case 3:
        AttendRows<3>(q + i, n_kv + i, out + i, g, kv, scale, scores, qr);
        break;
      default:
        AttendRows<4>(q + i, n_kv + i, out + i, g, kv, scale, scores, qr);
        break;
    }
  }
}

// One query token, heads that share kv head g (GQA), N (1..4) at a time:
// each head's output is what the one-token per-head kernel computes (the
// same instructions on the same values, in the same order), but each K and
// V row is loaded and converted once for the N heads instead of once per
// head. q [N][head_dim], out [N][head_dim]; scores: N * n_kv floats, qr:
// N * head_dim floats of scratch. head_dim % 64 == 0.
// kq in ggml_vec_dot's order: four 16-lane accumulators over 64-element
// steps, summed (0 + 2) + (1 + 3), then _mm512_reduce_add_ps (ReduceAdd16
// for 16 positions at once). kqv in vec_dot's order too: lane class p mod
// 64 (see the V pass below).
template <int N>
void AttendHeadsOneToken(const float* q, int64_t n_kv, int64_t g, const attn::KvRows& kv,
                         float scale, float* scores, float* qr, float* out) {
  const int64_t hd = kv.head_dim;
  const size_t head_off = static_cast<size_t>(g * hd);
  // q in the cache's precision.
  for (int64_t i = 0; i < N * hd; i += 16) {
    const __m512 v = _mm512_loadu_ps(q + i);
    _mm512_storeu_ps(qr + i, kv.f16 ? RoundF16x16(v) : v);
  }
  // K rows kKvPrefetchAhead positions ahead, V rows with their K rows
  // (attention_kernels.h).
  for (int64_t p = 0; p < n_kv && p < attn::kKvPrefetchAhead; ++p)
    attn::PrefetchHeadRow(kv, kv.k[p], g);
  // lanes[h]: the 16 lanes whose _mm512_reduce_add_ps is head h's q.k at
  // position p.
  auto lane_sums = [&](int64_t p, __m512* lanes) {
    if (p + attn::kKvPrefetchAhead < n_kv)
      attn::PrefetchHeadRow(kv, kv.k[p + attn::kKvPrefetchAhead], g);
    attn::PrefetchHeadRow(kv, kv.v[p], g);
    if (kv.next != nullptr) attn::StepNextRows(kv.next);
    const uint8_t* k_row = kv.k[p];
    __m512 a[N][4];
    for (int h = 0; h < N; ++h) {
      for (int j = 0; j < 4; ++j) a[h][j] = _mm512_setzero_ps();
    }
    for (int64_t d = 0; d < hd; d += 64) {
      __m512 k[4];
      for (int j = 0; j < 4; ++j) k[j] = Load16(k_row, kv.f16, head_off + d + 16 * j);
      for (int h = 0; h < N; ++h) {
        for (int j = 0; j < 4; ++j) {
          a[h][j] = _mm512_fmadd_ps(k[j], _mm512_loadu_ps(qr + h * hd + d + 16 * j), a[h][j]);
        }
      }
    }
    for (int h = 0; h < N; ++h) {
      lanes[h] = _mm512_add_ps(_mm512_add_ps(a[h][0], a[h][2]), _mm512_add_ps(a[h][1], a[h][3]));
    }
  };
  // scores = dot * scale, 16 positions per reduction; the running max as
  // mx = s > mx ? s : mx (per lane, then across lanes: the same maximum).
  const __m512 vscale = _mm512_set1_ps(scale);
  __m512 vmax[N];
  for (int h = 0; h < N; ++h) vmax[h] = _mm512_set1_ps(-INFINITY);
  int64_t p = 0;
  for (; p + 16 <= n_kv; p += 16) {
    __m512 v[N][16], lanes[N];
    for (int i = 0; i < 16; ++i) {
      lane_sums(p + i, lanes);
      for (int h = 0; h < N; ++h) v[h][i] = lanes[h];
    }
    for (int h = 0; h < N; ++h) {
      const __m512 s = _mm512_mul_ps(ReduceAdd16(v[h]), vscale);
      _mm512_storeu_ps(scores + h * n_kv + p, s);
      vmax[h] = _mm512_max_ps(s, vmax[h]);
    }
  }
  float mx[N];
  for (int h = 0; h < N; ++h) mx[h] = _mm512_reduce_max_ps(vmax[h]);
  for (; p < n_kv; ++p) {
    __m512 lanes[N];
    lane_sums(p, lanes);
    for (int h = 0; h < N; ++h) {
      const float s = _mm512_reduce_add_ps(lanes[h]) * scale;
      scores[h * n_kv + p] = s;
      mx[h] = s > mx[h] ? s : mx[h];
    }
  }
  for (int h = 0; h < N; ++h) Softmax(scores + h * n_kv, n_kv, mx[h], kv.f16);
  // out[d] = sum_p prob[p] * v[p][d] in ggml_vec_dot_f16/_f32's order
  // (AVX-512): accumulator j, lane l sums positions p = 16j + l, + 64, +
  // 128, ... in order (lane class p mod 64); the accumulators combine as
  // (acc0 + acc2) + (acc1 + acc3) per lane, then the 16 lanes as
  // _mm512_reduce_add_ps. Element-wise over 16 dims: the four classes of
  // lane l in registers, combined into x[l] at once, then
  // ReduceLaneClasses(x) -- the same fmas and adds in the same order as 64
  // class accumulators, without keeping 64 registers in memory.
  for (int64_t d = 0; d < hd; d += 16) {
    const size_t off = head_off + d;
    __m512 x[N][16];
    for (int l = 0; l < 16; ++l) {
      __m512 a[N][4];
      for (int h = 0; h < N; ++h) {
        for (int c = 0; c < 4; ++c) a[h][c] = _mm512_setzero_ps();
      }
      // a[h][c] = fma(v[p] (16 dims), prob_h[p], a[h][c]) for every head
      auto add = [&](int64_t p, int c) {
        const __m512 v = Load16(kv.v[p], kv.f16, off);
        for (int h = 0; h < N; ++h) {
          a[h][c] = _mm512_fmadd_ps(v, _mm512_set1_ps(scores[h * n_kv + p]), a[h][c]);
        }
      };
      int64_t p = l;
      for (; p + 48 < n_kv; p += 64) {  // four independent chains per step
        add(p, 0);
        add(p + 16, 1);
        add(p + 32, 2);
        add(p + 48, 3);
      }
      if (p < n_kv) add(p, 0);
      if (p + 16 < n_kv) add(p + 16, 1);
      if (p + 32 < n_kv) add(p + 32, 2);
      for (int h = 0; h < N; ++h) {
        x[h][l] = _mm512_add_ps(_mm512_add_ps(a[h][0], a[h][2]), _mm512_add_ps(a[h][1], a[h][3]));
      }
    }
    for (int h = 0; h < N; ++h) _mm512_storeu_ps(out + h * hd + d, ReduceLaneClasses(x[h]));
  }
}

// n heads sharing kv head g, up to 4 per pass over K and V (the accumulators
// of 4 heads fill the registers).
void AttendHeadsOneTokenAvx512(const float* q, int64_t n, int64_t n_kv, int64_t g,
                               const attn::KvRows& kv, float scale, float* scores, float* qr,
                               float* out) {
  const int64_t hd = kv.head_dim;
  for (int64_t h = 0; h < n; h += 4) {
    const int64_t at = h * hd;
    float* s = scores + h * n_kv;
    switch (n - h < 4 ? n - h : 4) {
      case 1:
        AttendHeadsOneToken<1>(q + at, n_kv, g, kv, scale, s, qr, out + at);
        break;
      case 2:
        AttendHeadsOneToken<2>(q + at, n_kv, g, kv, scale, s, qr, out + at);
        break;
      case 3:
        AttendHeadsOneToken<3>(q + at, n_kv, g, kv, scale, s, qr, out + at);
        break;
      default:
        AttendHeadsOneToken<4>(q + at, n_kv, g, kv, scale, s, qr, out + at);
        break;
    }
  }
}

}  // namespace

namespace attn {
AttendFn Avx512Attend() { return &AttendAvx512; }
AttendRowsFn Avx512AttendRows() { return &AttendRowsAvx512; }
AttendHeadsFn Avx512AttendOneTokenHeads() { return &AttendHeadsOneTokenAvx512; }
}  // namespace attn
}  // namespace llm

#pragma GCC diagnostic pop
