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
// The tiny model runs by default; LLM_STRESS_MODEL=path runs another (e.g.
// the real model). Fork, rewind and cancel join this test with the batcher
// issue (they do not exist in 0.1).
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
      case LLM_ERR_INVALID_ARGUMENT:
        // A handle another thread freed, or a session reset by another
        // thread (no logits): both legitimate in this free-for-all.
        if (std::strstr(llm_last_error(), "not a live session") != nullptr ||
            std::strstr(llm_last_error(), "logits") != nullptr) {
          ++c.stale;
          return;
        }
        break;
      default: break;
    }
    ADD_FAILURE() << what << ": " << llm_status_string(st) << ": " << llm_last_error();
  }

  void Worker(int id, std::chrono::steady_clock::time_point deadline, Counters& c) {
    std::mt19937 rng(1234u + static_cast<unsigned>(id));
    std::uniform_int_distribution<int> action(0, 99), slot(0, kSlots - 1), len(1, 12);
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
  Counters c;
  Run(seconds, c);
  const long rss_end = RssKiB();
  std::printf("stress: %ld ok, %ld busy, %ld stale/no-logits, %ld context-full, %ld sessions "
              "created, %ld freed, %ld tokens generated; RSS %ld -> %ld KiB\n",
              c.ok.load(), c.busy.load(), c.stale.load(), c.full.load(), c.created.load(),
              c.freed.load(), c.generated.load(), rss_base, rss_end);
  EXPECT_GT(c.ok.load(), 0);
  EXPECT_GT(c.generated.load(), 0);
  EXPECT_GT(c.created.load(), 0);
  if (rss_base > 0 && !kSanitized) {
    EXPECT_LE(rss_end, rss_base + 32 * 1024 + rss_base / 4)
        << "RSS grew from " << rss_base << " KiB to " << rss_end << " KiB";
  }
}

}  // namespace
