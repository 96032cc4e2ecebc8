// The iteration-level batcher, driven through a fake StepExecutor that
// records every pass (which clients, which tokens), can refuse a client's
// Prepare or fail a Run, and can hold each Run on a gate so the test decides
// when a pass ends (and so knows exactly which steps were pending when the
// next pass was picked).
#include "engine/scheduler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "core/status.h"
#include "gtest/gtest.h"

namespace llm {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

class FakeExecutor : public StepExecutor {
 public:
  struct Chunk {
    SchedulerClient* client;
    std::vector<int32_t> tokens;
    bool last;
  };
  using Pass = std::vector<Chunk>;

  absl::Status Prepare(const ScheduledChunk& chunk) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = fail_prepare_.find(chunk.client);
    if (it != fail_prepare_.end()) {
      absl::Status s = it->second;
      fail_prepare_.erase(it);
      return s;
    }
    if (random_prepare_failures_ && rng_() % 8 == 0) {
      return Error(LLM_ERR_KV_FULL, "fake: no free KV blocks");
    }
    return absl::OkStatus();
  }

  absl::Status Run(absl::Span<const ScheduledChunk> chunks) override {
    std::unique_lock<std::mutex> lock(mu_);
    Pass pass;
    for (const ScheduledChunk& c : chunks) {
      pass.push_back(
          Chunk{c.client, std::vector<int32_t>(c.tokens.begin(), c.tokens.end()), c.last});
    }
    const size_t index = passes_.size();
    passes_.push_back(pass);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !gated_ || permits_ > 0; });
    if (gated_) --permits_;
    absl::Status status = absl::OkStatus();
    auto fail = fail_run_.find(index);
    if (fail != fail_run_.end()) status = fail->second;
    if (status.ok()) {
      for (const Chunk& c : pass) {
        auto& rec = recorded_[c.client];
        rec.insert(rec.end(), c.tokens.begin(), c.tokens.end());
        total_tokens_ += c.tokens.size();
      }
    }
    const microseconds work = work_;
    lock.unlock();
    if (work.count() > 0) std::this_thread::sleep_for(work);  // the "forward pass"
    return status;
  }

  // Each Run blocks until Release() lets one pass through.
  void Gate() {
    std::lock_guard<std::mutex> lock(mu_);
    gated_ = true;
  }
  void Ungate() {
    std::lock_guard<std::mutex> lock(mu_);
    gated_ = false;
    cv_.notify_all();
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    ++permits_;
    cv_.notify_all();
  }
  // Waits until n Runs have been entered (false after 10 s: the test failed).
  bool WaitEntered(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return entered_ >= n; });
  }
  size_t entered() {
    std::lock_guard<std::mutex> lock(mu_);
    return entered_;
  }
  void FailPrepare(SchedulerClient* c, absl::Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_prepare_[c] = std::move(s);
  }
  void FailRun(size_t pass_index, absl::Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_run_[pass_index] = std::move(s);
  }
  void SetWork(microseconds w) {
    std::lock_guard<std::mutex> lock(mu_);
    work_ = w;
  }
  void SetRandomPrepareFailures(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    random_prepare_failures_ = on;
  }
  std::vector<Pass> passes() {
    std::lock_guard<std::mutex> lock(mu_);
    return passes_;
  }
  std::vector<int32_t> recorded(SchedulerClient* c) {
    std::lock_guard<std::mutex> lock(mu_);
    return recorded_[c];
  }
  uint64_t total_tokens() {
    std::lock_guard<std::mutex> lock(mu_);
    return total_tokens_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pass> passes_;
  size_t entered_ = 0;
  bool gated_ = false;
  int permits_ = 0;
  microseconds work_{0};
  std::map<SchedulerClient*, absl::Status> fail_prepare_;
  std::map<size_t, absl::Status> fail_run_;
  std::map<SchedulerClient*, std::vector<int32_t>> recorded_;
  uint64_t total_tokens_ = 0;
  bool random_prepare_failures_ = false;
  std::mt19937 rng_{7};
};

std::vector<int32_t> RandomTokens(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(0, 49151);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = dist(rng);
  return t;
}

bool Contains(const FakeExecutor::Pass& pass, const SchedulerClient* c) {
  return std::any_of(pass.begin(), pass.end(), [&](const auto& ch) { return ch.client == c; });
}

llm_status Code(const absl::Status& s) { return ToLlmStatus(s); }

