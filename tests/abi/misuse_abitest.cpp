// Misuse of the public API (issue 4 part 5), public header only: stale and
// foreign handles are refused without touching memory (this file runs under
// ASan in scripts/test_sanitizers.sh, where a use-after-free would abort),
// re-entrant calls from callbacks get LLM_ERR_BUSY, two threads on one
// session get BUSY instead of a data race, and callbacks may stop at every
// point.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "llm/llm.h"
#include "test_util.h"

namespace {

std::string TinyPath() { return llm_abi_test::TinyModelPath("Q8_0"); }

bool Contains(const char* haystack, const char* needle) {
  return std::strstr(haystack, needle) != nullptr;
}

class MisuseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LLM_ABI_REQUIRE_FILE(TinyPath());
    ASSERT_EQ(llm_model_load(TinyPath().c_str(), nullptr, &model_), LLM_OK) << llm_last_error();
  }
  void TearDown() override { llm_model_free(model_); }

  llm_session* NewSession(int32_t n_ctx = 64) {
    llm_session_params sp;
    llm_session_params_init(&sp);
    sp.n_ctx = n_ctx;
    sp.n_threads = 1;
    sp.sampler.temperature = 0;  // greedy: runs repeat exactly
    llm_session* s = nullptr;
    EXPECT_EQ(llm_session_create(model_, &sp, &s), LLM_OK) << llm_last_error();
    return s;
  }

  llm_model* model_ = nullptr;
  const llm_token prompt_[3] = {1, 2, 3};
};

// Every session call on `s` returns `want` (for handles that are not live).
void ExpectSessionCallsRefused(llm_session* s, llm_status want, const char* msg_part) {
  const llm_token t = 1;
  llm_token out = -7;
  const float* logits = nullptr;
  size_t n = 0;
  llm_sampler_params sp;
  llm_sampler_params_init(&sp);
  llm_generate_params gp;
  llm_generate_params_init(&gp);
  EXPECT_EQ(llm_session_prefill(s, &t, 1), want);
  EXPECT_TRUE(Contains(llm_last_error(), msg_part)) << llm_last_error();
  EXPECT_EQ(llm_session_decode(s, &out), want);
  EXPECT_EQ(out, -7) << "out-parameter written on failure";
  EXPECT_EQ(llm_session_logits(s, &logits, &n), want);
  EXPECT_EQ(llm_session_n_tokens(s, &n), want);
  EXPECT_EQ(llm_session_set_sampler(s, &sp), want);
  EXPECT_EQ(llm_session_reset(s), want);
  EXPECT_EQ(llm_generate(s, &t, 1, &gp, nullptr), want);
  EXPECT_TRUE(Contains(llm_last_error(), msg_part)) << llm_last_error();
}

