// Cancel and failure atomicity through the public API (issue 10, parts 3 and
// 4), on the tiny model in deterministic mode, so a session's state can be
// compared bit for bit with a session that never failed:
//  - a cancel issued while a call runs makes that call return
//    LLM_ERR_CANCELLED, even if its step completed; one issued while no call
//    runs is latched and fails the next call that runs the model;
//  - a call that fails (KV_FULL, CANCELLED) leaves the session as it was
//    (rewind: at n tokens without logits, which a retry completes);
//  - kv_budget_bytes below one block is refused at load.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "llm/llm.h"
#include "test_util.h"

namespace {

std::string TinyPath() { return llm_abi_test::TinyModelPath("Q8_0"); }

llm_model* LoadTiny(int32_t batch_tokens = 16, uint64_t kv_budget = 0) {
  llm_model_params mp;
  llm_model_params_init(&mp);
  mp.n_threads = 1;
  mp.deterministic = 1;
  mp.batch_tokens = batch_tokens;
  mp.kv_budget_bytes = kv_budget;
  llm_model* m = nullptr;
  EXPECT_EQ(llm_model_load(TinyPath().c_str(), &mp, &m), LLM_OK) << llm_last_error();
  return m;
}

llm_session* NewSession(llm_model* m, int32_t n_ctx = 512, uint64_t seed = 7) {
  llm_session_params sp;
  llm_session_params_init(&sp);
  sp.n_ctx = n_ctx;
  sp.seed = seed;
  sp.sampler.temperature = 0.8f;  // the RNG matters: a lost draw shows
  llm_session* s = nullptr;
  EXPECT_EQ(llm_session_create(m, &sp, &s), LLM_OK) << llm_last_error();
  return s;
}

int32_t NVocab(llm_model* m) {
  llm_model_info info;
  llm_model_info_init(&info);
  EXPECT_EQ(llm_model_get_info(m, &info), LLM_OK);
  return info.n_vocab;
}

llm_kv_stats KvStats(llm_model* m) {
  llm_kv_stats k;
  llm_kv_stats_init(&k);
  EXPECT_EQ(llm_model_kv_stats(m, &k), LLM_OK);
  return k;
}

// n token ids, all valid for the tiny model; salt makes prompts differ.
std::vector<llm_token> Tokens(int n, int salt, int32_t n_vocab) {
  std::vector<llm_token> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[i] = static_cast<llm_token>(3 + (i * 37 + salt * 101) % (n_vocab - 3));
  return t;
}

// What failure atomicity compares: history length and logits.
struct State {
  size_t n_tokens = 0;
  bool has_logits = false;
  std::vector<float> logits;
  bool operator==(const State& o) const {
    return n_tokens == o.n_tokens && has_logits == o.has_logits && logits == o.logits;
  }
};

State StateOf(llm_session* s) {
  State st;
  EXPECT_EQ(llm_session_n_tokens(s, &st.n_tokens), LLM_OK) << llm_last_error();
  const float* l = nullptr;
  size_t n = 0;
  st.has_logits = llm_session_logits(s, &l, &n) == LLM_OK;
  if (st.has_logits) st.logits.assign(l, l + n);
  return st;
}

std::string Describe(const State& s) {
  return std::to_string(s.n_tokens) + " tokens, " + (s.has_logits ? "logits" : "no logits");
}

// A fresh session fed `history` in one prefill (no logits if empty).
State FreshState(llm_model* m, const std::vector<llm_token>& history) {
  llm_session* f = NewSession(m);
  if (!history.empty()) {
    EXPECT_EQ(llm_session_prefill(f, history.data(), history.size()), LLM_OK) << llm_last_error();
  }
  State st = StateOf(f);
  llm_session_free(f);
  return st;
}

class CancelTest : public ::testing::Test {
 protected:
  void SetUp() override { LLM_ABI_REQUIRE_FILE(TinyPath()); }
};

// ---- (c) kv_budget_bytes ---------------------------------------------------

TEST_F(CancelTest, KvBudgetBelowOneBlockIsRefusedAtLoad) {
  llm_model* probe = LoadTiny();
  ASSERT_NE(probe, nullptr);
  const uint64_t block = KvStats(probe).block_bytes;
  llm_model_free(probe);
  for (uint64_t budget : {uint64_t{1}, block - 1}) {
    llm_model_params mp;
    llm_model_params_init(&mp);
    mp.kv_budget_bytes = budget;
    llm_model* m = nullptr;
    EXPECT_EQ(llm_model_load(TinyPath().c_str(), &mp, &m), LLM_ERR_INVALID_ARGUMENT) << budget;
    EXPECT_EQ(m, nullptr);
    EXPECT_NE(std::string(llm_last_error()).find(std::to_string(block)), std::string::npos)
        << "the message names the minimum: " << llm_last_error();
  }
  llm_model* m = LoadTiny(16, block);  // exactly one block: accepted
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(KvStats(m).blocks_total, 1u);
  llm_model_free(m);
  m = LoadTiny(16, 0);  // 0: the default
  ASSERT_NE(m, nullptr);
  EXPECT_GT(KvStats(m).blocks_total, 1u);
  llm_model_free(m);
}

// ---- the latch ---------------------------------------------------------------

// A cancel with no call in progress fails the next call that runs the model,
// at once and changing nothing; calls that do not run the model neither see
// nor clear it; the failing call clears it; reset clears it.
TEST_F(CancelTest, CancelWithNoCallInProgressLatchesForTheNextStepCall) {
  llm_model* m = LoadTiny();
  ASSERT_NE(m, nullptr);
  const int32_t nv = NVocab(m);
  llm_session* s = NewSession(m);
  const std::vector<llm_token> p = Tokens(20, 1, nv);
  ASSERT_EQ(llm_session_prefill(s, p.data(), p.size()), LLM_OK) << llm_last_error();
  const State before = StateOf(s);
  llm_generate_params gp;
  llm_generate_params_init(&gp);
  gp.max_tokens = 3;
  llm_token tok = -5;
  int32_t done = 0;
  std::vector<std::pair<const char*, std::function<llm_status()>>> step_calls = {
      {"decode", [&] { return llm_session_decode(s, &tok); }},
      {"prefill", [&] { return llm_session_prefill(s, p.data(), 4); }},
      {"decode_async", [&] { return llm_session_decode_async(s); }},
      {"prefill_async", [&] { return llm_session_prefill_async(s, p.data(), 4); }},
      {"generate", [&] { return llm_generate(s, p.data(), 2, &gp, nullptr); }},
      {"generate (no prompt)", [&] { return llm_generate(s, nullptr, 0, &gp, nullptr); }},
      {"rewind", [&] { return llm_session_rewind(s, 10); }},
  };
  for (auto& [what, call] : step_calls) {
    ASSERT_EQ(llm_session_cancel(s), LLM_OK);
    ASSERT_EQ(llm_session_cancel(s), LLM_OK);  // two cancels latch once
    // Calls that do not run the model leave the latch alone.
    size_t n = 0;
    EXPECT_EQ(llm_session_n_tokens(s, &n), LLM_OK);
    size_t size = 0;
    EXPECT_EQ(llm_session_save(s, nullptr, 0, &size), LLM_ERR_BUFFER_TOO_SMALL);
    std::vector<uint8_t> buf(size);
    EXPECT_EQ(llm_session_save(s, buf.data(), buf.size(), &size), LLM_OK) << llm_last_error();
    EXPECT_EQ(llm_session_load(s, buf.data(), size), LLM_OK) << llm_last_error();
    llm_session* child = nullptr;
    EXPECT_EQ(llm_session_fork(s, &child), LLM_OK) << llm_last_error();
    llm_sampler_params sp;
    llm_sampler_params_init(&sp);
    sp.temperature = 0.8f;
    EXPECT_EQ(llm_session_set_sampler(s, &sp), LLM_OK);
    EXPECT_EQ(llm_session_poll(s, &done, &tok), LLM_ERR_INVALID_ARGUMENT) << "nothing submitted";
    // The next step call fails at once, nothing changed.
    EXPECT_EQ(call(), LLM_ERR_CANCELLED) << what;
    EXPECT_TRUE(StateOf(s) == before) << what << ": " << Describe(StateOf(s));
    // The fork did not inherit the latch.
    EXPECT_EQ(llm_session_decode(child, &tok), LLM_OK) << what << ": " << llm_last_error();
    llm_session_free(child);
  }
  // The latch was consumed: the next call runs.
  ASSERT_EQ(llm_session_decode(s, &tok), LLM_OK) << llm_last_error();
  // Reset clears it.
  ASSERT_EQ(llm_session_cancel(s), LLM_OK);
  ASSERT_EQ(llm_session_reset(s), LLM_OK);
  EXPECT_EQ(llm_session_prefill(s, p.data(), p.size()), LLM_OK) << llm_last_error();
  EXPECT_TRUE(StateOf(s) == before);
  llm_session_free(s);
  llm_model_free(m);
}

// A cancel after an async decode step completed, before it is collected:
// the collecting call returns CANCELLED and the decode is undone (token,
// logits and RNG draw), so the next decode samples the same token.
TEST_F(CancelTest, CancelAfterTheStepCompletedFailsTheCallAndUndoesIt) {
  llm_model* m = LoadTiny();
  ASSERT_NE(m, nullptr);
  const int32_t nv = NVocab(m);
  llm_session* s = NewSession(m);
  llm_session* ref = NewSession(m);
  const std::vector<llm_token> p = Tokens(30, 2, nv);
  ASSERT_EQ(llm_session_prefill(s, p.data(), p.size()), LLM_OK);
  ASSERT_EQ(llm_session_prefill(ref, p.data(), p.size()), LLM_OK);
  for (int round = 0; round < 5; ++round) {
    const State before = StateOf(s);
    llm_session_stats st;
    llm_session_stats_init(&st);
    ASSERT_EQ(llm_session_get_stats(s, &st), LLM_OK);
    const uint64_t iters = st.iterations;
    ASSERT_EQ(llm_session_decode_async(s), LLM_OK) << llm_last_error();
    // The pass that runs the step counts it and ends it under the batcher's
    // lock, which the cancel takes: this cancel comes after the step ended.
    do {
      std::this_thread::yield();
      ASSERT_EQ(llm_session_get_stats(s, &st), LLM_OK);
    } while (st.iterations == iters);
    ASSERT_EQ(llm_session_cancel(s), LLM_OK);
    llm_token tok = -5;
    const bool use_poll = round % 2 == 1;
    int32_t done = 0;
    const llm_status status = use_poll ? llm_session_poll(s, &done, &tok) : llm_session_wait(s, &tok);
    EXPECT_EQ(status, LLM_ERR_CANCELLED) << (use_poll ? "poll" : "wait");
    EXPECT_TRUE(StateOf(s) == before) << Describe(StateOf(s)) << " vs " << Describe(before);
    llm_token a = -1, b = -1;
    ASSERT_EQ(llm_session_decode(s, &a), LLM_OK) << llm_last_error();
    ASSERT_EQ(llm_session_decode(ref, &b), LLM_OK) << llm_last_error();
    EXPECT_EQ(a, b) << "the undone decode's RNG draw was given back";
    EXPECT_TRUE(StateOf(s) == StateOf(ref));
  }
  llm_session_free(ref);
  llm_session_free(s);
  llm_model_free(m);
}

// ---- (a) cancel lands on loops of calls ----------------------------------------

// Finding (a): a loop of blocking decodes (or decode_async + wait) driven by
// one thread must stop with LLM_ERR_CANCELLED when another thread cancels,
// whenever the cancel lands.
TEST_F(CancelTest, CancelStopsALoopOfDecodes) {
  llm_model* m = LoadTiny();
  ASSERT_NE(m, nullptr);
  const int32_t nv = NVocab(m);
  const std::vector<llm_token> p = Tokens(8, 3, nv);
  std::mt19937 rng(10);
  int stopped = 0;
  const int trials = 20;
  for (int trial = 0; trial < trials; ++trial) {
    llm_session* s = NewSession(m, 256);
    ASSERT_EQ(llm_session_prefill(s, p.data(), p.size()), LLM_OK);
    const bool async = trial % 2 == 1;
    std::atomic<bool> started{false};
    const int delay_us = static_cast<int>(rng() % 2000);
    std::thread canceller([&] {
      while (!started.load()) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      EXPECT_EQ(llm_session_cancel(s), LLM_OK);
    });
    llm_status st = LLM_OK;
    started.store(true);
    const auto t0 = std::chrono::steady_clock::now();
    // Bounded by time, not steps: the cancel comes within 2 ms.
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3)) {
      llm_token tok = -1;
      if (async) {
        st = llm_session_decode_async(s);
        if (st == LLM_OK) st = llm_session_wait(s, &tok);
      } else {
        st = llm_session_decode(s, &tok);
      }
      if (st != LLM_OK) break;
      size_t n = 0;
      llm_session_n_tokens(s, &n);
      if (n > 200) st = llm_session_rewind(s, p.size());
      if (st != LLM_OK) break;
    }
    canceller.join();
    EXPECT_EQ(st, LLM_ERR_CANCELLED) << "trial " << trial << (async ? " (async)" : "") << ": "
                                     << llm_status_string(st);
    if (st == LLM_ERR_CANCELLED) ++stopped;
    llm_session_free(s);
  }
  std::printf("cancel stopped %d of %d decode loops\n", stopped, trials);
  llm_model_free(m);
}