TEST(SchedulerTest, BudgetRespectedDecodesFirstPrefillChunked) {
  std::mt19937 rng(11);
  FakeExecutor ex;
  ex.Gate();
  Scheduler sched(&ex, SchedulerOptions{10, 4});
  SchedulerClient blocker;
  std::vector<std::unique_ptr<SchedulerClient>> decodes, prefills;
  for (int i = 0; i < 5; ++i) decodes.push_back(std::make_unique<SchedulerClient>());
  for (int i = 0; i < 3; ++i) prefills.push_back(std::make_unique<SchedulerClient>());
  sched.Attach(&blocker);
  for (auto& c : decodes) sched.Attach(c.get());
  for (auto& c : prefills) sched.Attach(c.get());

  const std::vector<int32_t> blocker_tokens = RandomTokens(2, rng);
  ASSERT_TRUE(sched.Submit(&blocker, blocker_tokens).ok());
  ASSERT_TRUE(ex.WaitEntered(1));  // pass 0 holds only the blocker
  std::vector<std::vector<int32_t>> dtok, ptok;
  for (auto& c : decodes) {
    dtok.push_back(RandomTokens(1, rng));
    ASSERT_TRUE(sched.Submit(c.get(), dtok.back()).ok());
  }
  const size_t sizes[3] = {9, 6, 11};
  for (int i = 0; i < 3; ++i) {
    ptok.push_back(RandomTokens(sizes[i], rng));
    ASSERT_TRUE(sched.Submit(prefills[i].get(), ptok.back()).ok());
  }
  ex.Ungate();
  EXPECT_TRUE(sched.Wait(&blocker).ok());
  for (auto& c : decodes) EXPECT_TRUE(sched.Wait(c.get()).ok());
  for (auto& c : prefills) EXPECT_TRUE(sched.Wait(c.get()).ok());

  const auto passes = ex.passes();
  ASSERT_GE(passes.size(), 2u);
  // Pass 1: all five decodes first, then the budget's remaining 5 tokens to
  // the prefills in FIFO order, at most max_chunk (4) each.
  const auto& p1 = passes[1];
  ASSERT_EQ(p1.size(), 7u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(p1[i].tokens.size(), 1u);
    EXPECT_TRUE(p1[i].last);
  }
  EXPECT_EQ(p1[5].client, prefills[0].get());
  EXPECT_EQ(p1[5].tokens.size(), 4u);
  EXPECT_EQ(p1[6].client, prefills[1].get());
  EXPECT_EQ(p1[6].tokens.size(), 1u);
  for (const auto& pass : passes) {
    size_t tokens = 0;
    bool seen_prefill = false;
    for (const auto& ch : pass) {
      tokens += ch.tokens.size();
      const bool is_decode = std::any_of(decodes.begin(), decodes.end(),
                                         [&](const auto& d) { return d.get() == ch.client; });
      if (is_decode) {
        EXPECT_FALSE(seen_prefill) << "a decode step after a prefill chunk";
      }
      if (!is_decode) {
        seen_prefill = true;
        EXPECT_LE(ch.tokens.size(), 4u);
      }
    }
    EXPECT_LE(tokens, 10u);
    EXPECT_GE(tokens, 1u);
  }
  // Every step's tokens ran once, in order; `last` only on the final chunk.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(ex.recorded(decodes[i].get()), dtok[i]);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ex.recorded(prefills[i].get()), ptok[i]);
    size_t seen = 0;
    for (const auto& pass : passes) {
      for (const auto& ch : pass) {
        if (ch.client != prefills[i].get()) continue;
        seen += ch.tokens.size();
        EXPECT_EQ(ch.last, seen == ptok[i].size());
      }
    }
  }
  const SchedulerStats st = sched.stats();
  EXPECT_EQ(st.iterations, passes.size());
  EXPECT_EQ(st.decode_rows, 5u);
  EXPECT_EQ(st.decode_iterations, 1u);
  EXPECT_EQ(st.tokens, 2u + 5 + 9 + 6 + 11);
  EXPECT_EQ(st.steps_completed, 9u);
  EXPECT_EQ(st.steps_failed, 0u);
  EXPECT_EQ(st.max_chunks_in_pass, 7u);
  sched.Detach(&blocker);
  for (auto& c : decodes) sched.Detach(c.get());
  for (auto& c : prefills) sched.Detach(c.get());
}