void ExpectModelCallsRefused(llm_model* m) {
  llm_model_info info;
  llm_model_info_init(&info);
  llm_token tokens[8];
  size_t n = 0;
  char buf[64];
  int32_t eog = 0;
  llm_session* s = nullptr;
  llm_chat_message msg = {"user", "hi"};
  EXPECT_EQ(llm_model_get_info(m, &info), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(llm_last_error(), "not a live model handle")) << llm_last_error();
  EXPECT_EQ(llm_tokenize(m, "hi", 2, 1, 0, tokens, 8, &n), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_token_to_piece(m, 1, 0, buf, sizeof buf, &n), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_detokenize(m, tokens, 0, 0, buf, sizeof buf, &n), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_model_chat_template(m, buf, sizeof buf, &n), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_token_is_eog(m, 1, &eog), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_chat_format(m, nullptr, &msg, 1, 1, buf, sizeof buf, &n), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_session_create(m, nullptr, &s), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
}

TEST_F(MisuseTest, FreedModelHandleIsRefusedAndFreeingItAgainIsANoOp) {
  llm_model* m = nullptr;
  ASSERT_EQ(llm_model_load(TinyPath().c_str(), nullptr, &m), LLM_OK);
  llm_model_free(m);
  ExpectModelCallsRefused(m);
  llm_model_free(m);  // stale: no-op (a double free would abort under ASan)
  llm_model_free(m);
  // The fixture's model is untouched by all this.
  llm_model_info info;
  llm_model_info_init(&info);
  EXPECT_EQ(llm_model_get_info(model_, &info), LLM_OK);
}

TEST_F(MisuseTest, FreedSessionHandleIsRefusedAndFreeingItAgainIsANoOp) {
  llm_session* s = NewSession();
  ASSERT_EQ(llm_session_prefill(s, prompt_, 3), LLM_OK);
  llm_session_free(s);
  ExpectSessionCallsRefused(s, LLM_ERR_INVALID_ARGUMENT, "not a live session handle");
  llm_session_free(s);
  // A new session never gets the old handle value back (ids are not reused),
  // so the stale handle stays refused.
  llm_session* s2 = NewSession();
  EXPECT_NE(s2, s);
  ExpectSessionCallsRefused(s, LLM_ERR_INVALID_ARGUMENT, "not a live session handle");
  llm_session_free(s2);
}

TEST_F(MisuseTest, ForeignPointersAreRefusedWithoutBeingRead) {
  // Values the library never handed out (0x10004: ids step by 16 from
  // 0x10000, so this is never one), including freed heap memory: ASan
  // aborts if any call reads it.
  void* heap = std::malloc(256);
  ASSERT_NE(heap, nullptr);
  std::memset(heap, 0xAB, 256);
  const uintptr_t freed = reinterpret_cast<uintptr_t>(heap);
  std::free(heap);
  int on_stack[64] = {0};
  const uintptr_t forged[] = {freed,
                              reinterpret_cast<uintptr_t>(on_stack), 1, 16, 0x10004,
                              UINTPTR_MAX, UINTPTR_MAX - 15};
  for (uintptr_t v : forged) {
    ExpectModelCallsRefused(reinterpret_cast<llm_model*>(v));
    ExpectSessionCallsRefused(reinterpret_cast<llm_session*>(v), LLM_ERR_INVALID_ARGUMENT,
                              "not a live session handle");
    llm_model_free(reinterpret_cast<llm_model*>(v));  // no-ops
    llm_session_free(reinterpret_cast<llm_session*>(v));
  }
}

TEST_F(MisuseTest, HandleOfTheOtherKindIsRefused) {
  llm_session* s = NewSession();
  ExpectModelCallsRefused(reinterpret_cast<llm_model*>(s));
  ExpectSessionCallsRefused(reinterpret_cast<llm_session*>(model_), LLM_ERR_INVALID_ARGUMENT,
                            "not a live session handle");
  llm_model_free(reinterpret_cast<llm_model*>(s));  // not a model: no-op
  size_t n = 0;
  EXPECT_EQ(llm_session_n_tokens(s, &n), LLM_OK) << "the session survived a wrong-kind free";
  llm_session_free(s);
}

// ---- re-entrancy -----------------------------------------------------------

struct Reentry {
  llm_session* self = nullptr;
  llm_session* other = nullptr;
  llm_model* model = nullptr;
  int calls = 0;
  std::vector<llm_status> self_status;  // statuses of calls on `self`
  llm_status other_status = -1;
  bool free_self = false;
  bool free_model = false;
};

int32_t ReenterOnPiece(const char*, size_t, void* user) {
  auto* r = static_cast<Reentry*>(user);
  ++r->calls;
  if (r->free_self) {
    llm_session_free(r->self);
    return 0;  // the library stops anyway: the session is going away
  }
  if (r->free_model) {
    llm_model_free(r->model);  // the session holds its own reference
    r->model = nullptr;
    return 0;
  }
  const llm_token t = 1;
  llm_token out = 0;
  size_t n = 0;
  const float* logits = nullptr;
  llm_generate_params gp;
  llm_generate_params_init(&gp);
  r->self_status.push_back(llm_session_decode(r->self, &out));
  r->self_status.push_back(llm_session_prefill(r->self, &t, 1));
  r->self_status.push_back(llm_session_n_tokens(r->self, &n));
  r->self_status.push_back(llm_session_logits(r->self, &logits, &n));
  r->self_status.push_back(llm_session_reset(r->self));
  r->self_status.push_back(llm_generate(r->self, &t, 1, &gp, nullptr));
  if (r->other != nullptr && r->other_status == -1) {
    r->other_status = llm_session_prefill(r->other, &t, 1);  // a different session: fine
  }
  return 0;
}

TEST_F(MisuseTest, ReentrantCallsOnTheSameSessionAreBusy) {
  llm_session* s = NewSession();
  llm_session* other = NewSession();
  Reentry r;
  r.self = s;
  r.other = other;
  llm_generate_params gp;
  llm_generate_params_init(&gp);
  gp.max_tokens = 6;
  gp.on_piece = ReenterOnPiece;
  gp.user = &r;
  llm_generate_result res;
  llm_generate_result_init(&res);
  ASSERT_EQ(llm_generate(s, prompt_, 3, &gp, &res), LLM_OK) << llm_last_error();
  if (r.calls == 0) GTEST_SKIP() << "the tiny model produced no text piece to call back from";
  ASSERT_FALSE(r.self_status.empty());
  for (llm_status st : r.self_status) EXPECT_EQ(st, LLM_ERR_BUSY) << llm_status_string(st);
  EXPECT_EQ(r.other_status, LLM_OK);
  // The re-entrant calls changed nothing: history = prompt + generated.
  size_t n = 0;
  ASSERT_EQ(llm_session_n_tokens(s, &n), LLM_OK);
  EXPECT_EQ(n, 3u + static_cast<size_t>(res.n_generated));
  // And the session is not left busy.
  llm_token out = 0;
  EXPECT_EQ(llm_session_decode(s, &out), LLM_OK) << llm_last_error();
  llm_session_free(other);
  llm_session_free(s);
}

TEST_F(MisuseTest, FreeingTheSessionFromItsOwnCallbackStopsAndFreesIt) {
  llm_session* s = NewSession();
  Reentry r;
  r.self = s;
  r.free_self = true;
  llm_generate_params gp;
  llm_generate_params_init(&gp);
  gp.max_tokens = 16;
  gp.on_piece = ReenterOnPiece;
  gp.user = &r;
  llm_generate_result res;
  llm_generate_result_init(&res);
  const llm_status st = llm_generate(s, prompt_, 3, &gp, &res);
  if (r.calls == 0) {
    llm_session_free(s);
    GTEST_SKIP() << "the tiny model produced no text piece to call back from";
  }
  EXPECT_EQ(st, LLM_OK) << llm_last_error();
  EXPECT_EQ(r.calls, 1) << "generation went on after its session was freed";
  EXPECT_EQ(res.stop_reason, LLM_STOP_CALLBACK);
  // Gone now (LeakSanitizer checks it was really destroyed).
  size_t n = 0;
  EXPECT_EQ(llm_session_n_tokens(s, &n), LLM_ERR_INVALID_ARGUMENT);
  llm_session_free(s);  // stale: no-op
}

TEST_F(MisuseTest, FreeingTheModelFromACallbackKeepsTheSessionWorking) {
  llm_session* s = NewSession();
  Reentry r;
  r.self = s;
  r.model = model_;
  r.free_model = true;
  model_ = nullptr;  // the callback frees it (TearDown's free(NULL) is a no-op)
  llm_generate_params gp;
  llm_generate_params_init(&gp);
  gp.max_tokens = 8;
  gp.on_piece = ReenterOnPiece;
  gp.user = &r;
  EXPECT_EQ(llm_generate(s, prompt_, 3, &gp, nullptr), LLM_OK) << llm_last_error();
  if (r.model != nullptr) llm_model_free(r.model);  // no piece came: free it here
  llm_token out = 0;
  EXPECT_EQ(llm_session_decode(s, &out), LLM_OK) << llm_last_error();
  llm_session_free(s);
}

struct Progress {
  int calls = 0;
  int cancel_at = -1;
  llm_model* free_me = nullptr;
};

int32_t OnProgress(float p, void* user) {
  auto* pr = static_cast<Progress*>(user);
  EXPECT_GE(p, 0.0f);
  EXPECT_LE(p, 1.0f);
  if (pr->free_me != nullptr) {
    llm_model_free(pr->free_me);  // another model, freed from inside a load
    pr->free_me = nullptr;
  }
  return pr->calls++ == pr->cancel_at ? 1 : 0;
}

TEST_F(MisuseTest, ProgressCanCancelAtEveryCall) {
  llm_model_params mp;
  llm_model_params_init(&mp);
  mp.progress = OnProgress;
  Progress count;
  mp.progress_user = &count;
  llm_model* m = nullptr;
  ASSERT_EQ(llm_model_load(TinyPath().c_str(), &mp, &m), LLM_OK);
  llm_model_free(m);
  ASSERT_GE(count.calls, 2);
  for (int i = 0; i < count.calls; ++i) {
    Progress pr;
    pr.cancel_at = i;
    mp.progress_user = &pr;
    llm_model* sentinel = reinterpret_cast<llm_model*>(uintptr_t{0x1234});
    llm_model* out = sentinel;
    EXPECT_EQ(llm_model_load(TinyPath().c_str(), &mp, &out), LLM_ERR_CANCELLED) << "call " << i;
    EXPECT_EQ(out, sentinel) << "out_model written on failure";
    EXPECT_EQ(pr.calls, i + 1) << "progress was called after it asked to stop";
  }
}

TEST_F(MisuseTest, ProgressMayFreeAnotherModel) {
  llm_model_params mp;
  llm_model_params_init(&mp);
  mp.progress = OnProgress;
  Progress pr;
  pr.free_me = model_;
  model_ = nullptr;
  mp.progress_user = &pr;
  llm_model* m = nullptr;
  ASSERT_EQ(llm_model_load(TinyPath().c_str(), &mp, &m), LLM_OK) << llm_last_error();
  EXPECT_EQ(pr.free_me, nullptr);
  model_ = m;
}

struct StopAfter {
  int pieces = 0;
  int stop_after = 0;  // 0: never stop
};

int32_t CountAndStop(const char*, size_t len, void* user) {
  auto* s = static_cast<StopAfter*>(user);
  EXPECT_GT(len, 0u);
  ++s->pieces;
  return s->stop_after > 0 && s->pieces >= s->stop_after ? 1 : 0;
}

TEST_F(MisuseTest, OnPieceCanStopAtEveryPiece) {
  llm_session* s = NewSession(128);
  llm_generate_params gp;
  llm_generate_params_init(&gp);
  gp.max_tokens = 40;
  gp.on_piece = CountAndStop;
  StopAfter all;
  gp.user = &all;
  llm_generate_result res;
  llm_generate_result_init(&res);
  ASSERT_EQ(llm_generate(s, prompt_, 3, &gp, &res), LLM_OK) << llm_last_error();
  ASSERT_GE(all.pieces, 1);
  for (int k = 1; k <= all.pieces; ++k) {
    ASSERT_EQ(llm_session_reset(s), LLM_OK);
    StopAfter st;
    st.stop_after = k;
    gp.user = &st;
    llm_generate_result r;
    llm_generate_result_init(&r);
    ASSERT_EQ(llm_generate(s, prompt_, 3, &gp, &r), LLM_OK) << llm_last_error();
    EXPECT_EQ(st.pieces, k) << "a piece was delivered after the callback asked to stop";
    EXPECT_EQ(r.stop_reason, LLM_STOP_CALLBACK) << "stop at piece " << k;
    // The session stays usable after every stop.
    llm_token out = 0;
    EXPECT_EQ(llm_session_decode(s, &out), LLM_OK) << llm_last_error();
  }
  llm_session_free(s);
}

// ---- two threads, one session ------------------------------------------

struct Blocker {
  std::atomic<bool> in_callback{false};
  std::atomic<bool> release{false};
};

int32_t BlockInCallback(const char*, size_t, void* user) {
  auto* b = static_cast<Blocker*>(user);
  b->in_callback.store(true);
  while (!b->release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return 1;  // stop
}

TEST_F(MisuseTest, SecondThreadOnABusySessionGetsBusy) {
  llm_session* s = NewSession();
  Blocker b;
  llm_status gen_status = -1;
  std::thread t([&] {
    llm_generate_params gp;
    llm_generate_params_init(&gp);
    gp.max_tokens = 16;
    gp.on_piece = BlockInCallback;
    gp.user = &b;
    gen_status = llm_generate(s, prompt_, 3, &gp, nullptr);
    b.in_callback.store(true);  // no piece came at all: unblock the main thread
  });
  while (!b.in_callback.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  llm_token out = 0;
  size_t n = 0;
  const llm_status decode = llm_session_decode(s, &out);
  const llm_status count = llm_session_n_tokens(s, &n);
  const bool was_blocked = !b.release.load();
  b.release.store(true);
  t.join();
  EXPECT_EQ(gen_status, LLM_OK);
  if (was_blocked && decode != LLM_OK) {
    EXPECT_EQ(decode, LLM_ERR_BUSY) << llm_last_error();
    EXPECT_EQ(count, LLM_ERR_BUSY);
    EXPECT_TRUE(Contains(llm_last_error(), "in use")) << llm_last_error();
  }
  // Free from another thread while a call runs: the handle dies at once and
  // the session goes when the call returns.
  Blocker b2;
  std::thread t2([&] {
    llm_generate_params gp;
    llm_generate_params_init(&gp);
    gp.max_tokens = 16;
    gp.on_piece = BlockInCallback;
    gp.user = &b2;
    llm_generate(s, nullptr, 0, &gp, nullptr);
    b2.in_callback.store(true);
  });
  while (!b2.in_callback.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  llm_session_free(s);
  EXPECT_EQ(llm_session_n_tokens(s, &n), LLM_ERR_INVALID_ARGUMENT);
  b2.release.store(true);
  t2.join();
  EXPECT_EQ(llm_session_n_tokens(s, &n), LLM_ERR_INVALID_ARGUMENT);
}

// Run under TSan by scripts/test_sanitizers.sh: every call on a shared session
// either runs alone or is refused; no data race, no crash.
TEST_F(MisuseTest, ConcurrentCallsOnOneSessionAreBusyOrOk) {
  llm_session* s = NewSession(256);
  ASSERT_EQ(llm_session_prefill(s, prompt_, 3), LLM_OK);
  std::atomic<int> busy{0}, ok{0}, bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        llm_token out = 0;
        size_t n = 0;
        llm_status st;
        switch ((i + t) % 4) {
          case 0: st = llm_session_decode(s, &out); break;
          case 1: st = llm_session_n_tokens(s, &n); break;
          case 2: st = llm_session_prefill(s, prompt_, 3); break;
          default: st = (i % 16 == 3) ? llm_session_reset(s) : llm_session_n_tokens(s, &n); break;
        }
        if (st == LLM_ERR_BUSY) {
          ++busy;
        } else if (st == LLM_OK || st == LLM_ERR_CONTEXT_FULL ||
                   (st == LLM_ERR_INVALID_ARGUMENT && Contains(llm_last_error(), "logits"))) {
          ++ok;  // CONTEXT_FULL / no logits after a reset are legitimate answers
        } else {
          ++bad;
          ADD_FAILURE() << llm_status_string(st) << ": " << llm_last_error();
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(ok.load(), 0);
  llm_session_free(s);
}

// ---- 0.2: async steps, cancel, rewind, fork, save/load, stats ---------------

// Every 0.2 session function refuses a handle that is not a live session.
void ExpectNewSessionCallsRefused(llm_session* s) {
  const llm_token t = 1;
  llm_token out = -7;
  int32_t done = -7;
  size_t size = 12345;
  uint8_t buf[200] = {};
  llm_session* child = nullptr;
  llm_session_stats ss;
  llm_session_stats_init(&ss);
  EXPECT_EQ(llm_session_prefill_async(s, &t, 1), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(llm_last_error(), "not a live session handle")) << llm_last_error();
  EXPECT_EQ(llm_session_decode_async(s), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_session_poll(s, &done, &out), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_session_wait(s, &out), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_session_cancel(s), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(llm_last_error(), "not a live session handle")) << llm_last_error();
  EXPECT_EQ(llm_session_rewind(s, 0), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_session_fork(s, &child), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_session_save(s, buf, sizeof buf, &size), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_session_load(s, buf, sizeof buf), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_session_set_seed(s, 7), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(llm_session_get_stats(s, &ss), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(llm_last_error(), "not a live session handle")) << llm_last_error();
  EXPECT_EQ(out, -7);
  EXPECT_EQ(done, -7);
  EXPECT_EQ(size, 12345u);
  EXPECT_EQ(child, nullptr);
}

void ExpectModelStatsRefused(llm_model* m) {
  llm_kv_stats ks;
  llm_kv_stats_init(&ks);
  llm_batch_stats bs;
  llm_batch_stats_init(&bs);
  EXPECT_EQ(llm_model_kv_stats(m, &ks), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(llm_last_error(), "not a live model handle")) << llm_last_error();
  EXPECT_EQ(llm_model_batch_stats(m, &bs), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(llm_last_error(), "not a live model handle")) << llm_last_error();
}

TEST_F(MisuseTest, NewSessionFunctionsRefuseStaleForeignAndWrongKindHandles) {
  llm_session* s = NewSession();
  ASSERT_EQ(llm_session_prefill(s, prompt_, 3), LLM_OK);
  llm_session_free(s);
  ExpectNewSessionCallsRefused(s);
  llm_model* m = nullptr;
  ASSERT_EQ(llm_model_load(TinyPath().c_str(), nullptr, &m), LLM_OK);
  llm_model_free(m);
  ExpectModelStatsRefused(m);
  void* heap = std::malloc(64);
  ASSERT_NE(heap, nullptr);
  const uintptr_t freed = reinterpret_cast<uintptr_t>(heap);
  std::free(heap);
  for (uintptr_t v : {freed, uintptr_t{1}, uintptr_t{0x10004}, UINTPTR_MAX}) {
    ExpectNewSessionCallsRefused(reinterpret_cast<llm_session*>(v));
    ExpectModelStatsRefused(reinterpret_cast<llm_model*>(v));
  }
  // Wrong kind: the model as a session and a live session as a model.
  llm_session* live = NewSession();
  ExpectNewSessionCallsRefused(reinterpret_cast<llm_session*>(model_));
  ExpectModelStatsRefused(reinterpret_cast<llm_model*>(live));
  // The parent of a fork must be live; a fork's handle is a new id.
  llm_session* child = nullptr;
  ASSERT_EQ(llm_session_fork(live, &child), LLM_OK) << llm_last_error();
  EXPECT_NE(child, live);
  EXPECT_NE(child, s);
  llm_session_free(child);
  ExpectNewSessionCallsRefused(child);
  llm_session_free(live);
}

// While a non-blocking step is pending, every call on the session but
// poll / wait / cancel / get_stats / free is BUSY and changes nothing.
TEST_F(MisuseTest, EveryCallIsBusyWhileAnAsyncStepIsPending) {
  llm_session* s = NewSession(128);
  ASSERT_EQ(llm_session_prefill(s, prompt_, 3), LLM_OK);
  std::vector<llm_token> longp(100);
  for (size_t i = 0; i < longp.size(); ++i) longp[i] = static_cast<llm_token>(3 + i % 200);
  for (int kind = 0; kind < 2; ++kind) {
    SCOPED_TRACE(kind == 0 ? "prefill_async" : "decode_async");
    if (kind == 0) {
      ASSERT_EQ(llm_session_prefill_async(s, longp.data(), longp.size()), LLM_OK)
          << llm_last_error();
    } else {
      ASSERT_EQ(llm_session_decode_async(s), LLM_OK) << llm_last_error();
    }
    const llm_token t = 1;
    llm_token out = -7;
    size_t n = 12345;
    const float* logits = nullptr;
    llm_sampler_params sp;
    llm_sampler_params_init(&sp);
    llm_generate_params gp;
    llm_generate_params_init(&gp);
    llm_session* child = nullptr;
    std::vector<uint8_t> buf(1 << 20);
    size_t size = 12345;
    std::vector<std::pair<const char*, llm_status>> got = {
        {"prefill", llm_session_prefill(s, &t, 1)},
        {"decode", llm_session_decode(s, &out)},
        {"logits", llm_session_logits(s, &logits, &n)},
        {"n_tokens", llm_session_n_tokens(s, &n)},
        {"set_sampler", llm_session_set_sampler(s, &sp)},
        {"reset", llm_session_reset(s)},
        {"set_seed", llm_session_set_seed(s, 9)},
        {"generate", llm_generate(s, &t, 1, &gp, nullptr)},
        {"prefill_async", llm_session_prefill_async(s, &t, 1)},
        {"decode_async", llm_session_decode_async(s)},
        {"rewind", llm_session_rewind(s, 1)},
        {"fork", llm_session_fork(s, &child)},
        {"save", llm_session_save(s, buf.data(), buf.size(), &size)},
        {"load", llm_session_load(s, buf.data(), 140)},
    };
    for (const auto& [what, st] : got) {
      EXPECT_EQ(st, LLM_ERR_BUSY) << what << ": " << llm_status_string(st);
    }
    EXPECT_EQ(out, -7);
    EXPECT_EQ(n, 12345u);
    EXPECT_EQ(child, nullptr);
    EXPECT_EQ(size, 12345u);
    // The allowed ones.
    llm_session_stats ss;
    llm_session_stats_init(&ss);
    EXPECT_EQ(llm_session_get_stats(s, &ss), LLM_OK) << llm_last_error();
    int32_t done = -1;
    EXPECT_EQ(llm_session_poll(s, &done, &out), LLM_OK) << llm_last_error();
    EXPECT_TRUE(done == 0 || done == 1);
    if (done == 0) {
      EXPECT_EQ(llm_session_wait(s, &out), LLM_OK) << llm_last_error();
    }
    // Collected: the session is free again and has every token.
    size_t have = 0;
    ASSERT_EQ(llm_session_n_tokens(s, &have), LLM_OK) << llm_last_error();
    EXPECT_EQ(have, kind == 0 ? 103u : 104u);
    if (kind == 1) {
      EXPECT_GE(out, 0);
    }
  }
  llm_session_free(s);
}

TEST_F(MisuseTest, FreeWithAStepPendingCancelsIt) {
  for (int round = 0; round < 3; ++round) {
    llm_session* s = NewSession(256);
    std::vector<llm_token> p(200);
    for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<llm_token>(3 + (i * 7) % 300);
    ASSERT_EQ(llm_session_prefill_async(s, p.data(), p.size()), LLM_OK) << llm_last_error();
    if (round == 1) {
      int32_t done = 0;
      (void)llm_session_poll(s, &done, nullptr);
    }
    llm_session_free(s);  // pending (round 2: freed model too, below)
    int32_t done = 0;
    EXPECT_EQ(llm_session_poll(s, &done, nullptr), LLM_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(llm_session_wait(s, nullptr), LLM_ERR_INVALID_ARGUMENT);
  }
  // The model's batcher still serves other sessions.
  llm_session* s = NewSession();
  ASSERT_EQ(llm_session_prefill(s, prompt_, 3), LLM_OK) << llm_last_error();
  // Last reference to the model held by a session with a pending step.
  llm_model* m = nullptr;
  ASSERT_EQ(llm_model_load(TinyPath().c_str(), nullptr, &m), LLM_OK);
  llm_session* t = nullptr;
  ASSERT_EQ(llm_session_create(m, nullptr, &t), LLM_OK);
  llm_model_free(m);
  ASSERT_EQ(llm_session_prefill_async(t, prompt_, 3), LLM_OK) << llm_last_error();
  llm_session_free(t);  // joins that model's scheduler thread
  llm_token out = 0;
  EXPECT_EQ(llm_session_decode(s, &out), LLM_OK) << llm_last_error();
  llm_session_free(s);
}

int32_t HoldInCallback(const char*, size_t, void* user) {
  auto* b = static_cast<Blocker*>(user);
  b->in_callback.store(true);
  while (!b->release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return 0;  // go on (unlike BlockInCallback)
}

// A generation held inside its first on_piece callback on thread T (so the
// call is certainly in progress): from the main thread every 0.2 call but
// cancel / get_stats is BUSY; cancel makes the generation end CANCELLED and the
// session stays usable.
TEST_F(MisuseTest, CancelFromAnotherThreadDuringABlockingCall) {
  llm_session* s = NewSession(128);
  Blocker b;
  llm_status gen_status = -1;
  std::thread th([&] {
    llm_generate_params gp;
    llm_generate_params_init(&gp);
    gp.max_tokens = 32;
    gp.on_piece = HoldInCallback;
    gp.user = &b;
    gen_status = llm_generate(s, prompt_, 3, &gp, nullptr);
    b.in_callback.store(true);
  });
  while (!b.in_callback.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const bool held = !b.release.load();
  const llm_token t = 1;
  llm_token out = -7;
  int32_t done = -7;
  llm_session* child = nullptr;
  uint8_t buf[256] = {};
  size_t size = 12345;
  std::vector<std::pair<const char*, llm_status>> got = {
      {"prefill_async", llm_session_prefill_async(s, &t, 1)},
      {"decode_async", llm_session_decode_async(s)},
      {"poll", llm_session_poll(s, &done, &out)},
      {"wait", llm_session_wait(s, &out)},
      {"rewind", llm_session_rewind(s, 1)},
      {"fork", llm_session_fork(s, &child)},
      {"save", llm_session_save(s, buf, sizeof buf, &size)},
      {"load", llm_session_load(s, buf, sizeof buf)},
      {"set_seed", llm_session_set_seed(s, 3)},
  };
  llm_session_stats ss;
  llm_session_stats_init(&ss);
  const llm_status stats = llm_session_get_stats(s, &ss);
  const llm_status cancel = llm_session_cancel(s);
  b.release.store(true);
  th.join();
  EXPECT_EQ(stats, LLM_OK);
  EXPECT_EQ(cancel, LLM_OK);
  if (held) {
    for (const auto& [what, st] : got) {
      EXPECT_EQ(st, LLM_ERR_BUSY) << what << ": " << llm_status_string(st);
    }
    EXPECT_EQ(child, nullptr);
    EXPECT_EQ(size, 12345u);
    EXPECT_EQ(done, -7);
    // The cancel came while the generation was in progress: it ends CANCELLED.
    EXPECT_EQ(gen_status, LLM_ERR_CANCELLED) << llm_status_string(gen_status);
  }
  // Usable afterwards. The cancelled generation was undone; a cancel that
  // came after it ended is latched and fails the next step call instead.
  size_t n = 0;
  ASSERT_EQ(llm_session_n_tokens(s, &n), LLM_OK);
  if (held) {
    EXPECT_EQ(n, 0u) << "a failed generation leaves the session as it was";
  } else {
    EXPECT_EQ(llm_session_prefill(s, &t, 1), LLM_ERR_CANCELLED);
  }
  EXPECT_EQ(llm_session_prefill(s, &t, 1), LLM_OK) << llm_last_error();
  EXPECT_EQ(llm_session_decode(s, &out), LLM_OK) << llm_last_error();
  llm_session_free(s);
}

// A cancel with nothing in progress is latched: the next call that runs the
// model returns CANCELLED at once and changes nothing; the call after runs.
TEST_F(MisuseTest, CancelWithNothingInProgressFailsTheNextStepCall) {
  llm_session* s = NewSession();
  EXPECT_EQ(llm_session_cancel(s), LLM_OK);
  EXPECT_EQ(llm_session_cancel(s), LLM_OK);
  EXPECT_EQ(llm_session_prefill(s, prompt_, 3), LLM_ERR_CANCELLED);
  ASSERT_EQ(llm_session_prefill(s, prompt_, 3), LLM_OK) << llm_last_error();
  llm_token out = -1;
  EXPECT_EQ(llm_session_cancel(s), LLM_OK);
  EXPECT_EQ(llm_session_decode(s, &out), LLM_ERR_CANCELLED);
  EXPECT_EQ(llm_session_decode(s, &out), LLM_OK) << llm_last_error();
  EXPECT_EQ(llm_session_cancel(s), LLM_OK);
  EXPECT_EQ(llm_session_decode_async(s), LLM_ERR_CANCELLED);
  ASSERT_EQ(llm_session_decode_async(s), LLM_OK) << llm_last_error();
  EXPECT_EQ(llm_session_wait(s, &out), LLM_OK);
  // Cancelling after a step was collected latches for the next call too;
  // reset clears the latch.
  EXPECT_EQ(llm_session_cancel(s), LLM_OK);
  size_t n = 0;
  ASSERT_EQ(llm_session_n_tokens(s, &n), LLM_OK);
  EXPECT_EQ(n, 5u);
  EXPECT_EQ(llm_session_reset(s), LLM_OK);
  EXPECT_EQ(llm_session_prefill(s, prompt_, 3), LLM_OK) << llm_last_error();
  llm_session_free(s);
}

// Another thread cancels an async step (and keeps cancelling) while this
// thread polls: the step ends OK or CANCELLED; after CANCELLED the session
// is as before the submit (empty, no logits); reset clears the latch the
// last cancels left.
TEST_F(MisuseTest, CancelAnAsyncStepFromAnotherThread) {
  llm_model_params mp;
  llm_model_params_init(&mp);
  mp.batch_tokens = 8;  // many iterations per prefill
  mp.n_threads = 1;
  llm_model* m = nullptr;
  ASSERT_EQ(llm_model_load(TinyPath().c_str(), &mp, &m), LLM_OK) << llm_last_error();
  llm_session_params sp;
  llm_session_params_init(&sp);
  sp.n_ctx = 256;
  llm_session* s = nullptr;
  ASSERT_EQ(llm_session_create(m, &sp, &s), LLM_OK);
  std::vector<llm_token> p(200);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<llm_token>(3 + (i * 5) % 300);
  int cancelled = 0;
  for (int round = 0; round < 4; ++round) {
    ASSERT_EQ(llm_session_rewind(s, 0), LLM_OK) << llm_last_error();
    ASSERT_EQ(llm_session_prefill_async(s, p.data(), p.size()), LLM_OK) << llm_last_error();
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    std::thread canceller([&] {
      while (!stop.load()) {
        if (llm_session_cancel(s) != LLM_OK) bad.fetch_add(1);
        std::this_thread::yield();
      }
    });
    int32_t done = 0;
    llm_status st = LLM_OK;
    while (done == 0) {
      st = llm_session_poll(s, &done, nullptr);
      if (done == 0) std::this_thread::yield();
    }
    stop.store(true);
    canceller.join();
    EXPECT_EQ(bad.load(), 0);
    ASSERT_TRUE(st == LLM_OK || st == LLM_ERR_CANCELLED) << llm_status_string(st);
    size_t n = 0;
    ASSERT_EQ(llm_session_n_tokens(s, &n), LLM_OK);
    const float* logits = nullptr;
    size_t nv = 0;
    if (st == LLM_ERR_CANCELLED) {
      ++cancelled;
      EXPECT_EQ(n, 0u) << "a cancelled prefill is undone";
      EXPECT_EQ(llm_session_logits(s, &logits, &nv), LLM_ERR_INVALID_ARGUMENT);
    } else {
      EXPECT_EQ(n, p.size());
    }
    ASSERT_EQ(llm_session_reset(s), LLM_OK);
    EXPECT_EQ(llm_session_prefill(s, p.data(), 1), LLM_OK) << llm_last_error();
    llm_token out = -1;
    EXPECT_EQ(llm_session_decode(s, &out), LLM_OK) << llm_last_error();
  }
  std::printf("async prefill cancelled in %d of 4 rounds\n", cancelled);
  llm_session_free(s);
  llm_model_free(m);
}

// Fork, save, load, rewind and stats from several threads on their own
// sessions while other threads cancel those sessions: only OK / CANCELLED /
// BUSY, never anything else.
TEST_F(MisuseTest, SessionOpsRaceWithCancelFromOtherThreads) {
  llm_session* base = NewSession(64);
  ASSERT_EQ(llm_session_prefill(base, prompt_, 3), LLM_OK);
  std::vector<llm_session*> sessions(4, nullptr);
  for (auto& x : sessions) ASSERT_EQ(llm_session_fork(base, &x), LLM_OK) << llm_last_error();
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> ths;
  for (size_t i = 0; i < sessions.size(); ++i) {
    ths.emplace_back([&, i] {
      llm_session* s = sessions[i];
      std::vector<uint8_t> buf;
      for (int it = 0; it < 20; ++it) {
        auto ok = [&](llm_status st) {
          if (st != LLM_OK && st != LLM_ERR_CANCELLED && st != LLM_ERR_BUSY &&
              st != LLM_ERR_INVALID_ARGUMENT /* no logits after a cancel */) {
            bad.fetch_add(1);
          }
        };
        llm_token out = 0;
        ok(llm_session_decode(s, &out));
        size_t size = 0;
        if (llm_session_save(s, nullptr, 0, &size) == LLM_ERR_BUFFER_TOO_SMALL) {
          buf.resize(size);
          if (llm_session_save(s, buf.data(), buf.size(), &size) == LLM_OK) {
            ok(llm_session_load(s, buf.data(), size));
          }
        }
        size_t n = 0;
        if (llm_session_n_tokens(s, &n) == LLM_OK && n > 40) ok(llm_session_rewind(s, 3));
        if (n == 0) ok(llm_session_prefill(s, prompt_, 3));
        llm_session* c = nullptr;
        if (llm_session_fork(s, &c) == LLM_OK) llm_session_free(c);
        llm_session_stats ss;
        llm_session_stats_init(&ss);
        ok(llm_session_get_stats(s, &ss));
      }
    });
  }
  std::thread canceller([&] {
    while (!stop.load()) {
      for (llm_session* s : sessions) {
        if (llm_session_cancel(s) != LLM_OK) bad.fetch_add(1);
      }
      std::this_thread::yield();
    }
  });
  for (auto& t : ths) t.join();
  stop.store(true);
  canceller.join();
  EXPECT_EQ(bad.load(), 0);
  for (llm_session* s : sessions) {
    // Recoverable: rewind to what is there (recomputes logits), then decode.
    // The first step call may meet a cancel latched after the last call.
    size_t n = 0;
    ASSERT_EQ(llm_session_n_tokens(s, &n), LLM_OK);
    for (int attempt = 0; attempt < 2; ++attempt) {
      const llm_status st =
          n == 0 ? llm_session_prefill(s, prompt_, 3) : llm_session_rewind(s, n);
      if (attempt == 0 && st == LLM_ERR_CANCELLED) continue;
      EXPECT_EQ(st, LLM_OK) << llm_last_error();
      break;
    }
    llm_token out = 0;
    EXPECT_EQ(llm_session_decode(s, &out), LLM_OK) << llm_last_error();
    llm_session_free(s);
  }
  llm_session_free(base);
}

}  // namespace
