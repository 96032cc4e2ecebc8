// Stress/soak (issue 4 part 6): 32 threads share one model and a table of
// session slots, and at random create, prefill, decode, generate (streaming),
// reset and free sessions — including sessions another thread is using or has
// just freed — for a bounded time (LLM_STRESS_SECONDS, default 10).
//
// Checked: no crash (and, in the sanitizer builds, no race, leak or bad
// access); every status is one the API documents for the situation (OK, BUSY
// for a session in use, INVALID_ARGUMENT for a handle freed by another thread
// or a session without logits, CONTEXT_FULL); generated ids are token ids of
// the model; streamed text is valid UTF-8 piece by piece; RSS after the run
// is within a stated slack of RSS after a warm-up of the same workload.
//
// Since 0.2 the mix also forks shared sessions (the child goes into a free
// slot), rewinds to random lengths, cancels sessions other threads are using,
// submits non-blocking steps and collects them with poll/wait (other threads
// may collect them first), round-trips save/load (the buffer also loads into
// a private session whose own save must reproduce it byte for byte) and reads
// the KV / batch / session stats (checked for consistency).
//
// The tiny model runs by default; LLM_STRESS_MODEL=path runs another (e.g.
// the real model).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "llm/llm.h"

namespace {

// ASan keeps freed blocks in a quarantine (256 MiB by default) and its
// allocator returns memory lazily, so RSS says nothing about leaks there;
// LeakSanitizer checks those builds instead.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && v[0] != '\0') ? std::string(v) : fallback;
}

// VmRSS of this process in KiB (0 if unknown).
long RssKiB() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.compare(0, 6, "VmRSS:") == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      n = 1;
      cp = c;
    } else if ((c >> 5) == 6) {
      n = 2;
      cp = c & 0x1F;
    } else if ((c >> 4) == 14) {
      n = 3;
      cp = c & 0x0F;
    } else if ((c >> 3) == 30) {
      n = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 2) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid too.
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      return false;
    }
    i += n;
  }
  return true;
}

struct Stream {
  std::string text;
  int pieces = 0;
  bool bad_piece = false;
};

int32_t OnPiece(const char* text, size_t len, void* user) {
  auto* s = static_cast<Stream*>(user);
  const std::string piece(text, len);
  if (len == 0 || !ValidUtf8(piece)) s->bad_piece = true;
  s->text += piece;
  ++s->pieces;
  return 0;
}

struct Counters {
  std::atomic<long> ok{0}, busy{0}, stale{0}, full{0}, generated{0}, created{0}, freed{0};
  std::atomic<long> cancelled{0}, forked{0}, async_steps{0}, round_trips{0}, rewinds{0};
};

class StressTest : public ::testing::Test {
 protected:
  static constexpr int kThreads = 32;
  static constexpr int kSlots = 24;

  void SetUp() override {
    path_ = EnvOr("LLM_STRESS_MODEL", std::string(LLM_TEST_DATA_DIR) + "/tiny/tiny-llama-Q8_0.gguf");
    llm_model_params mp;
    llm_model_params_init(&mp);
    mp.n_threads = 1;
    ASSERT_EQ(llm_model_load(path_.c_str(), &mp, &model_), LLM_OK) << llm_last_error();
    llm_model_info info;
    llm_model_info_init(&info);
    ASSERT_EQ(llm_model_get_info(model_, &info), LLM_OK);
    n_vocab_ = info.n_vocab;
    for (auto& s : slots_) s.store(0);
  }
  // Memory the KV pools have taken so far (storage and bookkeeping), KiB.
  long KvPoolKiB() const {
    llm_kv_stats st;
    llm_kv_stats_init(&st);
    if (llm_model_kv_stats(model_, &st) != LLM_OK) {
      ADD_FAILURE() << llm_last_error();
      return 0;
    }
    const uint64_t bytes =
        st.blocks_allocated * (st.block_bytes + st.block_overhead_bytes) +
        st.local_blocks_allocated * (st.local_block_bytes + st.block_overhead_bytes);
    return static_cast<long>(bytes / 1024);
  }
  void TearDown() override {
    FreeAllSlots();
    llm_model_free(model_);
  }

  void FreeAllSlots() {
    for (auto& s : slots_) {
      llm_session_free(reinterpret_cast<llm_session*>(s.exchange(0)));
    }
  }