// ---- (d) rewind ---------------------------------------------------------------

// Finding (d), the reported reproduction: an 8-block pool; P holds 40
// tokens; C is a fork of P (they share P's 3 blocks); a third session fills
// the other 5. rewind(P, 36) must rewrite position 35, which lies in a block
// shared with C: copy-on-write needs a free block -> KV_FULL. P then holds
// 36 tokens without logits (not 35), and once blocks are free the same
// rewind succeeds with the logits a fresh session computes.
TEST_F(CancelTest, FailedRewindKeepsItsTokensAndARetrySucceeds) {
  llm_model* probe = LoadTiny();
  ASSERT_NE(probe, nullptr);
  const llm_kv_stats k = KvStats(probe);
  llm_model_free(probe);
  ASSERT_EQ(k.block_tokens, 16u);
  llm_model* m = LoadTiny(16, 8 * k.block_bytes);
  ASSERT_NE(m, nullptr);
  llm_model* roomy = LoadTiny(16);  // for the fresh sessions compared with
  ASSERT_NE(roomy, nullptr);
  const int32_t nv = NVocab(m);
  llm_session* parent = NewSession(m);
  const std::vector<llm_token> p = Tokens(40, 4, nv);
  ASSERT_EQ(llm_session_prefill(parent, p.data(), p.size()), LLM_OK) << llm_last_error();
  llm_session* child = nullptr;
  ASSERT_EQ(llm_session_fork(parent, &child), LLM_OK);
  llm_session* hog = NewSession(m);
  const std::vector<llm_token> h = Tokens(80, 5, nv);
  ASSERT_EQ(llm_session_prefill(hog, h.data(), h.size()), LLM_OK) << llm_last_error();
  ASSERT_EQ(KvStats(m).blocks_used, 8u);

  EXPECT_EQ(llm_session_rewind(parent, 36), LLM_ERR_KV_FULL);
  size_t n = 0;
  ASSERT_EQ(llm_session_n_tokens(parent, &n), LLM_OK);
  EXPECT_EQ(n, 36u) << "a failed rewind keeps the tokens it was asked to keep";
  const float* logits = nullptr;
  size_t n_vocab = 0;
  EXPECT_EQ(llm_session_logits(parent, &logits, &n_vocab), LLM_ERR_INVALID_ARGUMENT);
  // Still no room: the retry fails the same way and changes nothing.
  EXPECT_EQ(llm_session_rewind(parent, 36), LLM_ERR_KV_FULL);
  ASSERT_EQ(llm_session_n_tokens(parent, &n), LLM_OK);
  EXPECT_EQ(n, 36u);
  // The child is untouched.
  EXPECT_TRUE(StateOf(child) == FreshState(roomy, p));
  // Room again: the same call completes.
  llm_session_free(hog);
  ASSERT_EQ(llm_session_rewind(parent, 36), LLM_OK) << llm_last_error();
  EXPECT_TRUE(StateOf(parent) ==
              FreshState(roomy, std::vector<llm_token>(p.begin(), p.begin() + 36)));
  // A latched cancel fails a rewind at once, changing nothing.
  const State before = StateOf(parent);
  ASSERT_EQ(llm_session_cancel(parent), LLM_OK);
  EXPECT_EQ(llm_session_rewind(parent, 20), LLM_ERR_CANCELLED);
  EXPECT_TRUE(StateOf(parent) == before);
  llm_session_free(child);
  llm_session_free(parent);
  llm_model_free(roomy);
  llm_model_free(m);
}