// A 1000-token prompt runs in max_chunk pieces while three other sessions
// decode; no decode step waits for more than the pass already in flight.
TEST(SchedulerTest, LongPrefillIsChunkedWhileOthersDecode) {
  std::mt19937 rng(12);
  FakeExecutor ex;
  ex.SetWork(microseconds(100));
  Scheduler sched(&ex, SchedulerOptions{64, 16});
  SchedulerClient prefill;
  SchedulerClient dec[3];
  sched.Attach(&prefill);
  for (auto& d : dec) sched.Attach(&d);
  const std::vector<int32_t> prompt = RandomTokens(1000, rng);
  std::atomic<bool> prefill_done{false};
  std::vector<std::vector<size_t>> submit_at(3);  // passes entered when each step was submitted
  std::vector<std::vector<int32_t>> dtokens(3);
  for (int i = 0; i < 3; ++i) dtokens[i] = RandomTokens(400, rng);

  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      for (size_t k = 0; k < dtokens[i].size() && !prefill_done.load(); ++k) {
        ASSERT_TRUE(sched.Submit(&dec[i], absl::MakeConstSpan(&dtokens[i][k], 1)).ok());
        // Read after Submit: at most this many passes had started when the
        // step was queued (reading before could miss passes started between).
        submit_at[i].push_back(ex.entered());
        ASSERT_TRUE(sched.Wait(&dec[i]).ok());
      }
    });
  }
  ASSERT_TRUE(sched.Submit(&prefill, prompt).ok());
  EXPECT_TRUE(sched.Wait(&prefill).ok());
  prefill_done = true;
  for (auto& t : threads) t.join();

  EXPECT_EQ(ex.recorded(&prefill), prompt);
  const auto passes = ex.passes();
  std::vector<size_t> chunk_sizes;
  for (const auto& pass : passes) {
    for (const auto& ch : pass) {
      if (ch.client == &prefill) chunk_sizes.push_back(ch.tokens.size());
    }
  }
  ASSERT_EQ(chunk_sizes.size(), 63u);  // 62 x 16 + 8
  for (size_t i = 0; i + 1 < chunk_sizes.size(); ++i) EXPECT_EQ(chunk_sizes[i], 16u);
  EXPECT_EQ(chunk_sizes.back(), 8u);
  // The prefill had a chunk in every pass from its first to its last.
  size_t first = passes.size(), last = 0;
  for (size_t p = 0; p < passes.size(); ++p) {
    if (Contains(passes[p], &prefill)) {
      first = std::min(first, p);
      last = p;
    }
  }
  for (size_t p = first; p <= last; ++p) EXPECT_TRUE(Contains(passes[p], &prefill)) << p;
  // When the k-th decode step was queued, at most submit_at[i][k] passes had
  // started; pass index submit_at (possibly picked already) is the latest it
  // may miss, so it runs in pass index <= submit_at + 1.
  for (int i = 0; i < 3; ++i) {
    size_t k = 0;
    for (size_t p = 0; p < passes.size() && k < submit_at[i].size(); ++p) {
      if (!Contains(passes[p], &dec[i])) continue;
      EXPECT_LE(p, submit_at[i][k] + 1) << "decode step " << k << " of client " << i;
      ++k;
    }
    EXPECT_EQ(k, submit_at[i].size());
    EXPECT_EQ(ex.recorded(&dec[i]),
              std::vector<int32_t>(dtokens[i].begin(), dtokens[i].begin() + submit_at[i].size()));
  }
  sched.Detach(&prefill);
  for (auto& d : dec) sched.Detach(&d);
}

// Drives a gated scheduler one pass at a time: while pass r is held in Run
// (its content fixed), every decode client whose step ended is resubmitted,
// so the test knows exactly when each step became pending.
struct Stepper {
  FakeExecutor& ex;
  Scheduler& sched;
  // Waits for pass r to be in Run; returns it.
  FakeExecutor::Pass Enter(size_t r) {
    EXPECT_TRUE(ex.WaitEntered(r + 1)) << "pass " << r << " never started";
    return ex.passes().at(r);
  }
};

TEST(SchedulerTest, NoDecodeStarvesWhenDecodesExceedTheBudget) {
  std::mt19937 rng(13);
  FakeExecutor ex;
  ex.Gate();
  const int64_t budget = 4;
  const size_t n = 13;
  Scheduler sched(&ex, SchedulerOptions{budget, 4});
  std::vector<std::unique_ptr<SchedulerClient>> clients;
  std::vector<std::vector<int32_t>> tokens(n);
  std::vector<size_t> pending_since(n);
  for (size_t i = 0; i < n; ++i) {
    clients.push_back(std::make_unique<SchedulerClient>());
    sched.Attach(clients[i].get());
    tokens[i] = RandomTokens(1, rng);
  }
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(sched.Submit(clients[i].get(), tokens[i]).ok());
    pending_since[i] = 0;
  }
  Stepper step{ex, sched};
  const size_t bound = static_cast<size_t>((n + budget - 1) / budget);  // ceil(13/4) = 4
  std::vector<size_t> served(n, 0);
  for (size_t r = 0; r < 40; ++r) {
    const auto pass = step.Enter(r);
    EXPECT_LE(pass.size(), static_cast<size_t>(budget));
    for (size_t i = 0; i < n; ++i) {
      if (Contains(pass, clients[i].get())) {
        ++served[i];
        EXPECT_LE(r, pending_since[i] + bound) << "client " << i << " starved";
      } else if (r > pending_since[i] + bound) {
        ADD_FAILURE() << "client " << i << " pending since pass " << pending_since[i]
                      << " still not served in pass " << r;
      }
      absl::Status st;
      if (sched.Poll(clients[i].get(), &st)) {  // ended in an earlier pass
        EXPECT_TRUE(st.ok()) << st;
        tokens[i] = RandomTokens(1, rng);
        ASSERT_TRUE(sched.Submit(clients[i].get(), tokens[i]).ok());
        pending_since[i] = r + 1;  // pass r+1 is not picked yet: the thread is in Run
      }
    }
    ex.Release();
  }
  for (size_t i = 0; i < n; ++i) EXPECT_GE(served[i], 8u) << i;  // 40 passes x 4 / 13 ~ 12
  ex.Ungate();
  for (auto& c : clients) sched.Detach(c.get());
}

