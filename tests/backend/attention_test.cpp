// Attention vs the float64 reference: f32 and f16 KV, GQA, prefill (n_q > 1)
// and decode (n_q = 1) at odd positions, over paged KV views of several block
// sizes; paging, batch and thread invariance; the batch_invariant mode.
// Tolerance: 1e-5 relative to sum_p softmax_p * |v_p| of each output (plus a
// tiny absolute floor), the natural scale of a weighted average; with an f16
// cache 2^-11 more, for the f16 rounding of the probabilities (ggml's
// rounding points, see attention.cpp).
#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/thread_pool.h"
#include "core/half.h"
#include "core/status.h"
#include "gtest/gtest.h"
#include "kernels/cpu/ref/reference_kernels.h"
#include "tests/backend/kernel_test_util.h"

namespace llm {
namespace {

using testing_util::FreshSeed;
using testing_util::RandomVector;
using testing_util::SimdLevelGuard;
using testing_util::SupportedLevels;

// KV values of n_pos positions, [n_pos][stride] with stride = n_head_kv *
// head_dim + pad; f32 copies (already rounded to f16 when f16).
struct KvData {
  std::vector<float> k, v;
  int64_t n_pos = 0, n_head_kv = 0, head_dim = 0;
  size_t stride = 0;
  bool f16 = false;
};

KvData MakeKvData(std::mt19937& rng, int64_t n_pos, int64_t n_head_kv, int64_t head_dim, bool f16,
                  int64_t pad) {
  KvData kv;
  kv.n_pos = n_pos;
  kv.n_head_kv = n_head_kv;
  kv.head_dim = head_dim;
  kv.f16 = f16;
  kv.stride = static_cast<size_t>(n_head_kv * head_dim + pad);
  kv.k = RandomVector(rng, n_pos * kv.stride, 0.05f, 1.5f);
  kv.v = RandomVector(rng, n_pos * kv.stride, 0.05f, 1.5f);
  if (f16) {
    for (float& x : kv.k) x = F16ToF32(F32ToF16(x));
    for (float& x : kv.v) x = F16ToF32(F32ToF16(x));
  }
  return kv;
}

// The same values as the kernels' row pointers (attn::KvRows): f16 or f32
// rows of d.stride elements, one array each for K and V.
struct KernelRows {
  std::vector<uint16_t> k16, v16;
  std::vector<const uint8_t*> k_rows, v_rows;
  attn::KvRows kv;
};

void MakeKernelRows(const KvData& d, KernelRows* r) {
  r->k16.resize(d.k.size());
  r->v16.resize(d.v.size());
  for (size_t i = 0; i < d.k.size(); ++i) {
    r->k16[i] = F32ToF16(d.k[i]);
    r->v16[i] = F32ToF16(d.v[i]);
  }
  r->k_rows.resize(static_cast<size_t>(d.n_pos));
  r->v_rows.resize(static_cast<size_t>(d.n_pos));
  for (int64_t p = 0; p < d.n_pos; ++p) {
    const size_t at = static_cast<size_t>(p) * d.stride;
    r->k_rows[p] = d.f16 ? reinterpret_cast<const uint8_t*>(r->k16.data() + at)
                         : reinterpret_cast<const uint8_t*>(d.k.data() + at);
    r->v_rows[p] = d.f16 ? reinterpret_cast<const uint8_t*>(r->v16.data() + at)
                         : reinterpret_cast<const uint8_t*>(d.v.data() + at);
  }
  r->kv.k = r->k_rows.data();
  r->kv.v = r->v_rows.data();
  r->kv.f16 = d.f16;
  r->kv.head_dim = d.head_dim;
}

// The same values stored as a paged cache layer: blocks of block_tokens
// positions in shuffled slots of one pool (plus unused slots), each slot
// [k_offset filler][K or V rows][V or K rows] in random order. Everything a
// kernel must not read -- filler, row padding, rows past n_pos, unused slots
// -- is NaN, so reading it shows in the output.
struct PagedKv {
  std::vector<uint8_t> pool;
  std::vector<const uint8_t*> blocks;
  KvView base;  // blocks filled in by view()