// ---- failure atomicity, randomized ---------------------------------------------

// A target session on a small pool (other sessions hold blocks) and a shadow
// session on a roomy pool that replays only the target's successful calls.
// Random calls (prefill, decode, decode_async + wait / poll, prefill_async,
// generate, rewind, fork, save, load) are driven into KV_FULL and CANCELLED
// (latched before the call, or from another thread at a random moment).
// After each call the target must equal the shadow: a failed call changed
// nothing (a failed rewind: n tokens, no logits, and its retry completes).
// Periodically both are compared with a fresh session fed the history.
TEST_F(CancelTest, RandomCallsFailAtomicallyOnKvFullAndCancel) {
  llm_model* probe = LoadTiny();
  ASSERT_NE(probe, nullptr);
  const uint64_t block_bytes = KvStats(probe).block_bytes;
  llm_model_free(probe);
  const uint64_t pool_blocks = 16;
  // t's own history stays well inside the pool (16 blocks x 16 positions):
  // a step adds at most 48 tokens, so with the others' blocks freed a step of
  // t always has room, and KV_FULL comes only from the other sessions.
  const size_t max_history = 180;
  llm_model* small = LoadTiny(16, pool_blocks * block_bytes);
  llm_model* roomy = LoadTiny(16);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(roomy, nullptr);
  const int32_t nv = NVocab(small);
  llm_session* t = NewSession(small, 400);
  llm_session* shadow = NewSession(roomy, 400);
  std::vector<llm_token> history;
  std::vector<llm_session*> hogs;
  std::vector<uint8_t> saved_t, saved_shadow;
  std::vector<llm_token> saved_history;
  std::mt19937 rng(12345);
  auto uniform = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  int kv_full = 0, cancelled = 0, ok = 0, salt = 100;
  const char* names[] = {"prefill", "decode", "decode_async+wait", "decode_async+poll",
                         "prefill_async+wait", "generate", "rewind", "fork", "save", "load"};

  auto save = [&](llm_session* s, std::vector<uint8_t>* buf) {
    size_t size = 0;
    ASSERT_EQ(llm_session_save(s, nullptr, 0, &size), LLM_ERR_BUFFER_TOO_SMALL);
    buf->resize(size);
    ASSERT_EQ(llm_session_save(s, buf->data(), buf->size(), &size), LLM_OK) << llm_last_error();
  };
  save(t, &saved_t);
  save(shadow, &saved_shadow);

  for (int iter = 0; iter < 400; ++iter) {
    // Other sessions hold a random share of the pool.
    for (llm_session* h : hogs) llm_session_free(h);
    hogs.clear();
    const llm_kv_stats k = KvStats(small);
    int to_hold = uniform(0, static_cast<int>(k.blocks_total - k.blocks_used));
    while (to_hold > 0) {
      const int blocks = std::min(to_hold, uniform(1, 3));
      llm_session* h = NewSession(small, 400);
      const std::vector<llm_token> hp = Tokens(16 * blocks, ++salt, nv);
      llm_session_prefill(h, hp.data(), hp.size());  // may be KV_FULL: fine
      hogs.push_back(h);
      to_hold -= blocks;
    }

    const State before = StateOf(t);
    ASSERT_EQ(before.n_tokens, history.size());
    int op = uniform(0, 9);
    if (!before.has_logits && op >= 1 && op <= 3) op = 0;  // decode needs logits
    if (history.size() > max_history) op = 6;               // keep within the pool
    const int cancel_mode = uniform(0, 9) < 6 ? 0 : uniform(1, 2);  // 1 latched, 2 thread
    if (cancel_mode == 1) {
      ASSERT_EQ(llm_session_cancel(t), LLM_OK);
    }
    std::thread canceller;
    if (cancel_mode == 2) {
      const int delay = uniform(0, 400);
      canceller = std::thread([t, delay] {
        std::this_thread::sleep_for(std::chrono::microseconds(delay));
        llm_session_cancel(t);
      });
    }

    llm_status st = LLM_OK;
    llm_token tok = -1;
    int32_t done = 0;
    std::vector<llm_token> prompt;
    int rewind_to = 0, max_tokens = 0;
    llm_generate_result gr;
    llm_generate_result_init(&gr);
    llm_session* child = nullptr;
    switch (op) {
      case 0:
      case 4:
        prompt = Tokens(uniform(1, 48), ++salt, nv);
        if (op == 0) {
          st = llm_session_prefill(t, prompt.data(), prompt.size());
        } else {
          st = llm_session_prefill_async(t, prompt.data(), prompt.size());
          if (st == LLM_OK) st = llm_session_wait(t, nullptr);
        }
        break;
      case 1:
        st = llm_session_decode(t, &tok);
        break;
      case 2:
        st = llm_session_decode_async(t);
        if (st == LLM_OK) st = llm_session_wait(t, &tok);
        break;
      case 3:
        st = llm_session_decode_async(t);
        while (st == LLM_OK && done == 0) {
          st = llm_session_poll(t, &done, &tok);
          std::this_thread::yield();
        }
        break;
      case 5: {
        if (!before.has_logits || uniform(0, 1) == 0) prompt = Tokens(uniform(1, 20), ++salt, nv);
        llm_generate_params gp;
        llm_generate_params_init(&gp);
        gp.max_tokens = max_tokens = uniform(1, 8);
        st = llm_generate(t, prompt.data(), prompt.size(), &gp, &gr);
        break;
      }
      case 6:
        rewind_to = uniform(0, static_cast<int>(history.size()));
        if (history.size() > max_history) rewind_to = uniform(0, 40);
        st = llm_session_rewind(t, static_cast<size_t>(rewind_to));
        break;
      case 7:
        st = llm_session_fork(t, &child);
        break;
      case 8: {
        std::vector<uint8_t> buf;
        save(t, &buf);
        saved_t = std::move(buf);
        save(shadow, &saved_shadow);
        saved_history = history;
        break;
      }
      case 9:
        st = llm_session_load(t, saved_t.data(), saved_t.size());
        break;
    }
    if (canceller.joinable()) canceller.join();
    SCOPED_TRACE(std::string("iteration ") + std::to_string(iter) + ", " + names[op] +
                 ", cancel mode " + std::to_string(cancel_mode) + ", " + llm_status_string(st));
    ASSERT_TRUE(st == LLM_OK || st == LLM_ERR_CANCELLED || st == LLM_ERR_KV_FULL)
        << llm_last_error();
    const bool runs_model = op <= 6;
    if (cancel_mode == 1 && runs_model) {
      EXPECT_EQ(st, LLM_ERR_CANCELLED) << "a latched cancel fails the next step call";
    }
    if (cancel_mode != 0 && st != LLM_ERR_CANCELLED) {
      // The cancel did not land on this call: it is latched for the next.
      const State now = StateOf(t);
      llm_token x = -1;
      EXPECT_EQ(llm_session_decode(t, &x), LLM_ERR_CANCELLED) << "the cancel was lost";
      EXPECT_TRUE(StateOf(t) == now);
    }
    if (st == LLM_ERR_KV_FULL) ++kv_full;
    if (st == LLM_ERR_CANCELLED) ++cancelled;
    if (st == LLM_OK) ++ok;

    if (st == LLM_OK) {
      // Replay on the shadow.
      switch (op) {
        case 0:
        case 4:
          ASSERT_EQ(llm_session_prefill(shadow, prompt.data(), prompt.size()), LLM_OK);
          history.insert(history.end(), prompt.begin(), prompt.end());
          break;
        case 1:
        case 2:
        case 3: {
          llm_token y = -1;
          ASSERT_EQ(llm_session_decode(shadow, &y), LLM_OK);
          EXPECT_EQ(tok, y) << "the same token as a session that never failed";
          history.push_back(y);
          break;
        }
        case 5:
          if (!prompt.empty()) {
            ASSERT_EQ(llm_session_prefill(shadow, prompt.data(), prompt.size()), LLM_OK);
            history.insert(history.end(), prompt.begin(), prompt.end());
          }
          for (int i = 0; i < gr.n_generated; ++i) {
            llm_token y = -1;
            ASSERT_EQ(llm_session_decode(shadow, &y), LLM_OK);
            history.push_back(y);
          }
          break;
        case 6:
          ASSERT_EQ(llm_session_rewind(shadow, static_cast<size_t>(rewind_to)), LLM_OK);
          history.resize(static_cast<size_t>(rewind_to));
          break;
        case 7:
          EXPECT_TRUE(StateOf(child) == before) << "a fork continues where its parent stands";
          llm_session_free(child);
          break;
        case 9:
          ASSERT_EQ(llm_session_load(shadow, saved_shadow.data(), saved_shadow.size()), LLM_OK);
          history = saved_history;
          break;
        default:
          break;
      }
    } else if (op == 6 && StateOf(t).n_tokens == static_cast<size_t>(rewind_to) &&
               before.n_tokens != static_cast<size_t>(rewind_to)) {
      // A rewind that failed after dropping the tokens past n: n tokens, no
      // logits; the retry (with room, no cancel) completes it.
      EXPECT_FALSE(StateOf(t).has_logits);
      for (llm_session* h : hogs) llm_session_free(h);
      hogs.clear();
      ASSERT_EQ(llm_session_rewind(t, static_cast<size_t>(rewind_to)), LLM_OK) << llm_last_error();
      ASSERT_EQ(llm_session_rewind(shadow, static_cast<size_t>(rewind_to)), LLM_OK);
      history.resize(static_cast<size_t>(rewind_to));
    }
    // Otherwise the failed call changed nothing; either way the target
    // equals the shadow.
    const State now = StateOf(t);
    ASSERT_TRUE(now == StateOf(shadow)) << Describe(now) << " vs the shadow's "
                                        << Describe(StateOf(shadow));
    if (st != LLM_OK && op != 6) {
      ASSERT_TRUE(now == before);
    }
    if (iter % 40 == 39) {
      ASSERT_TRUE(now == FreshState(roomy, history));
    }
    // The RNG: the next decode (when possible) samples what the shadow does.
    if (now.has_logits && uniform(0, 3) == 0) {
      for (llm_session* h : hogs) llm_session_free(h);
      hogs.clear();
      llm_token a = -1, b = -1;
      ASSERT_EQ(llm_session_decode(t, &a), LLM_OK) << llm_last_error();
      ASSERT_EQ(llm_session_decode(shadow, &b), LLM_OK);
      ASSERT_EQ(a, b);
      history.push_back(a);
    }
  }
  for (llm_session* h : hogs) llm_session_free(h);
  EXPECT_TRUE(StateOf(t) == FreshState(roomy, history));
  std::printf("random calls: %d OK, %d KV_FULL, %d CANCELLED\n", ok, kv_full, cancelled);
  EXPECT_GE(kv_full, 10) << "the test must drive calls into KV_FULL";
  EXPECT_GE(cancelled, 30) << "the test must drive calls into CANCELLED";
  llm_session_free(shadow);
  llm_session_free(t);
  llm_model_free(roomy);
  llm_model_free(small);
}