  // Classifies a status; records a failure for anything undocumented.
  void Check(llm_status st, const char* what, Counters& c) {
    switch (st) {
      case LLM_OK: ++c.ok; return;
      case LLM_ERR_BUSY: ++c.busy; return;
      case LLM_ERR_CONTEXT_FULL: ++c.full; return;
      case LLM_ERR_CANCELLED: ++c.cancelled; return;  // another thread's cancel
      case LLM_ERR_INVALID_ARGUMENT:
        // A handle another thread freed, a session reset, rewound or cancelled
        // by another thread (no logits, fewer tokens than just read), or a
        // step another thread collected first: all legitimate in this
        // free-for-all.
        if (std::strstr(llm_last_error(), "not a live session") != nullptr ||
            std::strstr(llm_last_error(), "logits") != nullptr ||
            std::strstr(llm_last_error(), "exceeds") != nullptr ||
            std::strstr(llm_last_error(), "no step") != nullptr) {
          ++c.stale;
          return;
        }
        break;
      case LLM_ERR_BUFFER_TOO_SMALL:
        // The session grew between the size query and the save.
        if (std::strstr(what, "save") != nullptr) {
          ++c.busy;
          return;
        }
        break;
      default: break;
    }
    ADD_FAILURE() << what << ": " << llm_status_string(st) << ": " << llm_last_error();
  }

  void Worker(int id, std::chrono::steady_clock::time_point deadline, Counters& c) {
    std::mt19937 rng(1234u + static_cast<unsigned>(id));
    std::uniform_int_distribution<int> action(0, 149), slot(0, kSlots - 1), len(1, 12);
    std::uniform_int_distribution<llm_token> tok(0, n_vocab_ - 1);
    llm_session_params sp;
    llm_session_params_init(&sp);
    sp.n_ctx = 96;
    sp.n_threads = 1 + id % 2;
    sp.seed = static_cast<uint64_t>(id);
    while (std::chrono::steady_clock::now() < deadline && !::testing::Test::HasFailure()) {
      std::atomic<uintptr_t>& sl = slots_[slot(rng)];
      llm_session* s = reinterpret_cast<llm_session*>(sl.load());
      const int a = action(rng);
      if (s == nullptr || a < 8) {  // create into an empty slot
        llm_session* fresh = nullptr;
        const llm_status st = llm_session_create(model_, &sp, &fresh);
        Check(st, "create", c);
        if (st != LLM_OK) continue;
        ++c.created;
        uintptr_t expected = 0;
        if (!sl.compare_exchange_strong(expected, reinterpret_cast<uintptr_t>(fresh))) {
          llm_session_free(fresh);
          ++c.freed;
        }
        continue;
      }
      if (a < 14) {  // free (maybe while another thread is using it)
        uintptr_t expected = reinterpret_cast<uintptr_t>(s);
        if (sl.compare_exchange_strong(expected, 0)) {
          llm_session_free(s);
          ++c.freed;
        }
        continue;
      }
      if (a < 35) {
        std::vector<llm_token> prompt(static_cast<size_t>(len(rng)));
        for (llm_token& t : prompt) t = tok(rng);
        Check(llm_session_prefill(s, prompt.data(), prompt.size()), "prefill", c);
      } else if (a < 60) {
        llm_token out = -1;
        const llm_status st = llm_session_decode(s, &out);
        Check(st, "decode", c);
        if (st == LLM_OK) {
          EXPECT_GE(out, 0);
          EXPECT_LT(out, n_vocab_);
        }
      } else if (a < 80) {
        // Streaming generation: every piece valid UTF-8, and the stream equals
        // the detokenized text up to held-back bytes.
        Stream stream;
        llm_generate_params gp;
        llm_generate_params_init(&gp);
        gp.max_tokens = 1 + len(rng);
        gp.on_piece = OnPiece;
        gp.user = &stream;
        llm_token t = tok(rng);
        llm_generate_result res;
        llm_generate_result_init(&res);
        const llm_status st = llm_generate(s, &t, 1, &gp, &res);
        Check(st, "generate", c);
        if (st == LLM_OK) {
          c.generated += res.n_generated;
          EXPECT_FALSE(stream.bad_piece) << "a streamed piece was empty or not valid UTF-8";
          EXPECT_TRUE(ValidUtf8(stream.text));
        }
      } else if (a < 88) {
        Check(llm_session_reset(s), "reset", c);
      } else if (a < 94) {
        const float* logits = nullptr;
        size_t n = 0;
        const llm_status st = llm_session_logits(s, &logits, &n);
        Check(st, "logits", c);
        if (st == LLM_OK) {
          EXPECT_EQ(n, static_cast<size_t>(n_vocab_));
        }
      } else if (a >= 100) {
        SessionOps(s, a - 100, rng, c);
      } else {
        // Model-level calls from many threads at once.
        llm_token ids[64];
        size_t n = 0;
        ASSERT_EQ(llm_tokenize(model_, "stress \xF0\x9F\x98\x80 test", 16, 1, 0, ids, 64, &n),
                  LLM_OK);
        char text[1024];
        size_t tl = 0;
        ASSERT_EQ(llm_detokenize(model_, ids, n, 0, text, sizeof text, &tl), LLM_OK);
        EXPECT_TRUE(ValidUtf8(std::string(text, tl)));
      }
    }
  }

