// AVX2 + FMA + F16C inner loop of Attention (compiled with those flags; used
// when ActiveSimdLevel() >= kAvx2). f16 KV is converted with vcvtph2ps.
// No std:: templates or shared inline helpers here: an ISA-flagged copy of
// an inline function could be picked by the linker for the whole program.
#include <immintrin.h>
#include <math.h>

#include "backend/cpu/attention_kernels.h"

namespace llm {
namespace {

inline __m256 Load8(const void* base, bool f16, size_t off) {
  if (f16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + off)));
  }
  return _mm256_loadu_ps(static_cast<const float*>(base) + off);
}

inline float Load1(const void* base, bool f16, size_t off) {
  return f16 ? _cvtsh_ss(static_cast<const uint16_t*>(base)[off])
             : static_cast<const float*>(base)[off];
}

inline float HSum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// q . k over n: two 8-lane FMA chains, then the tail with scalar FMAs.
inline float Dot(const float* q, const void* k, bool f16, size_t off, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), Load8(k, f16, off + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), Load8(k, f16, off + i + 8), a1);
  }
  if (i + 8 <= n) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), Load8(k, f16, off + i), a0);
    i += 8;
  }
  __m128 s = _mm_set_ss(HSum256(_mm256_add_ps(a0, a1)));
  for (; i < n; ++i) s = _mm_fmadd_ss(_mm_set_ss(q[i]), _mm_set_ss(Load1(k, f16, off + i)), s);
  return _mm_cvtss_f32(s);
}

// exp(x) for x <= 0 on 8 lanes (Cephes expf polynomial, ~2 ulp): x = n ln2
// + r, |r| <= ln2/2, exp(x) = 2^n * P(r). Below -87.3 (where expf
// underflows to subnormals) the result is 0 -- those softmax weights are
// < 1e-37 of the largest one.
inline __m256 ExpNonPositive(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3f);
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_max_ps(x, lo);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

// acc[0..8*N) += w * v[off .. off+8N) for every position, N vectors kept in
// registers; per element the same FMA chain over p as the generic loop.
template <int N>
inline void AccumulateV(const float* scores, int64_t n_kv, const attn::KvRows& kv, size_t off,
                        float* acc) {
  __m256 a[N];
  for (int j = 0; j < N; ++j) a[j] = _mm256_loadu_ps(acc + 8 * j);
  for (int64_t p = 0; p < n_kv; ++p) {
    const __m256 w = _mm256_set1_ps(scores[p]);
    for (int j = 0; j < N; ++j)
      a[j] = _mm256_fmadd_ps(w, Load8(kv.v[p], kv.f16, off + 8 * j), a[j]);
  }
  for (int j = 0; j < N; ++j) _mm256_storeu_ps(acc + 8 * j, a[j]);
}

// f32 -> nearest-even f16 -> f32 on 8 lanes.
inline __m256 RoundF16x8(__m256 x) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline float RoundF16x1(float x) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT)));
}

// Same arithmetic contract as the scalar AttendOne (attention.cpp): with an
// f16 cache, q and the normalized probabilities are rounded to f16 as
// ggml-cpu's non-flash attention does.
void AttendAvx2(const float* qh, int64_t n_kv, int64_t g, const attn::KvRows& kv, float scale,
                float* scores, float* acc, float* out) {
  const int64_t hd = kv.head_dim;
  const size_t head_off = static_cast<size_t>(g * hd);
  if (kv.f16) {  // acc holds the f16-rounded query until the V pass
    int64_t d = 0;
    for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(acc + d, RoundF16x8(_mm256_loadu_ps(qh + d)));
    for (; d < hd; ++d) acc[d] = RoundF16x1(qh[d]);
    qh = acc;
  }
  float mx = -INFINITY;
  for (int64_t p = 0; p < n_kv; ++p) {
    const float s = Dot(qh, kv.k[p], kv.f16, head_off, hd) * scale;
    scores[p] = s;
    mx = s > mx ? s : mx;
  }
  // exp(s - max), summed in double: two 4-lane accumulators, fixed order.
  const __m256 vmx = _mm256_set1_ps(mx);
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int64_t p = 0;
  for (; p + 8 <= n_kv; p += 8) {
    const __m256 e = ExpNonPositive(_mm256_sub_ps(_mm256_loadu_ps(scores + p), vmx));
    _mm256_storeu_ps(scores + p, e);
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  if (p < n_kv) {  // tail: masked lanes are exp(-inf - ...) -> excluded
    float tmp[8];
    for (int j = 0; j < 8; ++j) tmp[j] = p + j < n_kv ? scores[p + j] - mx : -INFINITY;
    const __m256 e = ExpNonPositive(_mm256_loadu_ps(tmp));
    _mm256_storeu_ps(tmp, e);
    for (int j = 0; p + j < n_kv; ++j) scores[p + j] = tmp[j];
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  __m256d sd = _mm256_add_pd(s0, s1);
  __m128d sh = _mm_add_pd(_mm256_castpd256_pd128(sd), _mm256_extractf128_pd(sd, 1));
  const double sum = _mm_cvtsd_f64(_mm_add_sd(sh, _mm_unpackhi_pd(sh, sh)));
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  if (kv.f16) {  // probabilities exp * (float)(1/sum), rounded to f16
    p = 0;
    for (; p + 8 <= n_kv; p += 8)
      _mm256_storeu_ps(scores + p, RoundF16x8(_mm256_mul_ps(_mm256_loadu_ps(scores + p), inv)));
    for (; p < n_kv; ++p)
      scores[p] = RoundF16x1(_mm_cvtss_f32(
          _mm_mul_ss(_mm_set_ss(scores[p]), _mm256_castps256_ps128(inv))));
  }

  for (int64_t d = 0; d < hd; ++d) acc[d] = 0.0f;
  int64_t d = 0;
  for (; d + 64 <= hd; d += 64) AccumulateV<8>(scores, n_kv, kv, head_off + d, acc + d);
  for (; d + 8 <= hd; d += 8) AccumulateV<1>(scores, n_kv, kv, head_off + d, acc + d);
  for (; d < hd; ++d) {
    __m128 a = _mm_set_ss(acc[d]);
    for (int64_t q = 0; q < n_kv; ++q)
      a = _mm_fmadd_ss(_mm_set_ss(scores[q]), _mm_set_ss(Load1(kv.v[q], kv.f16, head_off + d)), a);
    acc[d] = _mm_cvtss_f32(a);
  }
  if (kv.f16) {  // already normalized
    for (d = 0; d < hd; ++d) out[d] = acc[d];
    return;
  }
  d = 0;
  for (; d + 8 <= hd; d += 8)
    _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), inv));
  for (; d < hd; ++d)
    out[d] = _mm_cvtss_f32(_mm_mul_ss(_mm_set_ss(acc[d]), _mm256_castps256_ps128(inv)));
}

}  // namespace

namespace attn {
AttendFn Avx2Attend() { return &AttendAvx2; }
}  // namespace attn
}  // namespace llm