// Decodes fill the whole budget in every pass, yet the prefill steps advance:
// a prefill step waits at most P+1 passes (P = prefill steps pending).
TEST(SchedulerTest, PrefillsProgressWhenDecodesFillTheBudget) {
  std::mt19937 rng(14);
  FakeExecutor ex;
  ex.Gate();
  const int64_t budget = 8;
  Scheduler sched(&ex, SchedulerOptions{budget, 5});
  SchedulerClient blocker;
  sched.Attach(&blocker);
  const std::vector<int32_t> blocker_tokens = RandomTokens(1, rng);  // valid until collected
  ASSERT_TRUE(sched.Submit(&blocker, blocker_tokens).ok());
  Stepper step{ex, sched};
  step.Enter(0);

  const size_t n_dec = 20;
  std::vector<std::unique_ptr<SchedulerClient>> dec;
  std::vector<std::vector<int32_t>> dtok(n_dec);
  for (size_t i = 0; i < n_dec; ++i) {
    dec.push_back(std::make_unique<SchedulerClient>());
    sched.Attach(dec[i].get());
    dtok[i] = RandomTokens(1, rng);
    ASSERT_TRUE(sched.Submit(dec[i].get(), dtok[i]).ok());
  }
  const size_t sizes[3] = {11, 7, 9};
  SchedulerClient pre[3];
  std::vector<int32_t> ptok[3];
  for (int i = 0; i < 3; ++i) {
    sched.Attach(&pre[i]);
    ptok[i] = RandomTokens(sizes[i], rng);
    ASSERT_TRUE(sched.Submit(&pre[i], ptok[i]).ok());
  }
  ex.Release();                         // pass 0
  std::vector<size_t> last_seen(3, 0);  // pending since pass 1
  bool finished[3] = {false, false, false};
  size_t r = 1;
  for (; r < 200 && !(finished[0] && finished[1] && finished[2]); ++r) {
    const auto pass = step.Enter(r);
    size_t tokens = 0, decode_rows = 0;
    for (const auto& ch : pass) {
      tokens += ch.tokens.size();
      if (ch.tokens.size() == 1 && ch.last &&
          std::any_of(dec.begin(), dec.end(),
                      [&](const auto& d) { return d.get() == ch.client; })) {
        ++decode_rows;
      }
    }
    EXPECT_EQ(tokens, static_cast<size_t>(budget)) << "decodes alone fill every pass";
    EXPECT_GE(decode_rows, static_cast<size_t>(budget - budget / 4)) << "the reserve is bounded";
    size_t pending_prefills = 0;
    for (int i = 0; i < 3; ++i) pending_prefills += finished[i] ? 0 : 1;
    for (int i = 0; i < 3; ++i) {
      if (finished[i]) continue;
      if (Contains(pass, &pre[i])) {
        last_seen[i] = r;
      } else {
        EXPECT_LE(r - last_seen[i], pending_prefills + 1) << "prefill " << i << " starved";
      }
      absl::Status st;
      if (sched.Poll(&pre[i], &st)) {
        EXPECT_TRUE(st.ok()) << st;
        finished[i] = true;
      }
    }
    for (size_t i = 0; i < n_dec; ++i) {
      absl::Status st;
      if (sched.Poll(dec[i].get(), &st)) {
        EXPECT_TRUE(st.ok()) << st;
        dtok[i] = RandomTokens(1, rng);
        ASSERT_TRUE(sched.Submit(dec[i].get(), dtok[i]).ok());
      }
    }
    ex.Release();
  }
  ex.Ungate();
  for (int i = 0; i < 3; ++i) {
    if (!finished[i]) {
      EXPECT_TRUE(sched.Wait(&pre[i]).ok());
    }
    EXPECT_EQ(ex.recorded(&pre[i]), ptok[i]);
  }
  EXPECT_LT(r, 60u);  // 27 prefill tokens at >= 2 a pass, shared by 3
  sched.Detach(&blocker);
  for (auto& d : dec) sched.Detach(d.get());
  for (auto& p : pre) sched.Detach(&p);
}