  KvView view() const {
    KvView v = base;
    v.blocks = blocks.data();
    return v;
  }
};

PagedKv Page(const KvData& d, int64_t block_tokens, std::mt19937& rng) {
  PagedKv pk;
  const size_t elem = d.f16 ? 2 : 4;
  const size_t row_bytes = d.stride * elem;
  const size_t half = static_cast<size_t>(block_tokens) * row_bytes;
  const size_t filler = static_cast<size_t>(rng() % 3) * row_bytes + 4 * elem;
  const size_t slot_bytes = filler + 2 * half;
  const int64_t n_blocks = (d.n_pos + block_tokens - 1) / block_tokens;
  const int64_t n_slots = n_blocks + 2;
  pk.pool.resize(static_cast<size_t>(n_slots) * slot_bytes);
  // NaN everywhere first.
  for (size_t i = 0; i < pk.pool.size(); i += elem) {
    if (d.f16) {
      const uint16_t nan = 0x7E00;
      std::memcpy(pk.pool.data() + i, &nan, 2);
    } else {
      const float nan = NAN;
      std::memcpy(pk.pool.data() + i, &nan, 4);
    }
  }
  std::vector<int64_t> slot(static_cast<size_t>(n_slots));
  std::iota(slot.begin(), slot.end(), 0);
  std::shuffle(slot.begin(), slot.end(), rng);
  const bool v_first = (rng() & 1) != 0;
  pk.base.block_tokens = block_tokens;
  pk.base.k_offset = filler + (v_first ? half : 0);
  pk.base.v_offset = filler + (v_first ? 0 : half);
  pk.base.f16 = d.f16;
  pk.base.n_head_kv = d.n_head_kv;
  pk.base.head_dim = d.head_dim;
  pk.base.row_stride = d.stride;
  for (int64_t b = 0; b < n_blocks; ++b)
    pk.blocks.push_back(pk.pool.data() + static_cast<size_t>(slot[b]) * slot_bytes);
  const size_t width = static_cast<size_t>(d.n_head_kv * d.head_dim);  // padding stays NaN
  for (int64_t p = 0; p < d.n_pos; ++p) {
    uint8_t* row = const_cast<uint8_t*>(pk.blocks[p / block_tokens]) +
                   static_cast<size_t>(p % block_tokens) * row_bytes;
    for (int kv = 0; kv < 2; ++kv) {
      const float* src = (kv == 0 ? d.k.data() : d.v.data()) + p * d.stride;
      uint8_t* dst = row + (kv == 0 ? pk.base.k_offset : pk.base.v_offset);
      for (size_t i = 0; i < width; ++i) {
        if (d.f16) {
          const uint16_t h = F32ToF16(src[i]);
          std::memcpy(dst + 2 * i, &h, 2);
        } else {
          std::memcpy(dst + 4 * i, &src[i], 4);
        }
      }
    }
  }
  return pk;
}

// Dense double copy without the padding, [n_pos][n_head_kv][head_dim].
std::vector<double> Dense(const std::vector<float>& src, int64_t n_pos, int64_t width,
                          size_t stride) {
  std::vector<double> d(static_cast<size_t>(n_pos * width));
  for (int64_t p = 0; p < n_pos; ++p)
    for (int64_t i = 0; i < width; ++i) d[p * width + i] = src[p * stride + i];
  return d;
}

struct Case {
  int64_t n_q, n_head, n_head_kv, head_dim, pos0, pad;
};

// Block sizes: one position, odd, typical, and one block holding all (0).
constexpr int64_t kBlockSizes[] = {1, 3, 16, 0};

int64_t BlockTokens(int64_t bt, int64_t n_pos) { return bt > 0 ? bt : n_pos + 5; }

std::string Name(const Case& c, bool f16, int64_t bt) {
  return "f16=" + std::to_string(f16) + " n_q=" + std::to_string(c.n_q) +
         " n_head=" + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) +
         " hd=" + std::to_string(c.head_dim) + " pos0=" + std::to_string(c.pos0) +
         " block_tokens=" + std::to_string(bt);
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
    for (const Case& c :
         {Case{1, 9, 3, 64, 0, 0}, Case{1, 9, 3, 64, 36, 0}, Case{7, 9, 3, 64, 0, 0},
          Case{5, 4, 4, 33, 11, 3}, Case{3, 8, 1, 128, 200, 5}, Case{16, 6, 2, 64, 17, 0},
          Case{2, 5, 5, 16, 30, 1}, Case{1, 3, 1, 7, 18, 2}}) {
      for (bool f16 : {false, true}) {
        const int64_t n_pos = c.pos0 + c.n_q;
        const KvData d = MakeKvData(rng, n_pos, c.n_head_kv, c.head_dim, f16, c.pad);
        // Queries large enough that the softmax is far from uniform.
        const std::vector<float> q = RandomVector(rng, c.n_q * c.n_head * c.head_dim, 0.1f, 2.0f);
        const int64_t width = c.n_head_kv * c.head_dim;
        const std::vector<double> kd = Dense(d.k, n_pos, width, d.stride);
        const std::vector<double> vd = Dense(d.v, n_pos, width, d.stride);
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
        for (int64_t bt : kBlockSizes) {
          SCOPED_TRACE(Name(c, f16, bt));
          const PagedKv pk = Page(d, BlockTokens(bt, n_pos), rng);
          for (bool invariant : {false, true}) {
            std::vector<float> out(q.size());
            ASSERT_TRUE(Attention(q.data(), c.n_q, c.n_head, c.pos0, pk.view(), out.data(),
                                  c.n_q > 3 ? &pool : nullptr, invariant)
                            .ok());
            for (size_t i = 0; i < out.size(); ++i) {
              ASSERT_NEAR(out[i], ref[i], rel_tol * scale[i] + 1e-7)
                  << "i=" << i << " batch_invariant=" << invariant;
            }
          }
        }
      }
    }
  }
}

