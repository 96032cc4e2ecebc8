// A small fork-join thread pool for the CPU kernels: ParallelFor splits an
// index range into contiguous chunks and runs them on the pool's threads plus
// the calling thread, returning when every chunk is done.
//
// Kernels parallelize over whole output rows, so their results never depend on
// how many threads ran or how the range was split.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace llm {

class ThreadPool {
 public:
  // n_threads counts the caller: n_threads - 1 worker threads are started
  // (values < 1 are treated as 1, i.e. no workers).
  // Throws std::bad_alloc when a worker thread cannot be started (after
  // joining the ones that did).
  explicit ThreadPool(int n_threads);
  // Stops and joins every worker (no thread outlives the pool).
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads that work on a ParallelFor, the caller included.
  int size() const { return n_threads_; }

  // Calls fn(begin, end) on disjoint contiguous chunks covering [0, n) exactly
  // once; blocks until all chunks are done. The caller runs chunks too. An
  // exception thrown by fn on any thread is rethrown here (the first one; the
  // remaining chunks still run or are skipped, but all threads have stopped
  // touching fn when this returns). Safe to call from several threads at once
  // (calls are serialized); a nested call from inside fn runs inline.
  // chunks_per_thread: [0, n) is cut into up to size() * chunks_per_thread
  // chunks that threads take in turn, so a thread that is delayed (the
  // machine is shared) or gets slower chunks leaves more of them to the
  // others. 1 suits many small calls (one decode row: the extra chunk
  // hand-offs cost more than they balance); batches pass more.
  void ParallelFor(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn,
                   int chunks_per_thread = 1);

 private:
  void WorkerLoop();
  void StopAndJoin() noexcept;
  // Claims and runs chunks of the current job until none are left.
  void RunChunks();

  const int n_threads_;
  std::vector<std::thread> workers_;

  std::mutex call_mu_;  // serializes ParallelFor calls

  // Hand-offs between the caller and the workers go through generation_ and
  // pending_ alone while both sides spin; mu_ and the condition variables
  // are taken only by a side that sleeps, or that wakes a sleeper (the
  // counts below say whether there is one: each sleeper publishes itself
  // and then re-checks, and each waker changes the state and then checks
  // the count, all sequentially consistent, so one of the two sees the
  // other). A locked hand-off moved mu_'s cache line between the cores
  // several times per call (ParallelFor of nothing: ~1.4 us).
  std::mutex mu_;
  std::condition_variable work_cv_;  // workers wait for a new generation
  std::condition_variable done_cv_;  // caller waits for pending_ == 0
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};               // workers that have not finished the job
  std::atomic<int> sleeping_workers_{0};      // workers in work_cv_.wait
  std::atomic<bool> caller_sleeping_{false};  // the caller in done_cv_.wait

  // The current job (valid while a ParallelFor is in flight).
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t n_chunks_ = 0;
  std::atomic<int64_t> next_chunk_{0};
  std::mutex error_mu_;
  std::exception_ptr error_;
};

// Number of physical cores (hyper-threads of one core count once), from
// /sys/devices/system/cpu/cpu*/topology, else /proc/cpuinfo, else
// std::thread::hardware_concurrency(); capped by the CPUs this process may
// run on (sched_getaffinity); always >= 1. The default decode thread count.
int PhysicalCoreCount();

}  // namespace llm
