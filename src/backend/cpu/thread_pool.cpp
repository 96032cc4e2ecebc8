#include "backend/cpu/thread_pool.h"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <system_error>
#include <set>
#include <string>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LLM_CPU_RELAX() _mm_pause()
#else
#define LLM_CPU_RELAX() ((void)0)
#endif

namespace llm {
namespace {

// Pool whose chunk the current thread is running (nested calls run inline).
thread_local const ThreadPool* tls_current_pool = nullptr;

// Spinning before sleeping, bounded in time (a pause takes ~15 ns on the
// Sapphire Rapids VM of BENCHMARKS.md and several times that on other CPUs,
// so a count of pauses is no bound).
//
// Workers waiting for the next section: decode issues hundreds of short
// ParallelFors per token, separated by microseconds of serial work (norms,
// activation quantization, sampling), and waking a sleeping thread through a
// futex costs tens of microseconds on a VM, once for the worker and often
// again for the caller that then waits for the late worker. A 2048-pause
// bound (~30 us here) let the workers fall asleep 3-30 times per SmolLM2
// token and cost 4-20 % of decode speed against an always-spinning pool.
// One millisecond covers every gap inside a pass and between tokens of a
// streamed generation, and an idle model still sleeps after at most 1 ms.
constexpr int64_t kWorkerSpinMicros = 1000;
// The caller waiting for workers that are running its section: they finish
// within the section's time, so spinning is not idling; the bound only stops
// a caller from burning a core while a worker is descheduled or stalled on a
// page fault of cold mapped weights.
constexpr int64_t kCallerSpinMicros = 2000;

// LLM_CPU_POOL_SPIN=<microseconds> (>= 0), read once, replaces both bounds.
// Only for measuring what the bounds cost or save (docs/CPU_KERNELS.md: a
// huge value gives an always-spinning pool for comparison). -1: unset.
int64_t SpinOverrideMicros() {
  static const int64_t n = [] {
    const char* v = std::getenv("LLM_CPU_POOL_SPIN");
    if (v == nullptr || *v == '\0') return int64_t{-1};
    char* end = nullptr;
    const long long parsed = std::strtoll(v, &end, 10);
    return end != nullptr && *end == '\0' && parsed >= 0 ? static_cast<int64_t>(parsed)
                                                          : int64_t{-1};
  }();
  return n;
}

int64_t SpinMicros(int64_t default_micros) {
  const int64_t override_micros = SpinOverrideMicros();
  return override_micros >= 0 ? override_micros : default_micros;
}

// Spins (pause) until done() or max_micros have passed; returns done(). The
// clock is read once per 16 pauses (a few hundred nanoseconds).
template <typename Done>
bool SpinUntil(const Done& done, int64_t max_micros) {
  if (done()) return true;
  if (max_micros <= 0) return false;
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::microseconds(std::min<int64_t>(max_micros, int64_t{1} << 40));
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (done()) return true;
      LLM_CPU_RELAX();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  try {
    workers_.reserve(static_cast<size_t>(n_threads_ - 1));
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  } catch (const std::system_error&) {
    // pthread_create failed (EAGAIN: no memory for a stack, or the thread
    // limit). Join what started (a joinable std::thread destroyed during
    // unwinding would call std::terminate) and report it as resource
    // exhaustion, which the API maps to LLM_ERR_OUT_OF_MEMORY.
    StopAndJoin();
    throw std::bad_alloc();
  } catch (...) {
    StopAndJoin();
    throw;
  }
}

ThreadPool::~ThreadPool() { StopAndJoin(); }

void ThreadPool::StopAndJoin() noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    // Ends the spin of workers waiting for a new section (they then see stop_).
    generation_.fetch_add(1);
    work_cv_.notify_all();
  }
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

void ThreadPool::RunChunks() {
  for (;;) {
    const int64_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (c >= n_chunks_) break;
    // Chunk c of n_chunks_ near-equal contiguous pieces (no c*n overflow).
    const int64_t base = n_ / n_chunks_, extra = n_ % n_chunks_;
    const int64_t begin = c * base + std::min(c, extra);
    const int64_t end = begin + base + (c < extra ? 1 : 0);
    try {
      (*fn_)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void ThreadPool::WorkerLoop() {
  tls_current_pool = this;
  uint64_t seen = 0;
  for (;;) {
    if (!SpinUntil([&] { return generation_.load(std::memory_order_acquire) != seen; },
                   SpinMicros(kWorkerSpinMicros))) {
      std::unique_lock<std::mutex> lock(mu_);
      sleeping_workers_.fetch_add(1);
      work_cv_.wait(lock, [&] { return generation_.load() != seen; });
      sleeping_workers_.fetch_sub(1);
    }
    // The new generation's job (or stop_) was written before generation_
    // was raised; the acquire load above or the mutex orders the reads.
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    RunChunks();
    if (pending_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                             int chunks_per_thread) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1 || tls_current_pool == this) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  // Every worker has finished the previous job (pending_ reached 0), so none
  // reads these until it sees the new generation.
  fn_ = &fn;
  n_ = n;
  n_chunks_ = std::min<int64_t>(n, int64_t{n_threads_} * std::max(1, chunks_per_thread));
  next_chunk_.store(0, std::memory_order_relaxed);
  error_ = nullptr;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1);
  if (sleeping_workers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    work_cv_.notify_all();
  }

  const ThreadPool* saved = tls_current_pool;
  tls_current_pool = this;
  RunChunks();
  tls_current_pool = saved;

  if (!SpinUntil([&] { return pending_.load(std::memory_order_acquire) == 0; },
                 SpinMicros(kCallerSpinMicros))) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_sleeping_.store(true);
    done_cv_.wait(lock, [&] { return pending_.load() == 0; });
    caller_sleeping_.store(false);
  }
  fn_ = nullptr;
  if (error_) {
    std::exception_ptr e = std::exchange(error_, nullptr);
    std::rethrow_exception(e);
  }
}

namespace {

bool ReadInt(const std::string& path, long* out) {
  std::ifstream f(path);
  long v;
  if (!(f >> v)) return false;
  *out = v;
  return true;
}

int CoresFromSysfs() {
  DIR* dir = opendir("/sys/devices/system/cpu");
  if (dir == nullptr) return 0;
  std::set<std::pair<long, long>> cores;  // (package, core)
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.size() < 4 || name.compare(0, 3, "cpu") != 0 ||
        !std::all_of(name.begin() + 3, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    const std::string topo = "/sys/devices/system/cpu/" + name + "/topology/";
    long core = 0, pkg = 0;
    if (!ReadInt(topo + "core_id", &core)) continue;  // offline CPUs have no topology
    if (!ReadInt(topo + "physical_package_id", &pkg)) pkg = 0;
    cores.emplace(pkg, core);
  }
  closedir(dir);
  return static_cast<int>(cores.size());
}

int CoresFromCpuinfo() {
  std::ifstream f("/proc/cpuinfo");
  if (!f) return 0;
  std::set<std::pair<long, long>> cores;
  long phys = 0;
  std::string line;
  while (std::getline(f, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const long v = std::strtol(line.c_str() + colon + 1, nullptr, 10);
    if (line.compare(0, 11, "physical id") == 0) phys = v;
    if (line.compare(0, 7, "core id") == 0) cores.emplace(phys, v);
  }
  return static_cast<int>(cores.size());
}

}  // namespace

int PhysicalCoreCount() {
  int n = 0;
  try {
    n = CoresFromSysfs();
    if (n <= 0) n = CoresFromCpuinfo();
  } catch (...) {
    n = 0;
  }
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  // Never more than the CPUs this process may run on (taskset, cgroup cpusets).
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int allowed = CPU_COUNT(&set);
    if (allowed > 0) n = std::min(n, allowed);
  }
  return std::max(1, n);
}

}  // namespace llm