// Paging changes only addressing: every block size gives the bits of one
// contiguous block, at every level, for prefill and decode, in both modes.
TEST(AttentionTest, PagedEqualsContiguousBitExact) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ThreadPool pool(2);
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    SCOPED_TRACE(SimdLevelName(level));
    for (const Case& c : {Case{1, 9, 3, 64, 40, 0}, Case{6, 9, 3, 64, 13, 2},
                          Case{3, 4, 2, 48, 21, 0}, Case{1, 3, 3, 33, 50, 1}}) {
      for (bool f16 : {false, true}) {
        const int64_t n_pos = c.pos0 + c.n_q;
        const KvData d = MakeKvData(rng, n_pos, c.n_head_kv, c.head_dim, f16, c.pad);
        const std::vector<float> q = RandomVector(rng, c.n_q * c.n_head * c.head_dim, 0.1f, 2.0f);
        const PagedKv one = Page(d, n_pos, rng);
        for (bool invariant : {false, true}) {
          std::vector<float> want(q.size()), got(q.size());
          ASSERT_TRUE(Attention(q.data(), c.n_q, c.n_head, c.pos0, one.view(), want.data(), nullptr,
                                invariant)
                          .ok());
          for (int64_t bt : {int64_t{1}, int64_t{3}, int64_t{7}, int64_t{16}}) {
            SCOPED_TRACE(Name(c, f16, bt) + " batch_invariant=" + std::to_string(invariant));
            const PagedKv pk = Page(d, bt, rng);
            ASSERT_TRUE(Attention(q.data(), c.n_q, c.n_head, c.pos0, pk.view(), got.data(), &pool,
                                  invariant)
                            .ok());
            ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
          }
        }
      }
    }
  }
}

