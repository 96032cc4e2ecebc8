// Attention vs the float64 reference: f32 and f16 KV, GQA, prefill (n_q > 1)
// and decode (n_q = 1) at odd positions; and batch/thread invariance.
// Tolerance: 1e-5 relative to sum_p softmax_p * |v_p| of each output (plus a
// tiny absolute floor), the natural scale of a weighted average; with an f16
// cache 2^-11 more, for the f16 rounding of the probabilities (ggml's
// rounding points, see attention.cpp).
#include "backend/cpu/attention.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "core/half.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "gtest/gtest.h"
#include "kernels/cpu/ref/reference_kernels.h"
#include "tests/backend/kernel_test_util.h"

namespace llm {
namespace {

using testing_util::FreshSeed;
using testing_util::RandomVector;
using testing_util::SimdLevelGuard;
using testing_util::SupportedLevels;

struct Kv {
  std::vector<float> k, v;       // f32 copy (after f16 rounding if f16)
  std::vector<uint16_t> kh, vh;  // f16 storage
  KvView view;
};

// Dense KV of n_pos positions, row_stride = n_head_kv*head_dim + pad.
Kv MakeKv(std::mt19937& rng, int64_t n_pos, int64_t n_head_kv, int64_t head_dim, bool f16,
          int64_t pad) {
  Kv kv;
  const size_t stride = static_cast<size_t>(n_head_kv * head_dim + pad);
  kv.k = RandomVector(rng, n_pos * stride, 0.05f, 1.5f);
  kv.v = RandomVector(rng, n_pos * stride, 0.05f, 1.5f);
  if (f16) {
    kv.kh.resize(kv.k.size());
    kv.vh.resize(kv.v.size());
    for (size_t i = 0; i < kv.k.size(); ++i) {
      kv.kh[i] = F32ToF16(kv.k[i]);
      kv.k[i] = F16ToF32(kv.kh[i]);
      kv.vh[i] = F32ToF16(kv.v[i]);
      kv.v[i] = F16ToF32(kv.vh[i]);
    }
  }
  kv.view.k = f16 ? static_cast<const void*>(kv.kh.data()) : kv.k.data();
  kv.view.v = f16 ? static_cast<const void*>(kv.vh.data()) : kv.v.data();
  kv.view.f16 = f16;
  kv.view.n_head_kv = n_head_kv;
  kv.view.head_dim = head_dim;
  kv.view.row_stride = stride;
  return kv;
}

// Dense double copy without the padding, [n_pos][n_head_kv][head_dim].
std::vector<double> Dense(const std::vector<float>& src, int64_t n_pos, int64_t width,
                          size_t stride) {
  std::vector<double> d(static_cast<size_t>(n_pos * width));
  for (int64_t p = 0; p < n_pos; ++p)
    for (int64_t i = 0; i < width; ++i) d[p * width + i] = src[p * stride + i];
  return d;
}

TEST(AttentionTest, MatchesFloat64Reference) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ThreadPool pool(2);
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    SCOPED_TRACE(SimdLevelName(level));
    struct Case {
      int64_t n_q, n_head, n_head_kv, head_dim, pos0, pad;
    };
    for (const Case& c :
         {Case{1, 9, 3, 64, 0, 0}, Case{1, 9, 3, 64, 36, 0}, Case{7, 9, 3, 64, 0, 0},
          Case{5, 4, 4, 33, 11, 3}, Case{3, 8, 1, 128, 200, 5}, Case{16, 6, 2, 64, 17, 0}}) {
      for (bool f16 : {false, true}) {
        SCOPED_TRACE("f16=" + std::to_string(f16) + " n_q=" + std::to_string(c.n_q) +
                     " n_head=" + std::to_string(c.n_head) + " pos0=" + std::to_string(c.pos0));
        const int64_t n_pos = c.pos0 + c.n_q;
        Kv kv = MakeKv(rng, n_pos, c.n_head_kv, c.head_dim, f16, c.pad);
        // Queries large enough that the softmax is far from uniform.
        const std::vector<float> q = RandomVector(rng, c.n_q * c.n_head * c.head_dim, 0.1f, 2.0f);
        std::vector<float> out(q.size());
        ASSERT_TRUE(Attention(q.data(), c.n_q, c.n_head, c.pos0, kv.view, out.data(),
                              c.n_q > 3 ? &pool : nullptr)
                        .ok());
        const int64_t width = c.n_head_kv * c.head_dim;
        const std::vector<double> kd = Dense(kv.k, n_pos, width, kv.view.row_stride);
        const std::vector<double> vd = Dense(kv.v, n_pos, width, kv.view.row_stride);
        // With an f16 cache the contract (as ggml's) rounds q to f16 before
        // q.k: the reference gets that rounded q, so what remains is f32
        // arithmetic plus the f16 rounding of each softmax probability
        // (relative <= 2^-11), i.e. |error| <= 2^-11 * sum_p p |v_p| = 2^-11 *
        // scale[i] on top of the f32 bound.
        std::vector<double> qd(q.begin(), q.end());
        if (f16) {
          for (double& x : qd) x = F16ToF32(F32ToF16(static_cast<float>(x)));
        }
        const double rel_tol = f16 ? 1e-5 + std::ldexp(1.0, -11) : 1e-5;
        std::vector<double> ref(q.size()), scale(q.size());
        ref::RefAttention(qd.data(), c.n_q, c.n_head, c.pos0, kd.data(), vd.data(), c.n_head_kv,
                          c.head_dim, ref.data(), scale.data());
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_NEAR(out[i], ref[i], rel_tol * scale[i] + 1e-7) << "i=" << i;
        }
      }
    }
  }
}

