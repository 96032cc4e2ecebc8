// Phi-3 LongRoPE through the C ABI (tests/data/arch/tiny-phi3.gguf from
// tools/make_arch_models.py: original context 4096 of 131072, short factors
// 1 .. 2, long factors 6 .. 16). A session rotates with the long factors
// exactly when its n_ctx exceeds the original context (llama.cpp's rule,
// docs/ARCHITECTURE.md): the choice flips between n_ctx 4096 and 4097, is
// fixed for the session's life, keeps the prefix cache's variants apart and
// is checked by session load. Agreement with llama.cpp on each side is the
// teacher-forced test's (Arch/Phi3_FusedLongRope, Arch/Phi3_LongFactors).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "llm/llm.h"
#include "session_util.h"
#include "test_util.h"

namespace {

constexpr int32_t kOriginalCtx = 4096;  // phi3.rope.scaling.original_context_length

using llm_abi_test::Logits;
using llm_abi_test::MaxAbsDiff;
using llm_abi_test::ModelPtr;
using llm_abi_test::RandomTokens;
using llm_abi_test::SessionPtr;

std::string Phi3Path() { return llm_abi_test::TestDataPath("arch/tiny-phi3.gguf"); }

class LongRopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LLM_ABI_REQUIRE_FILE(Phi3Path());
    // Deterministic kernels: a prefix adopted from the cache and one
    // computed gives the same bits (docs/BATCHING.md), so logits compare
    // exactly whichever sessions ran before.
    llm_model_params mp;
    ASSERT_EQ(llm_model_params_init(&mp), LLM_OK);
    mp.deterministic = 1;
    llm_model *m = nullptr;
    ASSERT_EQ(llm_model_load(Phi3Path().c_str(), &mp, &m), LLM_OK) << llm_last_error();
    model_.reset(m);
  }
  SessionPtr NewSession(int32_t n_ctx) {
    llm_session_params sp;
    EXPECT_EQ(llm_session_params_init(&sp), LLM_OK);
    sp.n_ctx = n_ctx;
    sp.kv_type = LLM_KV_F32;
    llm_session *s = nullptr;
    EXPECT_EQ(llm_session_create(model_.get(), &sp, &s), LLM_OK) << llm_last_error();
    return SessionPtr(s);
  }
  // The next-token logits after prefilling tokens into a fresh session.
  std::vector<float> LogitsAfter(int32_t n_ctx, const std::vector<llm_token> &tokens) {
    SessionPtr s = NewSession(n_ctx);
    if (s == nullptr) return {};
    return Prefill(s.get(), tokens);
  }
  static std::vector<float> Prefill(llm_session *s, const std::vector<llm_token> &tokens) {
    EXPECT_EQ(llm_session_prefill(s, tokens.data(), tokens.size()), LLM_OK) << llm_last_error();
    return Logits(s);
  }
  static double MaxAbsDiff(const std::vector<float> &a, const std::vector<float> &b) {
    EXPECT_EQ(a.size(), b.size());
    double m = 0.0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
    }
    return m;
  }
  ModelPtr model_;
};

// The boundary: every n_ctx up to the original context gives the short
// factors' logits, bit for bit; every n_ctx above it the long ones; and the
// two differ clearly (the factors differ by 4 to 12x), at positions far
// below 4096 too: llama.cpp chooses per context, not per position.
TEST_F(LongRopeTest, ChoiceFlipsAboveTheOriginalContext) {
  const std::vector<llm_token> prompt = RandomTokens(40, 7);
  const std::vector<float> short64 = LogitsAfter(64, prompt);
  const std::vector<float> short4095 = LogitsAfter(kOriginalCtx - 1, prompt);
  const std::vector<float> short4096 = LogitsAfter(kOriginalCtx, prompt);
  const std::vector<float> long4097 = LogitsAfter(kOriginalCtx + 1, prompt);
  const std::vector<float> long8192 = LogitsAfter(2 * kOriginalCtx, prompt);
  ASSERT_EQ(short64.size(), 512u);
  EXPECT_EQ(MaxAbsDiff(short64, short4095), 0.0);
  EXPECT_EQ(MaxAbsDiff(short64, short4096), 0.0);
  EXPECT_EQ(MaxAbsDiff(long4097, long8192), 0.0);
  EXPECT_GT(MaxAbsDiff(short4096, long4097), 0.05)
      << "n_ctx 4097 must rotate with the long factors";
}