// ---- 1,000 randomly timed cancels ------------------------------------------------

// One thread drives a session through blocking decode loops, decode_async +
// wait / poll loops, prefills and generations; another issues 1,000 cancels
// at random moments (random sleeps), each after the previous one landed.
// Every cancel must land exactly once -- the call in flight or the next call
// returns LLM_ERR_CANCELLED, and no call returns it without a cancel -- and
// after every call the session equals a shadow session that replayed only
// the successful calls (deterministic mode: logits bit for bit).
TEST_F(CancelTest, ThousandRandomlyTimedCancelsAllLand) {
  llm_model* m = LoadTiny(16);
  ASSERT_NE(m, nullptr);
  const int32_t nv = NVocab(m);
  llm_session* s = NewSession(m, 256);
  llm_session* shadow = NewSession(m, 256);
  const int kCancels = 1000;
  std::mutex mu;
  std::condition_variable cv;
  int issued = 0, landed = 0;  // guarded by mu
  bool stop = false;
  std::atomic<int> spurious{0}, failures{0};
  const char* kinds[] = {"decode", "decode_async+wait", "decode_async+poll", "prefill",
                         "generate", "rewind"};
  int landed_by_kind[6] = {};

  std::thread canceller([&] {
    std::mt19937 rng(99);
    for (int i = 0; i < kCancels; ++i) {
      const int r = static_cast<int>(rng() % 100);
      // Mostly short sleeps (lands in flight), some longer (often latched).
      const int us = r < 10 ? 0 : r < 80 ? static_cast<int>(rng() % 300) : static_cast<int>(rng() % 3000);
      std::this_thread::sleep_for(std::chrono::microseconds(us));
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stop) return;  // the driver failed
        ++issued;
      }
      const llm_status cancel_status = llm_session_cancel(s);
      EXPECT_EQ(cancel_status, LLM_OK);
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_for(lock, std::chrono::seconds(20), [&] { return landed == issued; })) {
        ADD_FAILURE() << "cancel " << i << " never landed";
        break;
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  });

  // Records a CANCELLED return: it must answer an outstanding cancel.
  auto land = [&](int kind) {
    std::lock_guard<std::mutex> lock(mu);
    if (landed >= issued) {
      spurious.fetch_add(1);
    } else {
      ++landed;
      ++landed_by_kind[kind];
    }
    cv.notify_all();
  };
  std::mt19937 rng(7);
  std::vector<llm_token> history;
  int salt = 0, calls = 0;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stop) break;
    }
    const State before = StateOf(s);
    int kind = static_cast<int>(rng() % 5);
    if (!before.has_logits) kind = 3;
    if (history.size() > 200) kind = 5;
    llm_status st = LLM_OK;
    llm_token tok = -1;
    std::vector<llm_token> prompt;
    llm_generate_result gr;
    llm_generate_result_init(&gr);
    size_t rewind_to = 0;
    int32_t done = 0;
    switch (kind) {
      case 0:
        st = llm_session_decode(s, &tok);
        break;
      case 1:
        st = llm_session_decode_async(s);
        if (st == LLM_OK) st = llm_session_wait(s, &tok);
        break;
      case 2:
        st = llm_session_decode_async(s);
        while (st == LLM_OK && done == 0) st = llm_session_poll(s, &done, &tok);
        break;
      case 3:
        prompt = Tokens(1 + static_cast<int>(rng() % 40), ++salt, nv);
        st = llm_session_prefill(s, prompt.data(), prompt.size());
        break;
      case 4: {
        llm_generate_params gp;
        llm_generate_params_init(&gp);
        gp.max_tokens = 1 + static_cast<int>(rng() % 6);
        st = llm_generate(s, nullptr, 0, &gp, &gr);
        break;
      }
      case 5:
        rewind_to = 1 + rng() % 16;
        st = llm_session_rewind(s, rewind_to);
        break;
    }
    ++calls;
    if (st == LLM_ERR_CANCELLED) {
      land(kind);
    } else if (st != LLM_OK) {
      ADD_FAILURE() << kinds[kind] << ": " << llm_status_string(st) << " " << llm_last_error();
      failures.fetch_add(1);
      break;
    }
    if (st == LLM_OK) {
      llm_token y = -1;
      switch (kind) {
        case 0:
        case 1:
        case 2:
          if (llm_session_decode(shadow, &y) != LLM_OK || y != tok) failures.fetch_add(1);
          history.push_back(y);
          break;
        case 3:
          if (llm_session_prefill(shadow, prompt.data(), prompt.size()) != LLM_OK) failures.fetch_add(1);
          history.insert(history.end(), prompt.begin(), prompt.end());
          break;
        case 4:
          for (int i = 0; i < gr.n_generated; ++i) {
            if (llm_session_decode(shadow, &y) != LLM_OK) failures.fetch_add(1);
            history.push_back(y);
          }
          break;
        case 5:
          if (llm_session_rewind(shadow, rewind_to) != LLM_OK) failures.fetch_add(1);
          history.resize(rewind_to);
          break;
      }
    } else if (kind == 5 && StateOf(s).n_tokens == rewind_to && before.n_tokens != rewind_to) {
      // Cancelled after dropping the tokens past rewind_to: the documented
      // state (no logits); retrying the rewind completes it.
      if (StateOf(s).has_logits) failures.fetch_add(1);
      llm_status retry;
      while ((retry = llm_session_rewind(s, rewind_to)) == LLM_ERR_CANCELLED) land(kind);
      if (retry != LLM_OK || llm_session_rewind(shadow, rewind_to) != LLM_OK) failures.fetch_add(1);
      history.resize(rewind_to);
    }
    const State now = StateOf(s);
    if (!(now == StateOf(shadow)) || (st != LLM_OK && kind != 5 && !(now == before))) {
      ADD_FAILURE() << "after " << kinds[kind] << " (" << llm_status_string(st)
                    << "): " << Describe(now) << ", shadow " << Describe(StateOf(shadow));
      failures.fetch_add(1);
      break;
    }
  }
  if (failures.load() > 0) {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  // Let a canceller waiting for a landing finish: land any last cancel.
  for (int i = 0; i < 100; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (landed == issued && (stop || failures.load() > 0)) break;
    }
    llm_token x;
    if (llm_session_decode(s, &x) == LLM_ERR_CANCELLED) land(0);
  }
  canceller.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(spurious.load(), 0) << "CANCELLED with no cancel outstanding";
  EXPECT_EQ(landed, kCancels);
  EXPECT_EQ(issued, kCancels);
  EXPECT_TRUE(StateOf(s) == FreshState(m, history));
  std::printf("%d/%d cancels landed over %d calls (", landed, issued, calls);
  for (int k = 0; k < 6; ++k) std::printf("%s%s %d", k ? ", " : "", kinds[k], landed_by_kind[k]);
  std::printf(")\n");
  llm_session_free(shadow);
  llm_session_free(s);
  llm_model_free(m);
}

}  // namespace