// A prefill of n_q tokens gives the same bits as n_q one-token decodes, with
// or without threads -- except at the AVX-512 level, which follows llama.cpp
// in summing a one-token step in another order (there: within the f32
// tolerance of the float64 test above, and still thread-invariant).
TEST(AttentionTest, PrefillEqualsDecodeStepsBitExact) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ThreadPool pool(2);
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    SCOPED_TRACE(SimdLevelName(level));
    for (bool f16 : {true, false}) {
      const int64_t n_head = 9, n_head_kv = 3, hd = 64, pos0 = 4, n_q = 6;
      Kv kv = MakeKv(rng, pos0 + n_q, n_head_kv, hd, f16, f16 ? 0 : 3);
      const std::vector<float> q = RandomVector(rng, n_q * n_head * hd);
      std::vector<float> all(q.size()), all_mt(q.size()), step(n_head * hd);
      ASSERT_TRUE(Attention(q.data(), n_q, n_head, pos0, kv.view, all.data(), nullptr).ok());
      ASSERT_TRUE(Attention(q.data(), n_q, n_head, pos0, kv.view, all_mt.data(), &pool).ok());
      EXPECT_EQ(0, std::memcmp(all.data(), all_mt.data(), all.size() * sizeof(float)));
      for (int64_t t = 0; t < n_q; ++t) {
        ASSERT_TRUE(
            Attention(q.data() + t * n_head * hd, 1, n_head, pos0 + t, kv.view, step.data(), &pool)
                .ok());
        if (level == SimdLevel::kAvx512) {
          for (int64_t i = 0; i < n_head * hd; ++i) {
            // f32 ulps in the scores can move an f16-rounded probability by
            // one f16 ulp (<= 2^-10 p): sum_p 2^-10 p |v_p| <= 1.5 * 2^-10
            // (MakeKv's |v| <= 1.5).
            ASSERT_NEAR(step[i], all[t * n_head * hd + i], 1.5 * std::ldexp(1.0, -10) + 1e-6)
                << "t=" << t << " i=" << i;
          }
          continue;
        }
        ASSERT_EQ(
            0, std::memcmp(step.data(), all.data() + t * n_head * hd, step.size() * sizeof(float)))
            << "t=" << t;
      }
    }
  }
}

TEST(AttentionTest, RejectsBadShapes) {
  float q[64] = {1}, out[64];
  float kvbuf[64] = {1};
  KvView kv;
  kv.k = kvbuf;
  kv.v = kvbuf;
  kv.n_head_kv = 3;
  kv.head_dim = 4;
  kv.row_stride = 12;
  // n_head not a multiple of n_head_kv.
  EXPECT_EQ(ToLlmStatus(Attention(q, 1, 4, 0, kv, out, nullptr)), LLM_ERR_INVALID_ARGUMENT);
  kv.row_stride = 8;  // shorter than a position
  EXPECT_EQ(ToLlmStatus(Attention(q, 1, 3, 0, kv, out, nullptr)), LLM_ERR_INVALID_ARGUMENT);
  kv.row_stride = 12;
  kv.k = nullptr;
  EXPECT_EQ(ToLlmStatus(Attention(q, 1, 3, 0, kv, out, nullptr)), LLM_ERR_INVALID_ARGUMENT);
  kv.k = kvbuf;
  EXPECT_EQ(ToLlmStatus(Attention(q, 1, 3, -1, kv, out, nullptr)), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Attention(q, 1, 3, 0, kv, out, nullptr).ok());
}

}  // namespace
}  // namespace llm