// Default mode: a prefill of n_q tokens gives the same bits as n_q one-token
// decodes, with or without threads -- except at the AVX-512 and AVX2 levels,
// which follow llama.cpp in summing a one-token step in another order
// (there: within the f32 tolerance of the float64 test above, and still
// thread-invariant).
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
      const KvData d = MakeKvData(rng, pos0 + n_q, n_head_kv, hd, f16, f16 ? 0 : 3);
      const PagedKv pk = Page(d, 3, rng);
      const KvView kv = pk.view();
      const std::vector<float> q = RandomVector(rng, n_q * n_head * hd);
      std::vector<float> all(q.size()), all_mt(q.size()), step(n_head * hd);
      ASSERT_TRUE(Attention(q.data(), n_q, n_head, pos0, kv, all.data(), nullptr).ok());
      ASSERT_TRUE(Attention(q.data(), n_q, n_head, pos0, kv, all_mt.data(), &pool).ok());
      EXPECT_EQ(0, std::memcmp(all.data(), all_mt.data(), all.size() * sizeof(float)));
      for (int64_t t = 0; t < n_q; ++t) {
        ASSERT_TRUE(
            Attention(q.data() + t * n_head * hd, 1, n_head, pos0 + t, kv, step.data(), &pool)
                .ok());
        if (level != SimdLevel::kScalar) {
          for (int64_t i = 0; i < n_head * hd; ++i) {
            // f32 ulps in the scores can move an f16-rounded probability by
            // one f16 ulp (<= 2^-10 p): sum_p 2^-10 p |v_p| <= 1.5 * 2^-10
            // (MakeKvData's |v| <= 1.5).
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

// batch_invariant: query t of one n_q = N call has the bits of the one-query
// call at position pos0 + t, at every level (AVX-512 and AVX2 included), head
// size, cache type and thread count. Without the flag nothing changes where
// the default kernels are already invariant (multi-query steps; the scalar
// level).
TEST(AttentionTest, BatchInvariantPrefillEqualsDecodeStepsBitExact) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ThreadPool pool(2);
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    SCOPED_TRACE(SimdLevelName(level));
    for (const Case& c : {Case{7, 9, 3, 64, 5, 0}, Case{5, 4, 2, 128, 30, 3},
                          Case{4, 6, 6, 32, 9, 0}, Case{6, 3, 1, 33, 2, 1}}) {
      for (bool f16 : {true, false}) {
        for (int64_t bt : {int64_t{3}, int64_t{0}}) {
          SCOPED_TRACE(Name(c, f16, bt));
          const int64_t n_pos = c.pos0 + c.n_q, row = c.n_head * c.head_dim;
          const KvData d = MakeKvData(rng, n_pos, c.n_head_kv, c.head_dim, f16, c.pad);
          const PagedKv pk = Page(d, BlockTokens(bt, n_pos), rng);
          const KvView kv = pk.view();
          const std::vector<float> q = RandomVector(rng, c.n_q * row, 0.1f, 2.0f);
          std::vector<float> all(q.size()), dflt(q.size()), step(row), step_dflt(row);
          ASSERT_TRUE(
              Attention(q.data(), c.n_q, c.n_head, c.pos0, kv, all.data(), &pool, true).ok());
          ASSERT_TRUE(
              Attention(q.data(), c.n_q, c.n_head, c.pos0, kv, dflt.data(), nullptr, false).ok());
          EXPECT_EQ(0, std::memcmp(all.data(), dflt.data(), all.size() * sizeof(float)));
          for (int64_t t = 0; t < c.n_q; ++t) {
            const float* qt = q.data() + t * row;
            ASSERT_TRUE(
                Attention(qt, 1, c.n_head, c.pos0 + t, kv, step.data(), nullptr, true).ok());
            ASSERT_EQ(0, std::memcmp(step.data(), all.data() + t * row, row * sizeof(float)))
                << "t=" << t;
            if (level == SimdLevel::kScalar) {
              ASSERT_TRUE(Attention(qt, 1, c.n_head, c.pos0 + t, kv, step_dflt.data(), &pool).ok());
              ASSERT_EQ(0, std::memcmp(step.data(), step_dflt.data(), row * sizeof(float)))
                  << "t=" << t;
            }
          }
        }
      }
    }
  }
}

TEST(AttentionTest, RejectsBadShapes) {
  float q[64] = {1}, out[64];
  float kvbuf[64] = {1};
  const uint8_t* blocks[2] = {reinterpret_cast<const uint8_t*>(kvbuf), nullptr};
  KvView kv;
  kv.blocks = blocks;
  kv.block_tokens = 1;
  kv.k_offset = 0;
  kv.v_offset = 12 * sizeof(float);
  kv.n_head_kv = 3;
  kv.head_dim = 4;
  kv.row_stride = 12;
  EXPECT_TRUE(Attention(q, 1, 3, 0, kv, out, nullptr).ok());
  // n_head not a multiple of n_head_kv.
  EXPECT_EQ(ToLlmStatus(Attention(q, 1, 4, 0, kv, out, nullptr)), LLM_ERR_INVALID_ARGUMENT);
  kv.row_stride = 8;  // shorter than a position
  EXPECT_EQ(ToLlmStatus(Attention(q, 1, 3, 0, kv, out, nullptr)), LLM_ERR_INVALID_ARGUMENT);
  kv.row_stride = 12;
  kv.block_tokens = 0;
  EXPECT_EQ(ToLlmStatus(Attention(q, 1, 3, 0, kv, out, nullptr)), LLM_ERR_INVALID_ARGUMENT);
  kv.block_tokens = -2;
  EXPECT_EQ(ToLlmStatus(Attention(q, 1, 3, 0, kv, out, nullptr)), LLM_ERR_INVALID_ARGUMENT);
  kv.block_tokens = 1;
  kv.blocks = nullptr;
  EXPECT_EQ(ToLlmStatus(Attention(q, 1, 3, 0, kv, out, nullptr)), LLM_ERR_INVALID_ARGUMENT);
  kv.blocks = blocks;
  // Position 1 lives in the second block, which is null.
  EXPECT_EQ(ToLlmStatus(Attention(q, 1, 3, 1, kv, out, nullptr)), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ToLlmStatus(Attention(q, 1, 3, -1, kv, out, nullptr)), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ToLlmStatus(Attention(nullptr, 1, 3, 0, kv, out, nullptr)), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Attention(q, 1, 3, 0, kv, out, nullptr, true).ok());
  EXPECT_TRUE(Attention(q, 0, 3, 5, kv, out, nullptr).ok());  // nothing to do
}

// AttentionBatch: sequences of different lengths, steps (decode, prefill,
// empty), block sizes and cache types in one call give, job by job, the bits
// of separate Attention calls, with and without threads, in both modes; a
// bad job fails the call before any output is written.
TEST(AttentionTest, BatchEqualsSeparateCallsBitExact) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ThreadPool pool(2);
  const int64_t n_head = 9, n_head_kv = 3, hd = 64;
  struct Seq {
    int64_t n_q, pos0, block_tokens;
    bool f16;
  };
  const Seq seqs[] = {{1, 40, 16, true}, {5, 0, 3, true},   {1, 0, 1, false},
                      {0, 7, 16, true},  {3, 17, 7, false}, {1, 63, 16, true}};
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    SCOPED_TRACE(SimdLevelName(level));
    std::vector<PagedKv> caches;
    std::vector<std::vector<float>> qs;
    for (const Seq& sq : seqs) {
      const KvData d = MakeKvData(rng, sq.pos0 + sq.n_q + 1, n_head_kv, hd, sq.f16, 0);
      caches.push_back(Page(d, sq.block_tokens, rng));
      qs.push_back(RandomVector(rng, std::max<int64_t>(1, sq.n_q) * n_head * hd, 0.1f, 2.0f));
    }
    for (bool invariant : {false, true}) {
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        SCOPED_TRACE("batch_invariant=" + std::to_string(invariant) +
                     " threads=" + std::to_string(p == nullptr ? 1 : 2));
        std::vector<std::vector<float>> want, got;
        std::vector<AttentionJob> jobs;
        for (size_t i = 0; i < std::size(seqs); ++i) {
          want.emplace_back(qs[i].size(), 0.0f);
          got.emplace_back(qs[i].size(), -7.0f);
          ASSERT_TRUE(Attention(qs[i].data(), seqs[i].n_q, n_head, seqs[i].pos0, caches[i].view(),
                                want[i].data(), nullptr, invariant)
                          .ok());
          AttentionJob j;
          j.q = qs[i].data();
          j.n_q = seqs[i].n_q;
          j.pos0 = seqs[i].pos0;
          j.kv = caches[i].view();
          j.out = got[i].data();
          jobs.push_back(j);
        }
        ASSERT_TRUE(AttentionBatch(jobs, n_head, p, invariant).ok());
        for (size_t i = 0; i < std::size(seqs); ++i) {
          const size_t n = static_cast<size_t>(seqs[i].n_q * n_head * hd);
          ASSERT_EQ(0, std::memcmp(want[i].data(), got[i].data(), n * sizeof(float)))
              << "job " << i;
        }
        // A bad last job: refused, and no output written.
        for (auto& g : got) std::fill(g.begin(), g.end(), -7.0f);
        jobs.back().kv.head_dim = 0;
        const absl::Status st = AttentionBatch(jobs, n_head, p, invariant);
        EXPECT_EQ(ToLlmStatus(st), LLM_ERR_INVALID_ARGUMENT) << st;
        for (const auto& g : got) {
          EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](float x) { return x == -7.0f; }));
        }
      }
    }
  }
}

