// The iteration-level (continuous) batcher of DESIGN.md §1: one per model.
//
// Sessions submit "steps" (tokens to run through the model). While any step
// is pending, the scheduler's thread runs iterations; each iteration gathers
// work from every waiting session under a token budget -- decode steps
// (one-token steps) first, then chunks of prefill steps -- and runs ONE
// forward pass for all of it through a StepExecutor. A long prompt is run in
// chunks over several iterations, so it never stalls the others' decoding for
// more than one chunk. Sessions join (Attach) and leave (Detach) between
// iterations.
//
// The scheduler knows nothing of models or KV caches: the executor does the
// work (engine/executor.h for the real model, a fake one in the tests).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace llm {

class Scheduler;
class SchedulerClient;
class StepClient;  // engine/executor.h: what the executor asks of a step's session

// One session's share of an iteration: the next chunk of its pending step.
struct ScheduledChunk {
  SchedulerClient* client = nullptr;
  absl::Span<const int32_t> tokens;  // this chunk (a sub-span of the step's tokens)
  bool last = false;                 // the step's final chunk (its logits are wanted)
};

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  // Called on the scheduler thread for each chosen chunk before the pass
  // (e.g. to obtain KV blocks). A failure ends that client's step with the
  // status (LLM_ERR_KV_FULL, ...) and leaves the chunk out of the pass.
  virtual absl::Status Prepare(const ScheduledChunk& chunk) = 0;
  // Runs the prepared chunks as one forward pass (scheduler thread). On
  // success each chunk's tokens count as done (the executor records them in
  // its session); on failure every step in the pass ends with the status.
  virtual absl::Status Run(absl::Span<const ScheduledChunk> chunks) = 0;
};

struct SchedulerOptions {
  int64_t token_budget = 256;  // most tokens in one iteration (decode + prefill), >= 1
  int64_t max_chunk = 256;     // most tokens of one prefill step in one iteration, >= 1
};

// Counters since the scheduler was created (monotonic; read with stats()).
struct SchedulerStats {
  uint64_t iterations = 0;          // forward passes run
  uint64_t decode_iterations = 0;   // passes holding at least one one-token step
  uint64_t decode_rows = 0;         // one-token steps run, summed over passes
  uint64_t prefill_chunks = 0;      // chunks of multi-token steps run
  uint64_t tokens = 0;              // tokens run in all passes
  uint64_t max_chunks_in_pass = 0;  // the largest number of sessions in one pass
  uint64_t steps_completed = 0;
  uint64_t steps_failed = 0;  // ended with a status other than OK (cancel included)
};

// A session's membership in the scheduler. Owned by the session; registered
// with Scheduler::Attach and removed with Detach before it is destroyed.
class SchedulerClient {
 public:
  // The session whose steps this client carries, as the executor sees it
  // (null in scheduler tests whose executor needs none).
  StepClient* step_client = nullptr;

  // Counters readable from any thread:
  std::atomic<uint64_t> iterations{0};  // passes this client took part in
  std::atomic<uint64_t> chunks{0};      // chunks of multi-token steps it ran

 private:
  friend class Scheduler;
  // Guarded by the scheduler's mutex.
  enum class State { kIdle, kPending, kDone } state_ = State::kIdle;
  absl::Span<const int32_t> tokens_;  // the pending step
  int64_t done_ = 0;                  // tokens of the step already run
  absl::Status status_;               // result once kDone
  bool cancel_ = false;
  uint64_t submit_seq_ = 0;   // FIFO order among prefill steps
  uint64_t last_served_ = 0;  // iteration that last ran a chunk of it
  bool in_pass_ = false;      // part of the iteration now running
  // Added with the implementation:
  Scheduler* scheduler_ = nullptr;   // the scheduler it is attached to
  SchedulerClient* prev_ = nullptr;  // intrusive list of attached clients (no
  SchedulerClient* next_ = nullptr;  // allocation in Attach, which cannot fail)
  uint64_t waited_ = 0;              // iterations its prefill step went without a chunk
  bool expected_ = false;            // completed a step in the last pass; the gather
                                     // window waits for it to resubmit
  std::condition_variable done_cv_;  // signalled when the step ends or leaves a pass
};