TEST(SchedulerTest, BudgetOfOneRoundRobinsAllSteps) {
  std::mt19937 rng(15);
  FakeExecutor ex;
  Scheduler sched(&ex, SchedulerOptions{1, 1});
  SchedulerClient a, b;
  sched.Attach(&a);
  sched.Attach(&b);
  const auto ta = RandomTokens(5, rng);
  std::vector<int32_t> tb;
  ASSERT_TRUE(sched.Submit(&a, ta).ok());
  for (int k = 0; k < 20; ++k) {
    tb.push_back(RandomTokens(1, rng)[0]);
    ASSERT_TRUE(sched.Submit(&b, absl::MakeConstSpan(&tb.back(), 1)).ok());
    ASSERT_TRUE(sched.Wait(&b).ok());
  }
  EXPECT_TRUE(sched.Wait(&a).ok());
  EXPECT_EQ(ex.recorded(&a), ta);
  for (const auto& pass : ex.passes()) {
    ASSERT_EQ(pass.size(), 1u);
    EXPECT_EQ(pass[0].tokens.size(), 1u);
  }
  sched.Detach(&a);
  sched.Detach(&b);
}

TEST(SchedulerTest, JoinAndLeaveBetweenIterations) {
  std::mt19937 rng(16);
  FakeExecutor ex;
  ex.Gate();
  Scheduler sched(&ex, SchedulerOptions{16, 16});
  SchedulerClient a, b, c;
  sched.Attach(&a);
  sched.Attach(&b);
  const auto ta = RandomTokens(3, rng), tb = RandomTokens(1, rng), tc = RandomTokens(2, rng);
  ASSERT_TRUE(sched.Submit(&a, ta).ok());
  ASSERT_TRUE(ex.WaitEntered(1));  // pass 0 = {a}, held
  sched.Attach(&c);                // joins while a pass runs
  ASSERT_TRUE(sched.Submit(&b, tb).ok());
  ASSERT_TRUE(sched.Submit(&c, tc).ok());
  sched.Detach(&b);  // pending, not in a pass: cancelled and removed at once

  std::atomic<bool> detached{false};
  std::thread leaver([&] {
    sched.Detach(&a);  // a is in the running pass: waits for it
    detached = true;
  });
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(detached.load()) << "Detach returned while its client was in a running pass";
  ex.Release();
  leaver.join();
  EXPECT_TRUE(detached.load());
  ex.Ungate();
  EXPECT_TRUE(sched.Wait(&c).ok());
  const auto passes = ex.passes();
  ASSERT_GE(passes.size(), 2u);
  for (size_t p = 0; p < passes.size(); ++p) {
    EXPECT_FALSE(Contains(passes[p], &b));
    if (p > 0) {
      EXPECT_FALSE(Contains(passes[p], &a));
    }
  }
  EXPECT_TRUE(Contains(passes[1], &c));
  EXPECT_EQ(ex.recorded(&c), tc);
  // A detached client can be attached again and used.
  sched.Attach(&b);
  ASSERT_TRUE(sched.Submit(&b, tb).ok());
  EXPECT_TRUE(sched.Wait(&b).ok());
  EXPECT_EQ(ex.recorded(&b), tb);
  sched.Detach(&b);
  sched.Detach(&c);
  sched.Detach(&c);  // twice: no-op
}

TEST(SchedulerTest, CancelFromAnotherThreadDuringALongPrefill) {
  std::mt19937 rng(17);
  FakeExecutor ex;
  ex.SetWork(microseconds(200));
  Scheduler sched(&ex, SchedulerOptions{8, 8});
  SchedulerClient c;
  sched.Attach(&c);
  const auto prompt = RandomTokens(1000, rng);  // 125 chunks
  uint64_t after_cancel = 0;
  std::thread canceller([&] {
    while (c.chunks.load() < 5) std::this_thread::sleep_for(microseconds(50));
    sched.Cancel(&c);
    after_cancel = c.iterations.load();
  });
  ASSERT_TRUE(sched.Submit(&c, prompt).ok());
  const absl::Status st = sched.Wait(&c);
  canceller.join();
  EXPECT_EQ(Code(st), LLM_ERR_CANCELLED) << st;
  // At most the pass running when Cancel returned included the client.
  EXPECT_LE(c.iterations.load(), after_cancel + 1);
  EXPECT_EQ(c.iterations.load(), c.chunks.load());
  // The chunks that ran stay run: a prefix of the prompt, whole chunks.
  const auto rec = ex.recorded(&c);
  EXPECT_EQ(rec.size(), 8 * c.chunks.load());
  EXPECT_LT(rec.size(), prompt.size());
  EXPECT_TRUE(std::equal(rec.begin(), rec.end(), prompt.begin()));
  EXPECT_EQ(sched.stats().steps_failed, 1u);
  sched.Detach(&c);
}

