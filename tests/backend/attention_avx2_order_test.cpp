// Attention at the AVX2 level against a scalar model of what llama.cpp's
// default (non-flash) CPU attention computes when llama.cpp is built for AVX2
// (attention_avx2.cpp claims those bits): the model is written from ggml's
// source one lane at a time (tests/backend/ggml_avx2_model.h) and, unlike
// the kernel, runs over llama.cpp's padded cache view (a multiple of 256
// positions, the extra ones masked to -inf with zero K/V rows), so it also
// checks that the kernel's emulation of the padding is exact. Bit for bit,
// on fresh random inputs, for f16 and f32 caches, one-token and multi-token
// steps, batch_invariant (the multi-token orders at every n_q), GQA, head
// sizes that take every branch (tinyBLAS and vec_dot, vec_dot leftovers,
// head_dim % 8 != 0 and % 4 != 0) and contexts across the 8- and 32-position
// lane classes. The float64 tolerance test of the same kernels is
// AttentionTest.MatchesFloat64Reference (attention_test.cpp).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/cpu_features.h"
#include "core/half.h"
#include "gtest/gtest.h"
#include "tests/backend/ggml_avx2_model.h"
#include "tests/backend/kernel_test_util.h"

namespace llm {
namespace {

namespace model = ggml_avx2_model;
using testing_util::FreshSeed;
using testing_util::RandomVector;
using testing_util::SimdLevelGuard;
using testing_util::SupportedLevels;

inline float RoundF16(float x) { return F16ToF32(F32ToF16(x)); }

// One (query, head) as llama.cpp's AVX2 build computes it. q [hd] (f32), k /
// v: position p's row of the head's kv head at k + p * stride (values
// already representable in the cache type), n_kv visible positions.
void ModelAttend(const float* q, const float* k, const float* v, size_t stride, int64_t n_kv,
                 int64_t hd, bool f16, float scale, bool one_token, float* out) {
  const int64_t n_pad = (n_kv + 255) / 256 * 256;  // llama.cpp's cache view
  auto K = [&](int64_t p, int64_t d) { return p < n_kv ? k[p * stride + d] : 0.0f; };
  auto V = [&](int64_t p, int64_t d) { return p < n_kv ? v[p * stride + d] : 0.0f; };
  std::vector<float> qc(q, q + hd);  // kq's src1 converted to the vec_dot type
  if (f16) {
    for (float& x : qc) x = RoundF16(x);
  }
  // kq: tinyBLAS<8> for an f16 cache, >= 2 tokens and head_dim % 8 == 0,
  // else ggml_vec_dot_f16 / ggml_vec_dot_f32.
  const bool kq_tiny = f16 && !one_token && hd % 8 == 0;
  std::vector<float> s(static_cast<size_t>(n_pad));
  for (int64_t p = 0; p < n_pad; ++p) {
    float dot;
    if (kq_tiny) {
      float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t d = 0; d < hd; d += 8)
        for (int l = 0; l < 8; ++l) lane[l] = std::fma(K(p, d + l), qc[d + l], lane[l]);
      dot = model::HsumTiny(lane);
    } else {
      float acc[4][8] = {};
      const int64_t np = hd & ~int64_t{31};
      for (int64_t i = 0; i < np; i += 32)
        for (int j = 0; j < 4; ++j)
          for (int l = 0; l < 8; ++l) {
            acc[j][l] = std::fma(K(p, i + 8 * j + l), qc[i + 8 * j + l], acc[j][l]);
          }
      dot = model::Reduce4x8(acc);
      if (f16) {  // leftovers: double sum of f32 products
        double sum = dot;
        for (int64_t i = np; i < hd; ++i) sum += static_cast<double>(K(p, i) * qc[i]);
        dot = static_cast<float>(sum);
      } else {  // leftovers as llama-cpp-python 0.3.36's build compiles them
        const int64_t fused = hd - (hd - np) % 4;
        for (int64_t i = np; i < fused; ++i) dot = dot + K(p, i) * qc[i];
        for (int64_t i = fused; i < hd; ++i) dot = std::fma(K(p, i), qc[i], dot);
      }
    }
    // soft_max: kq * scale, plus the mask (0 or -inf).
    s[p] = p < n_kv ? dot * scale : -INFINITY;
  }
  float mx = -INFINITY;
  for (float x : s) mx = std::fmax(mx, x);
  double sum = 0.0;
  for (int64_t p = 0; p < n_pad; p += 8) {
    float e[8];
    for (int l = 0; l < 8; ++l) e[l] = s[p + l] = model::ExpF(s[p + l] - mx);
    sum += static_cast<double>(model::HsumTiny(e));
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (float& x : s) x = f16 ? RoundF16(x * inv) : x * inv;
  // kqv over the transposed V: tinyBLAS<8> for >= 2 tokens and head_dim % 4
  // == 0, else vec_dot (n_pad is a multiple of 32: no leftovers).
  const bool kqv_tiny = !one_token && hd % 4 == 0;
  for (int64_t d = 0; d < hd; ++d) {
    if (kqv_tiny) {
      float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t p = 0; p < n_pad; ++p) lane[p % 8] = std::fma(V(p, d), s[p], lane[p % 8]);
      out[d] = model::HsumTiny(lane);
    } else {
      float acc[4][8] = {};
      for (int64_t p = 0; p < n_pad; ++p) {
        float& a = acc[p % 32 / 8][p % 8];
        a = std::fma(V(p, d), s[p], a);
      }
      out[d] = model::Reduce4x8(acc);
    }
  }
}

struct Case {
  int64_t n_q, n_head, n_head_kv, head_dim, pos0;
};

TEST(AttentionTest, Avx2EqualsLlamaCppAvx2ModelBitExact) {
  bool has_avx2 = false;
  for (SimdLevel l : SupportedLevels()) has_avx2 |= l == SimdLevel::kAvx2;
  if (!has_avx2) GTEST_SKIP() << "this CPU has no AVX2";
  SimdLevelGuard guard;
  SetSimdLevelForTesting(SimdLevel::kAvx2);
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  // head_dim 64 / 128 / 96: every order without leftovers; 40: kq vec_dot
  // leftovers of 8 (f32: two fused-free groups of 4); 36: kq vec_dot
  // (tinyBLAS refuses k % 8), kqv tinyBLAS; 33 and 7: vec_dot everywhere
  // (kqv: tinyBLAS refuses m % 4), leftovers with fmas. Contexts from 1 to
  // 314 positions.
  for (const Case& c :
       {Case{1, 9, 3, 64, 0}, Case{1, 9, 3, 64, 300}, Case{7, 9, 3, 64, 0}, Case{5, 4, 2, 128, 37},
        Case{3, 2, 1, 40, 100}, Case{1, 2, 1, 40, 77}, Case{4, 3, 3, 33, 20}, Case{2, 2, 2, 36, 9},
        Case{1, 1, 1, 7, 3}, Case{6, 4, 1, 96, 250}, Case{16, 3, 1, 64, 17}}) {
    for (bool f16 : {true, false}) {
      for (bool invariant : {false, true}) {
        SCOPED_TRACE("f16=" + std::to_string(f16) + " n_q=" + std::to_string(c.n_q) +
                     " hd=" + std::to_string(c.head_dim) + " pos0=" + std::to_string(c.pos0) +
                     " batch_invariant=" + std::to_string(invariant));
        const int64_t n_pos = c.pos0 + c.n_q, hd = c.head_dim;
        const size_t stride = static_cast<size_t>(c.n_head_kv * hd);
        std::vector<float> k = RandomVector(rng, n_pos * stride, 0.05f, 1.5f);
        std::vector<float> v = RandomVector(rng, n_pos * stride, 0.05f, 1.5f);
        // One block holding every position: [K rows | V rows].
        std::vector<uint8_t> block(2 * k.size() * (f16 ? 2 : 4));
        for (size_t i = 0; i < k.size(); ++i) {
          if (f16) {
            k[i] = RoundF16(k[i]);
            v[i] = RoundF16(v[i]);
            const uint16_t hk = F32ToF16(k[i]), hv = F32ToF16(v[i]);
            std::memcpy(block.data() + 2 * i, &hk, 2);
            std::memcpy(block.data() + 2 * (k.size() + i), &hv, 2);
          } else {
            std::memcpy(block.data() + 4 * i, &k[i], 4);
            std::memcpy(block.data() + 4 * (k.size() + i), &v[i], 4);
          }
        }
        const uint8_t* blocks[1] = {block.data()};
        AttentionJob job;
        job.kv.blocks = blocks;
        job.kv.block_tokens = n_pos;
        job.kv.k_offset = 0;
        job.kv.v_offset = k.size() * (f16 ? 2 : 4);
        job.kv.f16 = f16;
        job.kv.n_head_kv = c.n_head_kv;
        job.kv.head_dim = hd;
        job.kv.row_stride = stride;
        job.scale = 1.0f / std::sqrt(static_cast<float>(hd));
        // Queries large enough that the softmax is far from uniform.
        const std::vector<float> q = RandomVector(rng, c.n_q * c.n_head * hd, 0.1f, 2.0f);
        std::vector<float> out(q.size());
        job.q = q.data();
        job.n_q = c.n_q;
        job.pos0 = c.pos0;
        job.out = out.data();
        ASSERT_TRUE(
            AttentionBatch(absl::MakeConstSpan(&job, 1), c.n_head, nullptr, invariant).ok());
        const bool one_token = c.n_q == 1 && !invariant;
        const int64_t group = c.n_head / c.n_head_kv;
        std::vector<float> want(static_cast<size_t>(hd));
        for (int64_t t = 0; t < c.n_q; ++t) {
          for (int64_t h = 0; h < c.n_head; ++h) {
            const size_t at = static_cast<size_t>((t * c.n_head + h) * hd);
            const size_t kv_off = static_cast<size_t>(h / group * hd);
            ModelAttend(q.data() + at, k.data() + kv_off, v.data() + kv_off, stride, c.pos0 + t + 1,
                        hd, f16, job.scale, one_token, want.data());
            ASSERT_EQ(0, std::memcmp(want.data(), out.data() + at, want.size() * sizeof(float)))
                << "query " << t << " head " << h << ": first value " << out[at] << " vs "
                << want[0];
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace llm