class Scheduler {
 public:
  // executor must outlive the scheduler. The thread starts on the first Submit.
  Scheduler(StepExecutor* executor, SchedulerOptions options);
  // Stops and joins the thread. Every client must have been detached.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  void Attach(SchedulerClient* client);
  // Cancels the client's pending step (if any) and returns once the
  // scheduler no longer touches the client or its step.
  void Detach(SchedulerClient* client);

  // Queues a step of tokens (they must stay valid until the step is collected
  // by Wait/Poll) and returns at once. Errors, with nothing queued:
  // LLM_ERR_INVALID_ARGUMENT (no tokens, or the client is not attached),
  // LLM_ERR_BUSY (a step is pending or uncollected on the client),
  // LLM_ERR_INTERNAL / LLM_ERR_OUT_OF_MEMORY (the scheduler thread, started
  // by the first Submit, could not be created).
  absl::Status Submit(SchedulerClient* client, absl::Span<const int32_t> tokens);
  // Blocks until the client's step ends; returns its status; the client is
  // idle again. Tokens of chunks that ran before a failure or a cancel stay
  // done (the executor recorded them). No step submitted (idle client):
  // LLM_ERR_INVALID_ARGUMENT at once.
  absl::Status Wait(SchedulerClient* client);
  // Non-blocking: false while the step runs; true once it ended, with its
  // status in *status (the client is then idle again). An idle client gives
  // true with LLM_ERR_INVALID_ARGUMENT.
  bool Poll(SchedulerClient* client, absl::Status* status);
  // From any thread: the client's pending step ends with LLM_ERR_CANCELLED
  // before its next iteration (so at most the iteration already running
  // includes it). No step pending: no-op.
  void Cancel(SchedulerClient* client);

  SchedulerStats stats() const;

 private:
  using Clock = std::chrono::steady_clock;

  void Loop();  // the scheduler thread
  // Picks this iteration's chunks into chunks_ (mu_ held); ends cancelled steps.
  void Pick();
  // Ends a pending step with status (mu_ held; the client is not in a pass).
  void EndStep(SchedulerClient* client, absl::Status status);
  // Forgets every "expected" client of the gather window (mu_ held).
  void ClearExpected();

  StepExecutor* const executor_;
  const SchedulerOptions options_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the thread waits here for work / the gather window
  std::thread thread_;               // started by the first Submit
  bool started_ = false;
  bool stop_ = false;
  bool sleeping_ = false;            // the thread waits for work
  bool gathering_ = false;           // the thread is in the gather window
  SchedulerClient* head_ = nullptr;  // attached clients
  SchedulerClient* tail_ = nullptr;
  int64_t n_attached_ = 0;
  int64_t n_pending_ = 0;        // clients in State::kPending
  int64_t n_expected_ = 0;       // clients with expected_ set
  uint64_t next_seq_ = 1;        // submit_seq_ source
  uint64_t pick_no_ = 0;         // iterations picked (last_served_ values)
  Clock::duration last_pass_{};  // duration of the last Prepare+Run
  SchedulerStats stats_;

  // Statuses the scheduler thread hands out, made once here: copying an
  // absl::Status does not allocate, so ending a step cannot throw there.
  const absl::Status cancelled_;       // LLM_ERR_CANCELLED
  const absl::Status out_of_memory_;   // the scheduler's scratch could not grow
  const absl::Status executor_oom_;    // the executor threw std::bad_alloc
  const absl::Status executor_threw_;  // the executor threw something else

  // Scratch of the scheduler thread, reused between iterations (touched only
  // by the thread; the vectors keep their capacity, so the steady state does
  // not allocate).
  std::vector<SchedulerClient*> decodes_;
  std::vector<SchedulerClient*> prefills_;
  std::vector<ScheduledChunk> chunks_;  // this iteration, decodes first
  std::vector<absl::Status> prepared_;  // Prepare's result per chunk
  std::vector<ScheduledChunk> run_;     // the chunks whose Prepare succeeded
};

}  // namespace llm