TEST(SchedulerTest, CancelWhileInAPassWhilePendingAndInTheLastPass) {
  std::mt19937 rng(18);
  FakeExecutor ex;
  ex.Gate();
  Scheduler sched(&ex, SchedulerOptions{8, 4});
  SchedulerClient a, b, d;
  sched.Attach(&a);
  sched.Attach(&b);
  sched.Attach(&d);
  const auto ta = RandomTokens(10, rng), tb = RandomTokens(3, rng), td = RandomTokens(4, rng);
  ASSERT_TRUE(sched.Submit(&a, ta).ok());
  ASSERT_TRUE(ex.WaitEntered(1));  // pass 0 = {a[0:4]}, held
  ASSERT_TRUE(sched.Submit(&b, tb).ok());
  sched.Cancel(&b);  // pending, not in the pass: ends now, while pass 0 is still held
  absl::Status st;
  ASSERT_TRUE(sched.Poll(&b, &st));
  EXPECT_EQ(Code(st), LLM_ERR_CANCELLED);
  sched.Cancel(&b);  // idle: no-op
  EXPECT_FALSE(sched.Poll(&a, &st));
  sched.Cancel(&a);  // in pass 0: ends when it returns, with its first chunk run
  EXPECT_FALSE(sched.Poll(&a, &st));
  ex.Release();
  EXPECT_EQ(Code(sched.Wait(&a)), LLM_ERR_CANCELLED);
  EXPECT_EQ(a.iterations.load(), 1u);
  EXPECT_EQ(ex.recorded(&a), std::vector<int32_t>(ta.begin(), ta.begin() + 4));

  // Cancelled during the pass that completes the step: it completed.
  ASSERT_TRUE(sched.Submit(&d, td).ok());
  ASSERT_TRUE(ex.WaitEntered(2));
  sched.Cancel(&d);
  ex.Release();
  EXPECT_TRUE(sched.Wait(&d).ok());
  EXPECT_EQ(ex.recorded(&d), td);
  EXPECT_EQ(ex.passes().size(), 2u);
  EXPECT_TRUE(ex.recorded(&b).empty());
  ex.Ungate();
  sched.Detach(&a);
  sched.Detach(&b);
  sched.Detach(&d);
}

TEST(SchedulerTest, PrepareFailureEndsOnlyThatStep) {
  std::mt19937 rng(19);
  FakeExecutor ex;
  ex.Gate();
  Scheduler sched(&ex, SchedulerOptions{32, 8});
  SchedulerClient blocker, c1, c2, c3;
  for (auto* c : {&blocker, &c1, &c2, &c3}) sched.Attach(c);
  const std::vector<int32_t> blocker_tokens = RandomTokens(1, rng);  // valid until collected
  ASSERT_TRUE(sched.Submit(&blocker, blocker_tokens).ok());
  ASSERT_TRUE(ex.WaitEntered(1));
  const auto t1 = RandomTokens(1, rng), t2 = RandomTokens(5, rng), t3 = RandomTokens(7, rng);
  ex.FailPrepare(&c2, Error(LLM_ERR_KV_FULL, "fake: pool exhausted"));
  ASSERT_TRUE(sched.Submit(&c1, t1).ok());
  ASSERT_TRUE(sched.Submit(&c2, t2).ok());
  ASSERT_TRUE(sched.Submit(&c3, t3).ok());
  ex.Release();  // pass 0
  // c2 ends before the pass that left it out returns.
  const absl::Status s2 = sched.Wait(&c2);
  EXPECT_EQ(Code(s2), LLM_ERR_KV_FULL) << s2;
  ASSERT_TRUE(ex.WaitEntered(2));
  ex.Ungate();
  EXPECT_TRUE(sched.Wait(&blocker).ok());
  EXPECT_TRUE(sched.Wait(&c1).ok());
  EXPECT_TRUE(sched.Wait(&c3).ok());
  EXPECT_EQ(ex.passes().size(), 2u);
  EXPECT_FALSE(Contains(ex.passes()[1], &c2));
  EXPECT_EQ(c2.iterations.load(), 0u);
  EXPECT_TRUE(ex.recorded(&c2).empty());
  EXPECT_EQ(ex.recorded(&c3), t3);
  // The next step of c2 runs.
  ASSERT_TRUE(sched.Submit(&c2, t2).ok());
  EXPECT_TRUE(sched.Wait(&c2).ok());
  EXPECT_EQ(ex.recorded(&c2), t2);
  const SchedulerStats st = sched.stats();
  EXPECT_EQ(st.steps_failed, 1u);
  EXPECT_EQ(st.steps_completed, 4u);  // blocker, c1, c3 and c2's second step
  for (auto* c : {&blocker, &c1, &c2, &c3}) sched.Detach(c);
}