// A decode step of many sequences (one query each) splits its tasks into
// one range per thread by cost, and each thread prefetches the next query's
// rows while it computes: sequences of very different lengths, windowed
// ones, both cache types and an empty job give, job by job, the bits of
// separate calls on 1, 2 and 3 threads, and every output is written.
TEST(AttentionTest, DecodeBatchEqualsSeparateCallsBitExact) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ThreadPool pool2(2), pool3(3);
  const int64_t n_head = 9, n_head_kv = 3, hd = 64;
  struct Seq {
    int64_t n_q, pos0, block_tokens, window;
    bool f16;
  };
  const Seq seqs[] = {{1, 300, 16, 0, true}, {1, 0, 16, 0, true},  {1, 40, 7, 0, false},
                      {0, 9, 16, 0, true},   {1, 95, 16, 0, true}, {1, 130, 16, 32, true},
                      {1, 2, 1, 0, false},   {1, 77, 5, 0, true},  {1, 200, 16, 0, true}};
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    SCOPED_TRACE(SimdLevelName(level));
    std::vector<PagedKv> caches;
    std::vector<std::vector<float>> qs, want;
    for (const Seq& sq : seqs) {
      const KvData d = MakeKvData(rng, sq.pos0 + 2, n_head_kv, hd, sq.f16, 0);
      caches.push_back(Page(d, sq.block_tokens, rng));
      qs.push_back(RandomVector(rng, n_head * hd, 0.1f, 2.0f));
      want.emplace_back(qs.back().size(), 0.0f);
      ASSERT_TRUE(Attention(qs.back().data(), sq.n_q, n_head, sq.pos0, caches.back().view(),
                            want.back().data(), nullptr, false, sq.window)
                      .ok());
    }
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
      SCOPED_TRACE("threads=" + std::to_string(p == nullptr ? 1 : p->size()));
      std::vector<std::vector<float>> got;
      std::vector<AttentionJob> jobs;
      for (size_t i = 0; i < std::size(seqs); ++i) {
        got.emplace_back(qs[i].size(), -7.0f);
        AttentionJob j;
        j.q = qs[i].data();
        j.n_q = seqs[i].n_q;
        j.pos0 = seqs[i].pos0;
        j.window = seqs[i].window;
        j.kv = caches[i].view();
        j.out = got[i].data();
        jobs.push_back(j);
      }
      ASSERT_TRUE(AttentionBatch(jobs, n_head, p).ok());
      for (size_t i = 0; i < std::size(seqs); ++i) {
        const size_t n = static_cast<size_t>(seqs[i].n_q * n_head * hd);
        ASSERT_EQ(0, std::memcmp(want[i].data(), got[i].data(), n * sizeof(float))) << "job " << i;
      }
    }
  }
}

