// llm_generate through the public ABI on the real model: streamed pieces are
// valid UTF-8 and add up to the text, stop strings cut exactly, callbacks can
// stop, and a chat answer ends on an end-of-generation token.
#include <string>
#include <vector>

#include "llm/llm.h"
#include "test_util.h"

namespace {

// Strict UTF-8 check: lead byte, continuation bytes, no truncated sequence.
bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    }
    i += n;
  }
  return true;
}

struct Collected {
  std::vector<std::string> pieces;
  int stop_after = -1;  // return non-zero after this many pieces
};

int32_t Collect(const char* text, size_t len, void* user) {
  auto* c = static_cast<Collected*>(user);
  c->pieces.emplace_back(text, len);
  return c->stop_after >= 0 && static_cast<int>(c->pieces.size()) >= c->stop_after ? 1 : 0;
}

class GenerateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = llm_abi_test::DefaultModelPath();
    LLM_ABI_REQUIRE_FILE(path);
    ASSERT_EQ(llm_model_load(path.c_str(), nullptr, &model_), LLM_OK) << llm_last_error();
  }
  void TearDown() override { llm_model_free(model_); }

  std::vector<llm_token> ChatPrompt(const char* user) {
    llm_chat_message m = {"user", user};
    char buf[4096];
    size_t len = 0;
    EXPECT_EQ(llm_chat_format(model_, nullptr, &m, 1, 1, buf, sizeof buf, &len), LLM_OK)
        << llm_last_error();
    std::vector<llm_token> tokens(1024);
    size_t n = 0;
    EXPECT_EQ(llm_tokenize(model_, buf, len, 1, 1, tokens.data(), tokens.size(), &n), LLM_OK);
    tokens.resize(n);
    return tokens;
  }

  // Greedy generation; returns the concatenated text.
  std::string Run(const std::vector<llm_token>& prompt, int max_tokens, const char* stop,
                  Collected* c, llm_generate_result* r, int n_ctx = 512) {
    llm_session_params sp;
    llm_session_params_init(&sp);
    sp.sampler.temperature = 0;
    sp.n_ctx = n_ctx;
    llm_session* s = nullptr;
    EXPECT_EQ(llm_session_create(model_, &sp, &s), LLM_OK) << llm_last_error();
    llm_generate_params gp;
    llm_generate_params_init(&gp);
    gp.max_tokens = max_tokens;
    gp.on_piece = Collect;
    gp.user = c;
    const char* stops[] = {stop};
    if (stop != nullptr) {
      gp.stop = stops;
      gp.n_stop = 1;
    }
    llm_generate_result_init(r);
    EXPECT_EQ(llm_generate(s, prompt.data(), prompt.size(), &gp, r), LLM_OK) << llm_last_error();
    llm_session_free(s);
    std::string text;
    for (const std::string& p : c->pieces) text += p;
    return text;
  }

  llm_model* model_ = nullptr;
};

TEST_F(GenerateTest, ChatAnswerStreamsValidUtf8AndEndsOnEog) {
  Collected c;
  llm_generate_result r;
  const std::string text = Run(ChatPrompt("What is the capital of France? Answer in one sentence."), 96,
                               nullptr, &c, &r);
  EXPECT_EQ(r.stop_reason, LLM_STOP_EOG);
  EXPECT_GT(r.n_generated, 1);
  EXPECT_NE(text.find("Paris"), std::string::npos) << text;
  for (const std::string& p : c.pieces) EXPECT_TRUE(IsValidUtf8(p)) << p;
  EXPECT_EQ(text.find("<|im_end|>"), std::string::npos) << "EOG text must not be emitted";
}

TEST_F(GenerateTest, StopStringCutsTheTextExactlyBeforeIt) {
  const auto prompt = ChatPrompt("Count from one to twenty in words, separated by commas.");
  Collected full;
  llm_generate_result r;
  const std::string text = Run(prompt, 48, nullptr, &full, &r);
  ASSERT_GT(text.size(), 20u) << text;
  // A stop string taken from the middle of the greedy output.
  const std::string stop = text.substr(text.size() / 2, 4);
  const size_t expected_end = text.find(stop);
  Collected cut;
  const std::string stopped = Run(prompt, 48, stop.c_str(), &cut, &r);
  EXPECT_EQ(r.stop_reason, LLM_STOP_STRING);
  EXPECT_EQ(stopped, text.substr(0, expected_end));
}

TEST_F(GenerateTest, CallbackCanStop) {
  Collected c;
  c.stop_after = 2;
  llm_generate_result r;
  Run(ChatPrompt("Tell me a long story about a dragon."), 64, nullptr, &c, &r);
  EXPECT_EQ(r.stop_reason, LLM_STOP_CALLBACK);
  EXPECT_EQ(c.pieces.size(), 2u);
}

TEST_F(GenerateTest, MaxTokensIsRespected) {
  Collected c;
  llm_generate_result r;
  Run(ChatPrompt("Tell me a long story about a dragon."), 5, nullptr, &c, &r);
  EXPECT_EQ(r.stop_reason, LLM_STOP_MAX_TOKENS);
  EXPECT_EQ(r.n_generated, 5);
}

TEST_F(GenerateTest, EndOfContextStopsWithItsOwnReason) {
  Collected c;
  llm_generate_result r;
  const auto prompt = ChatPrompt("Tell me a long story about a dragon.");
  Run(prompt, 100, nullptr, &c, &r, static_cast<int>(prompt.size()) + 5);
  EXPECT_EQ(r.stop_reason, LLM_STOP_CONTEXT_FULL);
  EXPECT_EQ(r.n_generated, 5);
}

}  // namespace