// A short session's cached prefix is not handed to a long session (their K
// rows differ), but long sessions share prefixes among themselves.
TEST_F(LongRopeTest, PrefixCacheKeepsShortAndLongApart) {
  const std::vector<llm_token> prompt = RandomTokens(70, 11);                  // > 4 F32 blocks
  const std::vector<float> want_long = LogitsAfter(2 * kOriginalCtx, prompt);  // registers long
  {
    SessionPtr s = NewSession(kOriginalCtx);
    const std::vector<float> got = Prefill(s.get(), prompt);
    llm_session_stats st;
    ASSERT_EQ(llm_session_stats_init(&st), LLM_OK);
    ASSERT_EQ(llm_session_get_stats(s.get(), &st), LLM_OK);
    EXPECT_EQ(st.cached_tokens, 0u) << "a short session adopted a long session's KV";
    EXPECT_GT(MaxAbsDiff(got, want_long), 0.05);
  }
  SessionPtr s = NewSession(kOriginalCtx + 1);
  const std::vector<float> got = Prefill(s.get(), prompt);
  llm_session_stats st;
  ASSERT_EQ(llm_session_stats_init(&st), LLM_OK);
  ASSERT_EQ(llm_session_get_stats(s.get(), &st), LLM_OK);
  EXPECT_GT(st.cached_tokens, 0u) << "long sessions should share their prefix";
  EXPECT_EQ(MaxAbsDiff(got, want_long), 0.0);
}

// Saved KV carries its rotation: a long session's buffer loads into another
// long session (any n_ctx above 4096) but not into a short one, and vice
// versa; the refused session is unchanged. A fork rotates as its parent.
TEST_F(LongRopeTest, SaveLoadAndForkKeepTheRotation) {
  const std::vector<llm_token> prompt = RandomTokens(30, 5);
  const std::vector<llm_token> next = RandomTokens(3, 6);
  SessionPtr long_s = NewSession(kOriginalCtx + 100);
  SessionPtr short_s = NewSession(kOriginalCtx);
  Prefill(long_s.get(), prompt);
  Prefill(short_s.get(), prompt);
  for (llm_session *from : {long_s.get(), short_s.get()}) {
    const bool from_long = from == long_s.get();
    SCOPED_TRACE(from_long ? "saved from long" : "saved from short");
    size_t size = 0;
    ASSERT_EQ(llm_session_save(from, nullptr, 0, &size), LLM_ERR_BUFFER_TOO_SMALL);
    std::vector<uint8_t> buf(size);
    ASSERT_EQ(llm_session_save(from, buf.data(), buf.size(), &size), LLM_OK) << llm_last_error();

    SessionPtr other = NewSession(from_long ? kOriginalCtx : 3 * kOriginalCtx);
    const std::vector<float> before = Prefill(other.get(), next);
    EXPECT_EQ(llm_session_load(other.get(), buf.data(), buf.size()), LLM_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(llm_last_error()).find("LongRoPE"), std::string::npos)
        << llm_last_error();
    EXPECT_EQ(MaxAbsDiff(Logits(other.get()), before), 0.0) << "a refused load changed the session";

    SessionPtr same = NewSession(from_long ? 2 * kOriginalCtx : 256);
    ASSERT_EQ(llm_session_load(same.get(), buf.data(), buf.size()), LLM_OK) << llm_last_error();
    const std::vector<float> after_load = Prefill(same.get(), next);
    const std::vector<float> direct = Prefill(from, next);
    EXPECT_EQ(MaxAbsDiff(after_load, direct), 0.0);

    llm_session *child_raw = nullptr;
    ASSERT_EQ(llm_session_fork(from, &child_raw), LLM_OK) << llm_last_error();
    SessionPtr child(child_raw);
    const std::vector<float> child_logits = Prefill(child.get(), next);
    const std::vector<float> same_logits = Prefill(same.get(), next);
    EXPECT_EQ(MaxAbsDiff(child_logits, same_logits), 0.0);
  }
}

}  // namespace