// A one-token step reads each kv head once for all the query heads that
// share it (GQA; 4 at a time at AVX-512): every head's output must equal a
// call that attends with that head alone, bit for bit, for groups of 1..8
// heads (including 4 + 4, 4 + 2 and 4 + 1 splits).
TEST(AttentionTest, GroupedHeadsEqualSingleHeadCallsBitExact) {
  SimdLevelGuard guard;
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  struct Heads {
    int64_t n_head, n_head_kv;
  };
  for (SimdLevel level : SupportedLevels()) {
    SetSimdLevelForTesting(level);
    SCOPED_TRACE(SimdLevelName(level));
    for (const Heads hs : {Heads{9, 3}, Heads{32, 4}, Heads{12, 2}, Heads{5, 1}, Heads{4, 4}}) {
      for (int64_t hd : {64, 128}) {
        for (bool f16 : {true, false}) {
          for (int64_t pos0 : {0, 16, 70, 200}) {
            const Case c{1, hs.n_head, hs.n_head_kv, hd, pos0, 0};
            SCOPED_TRACE(Name(c, f16, 16));
            const KvData d = MakeKvData(rng, pos0 + 1, hs.n_head_kv, hd, f16, 3);
            const PagedKv pk = Page(d, 16, rng);
            const std::vector<float> q = RandomVector(rng, hs.n_head * hd, 0.1f, 2.0f);
            std::vector<float> all(q.size()), one(static_cast<size_t>(hd));
            ASSERT_TRUE(
                Attention(q.data(), 1, hs.n_head, pos0, pk.view(), all.data(), nullptr).ok());
            const int64_t group = hs.n_head / hs.n_head_kv;
            for (int64_t h = 0; h < hs.n_head; ++h) {
              // Head h alone: its kv head as a one-head cache.
              KvView single = pk.view();
              const size_t shift = static_cast<size_t>(h / group * hd) * (f16 ? 2 : 4);
              single.k_offset += shift;
              single.v_offset += shift;
              single.n_head_kv = 1;
              ASSERT_TRUE(
                  Attention(q.data() + h * hd, 1, 1, pos0, single, one.data(), nullptr).ok());
              ASSERT_EQ(0, std::memcmp(one.data(), all.data() + h * hd, one.size() * sizeof(float)))
                  << "head " << h;
            }
          }
        }
      }
    }
  }
}

