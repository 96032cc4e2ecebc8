// Session helpers shared by the ABI tests that drive models position by
// position (sliding window, Gemma KV split, LongRoPE): owning pointers,
// random prompts, logits copies, and the check that the batcher changes no
// session's logits. Uses only include/llm/llm.h, like test_util.h.
#ifndef LLM_TESTS_ABI_SESSION_UTIL_H_
#define LLM_TESTS_ABI_SESSION_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "llm/llm.h"

namespace llm_abi_test {

struct ModelDeleter {
  void operator()(llm_model *m) const { llm_model_free(m); }
};
struct SessionDeleter {
  void operator()(llm_session *s) const { llm_session_free(s); }
};
using ModelPtr = std::unique_ptr<llm_model, ModelDeleter>;
using SessionPtr = std::unique_ptr<llm_session, SessionDeleter>;

// n token ids in [3, n_vocab): no BOS/EOS/UNK of the tiny vocabularies.
inline std::vector<llm_token> RandomTokens(size_t n, uint32_t seed, uint32_t n_vocab = 512) {
  std::mt19937 rng(seed);
  std::vector<llm_token> t(n);
  for (auto &x : t) x = static_cast<llm_token>(3 + rng() % (n_vocab - 3));
  return t;
}

// A copy of the session's current logits (empty when there are none).
inline std::vector<float> Logits(const llm_session *s) {
  const float *l = nullptr;
  size_t n = 0;
  EXPECT_EQ(llm_session_logits(s, &l, &n), LLM_OK) << llm_last_error();
  return l ? std::vector<float>(l, l + n) : std::vector<float>();
}

inline double MaxAbsDiff(const std::vector<float> &a, const std::vector<float> &b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return m;
}

// Four sessions with prompts of 70, 129, 200 and 5 tokens, then 40 greedy
// decodes each, run alone and then concurrently (the batcher merges their
// steps): each must end with the logits it has alone, within 1e-3.
inline void ExpectBatchedSessionsMatchAlone(const std::function<SessionPtr()> &new_session) {
  const size_t lens[4] = {70, 129, 200, 5};
  std::vector<std::vector<float>> alone(4);
  for (int i = 0; i < 4; ++i) {
    SessionPtr s = new_session();
    const std::vector<llm_token> p = RandomTokens(lens[i], 10 + i);
    ASSERT_EQ(llm_session_prefill(s.get(), p.data(), p.size()), LLM_OK);
    for (int k = 0; k < 40; ++k) {
      llm_token t = -1;
      ASSERT_EQ(llm_session_decode(s.get(), &t), LLM_OK);
    }
    alone[i] = Logits(s.get());
  }
  std::vector<SessionPtr> sessions;
  for (int i = 0; i < 4; ++i) sessions.push_back(new_session());
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

}  // namespace llm_abi_test

#endif  // LLM_TESTS_ABI_SESSION_UTIL_H_
