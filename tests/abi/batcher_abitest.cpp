// The batcher and paged KV pool on the default model, through the public API
// (issue 3): sessions on many threads share forward passes and still produce
// exactly what they produce alone; forks share their prompt's blocks; cancel
// stops within one iteration; the pool's figures are what the layout says.
// Assertions read the batcher's own counters (llm_model_batch_stats,
// llm_session_get_stats, llm_model_kv_stats), not only outputs.
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "llm/llm.h"
#include "test_util.h"

namespace {

using llm_abi_test::DefaultModelPath;

// A reusable barrier for n threads (std::barrier needs C++20 libstdc++ 11+,
// which we have, but this keeps the test obvious).
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const int gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return gen_ != gen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, count_ = 0, gen_ = 0;
};

llm_model* LoadModel(int32_t deterministic, int32_t batch_tokens = 0, uint64_t kv_budget = 0) {
  llm_model_params mp;
  llm_model_params_init(&mp);
  mp.n_threads = 2;
  mp.deterministic = deterministic;
  mp.batch_tokens = batch_tokens;
  mp.kv_budget_bytes = kv_budget;
  llm_model* model = nullptr;
  const llm_status s = llm_model_load(DefaultModelPath().c_str(), &mp, &model);
  EXPECT_EQ(s, LLM_OK) << llm_last_error();
  return model;
}

llm_session* NewSession(llm_model* model, int32_t n_ctx, float temperature, uint64_t seed) {
  llm_session_params sp;
  llm_session_params_init(&sp);
  sp.n_ctx = n_ctx;
  sp.seed = seed;
  sp.sampler.temperature = temperature;
  llm_session* s = nullptr;
  EXPECT_EQ(llm_session_create(model, &sp, &s), LLM_OK) << llm_last_error();
  return s;
}

// Deterministic synthetic prompt: n ids spread over the vocabulary.
std::vector<llm_token> Prompt(int n, int salt) {
  std::vector<llm_token> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[i] = static_cast<llm_token>((i * 7919 + salt * 104729 + 13) % 49000 + 1);
  return p;
}

std::vector<llm_token> Decode(llm_session* s, int n) {
  std::vector<llm_token> out;
  for (int i = 0; i < n; ++i) {
    llm_token t = -1;
    const llm_status st = llm_session_decode(s, &t);
    EXPECT_EQ(st, LLM_OK) << llm_last_error();
    if (st != LLM_OK) break;
    out.push_back(t);
  }
  return out;
}

llm_batch_stats BatchStats(llm_model* m) {
  llm_batch_stats b;
  llm_batch_stats_init(&b);
  EXPECT_EQ(llm_model_batch_stats(m, &b), LLM_OK);
  return b;
}

llm_kv_stats KvStats(llm_model* m) {
  llm_kv_stats k;
  llm_kv_stats_init(&k);
  EXPECT_EQ(llm_model_kv_stats(m, &k), LLM_OK);
  return k;
}

llm_session_stats SessionStats(llm_session* s) {
  llm_session_stats st;
  llm_session_stats_init(&st);
  EXPECT_EQ(llm_session_get_stats(s, &st), LLM_OK);
  return st;
}

class BatcherTest : public ::testing::Test {
 protected:
  void SetUp() override { LLM_ABI_REQUIRE_FILE(DefaultModelPath()); }
};