// The rows kernels (several queries and heads per pass over K and V) give
// every row the bits of their level's per-(query, head) kernel, for rows
// with different numbers of visible positions (1 .. 83, tails of every
// length), 1 .. 9 rows (4 + 4 + 1 and the other splits), several head sizes
// (AVX2 also ones that are not a multiple of 16, and one that is not of 8,
// which it runs row by row), and both cache types.
TEST(AttentionTest, RowsKernelsEqualPerRowKernelsBitExact) {
  struct Kernels {
    SimdLevel level;
    attn::AttendFn one;
    attn::AttendRowsFn rows;
    std::vector<int64_t> head_dims;
  };
  std::vector<Kernels> kernels;
  const std::vector<SimdLevel> levels = SupportedLevels();
  auto has = [&](SimdLevel l) {
    return std::find(levels.begin(), levels.end(), l) != levels.end();
  };
  if (has(SimdLevel::kAvx512)) {
    kernels.push_back({SimdLevel::kAvx512,
                       attn::Avx512Attend(),
                       attn::Avx512AttendRows(),
                       {16, 48, 64, 80, 128}});
  }
  if (has(SimdLevel::kAvx2)) {
    kernels.push_back(
        {SimdLevel::kAvx2, attn::Avx2Attend(), attn::Avx2AttendRows(), {8, 40, 64, 80, 128, 33}});
  }
  if (kernels.empty()) GTEST_SKIP() << "no AVX2 or AVX-512 on this host";
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const Kernels& k : kernels) {
    SCOPED_TRACE(SimdLevelName(k.level));
    for (int64_t hd : k.head_dims) {
      for (bool f16 : {true, false}) {
        const int64_t n_pos = 83, n_head_kv = 2, g = 1;
        const KvData d = MakeKvData(rng, n_pos, n_head_kv, hd, f16, 1);
        KernelRows kernel_rows;
        MakeKernelRows(d, &kernel_rows);
        const attn::KvRows& kv = kernel_rows.kv;
        for (int64_t n = 1; n <= 9; ++n) {
          SCOPED_TRACE("hd=" + std::to_string(hd) + " f16=" + std::to_string(f16) +
                       " rows=" + std::to_string(n));
          const std::vector<float> q = RandomVector(rng, n * hd, 0.1f, 2.0f);
          std::vector<const float*> q_rows(n);
          std::vector<int64_t> n_kv(n);
          std::vector<float> got(n * hd), want(hd);
          std::vector<float*> out_rows(n);
          std::uniform_int_distribution<int64_t> pick(1, n_pos);
          for (int64_t i = 0; i < n; ++i) {
            q_rows[i] = q.data() + i * hd;
            n_kv[i] = pick(rng);
            out_rows[i] = got.data() + i * hd;
          }
          std::vector<float> scores(4 * n_pos), acc(4 * hd);
          k.rows(q_rows.data(), n_kv.data(), out_rows.data(), n, g, kv, 0.125f, scores.data(),
                 acc.data());
          for (int64_t i = 0; i < n; ++i) {
            k.one(q_rows[i], n_kv[i], g, kv, 0.125f, scores.data(), acc.data(), want.data());
            ASSERT_EQ(0, std::memcmp(want.data(), out_rows[i], hd * sizeof(float)))
                << "row " << i << " n_kv " << n_kv[i];
          }
        }
      }
    }
  }
}

