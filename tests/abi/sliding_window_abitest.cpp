// A Mistral-style sliding-window model through the C ABI
// (tests/data/tiny/tiny-mistral-swa-F16.gguf from tools/make_mistral_swa.py:
// llama architecture, every layer windowed to 64 positions). The sessions'
// KV tables keep only the window (docs/SLIDING_WINDOW.md): llm_model_kv_stats
// shows the blocks held; rewinding into the released region fails cleanly;
// fork, save/load and the batcher keep working. Logit agreement with
// llama.cpp is the teacher-forced test's (Tiny_MistralSwa).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "llm/llm.h"
#include "test_util.h"

namespace {

constexpr int64_t kWindow = 64;

struct ModelDeleter {
  void operator()(llm_model *m) const { llm_model_free(m); }
};
struct SessionDeleter {
  void operator()(llm_session *s) const { llm_session_free(s); }
};
using ModelPtr = std::unique_ptr<llm_model, ModelDeleter>;
using SessionPtr = std::unique_ptr<llm_session, SessionDeleter>;

std::string MistralPath() { return llm_abi_test::TinyModelDir() + "/tiny-mistral-swa-F16.gguf"; }

std::vector<llm_token> RandomTokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<llm_token> t(n);
  for (auto &x : t) x = static_cast<llm_token>(3 + rng() % 509);
  return t;
}

class SlidingWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LLM_ABI_REQUIRE_FILE(MistralPath());
    llm_model *m = nullptr;
    ASSERT_EQ(llm_model_load(MistralPath().c_str(), nullptr, &m), LLM_OK) << llm_last_error();
    model_.reset(m);
  }
  SessionPtr NewSession(int32_t kv_type = LLM_KV_F16) {
    llm_session_params sp;
    EXPECT_EQ(llm_session_params_init(&sp), LLM_OK);
    sp.n_ctx = 512;
    sp.kv_type = kv_type;
    llm_session *s = nullptr;
    EXPECT_EQ(llm_session_create(model_.get(), &sp, &s), LLM_OK) << llm_last_error();
    return SessionPtr(s);
  }
  llm_kv_stats Stats() {
    llm_kv_stats st;
    EXPECT_EQ(llm_kv_stats_init(&st), LLM_OK);
    EXPECT_EQ(llm_model_kv_stats(model_.get(), &st), LLM_OK);
    return st;
  }
  std::vector<float> Logits(llm_session *s) {
    const float *l = nullptr;
    size_t n = 0;
    EXPECT_EQ(llm_session_logits(s, &l, &n), LLM_OK) << llm_last_error();
    return l ? std::vector<float>(l, l + n) : std::vector<float>();
  }
  ModelPtr model_;
};

double MaxAbsDiff(const std::vector<float> &a, const std::vector<float> &b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return m;
}

TEST_F(SlidingWindowTest, KvStatsShowOnlyTheWindowHeld) {
  SessionPtr s = NewSession();
  const llm_kv_stats before = Stats();
  const std::vector<llm_token> prompt = RandomTokens(300, 1);
  ASSERT_EQ(llm_session_prefill(s.get(), prompt.data(), prompt.size()), LLM_OK) << llm_last_error();
  llm_token tok = -1;
  ASSERT_EQ(llm_session_decode(s.get(), &tok), LLM_OK) << llm_last_error();
  const llm_kv_stats after = Stats();
  const uint64_t full_blocks = (301 + after.block_tokens - 1) / after.block_tokens;  // 19
  const uint64_t window_blocks = kWindow / after.block_tokens + 2;                   // 6
  std::printf("301 positions, window %lld: %llu blocks held (full attention: %llu)\n",
              static_cast<long long>(kWindow),
              static_cast<unsigned long long>(after.blocks_used - before.blocks_used),
              static_cast<unsigned long long>(full_blocks));
  EXPECT_LE(after.blocks_used - before.blocks_used, window_blocks);
  EXPECT_GT(full_blocks, 3 * window_blocks);
  // Released blocks were registered: they stay in the pool as prefix cache.
  EXPECT_GT(after.blocks_cached, 0u);
  // Freeing the session returns its blocks.
  s.reset();
  EXPECT_EQ(Stats().blocks_used, before.blocks_used);
}

TEST_F(SlidingWindowTest, RewindIntoTheReleasedRegionFailsCleanlyAndWithinTheWindowWorks) {
  SessionPtr s = NewSession();
  const std::vector<llm_token> prompt = RandomTokens(200, 2);
  ASSERT_EQ(llm_session_prefill(s.get(), prompt.data(), prompt.size()), LLM_OK);
  const std::vector<float> logits = Logits(s.get());
  // Position 10's window was released long ago.
  EXPECT_EQ(llm_session_rewind(s.get(), 10), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("sliding window"), std::string::npos)
      << llm_last_error();
  size_t n = 0;
  ASSERT_EQ(llm_session_n_tokens(s.get(), &n), LLM_OK);
  EXPECT_EQ(n, prompt.size());
  EXPECT_EQ(Logits(s.get()), logits) << "a refused rewind changed the session";
  // Within the window ([195 - 64, 195) is held: the prefill kept [136, 200)
  // in whole blocks of 16, from 128): the logits of position 194 as a fresh
  // prefill of 195 tokens computes them.
  ASSERT_EQ(llm_session_rewind(s.get(), 195), LLM_OK) << llm_last_error();
  SessionPtr fresh = NewSession();
  ASSERT_EQ(llm_session_prefill(fresh.get(), prompt.data(), 195), LLM_OK);
  EXPECT_LE(MaxAbsDiff(Logits(s.get()), Logits(fresh.get())), 1e-3);
  // And it continues: the same next tokens as the fresh session.
  for (int i = 0; i < 20; ++i) {
    llm_token a = -1, b = -1;
    ASSERT_EQ(llm_session_decode(s.get(), &a), LLM_OK);
    ASSERT_EQ(llm_session_decode(fresh.get(), &b), LLM_OK);
    EXPECT_LE(MaxAbsDiff(Logits(s.get()), Logits(fresh.get())), 1e-3) << "step " << i;
    if (a != b) break;  // a near tie broken differently: the rest differs
  }
}