  // The 0.2 operations; op in [0, 50).
  void SessionOps(llm_session* s, int op, std::mt19937& rng, Counters& c) {
    std::uniform_int_distribution<llm_token> tok(0, n_vocab_ - 1);
    if (op < 8) {  // fork a shared session; the child takes a free slot
      llm_session* child = nullptr;
      const llm_status st = llm_session_fork(s, &child);
      Check(st, "fork", c);
      if (st != LLM_OK) return;
      ++c.forked;
      for (auto& sl : slots_) {
        uintptr_t expected = 0;
        if (sl.compare_exchange_strong(expected, reinterpret_cast<uintptr_t>(child))) {
          child = nullptr;
          break;
        }
      }
      if (child != nullptr) {  // no free slot: use it here, then free it
        llm_token out = -1;
        const llm_status d = llm_session_decode(child, &out);
        Check(d, "decode (fork)", c);
        if (d == LLM_OK) {
          EXPECT_GE(out, 0);
          EXPECT_LT(out, n_vocab_);
        }
        llm_session_free(child);
      }
    } else if (op < 16) {  // rewind to a random length
      size_t n = 0;
      const llm_status st = llm_session_n_tokens(s, &n);
      Check(st, "n_tokens", c);
      if (st != LLM_OK) return;
      std::uniform_int_distribution<size_t> to(0, n);
      Check(llm_session_rewind(s, to(rng)), "rewind", c);
      ++c.rewinds;
    } else if (op < 24) {  // cancel a session, maybe in use by another thread
      const llm_status st = llm_session_cancel(s);
      if (st != LLM_OK) {
        EXPECT_EQ(st, LLM_ERR_INVALID_ARGUMENT) << llm_last_error();
        EXPECT_TRUE(std::strstr(llm_last_error(), "not a live session") != nullptr)
            << llm_last_error();
      }
    } else if (op < 34) {  // non-blocking step, polled a few times, then waited for
      llm_status st;
      const bool decode = op % 2 == 0;
      if (decode) {
        st = llm_session_decode_async(s);
      } else {
        std::vector<llm_token> p(static_cast<size_t>(1 + op % 7));
        for (llm_token& t : p) t = tok(rng);
        st = llm_session_prefill_async(s, p.data(), p.size());
      }
      Check(st, decode ? "decode_async" : "prefill_async", c);
      if (st != LLM_OK) return;
      ++c.async_steps;
      // Collect it (BUSY: another thread is in a call on the session at this
      // moment, e.g. its own poll; try again so the step is not left behind).
      int32_t done = 0;
      llm_token out = -1;
      int polls = 0;
      for (int tries = 0; tries < 100000 && done == 0; ++tries) {
        if (polls < 3) {
          st = llm_session_poll(s, &done, &out);
        } else {
          st = llm_session_wait(s, &out);
          if (st != LLM_ERR_BUSY) done = 1;
        }
        if (done != 0) break;
        if (st == LLM_ERR_BUSY) {
          std::this_thread::yield();
          continue;
        }
        Check(st, "poll", c);
        if (st != LLM_OK) return;  // freed, or collected by another thread
        ++polls;
        std::this_thread::yield();
      }
      Check(st, "poll/wait", c);
      if (st == LLM_OK && decode) {
        EXPECT_GE(out, 0);
        EXPECT_LT(out, n_vocab_);
      }
    } else if (op < 42) {  // save/load round trip
      size_t size = 0;
      llm_status st = llm_session_save(s, nullptr, 0, &size);
      if (st != LLM_ERR_BUFFER_TOO_SMALL) {
        Check(st, "save (size)", c);
        return;
      }
      std::vector<uint8_t> buf(size);
      st = llm_session_save(s, buf.data(), buf.size(), &size);
      Check(st, "save", c);
      if (st != LLM_OK) return;
      buf.resize(size);
      // Into a private session: must load, and save the same bytes back.
      llm_session_params sp;
      llm_session_params_init(&sp);
      sp.n_ctx = 96;
      llm_session* mine = nullptr;
      ASSERT_EQ(llm_session_create(model_, &sp, &mine), LLM_OK) << llm_last_error();
      ASSERT_EQ(llm_session_load(mine, buf.data(), buf.size()), LLM_OK) << llm_last_error();
      std::vector<uint8_t> again(size + 1);
      size_t size2 = 0;
      ASSERT_EQ(llm_session_save(mine, again.data(), again.size(), &size2), LLM_OK);
      again.resize(size2);
      EXPECT_TRUE(again == buf) << "save(load(buf)) != buf";
      llm_session_free(mine);
      // And back into the shared session (or another one).
      Check(llm_session_load(s, buf.data(), buf.size()), "load", c);
      ++c.round_trips;
    } else {  // stats, from many threads, also on busy sessions
      llm_session_stats ss;
      llm_session_stats_init(&ss);
      const llm_status st = llm_session_get_stats(s, &ss);
      if (st != LLM_OK) Check(st, "get_stats", c);  // never BUSY
      EXPECT_NE(st, LLM_ERR_BUSY);
      llm_kv_stats ks;
      llm_kv_stats_init(&ks);
      ASSERT_EQ(llm_model_kv_stats(model_, &ks), LLM_OK) << llm_last_error();
      EXPECT_LE(ks.blocks_allocated, ks.blocks_total);
      EXPECT_LE(ks.blocks_shared, ks.blocks_total);
      llm_batch_stats bs;
      llm_batch_stats_init(&bs);
      ASSERT_EQ(llm_model_batch_stats(model_, &bs), LLM_OK) << llm_last_error();
      EXPECT_LE(bs.decode_iterations, bs.iterations);
    }
  }

