// The forward pass takes a ragged batch: sessions run together in one pass
// must give exactly (bit for bit) what each gives alone, and sessions driven
// from different threads at once must not disturb each other.
#include <thread>
#include <vector>

#include "engine/model.h"
#include "engine/session.h"
#include "engine_test_util.h"
#include "gtest/gtest.h"

namespace llm {
namespace {

class BatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = testing::RealModelPath();
    LLM_REQUIRE_MODEL(path);
    auto model = Model::LoadFile(path, ModelLoadOptions{});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
  }

  std::unique_ptr<Session> NewSession(int n_threads = 2) {
    SessionOptions options;
    options.n_ctx = 256;
    options.n_threads = n_threads;
    options.sampler.temperature = 0;  // greedy
    auto s = Session::Create(model_, options);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  // Prefill alone, then n greedy decode steps; returns the logits after each step.
  std::vector<std::vector<float>> RunAlone(const std::vector<int32_t>& prompt, int n,
                                           std::vector<int32_t>* generated) {
    auto s = NewSession();
    std::vector<std::vector<float>> out;
    EXPECT_TRUE(s->Prefill(prompt).ok());
    out.emplace_back(s->logits().begin(), s->logits().end());
    for (int i = 0; i < n; ++i) {
      auto t = s->Decode();
      EXPECT_TRUE(t.ok()) << t.status();
      generated->push_back(*t);
      out.emplace_back(s->logits().begin(), s->logits().end());
    }
    return out;
  }

  std::shared_ptr<Model> model_;
};

TEST_F(BatchTest, TwoSessionsInOnePassMatchEachAloneBitForBit) {
  const std::vector<int32_t> prompt_a = {1, 504, 3458, 282, 4214};
  const std::vector<int32_t> prompt_b = {1, 28120, 905, 314, 260, 1345, 6021, 30, 216};
  std::vector<int32_t> gen_a, gen_b;
  auto alone_a = RunAlone(prompt_a, 6, &gen_a);
  auto alone_b = RunAlone(prompt_b, 6, &gen_b);

  auto a = NewSession();
  auto b = NewSession();
  const SchedulerStats before = model_->scheduler().stats();
  // Both steps are queued before either is collected, so the batcher runs
  // them together (the prompts in one pass of 14 rows, then pairs of decode
  // rows), except when its thread starts a pass between the two submits.
  ASSERT_TRUE(a->SubmitPrefill(prompt_a).ok());
  ASSERT_TRUE(b->SubmitPrefill(prompt_b).ok());
  ASSERT_TRUE(a->Wait(nullptr).ok());
  ASSERT_TRUE(b->Wait(nullptr).ok());
  for (int step = 0; step <= 6; ++step) {
    const std::vector<float> la(a->logits().begin(), a->logits().end());
    const std::vector<float> lb(b->logits().begin(), b->logits().end());
    ASSERT_EQ(la, alone_a[step]) << "session A differs at step " << step;
    ASSERT_EQ(lb, alone_b[step]) << "session B differs at step " << step;
    if (step == 6) break;
    ASSERT_TRUE(a->SubmitDecode().ok());
    ASSERT_TRUE(b->SubmitDecode().ok());
    int32_t ta = -1, tb = -1;
    ASSERT_TRUE(a->Wait(&ta).ok());
    ASSERT_TRUE(b->Wait(&tb).ok());
    ASSERT_EQ(ta, gen_a[step]);
    ASSERT_EQ(tb, gen_b[step]);
  }
  const SchedulerStats after = model_->scheduler().stats();
  EXPECT_GE(after.max_chunks_in_pass, 2u) << "the two sessions never shared a pass";
  EXPECT_LE(after.iterations - before.iterations, 14u);
}

TEST_F(BatchTest, SessionsOnDifferentThreadsMatchAlone) {
  const std::vector<int32_t> prompt_a = {1, 504, 3458, 282, 4214};
  const std::vector<int32_t> prompt_b = {1, 28120, 905, 314, 260, 1345, 6021, 30, 216};
  std::vector<int32_t> alone_a, alone_b;
  RunAlone(prompt_a, 12, &alone_a);
  RunAlone(prompt_b, 12, &alone_b);

  std::vector<int32_t> got_a, got_b;
  auto worker = [this](const std::vector<int32_t>& prompt, std::vector<int32_t>* out) {
    auto s = NewSession(1);
    ASSERT_TRUE(s->Prefill(prompt).ok());
    for (int i = 0; i < 12; ++i) out->push_back(*s->Decode());
  };
  std::thread ta(worker, prompt_a, &got_a);
  std::thread tb(worker, prompt_b, &got_b);
  ta.join();
  tb.join();
  EXPECT_EQ(got_a, alone_a);
  EXPECT_EQ(got_b, alone_b);
}

}  // namespace
}  // namespace llm