TEST_F(SlidingWindowTest, ForkAndSaveLoadContinueExactly) {
  for (const int32_t kv : {LLM_KV_F16, LLM_KV_F32}) {
    SCOPED_TRACE(kv == LLM_KV_F16 ? "F16 KV" : "F32 KV");
    SessionPtr s = NewSession(kv);
    const std::vector<llm_token> prompt = RandomTokens(150, 3);
    ASSERT_EQ(llm_session_prefill(s.get(), prompt.data(), prompt.size()), LLM_OK);
    llm_token t0 = -1;
    ASSERT_EQ(llm_session_decode(s.get(), &t0), LLM_OK);

    llm_session *child_raw = nullptr;
    ASSERT_EQ(llm_session_fork(s.get(), &child_raw), LLM_OK) << llm_last_error();
    SessionPtr child(child_raw);
    size_t size = 0;
    ASSERT_EQ(llm_session_save(s.get(), nullptr, 0, &size), LLM_ERR_BUFFER_TOO_SMALL);
    std::vector<uint8_t> saved(size);
    ASSERT_EQ(llm_session_save(s.get(), saved.data(), saved.size(), &size), LLM_OK)
        << llm_last_error();
    SessionPtr loaded = NewSession(kv);
    ASSERT_EQ(llm_session_load(loaded.get(), saved.data(), size), LLM_OK) << llm_last_error();

    // All three continue with the same greedy tokens and bit-identical
    // logits (same positions, same KV, same kernels).
    for (int i = 0; i < 70; ++i) {  // past another window's worth of positions
      llm_token a = -1, b = -1, c = -1;
      ASSERT_EQ(llm_session_decode(s.get(), &a), LLM_OK);
      ASSERT_EQ(llm_session_decode(child.get(), &b), LLM_OK);
      ASSERT_EQ(llm_session_decode(loaded.get(), &c), LLM_OK) << llm_last_error();
      ASSERT_EQ(a, b) << "step " << i;
      ASSERT_EQ(a, c) << "step " << i;
      ASSERT_EQ(Logits(s.get()), Logits(child.get())) << "step " << i;
      ASSERT_EQ(Logits(s.get()), Logits(loaded.get())) << "step " << i;
    }
    // A loaded session refuses deep rewinds too (its old blocks never existed).
    EXPECT_EQ(llm_session_rewind(loaded.get(), 5), LLM_ERR_INVALID_ARGUMENT);
  }
}

TEST_F(SlidingWindowTest, BatchedSessionsMatchSessionsRunAlone) {
  // Four sessions with different prompt lengths decoding concurrently: the
  // batcher merges their steps; each must see the logits it sees alone.
  const size_t lens[4] = {70, 129, 200, 5};
  std::vector<std::vector<float>> alone(4);
  for (int i = 0; i < 4; ++i) {
    SessionPtr s = NewSession();
    const std::vector<llm_token> p = RandomTokens(lens[i], 10 + i);
    ASSERT_EQ(llm_session_prefill(s.get(), p.data(), p.size()), LLM_OK);
    for (int k = 0; k < 40; ++k) {
      llm_token t = -1;
      ASSERT_EQ(llm_session_decode(s.get(), &t), LLM_OK);
    }
    alone[i] = Logits(s.get());
  }
  std::vector<SessionPtr> sessions;
  for (int i = 0; i < 4; ++i) sessions.push_back(NewSession());
  std::vector<std::thread> threads;
  std::vector<std::vector<float>> together(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      const std::vector<llm_token> p = RandomTokens(lens[i], 10 + i);
      if (llm_session_prefill(sessions[i].get(), p.data(), p.size()) != LLM_OK) return;
      for (int k = 0; k < 40; ++k) {
        llm_token t = -1;
        if (llm_session_decode(sessions[i].get(), &t) != LLM_OK) return;
      }
      const float *l = nullptr;
      size_t n = 0;
      if (llm_session_logits(sessions[i].get(), &l, &n) == LLM_OK) together[i].assign(l, l + n);
    });
  }
  for (auto &t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(together[i].size(), alone[i].size()) << "session " << i << " failed";
    EXPECT_LE(MaxAbsDiff(together[i], alone[i]), 1e-3) << "session " << i;
  }
}

}  // namespace
