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
#include "session_util.h"
#include "test_util.h"

namespace {

constexpr int64_t kWindow = 64;

using llm_abi_test::Logits;
using llm_abi_test::MaxAbsDiff;
using llm_abi_test::ModelPtr;
using llm_abi_test::RandomTokens;
using llm_abi_test::SessionPtr;

std::string MistralPath() { return llm_abi_test::TinyModelDir() + "/tiny-mistral-swa-F16.gguf"; }

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
  ModelPtr model_;
};

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
  llm_abi_test::ExpectBatchedSessionsMatchAlone([this] { return NewSession(); });
}

}  // namespace