TEST(SchedulerTest, RunFailureEndsEveryStepInThePass) {
  std::mt19937 rng(20);
  FakeExecutor ex;
  ex.Gate();
  Scheduler sched(&ex, SchedulerOptions{8, 4});
  SchedulerClient blocker, c1, c2, c3;
  for (auto* c : {&blocker, &c1, &c2, &c3}) sched.Attach(c);
  const std::vector<int32_t> blocker_tokens = RandomTokens(1, rng);  // valid until collected
  ASSERT_TRUE(sched.Submit(&blocker, blocker_tokens).ok());
  ASSERT_TRUE(ex.WaitEntered(1));
  const auto t1 = RandomTokens(1, rng), t2 = RandomTokens(10, rng), t3 = RandomTokens(9, rng);
  ASSERT_TRUE(sched.Submit(&c1, t1).ok());
  ASSERT_TRUE(sched.Submit(&c2, t2).ok());
  ASSERT_TRUE(sched.Submit(&c3, t3).ok());
  // Pass 1 = c1(1) c2(4) c3(3); pass 2 = c2(4) c3(4) fails.
  ex.FailRun(2, Error(LLM_ERR_DEVICE, "fake: device lost"));
  ex.Ungate();
  EXPECT_TRUE(sched.Wait(&blocker).ok());
  EXPECT_TRUE(sched.Wait(&c1).ok());
  EXPECT_EQ(Code(sched.Wait(&c2)), LLM_ERR_DEVICE);
  EXPECT_EQ(Code(sched.Wait(&c3)), LLM_ERR_DEVICE);
  const auto passes = ex.passes();
  ASSERT_EQ(passes.size(), 3u);
  ASSERT_EQ(passes[1].size(), 3u);
  EXPECT_EQ(passes[1][2].tokens.size(), 3u);
  ASSERT_EQ(passes[2].size(), 2u);
  // Chunks run before the failure stay run.
  EXPECT_EQ(ex.recorded(&c2), std::vector<int32_t>(t2.begin(), t2.begin() + 4));
  EXPECT_EQ(ex.recorded(&c3), std::vector<int32_t>(t3.begin(), t3.begin() + 3));
  EXPECT_EQ(c2.iterations.load(), 2u);
  // The scheduler goes on.
  ASSERT_TRUE(sched.Submit(&c3, t1).ok());
  EXPECT_TRUE(sched.Wait(&c3).ok());
  EXPECT_EQ(sched.stats().steps_failed, 2u);
  for (auto* c : {&blocker, &c1, &c2, &c3}) sched.Detach(c);
}

TEST(SchedulerTest, PollIsNonBlockingAndMisuseIsReported) {
  std::mt19937 rng(21);
  FakeExecutor ex;
  ex.Gate();
  Scheduler sched(&ex, SchedulerOptions{});
  SchedulerClient c, stranger;
  sched.Attach(&c);
  const auto t = RandomTokens(3, rng);
  absl::Status st;
  EXPECT_TRUE(sched.Poll(&c, &st));  // idle
  EXPECT_EQ(Code(st), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Code(sched.Wait(&c)), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Code(sched.Submit(&c, {})), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Code(sched.Submit(&stranger, t)), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Code(sched.Submit(nullptr, t)), LLM_ERR_INVALID_ARGUMENT);
  sched.Cancel(&c);  // idle: no-op
  ASSERT_TRUE(sched.Submit(&c, t).ok());
  ASSERT_TRUE(ex.WaitEntered(1));
  st = absl::OkStatus();
  EXPECT_FALSE(sched.Poll(&c, &st));
  EXPECT_FALSE(sched.Poll(&c, nullptr));
  const absl::Status busy = sched.Submit(&c, t);
  EXPECT_EQ(Code(busy), LLM_ERR_BUSY) << busy;
  ex.Release();
  while (!sched.Poll(&c, &st)) std::this_thread::yield();
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_TRUE(sched.Poll(&c, &st));  // collected: idle again
  EXPECT_EQ(Code(st), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ex.recorded(&c), t);
  ex.Ungate();
  sched.Detach(&c);
  sched.Detach(&stranger);  // never attached: no-op
}