// The AVX2 one-token heads kernel (several heads of one kv head per pass
// over K and V, 3 at a time, 4 as 2 + 2) gives every head the bits of the
// AVX2 one-token per-head kernel, for 1 .. 8 heads, head sizes that are
// multiples of 32, both cache types, and position counts with tails of
// every length (1 .. 83).
TEST(AttentionTest, Avx2OneTokenHeadsKernelEqualsPerHeadKernelBitExact) {
  const std::vector<SimdLevel> levels = SupportedLevels();
  if (std::find(levels.begin(), levels.end(), SimdLevel::kAvx2) == levels.end()) {
    GTEST_SKIP() << "no AVX2 on this host";
  }
  const attn::AttendFn one = attn::Avx2AttendOneToken();
  const attn::AttendHeadsFn heads = attn::Avx2AttendOneTokenHeads();
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int64_t hd : {32, 64, 96, 128}) {
    for (bool f16 : {true, false}) {
      const int64_t n_pos = 83, n_head_kv = 2, g = 1;
      const KvData d = MakeKvData(rng, n_pos, n_head_kv, hd, f16, 1);
      KernelRows kernel_rows;
      MakeKernelRows(d, &kernel_rows);
      const attn::KvRows& kv = kernel_rows.kv;
      std::uniform_int_distribution<int64_t> pick(1, n_pos);
      for (int64_t n = 1; n <= 8; ++n) {
        const int64_t n_kv = pick(rng);
        SCOPED_TRACE("hd=" + std::to_string(hd) + " f16=" + std::to_string(f16) +
                     " heads=" + std::to_string(n) + " n_kv=" + std::to_string(n_kv));
        const std::vector<float> q = RandomVector(rng, n * hd, 0.1f, 2.0f);
        std::vector<float> got(n * hd), want(hd), scores(n * n_pos), acc(n * hd);
        heads(q.data(), n, n_kv, g, kv, 0.125f, scores.data(), acc.data(), got.data());
        for (int64_t h = 0; h < n; ++h) {
          one(q.data() + h * hd, n_kv, g, kv, 0.125f, scores.data(), acc.data(), want.data());
          ASSERT_EQ(0, std::memcmp(want.data(), got.data() + h * hd, hd * sizeof(float)))
              << "head " << h;
        }
      }
    }
  }
}
}  // namespace
}  // namespace llm