  void Run(double seconds, Counters& c) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([this, i, deadline, &c] { Worker(i, deadline, c); });
    }
    for (std::thread& t : threads) t.join();
    FreeAllSlots();
  }

  std::string path_;
  llm_model* model_ = nullptr;
  int32_t n_vocab_ = 0;
  std::atomic<uintptr_t> slots_[kSlots];
};

TEST_F(StressTest, ThirtyTwoThreadsCreateRunResetAndFreeSessionsAtRandom) {
  const double seconds = std::atof(EnvOr("LLM_STRESS_SECONDS", "10").c_str());
  ASSERT_GT(seconds, 0.0);
  // Warm-up: a quarter of the time with the same workload, then everything is
  // freed; the baseline RSS is taken in that state and compared with the same
  // state after the main run. Slack: 32 MiB + 25% of the baseline (allocator
  // arenas of 32 threads and the OpenMP runtime's thread caches settle during
  // the run; a per-session or per-token leak grows far past it).
  Counters warm;
  Run(seconds / 4, warm);
  const long rss_base = RssKiB();
  const long kv_base = KvPoolKiB();
  Counters c;
  Run(seconds, c);
  const long rss_end = RssKiB();
  // The KV pool takes new blocks up to its budget before it evicts the prefix
  // cache's (ended sessions' blocks stay cached by design), so it grows with
  // the run's length: its own growth is not a leak and is not counted.
  const long kv_growth = KvPoolKiB() - kv_base;
  std::printf("stress: %ld ok, %ld busy, %ld stale/no-logits, %ld context-full, %ld cancelled, "
              "%ld sessions created, %ld freed, %ld forked, %ld async steps, %ld save/load "
              "round trips, %ld rewinds, %ld tokens generated; RSS %ld -> %ld KiB (KV pool "
              "+%ld KiB)\n",
              c.ok.load(), c.busy.load(), c.stale.load(), c.full.load(), c.cancelled.load(),
              c.created.load(), c.freed.load(), c.forked.load(), c.async_steps.load(),
              c.round_trips.load(), c.rewinds.load(), c.generated.load(), rss_base, rss_end,
              kv_growth);
  EXPECT_GT(c.ok.load(), 0);
  EXPECT_GT(c.generated.load(), 0);
  EXPECT_GT(c.created.load(), 0);
  EXPECT_GT(c.forked.load(), 0);
  EXPECT_GT(c.async_steps.load(), 0);
  EXPECT_GT(c.round_trips.load(), 0);
  if (rss_base > 0 && !kSanitized) {
    EXPECT_LE(rss_end - kv_growth, rss_base + 32 * 1024 + rss_base / 4)
        << "RSS grew from " << rss_base << " KiB to " << rss_end << " KiB, the KV pool by "
        << kv_growth << " KiB";
  }
}

}  // namespace