// 16 sessions decoding from their own threads: the gather window keeps them
// in one batch instead of alternating halves.
TEST(SchedulerTest, ConcurrentDecodesShareIterations) {
  FakeExecutor ex;
  ex.SetWork(microseconds(1000));
  Scheduler sched(&ex, SchedulerOptions{256, 256});
  const int n = 16, steps = 50;
  std::vector<std::unique_ptr<SchedulerClient>> clients;
  for (int i = 0; i < n; ++i) {
    clients.push_back(std::make_unique<SchedulerClient>());
    sched.Attach(clients[i].get());
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937 rng(100 + i);
      std::vector<int32_t> sent;
      sent.reserve(steps);
      for (int k = 0; k < steps; ++k) {
        sent.push_back(RandomTokens(1, rng)[0]);
        ASSERT_TRUE(sched.Submit(clients[i].get(), absl::MakeConstSpan(&sent.back(), 1)).ok());
        ASSERT_TRUE(sched.Wait(clients[i].get()).ok());
      }
      EXPECT_EQ(ex.recorded(clients[i].get()), sent);
    });
  }
  for (auto& t : threads) t.join();
  const SchedulerStats st = sched.stats();
  EXPECT_EQ(st.decode_rows, static_cast<uint64_t>(n * steps));
  ASSERT_GT(st.decode_iterations, 0u);
  const double rows_per_pass = double(st.decode_rows) / double(st.decode_iterations);
  EXPECT_GE(rows_per_pass, 8.0) << st.decode_iterations << " passes";
  for (auto& c : clients) sched.Detach(c.get());
}

// Owners submit, poll, wait, cancel and detach while another thread cancels
// at random and Prepare fails at random (run under TSan too).
TEST(SchedulerTest, ConcurrentSubmitCancelDetach) {
  FakeExecutor ex;
  ex.SetRandomPrepareFailures(true);
  ex.SetWork(microseconds(20));
  Scheduler sched(&ex, SchedulerOptions{16, 8});
  const int n_owners = 6, per_owner = 2, ops = 150;
  std::vector<std::unique_ptr<SchedulerClient>> clients;
  for (int i = 0; i < n_owners * per_owner; ++i)
    clients.push_back(std::make_unique<SchedulerClient>());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> submitted{0}, ok{0}, cancelled{0}, kv_full{0}, other{0};
  auto tally = [&](const absl::Status& s) {
    switch (Code(s)) {
      case LLM_OK:
        ++ok;
        break;
      case LLM_ERR_CANCELLED:
        ++cancelled;
        break;
      case LLM_ERR_KV_FULL:
        ++kv_full;
        break;
      default:
        ++other;
        ADD_FAILURE() << s;
    }
  };
  std::thread canceller([&] {
    std::mt19937 rng(99);
    while (!stop.load()) {
      sched.Cancel(clients[rng() % clients.size()].get());
      std::this_thread::sleep_for(microseconds(rng() % 200));
    }
  });
  std::vector<std::thread> owners;
  for (int o = 0; o < n_owners; ++o) {
    owners.emplace_back([&, o] {
      std::mt19937 rng(1000 + o);
      std::vector<bool> attached(per_owner, false);
      for (int k = 0; k < ops; ++k) {
        const int j = static_cast<int>(rng() % per_owner);
        SchedulerClient* c = clients[o * per_owner + j].get();
        if (!attached[j]) {
          sched.Attach(c);
          attached[j] = true;
        }
        const std::vector<int32_t> t = RandomTokens(1 + rng() % 30, rng);
        ASSERT_TRUE(sched.Submit(c, t).ok());
        ++submitted;
        absl::Status st;
        switch (rng() % 4) {
          case 0:
            tally(sched.Wait(c));
            break;
          case 1:
            while (!sched.Poll(c, &st)) std::this_thread::yield();
            tally(st);
            break;
          case 2:
            sched.Cancel(c);
            tally(sched.Wait(c));
            break;
          case 3:
            sched.Detach(c);  // pending or finished: either way it is gone
            attached[j] = false;
            break;
        }
      }
      for (int j = 0; j < per_owner; ++j) sched.Detach(clients[o * per_owner + j].get());
    });
  }
  for (auto& t : owners) t.join();
  stop = true;
  canceller.join();
  const SchedulerStats st = sched.stats();
  EXPECT_EQ(other.load(), 0u);
  EXPECT_EQ(st.steps_completed + st.steps_failed, submitted.load());
  EXPECT_GE(st.steps_completed, ok.load());
  EXPECT_EQ(st.tokens, ex.total_tokens());
  EXPECT_GT(ok.load(), 0u);
}

}  // namespace
}  // namespace llm