// 16 sessions on 16 threads, prompts of 5..600 tokens, half greedy and half
// seeded sampling, in deterministic mode: each produces exactly the tokens it
// produces alone; while all 16 decode, passes hold >= 8 of them on average;
// the 600-token prompt ran in several chunks.
TEST_F(BatcherTest, SixteenThreadsMatchAloneAndShareDecodePasses) {
  constexpr int kSessions = 16, kDecode = 16;
  // Two instances: "alone" runs must not leave cached blocks behind for the
  // batched runs (those would then skip most of their prefill).
  llm_model* alone_model = LoadModel(/*deterministic=*/1);
  llm_model* model = LoadModel(/*deterministic=*/1);
  ASSERT_NE(alone_model, nullptr);
  ASSERT_NE(model, nullptr);
  std::vector<std::vector<llm_token>> prompts;
  for (int i = 0; i < kSessions; ++i) prompts.push_back(Prompt(i == 7 ? 600 : 5 + 9 * i, i));
  auto temperature = [](int i) { return i % 2 == 0 ? 0.0f : 0.9f; };
  // Alone: one session at a time.
  std::vector<std::vector<llm_token>> alone(kSessions);
  for (int i = 0; i < kSessions; ++i) {
    llm_session* s = NewSession(alone_model, 700, temperature(i), 1000 + i);
    ASSERT_EQ(llm_session_prefill(s, prompts[i].data(), prompts[i].size()), LLM_OK) << llm_last_error();
    alone[i] = Decode(s, kDecode);
    llm_session_free(s);
  }

  std::vector<std::vector<llm_token>> together(kSessions);
  std::vector<uint64_t> chunks(kSessions);
  Barrier barrier(kSessions);
  llm_batch_stats before{}, after{};
  std::vector<std::thread> threads;
  for (int i = 0; i < kSessions; ++i) {
    threads.emplace_back([&, i] {
      llm_session* s = NewSession(model, 700, temperature(i), 1000 + i);
      EXPECT_EQ(llm_session_prefill(s, prompts[i].data(), prompts[i].size()), LLM_OK) << llm_last_error();
      chunks[i] = SessionStats(s).prefill_chunks;
      barrier.Wait();
      if (i == 0) before = BatchStats(model);
      barrier.Wait();
      together[i] = Decode(s, kDecode);
      barrier.Wait();
      if (i == 0) after = BatchStats(model);
      llm_session_free(s);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kSessions; ++i) {
    EXPECT_EQ(together[i], alone[i]) << "session " << i << " (prompt of " << prompts[i].size()
                                     << " tokens, temperature " << temperature(i) << ")";
  }
  const uint64_t iters = after.decode_iterations - before.decode_iterations;
  const uint64_t rows = after.decode_rows - before.decode_rows;
  ASSERT_GT(iters, 0u);
  const double mean = static_cast<double>(rows) / static_cast<double>(iters);
  EXPECT_EQ(rows, static_cast<uint64_t>(kSessions * kDecode));
  EXPECT_GE(mean, 8.0) << rows << " decode rows in " << iters << " passes";
  EXPECT_GE(chunks[7], 3u) << "the 600-token prompt should run in chunks of <= 256 tokens";
  llm_model_free(model);
  llm_model_free(alone_model);
}

// A 1000-token world prompt forked into 50 sessions: its full blocks are
// stored once; each child, given its own line and decoding greedily,
// continues exactly like a fresh session (on a separate model instance) fed
// the same tokens.
TEST_F(BatcherTest, FiftyForksShareTheWorldPrompt) {
  constexpr int kChildren = 50, kWorld = 1000, kDecode = 3;
  llm_model* model = LoadModel(0);
  llm_model* fresh_model = LoadModel(0);
  ASSERT_NE(model, nullptr);
  ASSERT_NE(fresh_model, nullptr);
  const std::vector<llm_token> world = Prompt(kWorld, 99);
  llm_session* parent = NewSession(model, 1100, 0.0f, 1);
  ASSERT_EQ(llm_session_prefill(parent, world.data(), world.size()), LLM_OK) << llm_last_error();
  const llm_kv_stats k0 = KvStats(model);
  const uint64_t world_blocks = (kWorld + k0.block_tokens - 1) / k0.block_tokens;  // 62 full + 1 partial
  EXPECT_EQ(k0.blocks_used, world_blocks);

  std::vector<llm_session*> children(kChildren);
  for (int i = 0; i < kChildren; ++i) {
    ASSERT_EQ(llm_session_fork(parent, &children[i]), LLM_OK) << llm_last_error();
    size_t n = 0;
    ASSERT_EQ(llm_session_n_tokens(children[i], &n), LLM_OK);
    ASSERT_EQ(n, static_cast<size_t>(kWorld));
  }
  const llm_kv_stats k1 = KvStats(model);
  EXPECT_EQ(k1.blocks_used, world_blocks) << "forking must not copy blocks";
  EXPECT_EQ(k1.blocks_shared, world_blocks);

  // Each child: its own 6-token line, then greedy decoding; 5 threads.
  std::vector<std::vector<llm_token>> got(kChildren);
  std::vector<std::thread> threads;
  for (int t = 0; t < 5; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kChildren; i += 5) {
        const std::vector<llm_token> line = Prompt(6, 500 + i);
        EXPECT_EQ(llm_session_prefill(children[i], line.data(), line.size()), LLM_OK) << llm_last_error();
        got[i] = Decode(children[i], kDecode);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const llm_kv_stats k2 = KvStats(model);
  // The 62 full world blocks are still stored once; each child copied only
  // the partly filled last block (copy-on-write) and holds its new tokens.
  const uint64_t full_world = kWorld / k0.block_tokens;
  EXPECT_LE(k2.blocks_used, world_blocks + kChildren * 2) << "full world blocks were copied";
  EXPECT_GE(k2.blocks_shared, full_world);

  // Fresh sessions on another model instance, fed world + line.
  for (int i = 0; i < kChildren; i += 7) {
    std::vector<llm_token> all = world;
    const std::vector<llm_token> line = Prompt(6, 500 + i);
    all.insert(all.end(), line.begin(), line.end());
    llm_session* fresh = NewSession(fresh_model, 1100, 0.0f, 1);
    ASSERT_EQ(llm_session_prefill(fresh, all.data(), all.size()), LLM_OK) << llm_last_error();
    EXPECT_EQ(Decode(fresh, kDecode), got[i]) << "child " << i;
    llm_session_free(fresh);
  }
  for (llm_session* c : children) llm_session_free(c);
  llm_session_free(parent);
  EXPECT_EQ(KvStats(model).blocks_used, 0u);
  llm_model_free(fresh_model);
  llm_model_free(model);
}

// Cancel from another thread in the middle of a long prefill (64-token
// chunks): at most one more iteration of the session runs after the cancel,
// the prefill returns LLM_ERR_CANCELLED and is undone (the session is empty
// again), the whole blocks it computed stay in the prefix cache for a retry,
// and the session is usable afterwards.
TEST_F(BatcherTest, CancelDuringLongPrefillStopsWithinOneIteration) {
  llm_model* model = LoadModel(0, /*batch_tokens=*/64);
  ASSERT_NE(model, nullptr);
  llm_session* s = NewSession(model, 1100, 0.0f, 1);
  const std::vector<llm_token> prompt = Prompt(1000, 3);
  std::atomic<uint64_t> at_cancel{0};
  std::thread canceller([&] {
    while (SessionStats(s).iterations < 3) std::this_thread::sleep_for(std::chrono::microseconds(200));
    ASSERT_EQ(llm_session_cancel(s), LLM_OK);
    at_cancel = SessionStats(s).iterations;
  });
  const llm_status st = llm_session_prefill(s, prompt.data(), prompt.size());
  canceller.join();
  EXPECT_EQ(st, LLM_ERR_CANCELLED) << llm_last_error();
  const uint64_t final_iterations = SessionStats(s).iterations;
  EXPECT_LE(final_iterations, at_cancel + 1);
  size_t n = 1;
  ASSERT_EQ(llm_session_n_tokens(s, &n), LLM_OK);
  EXPECT_EQ(n, 0u) << "a failed prefill leaves the session as it was";
  llm_token t = -1;
  EXPECT_EQ(llm_session_decode(s, &t), LLM_ERR_INVALID_ARGUMENT) << "no logits, as before";
  // The retry reuses the blocks the cancelled prefill computed.
  ASSERT_EQ(llm_session_prefill(s, prompt.data(), prompt.size()), LLM_OK) << llm_last_error();
  EXPECT_GE(SessionStats(s).cached_tokens, 64 * (final_iterations - 1));
  EXPECT_EQ(llm_session_decode(s, &t), LLM_OK) << llm_last_error();
  // No call in progress: the cancel is latched and fails the next call only.
  EXPECT_EQ(llm_session_cancel(s), LLM_OK);
  EXPECT_EQ(llm_session_decode(s, &t), LLM_ERR_CANCELLED);
  EXPECT_EQ(llm_session_decode(s, &t), LLM_OK) << llm_last_error();
  llm_session_free(s);
  llm_model_free(model);
}

// The same through the non-blocking API: cancel a queued prefill, poll it.
TEST_F(BatcherTest, AsyncStepsPollAndCancel) {
  llm_model* model = LoadModel(0, 64);
  ASSERT_NE(model, nullptr);
  llm_session* a = NewSession(model, 1100, 0.0f, 1);
  llm_session* b = NewSession(model, 1100, 0.0f, 1);
  const std::vector<llm_token> prompt = Prompt(40, 5);
  // Blocking reference.
  ASSERT_EQ(llm_session_prefill(b, prompt.data(), prompt.size()), LLM_OK);
  const std::vector<llm_token> expected = Decode(b, 5);

  int32_t done = 0;
  EXPECT_EQ(llm_session_poll(a, &done, nullptr), LLM_ERR_INVALID_ARGUMENT) << "nothing submitted";
  ASSERT_EQ(llm_session_prefill_async(a, prompt.data(), prompt.size()), LLM_OK) << llm_last_error();
  llm_token t = -1;
  EXPECT_EQ(llm_session_decode(a, &t), LLM_ERR_BUSY) << "a step is pending";
  EXPECT_EQ(llm_session_prefill_async(a, prompt.data(), 1), LLM_ERR_BUSY);
  size_t n = 0;
  EXPECT_EQ(llm_session_n_tokens(a, &n), LLM_ERR_BUSY);
  // Poll never blocks: spin until done.
  int polls = 0;
  llm_status st = LLM_OK;
  while ((st = llm_session_poll(a, &done, &t)) == LLM_OK && !done) ++polls;
  EXPECT_EQ(st, LLM_OK);
  EXPECT_EQ(done, 1);
  std::vector<llm_token> got;
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(llm_session_decode_async(a), LLM_OK) << llm_last_error();
    ASSERT_EQ(llm_session_wait(a, &t), LLM_OK) << llm_last_error();
    got.push_back(t);
  }
  EXPECT_EQ(got, expected);
  // Cancel a long queued prefill; the wait reports it.
  const std::vector<llm_token> longp = Prompt(900, 6);
  ASSERT_EQ(llm_session_prefill_async(a, longp.data(), longp.size()), LLM_OK);
  ASSERT_EQ(llm_session_cancel(a), LLM_OK);
  EXPECT_EQ(llm_session_wait(a, &t), LLM_ERR_CANCELLED);
  ASSERT_EQ(llm_session_n_tokens(a, &n), LLM_OK);
  EXPECT_EQ(n, 45u) << "the cancelled prefill is undone";
  // Freeing a session with a pending step is allowed.
  ASSERT_EQ(llm_session_prefill_async(b, longp.data(), 500), LLM_OK);
  llm_session_free(b);
  llm_session_free(a);
  llm_model_free(model);
}

// KV memory: bytes per token as the layout says, blocks taken as used.
TEST_F(BatcherTest, KvStatsFollowTheLayout) {
  llm_model* model = LoadModel(0);
  ASSERT_NE(model, nullptr);
  llm_model_info info;
  llm_model_info_init(&info);
  ASSERT_EQ(llm_model_get_info(model, &info), LLM_OK);
  const uint64_t head_dim = static_cast<uint64_t>(info.n_embd / info.n_head);
  const uint64_t per_token_elems = 2ull * info.n_layer * info.n_head_kv * head_dim;
  const llm_kv_stats k = KvStats(model);
  EXPECT_EQ(k.bytes_per_token_f16, per_token_elems * 2);
  EXPECT_EQ(k.bytes_per_token_f32, per_token_elems * 4);
  EXPECT_EQ(k.block_bytes, k.bytes_per_token_f16 * k.block_tokens);
  EXPECT_GT(k.block_overhead_bytes, 0u);
  EXPECT_LT(k.block_overhead_bytes, k.block_bytes / 100) << "bookkeeping should be small";
  EXPECT_EQ(k.blocks_total, k.budget_bytes / k.block_bytes);
  EXPECT_EQ(k.blocks_allocated, 0u) << "no memory before any session runs";
  // Memory follows use, not n_ctx: 100 tokens in a 4096-context session.
  llm_session* s = NewSession(model, 4096, 0.0f, 1);
  const std::vector<llm_token> p = Prompt(100, 8);
  ASSERT_EQ(llm_session_prefill(s, p.data(), p.size()), LLM_OK);
  const llm_kv_stats k1 = KvStats(model);
  EXPECT_EQ(k1.blocks_used, (100 + k.block_tokens - 1) / k.block_tokens);
  // Storage comes in slabs of at most 64 blocks (1024 F16 positions).
  EXPECT_LE(k1.blocks_allocated, 64u);
  EXPECT_LT(k1.blocks_allocated, 4096u / k.block_tokens);
  // An F32 session: the same blocks hold half as many positions.
  llm_session_params sp;
  llm_session_params_init(&sp);
  sp.kv_type = LLM_KV_F32;
  llm_session* s32 = nullptr;
  ASSERT_EQ(llm_session_create(model, &sp, &s32), LLM_OK);
  ASSERT_EQ(llm_session_prefill(s32, p.data(), p.size()), LLM_OK);
  EXPECT_EQ(KvStats(model).blocks_used - k1.blocks_used, (100 + k.block_tokens / 2 - 1) / (k.block_tokens / 2));
  llm_session_free(s32);
  llm_session_free(s);
  llm_model_free(model);
}

// A full pool: the step that cannot get blocks fails with LLM_ERR_KV_FULL
// (policy: no preemption) and is undone, and other sessions are untouched.
TEST_F(BatcherTest, FullPoolFailsTheStepNotTheProcess) {
  llm_model* probe = LoadModel(0);
  ASSERT_NE(probe, nullptr);
  const uint64_t block_bytes = KvStats(probe).block_bytes;
  llm_model_free(probe);
  llm_model* model = LoadModel(0, 32, /*kv_budget=*/block_bytes * 8);  // 128 F16 positions
  ASSERT_NE(model, nullptr);
  llm_session* small = NewSession(model, 512, 0.0f, 1);
  const std::vector<llm_token> p1 = Prompt(20, 9);
  ASSERT_EQ(llm_session_prefill(small, p1.data(), p1.size()), LLM_OK);  // 2 blocks
  llm_session* big = NewSession(model, 512, 0.0f, 1);
  const std::vector<llm_token> p2 = Prompt(200, 10);
  EXPECT_EQ(llm_session_prefill(big, p2.data(), p2.size()), LLM_ERR_KV_FULL);
  EXPECT_NE(std::string(llm_last_error()).find("KV"), std::string::npos) << llm_last_error();
  size_t n = 1;
  ASSERT_EQ(llm_session_n_tokens(big, &n), LLM_OK);
  EXPECT_EQ(n, 0u) << "the failed prefill is undone";
  // The small session goes on exactly as it would alone.
  const std::vector<llm_token> cont = Decode(small, 4);
  llm_session_free(big);
  llm_session* again = NewSession(model, 512, 0.0f, 1);
  ASSERT_EQ(llm_session_prefill(again, p1.data(), p1.size()), LLM_OK);
  EXPECT_EQ(Decode(again, 4), cont);
  llm_session_free(again);
  llm_session_free(small);
  llm_model_free(model);
}

// Save, load into another session, continue identically; refusals.
TEST_F(BatcherTest, SaveLoadRoundTripAndRefusals) {
  llm_model* model = LoadModel(0);
  ASSERT_NE(model, nullptr);
  llm_session* a = NewSession(model, 512, 0.8f, 42);
  const std::vector<llm_token> p = Prompt(77, 11);
  ASSERT_EQ(llm_session_prefill(a, p.data(), p.size()), LLM_OK);
  Decode(a, 3);
  size_t size = 0;
  EXPECT_EQ(llm_session_save(a, nullptr, 0, &size), LLM_ERR_BUFFER_TOO_SMALL);
  ASSERT_GT(size, 80u * 2 * 1000);
  std::vector<uint8_t> buf(size);
  ASSERT_EQ(llm_session_save(a, buf.data(), buf.size(), &size), LLM_OK) << llm_last_error();
  llm_session* b = NewSession(model, 512, 0.8f, 7);
  ASSERT_EQ(llm_session_load(b, buf.data(), buf.size()), LLM_OK) << llm_last_error();
  size_t na = 0, nb = 0;
  llm_session_n_tokens(a, &na);
  llm_session_n_tokens(b, &nb);
  EXPECT_EQ(na, nb);
  EXPECT_EQ(Decode(b, 6), Decode(a, 6)) << "seeded sampling continues identically";

  // Corruption anywhere is refused and leaves the session unchanged.
  llm_session* c = NewSession(model, 512, 0.8f, 7);
  for (size_t off : {size_t{0}, size_t{9}, size / 3, size / 2, size - 1}) {
    std::vector<uint8_t> bad = buf;
    bad[off] ^= 0x20;
    EXPECT_NE(llm_session_load(c, bad.data(), bad.size()), LLM_OK) << "flip at " << off;
    size_t nc = 1;
    llm_session_n_tokens(c, &nc);
    EXPECT_EQ(nc, 0u);
  }
  EXPECT_NE(llm_session_load(c, buf.data(), buf.size() - 1), LLM_OK);
  // Another KV type.
  llm_session_params sp;
  llm_session_params_init(&sp);
  sp.kv_type = LLM_KV_F32;
  llm_session* f32 = nullptr;
  ASSERT_EQ(llm_session_create(model, &sp, &f32), LLM_OK);
  EXPECT_EQ(llm_session_load(f32, buf.data(), buf.size()), LLM_ERR_INVALID_ARGUMENT);
  // Another model.
  llm_model* tiny = nullptr;
  ASSERT_EQ(llm_model_load(llm_abi_test::TinyModelPath("Q8_0").c_str(), nullptr, &tiny), LLM_OK);
  llm_session* t = nullptr;
  ASSERT_EQ(llm_session_create(tiny, nullptr, &t), LLM_OK);
  EXPECT_EQ(llm_session_load(t, buf.data(), buf.size()), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("model"), std::string::npos) << llm_last_error();
  llm_session_free(t);
  llm_model_free(tiny);
  llm_session_free(f32);
  llm_session_free(c);
  llm_session_free(b);
  llm_session_free(a);
  llm_model_free(model);
}

// Rewind in deterministic mode: back to the prompt, the logits and the
// greedy continuation are bit-identical to the first time.
TEST_F(BatcherTest, RewindRecomputesIdenticalLogits) {
  llm_model* model = LoadModel(1);
  ASSERT_NE(model, nullptr);
  llm_session* s = NewSession(model, 512, 0.0f, 1);
  const std::vector<llm_token> p = Prompt(50, 12);
  ASSERT_EQ(llm_session_prefill(s, p.data(), p.size()), LLM_OK);
  const float* logits = nullptr;
  size_t n_vocab = 0;
  ASSERT_EQ(llm_session_logits(s, &logits, &n_vocab), LLM_OK);
  const std::vector<float> first(logits, logits + n_vocab);
  const std::vector<llm_token> gen = Decode(s, 8);
  ASSERT_EQ(llm_session_rewind(s, 60), LLM_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(llm_session_rewind(s, 50), LLM_OK) << llm_last_error();
  size_t n = 0;
  llm_session_n_tokens(s, &n);
  EXPECT_EQ(n, 50u);
  ASSERT_EQ(llm_session_logits(s, &logits, &n_vocab), LLM_OK);
  EXPECT_EQ(std::vector<float>(logits, logits + n_vocab), first);
  EXPECT_EQ(Decode(s, 8), gen);
  ASSERT_EQ(llm_session_rewind(s, 0), LLM_OK);
  EXPECT_EQ(llm_session_logits(s, &logits, &n_vocab), LLM_ERR_INVALID_ARGUMENT);
  llm_session_free(s);
  llm_model_free(model);
}

}  // namespace
