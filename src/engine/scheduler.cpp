// The iteration-level batcher: see scheduler.h for the contract and
// docs/SCHEDULER.md for the iteration rule, fairness and the gather window.
#include "engine/scheduler.h"

#include <algorithm>
#include <new>
#include <system_error>
#include <utility>

#include "core/status.h"

namespace llm {
namespace {

// The executor must not throw, but an exception escaping the scheduler thread
// would terminate the host process: turn it into a status.
template <typename F>
absl::Status Guarded(F&& f, const absl::Status& oom, const absl::Status& threw) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return oom;
  } catch (...) {
    return threw;
  }
}

}  // namespace

Scheduler::Scheduler(StepExecutor* executor, SchedulerOptions options)
    : executor_(executor),
      // Values below 1 would stall every step; clamp rather than fail (the
      // constructor cannot report a status).
      options_{std::max<int64_t>(1, options.token_budget), std::max<int64_t>(1, options.max_chunk)},
      cancelled_(Error(LLM_ERR_CANCELLED, "cancelled by llm_session_cancel")),
      out_of_memory_(Error(LLM_ERR_OUT_OF_MEMORY, "out of memory in the scheduler")),
      executor_oom_(Error(LLM_ERR_OUT_OF_MEMORY, "out of memory in the step executor")),
      executor_threw_(Error(LLM_ERR_INTERNAL, "the step executor threw an exception")) {}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    work_cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  // Every client should have been detached; forget any that were not, so a
  // late call on them finds them unattached instead of a dangling scheduler.
  for (SchedulerClient* c = head_; c != nullptr;) {
    SchedulerClient* next = c->next_;
    c->scheduler_ = nullptr;
    c->prev_ = c->next_ = nullptr;
    c = next;
  }
}

void Scheduler::Attach(SchedulerClient* client) {
  if (client == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (client->scheduler_ == this) return;
  client->scheduler_ = this;
  client->state_ = SchedulerClient::State::kIdle;
  client->cancel_ = false;
  client->in_pass_ = false;
  client->expected_ = false;
  client->waited_ = 0;
  client->prev_ = tail_;
  client->next_ = nullptr;
  if (tail_ != nullptr) {
    tail_->next_ = client;
  } else {
    head_ = client;
  }
  tail_ = client;
  ++n_attached_;
}

void Scheduler::Detach(SchedulerClient* client) {
  if (client == nullptr) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (client->scheduler_ != this) return;
  if (client->state_ == SchedulerClient::State::kPending) {
    if (client->in_pass_) {
      // The thread is running a pass that holds the client's chunk: it ends
      // the step when the pass returns.
      client->cancel_ = true;
      client->done_cv_.wait(lock, [&] { return !client->in_pass_; });
    }
    if (client->state_ == SchedulerClient::State::kPending) EndStep(client, cancelled_);
  }
  if (client->expected_) {
    client->expected_ = false;
    --n_expected_;
    if (gathering_ && n_expected_ == 0) work_cv_.notify_one();
  }
  if (client->prev_ != nullptr) {
    client->prev_->next_ = client->next_;
  } else {
    head_ = client->next_;
  }
  if (client->next_ != nullptr) {
    client->next_->prev_ = client->prev_;
  } else {
    tail_ = client->prev_;
  }
  client->prev_ = client->next_ = nullptr;
  client->scheduler_ = nullptr;
  client->state_ = SchedulerClient::State::kIdle;
  client->tokens_ = {};
  client->status_ = absl::OkStatus();
  --n_attached_;
}

absl::Status Scheduler::Submit(SchedulerClient* client, absl::Span<const int32_t> tokens) {
  if (client == nullptr) return Error(LLM_ERR_INVALID_ARGUMENT, "no scheduler client");
  if (tokens.empty()) return Error(LLM_ERR_INVALID_ARGUMENT, "a step needs at least one token");
  std::lock_guard<std::mutex> lock(mu_);
  if (client->scheduler_ != this) {
    return Error(LLM_ERR_INVALID_ARGUMENT, "the session is not attached to this scheduler");
  }
  if (client->state_ != SchedulerClient::State::kIdle) {
    return Error(LLM_ERR_BUSY, "a step is already pending on this session");
  }
  if (!started_) {
    // Started under mu_: the thread's first act is to take mu_, so it simply
    // waits until this Submit has queued the step.
    try {
      thread_ = std::thread(&Scheduler::Loop, this);
    } catch (const std::bad_alloc&) {
      return Error(LLM_ERR_OUT_OF_MEMORY, "out of memory starting the scheduler thread");
    } catch (const std::system_error& e) {
      return Errorf(LLM_ERR_INTERNAL, "could not start the scheduler thread: %s", e.what());
    }
    started_ = true;
  }
  client->state_ = SchedulerClient::State::kPending;
  client->tokens_ = tokens;
  client->done_ = 0;
  client->status_ = absl::OkStatus();
  client->cancel_ = false;
  client->submit_seq_ = next_seq_++;
  client->waited_ = 0;
  ++n_pending_;
  if (client->expected_) {
    client->expected_ = false;
    --n_expected_;
  }
  // Wake the thread only when it has something to do: it sleeps without
  // work, or it gathers and this was the last resubmission it waited for.
  if (sleeping_ || (gathering_ && n_expected_ == 0)) work_cv_.notify_one();
  return absl::OkStatus();
}

absl::Status Scheduler::Wait(SchedulerClient* client) {
  if (client == nullptr) return Error(LLM_ERR_INVALID_ARGUMENT, "no scheduler client");
  std::unique_lock<std::mutex> lock(mu_);
  if (client->scheduler_ != this || client->state_ == SchedulerClient::State::kIdle) {
    return Error(LLM_ERR_INVALID_ARGUMENT, "no step was submitted on this session");
  }
  client->done_cv_.wait(lock, [&] { return client->state_ == SchedulerClient::State::kDone; });
  client->state_ = SchedulerClient::State::kIdle;
  client->tokens_ = {};
  return std::exchange(client->status_, absl::OkStatus());
}

bool Scheduler::Poll(SchedulerClient* client, absl::Status* status) {
  absl::Status result;
  bool ended = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (client == nullptr || client->scheduler_ != this ||
        client->state_ == SchedulerClient::State::kIdle) {
      result = Error(LLM_ERR_INVALID_ARGUMENT, "no step was submitted on this session");
    } else if (client->state_ == SchedulerClient::State::kPending) {
      ended = false;
    } else {
      client->state_ = SchedulerClient::State::kIdle;
      client->tokens_ = {};
      result = std::exchange(client->status_, absl::OkStatus());
    }
  }
  if (ended && status != nullptr) *status = std::move(result);
  return ended;
}

void Scheduler::Cancel(SchedulerClient* client) {
  if (client == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (client->scheduler_ != this || client->state_ != SchedulerClient::State::kPending) return;
  if (client->in_pass_) {
    client->cancel_ = true;  // ended by the thread when the running pass returns
  } else {
    // Not in a pass, so the thread holds no reference to it outside mu_: end
    // it now rather than at the next pick, so a waiter need not wait for
    // the pass that is running.
    EndStep(client, cancelled_);
  }
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Scheduler::EndStep(SchedulerClient* client, absl::Status status) {
  if (status.ok()) {
    ++stats_.steps_completed;
  } else {
    ++stats_.steps_failed;
  }
  client->state_ = SchedulerClient::State::kDone;
  client->status_ = std::move(status);
  client->in_pass_ = false;
  client->cancel_ = false;
  --n_pending_;
  // Notified under mu_: once mu_ is released the owner may collect, detach
  // and destroy the client.
  client->done_cv_.notify_all();
}

void Scheduler::ClearExpected() {
  if (n_expected_ == 0) return;
  for (SchedulerClient* c = head_; c != nullptr; c = c->next_) c->expected_ = false;
  n_expected_ = 0;
}

void Scheduler::Pick() {
  decodes_.clear();
  prefills_.clear();
  chunks_.clear();
  for (SchedulerClient* c = head_; c != nullptr; c = c->next_) {
    if (c->state_ != SchedulerClient::State::kPending) continue;
    if (c->cancel_) {
      EndStep(c, cancelled_);
      continue;
    }
    // May throw std::bad_alloc (the caller fails the pending steps); nothing
    // below changes a client before every allocation is done.
    if (c->tokens_.size() == 1) {
      decodes_.push_back(c);
    } else {
      prefills_.push_back(c);
    }
  }
  const size_t n = decodes_.size() + prefills_.size();
  if (n == 0) return;
  chunks_.reserve(n);
  prepared_.reserve(n);
  run_.reserve(n);

  auto by_service = [](const SchedulerClient* a, const SchedulerClient* b) {
    return a->last_served_ != b->last_served_ ? a->last_served_ < b->last_served_
                                              : a->submit_seq_ < b->submit_seq_;
  };
  auto by_seq = [](const SchedulerClient* a, const SchedulerClient* b) {
    return a->submit_seq_ < b->submit_seq_;
  };
  std::sort(decodes_.begin(), decodes_.end(), by_service);
  std::sort(prefills_.begin(), prefills_.end(), by_seq);

  const int64_t budget = options_.token_budget;
  auto remaining = [](const SchedulerClient* c) {
    return static_cast<int64_t>(c->tokens_.size()) - c->done_;
  };
  auto add = [&](SchedulerClient* c, int64_t count) {
    chunks_.push_back(ScheduledChunk{
        c, c->tokens_.subspan(static_cast<size_t>(c->done_), static_cast<size_t>(count)),
        c->done_ + count == static_cast<int64_t>(c->tokens_.size())});
  };

  if (budget == 1) {
    // Degenerate budget: one token per iteration, so the reserve below would
    // starve decodes; serve the least recently served step of either kind.
    SchedulerClient* best = nullptr;
    for (SchedulerClient* c : decodes_) {
      if (best == nullptr || by_service(c, best)) best = c;
    }
    for (SchedulerClient* c : prefills_) {
      if (best == nullptr || by_service(c, best)) best = c;
    }
    add(best, 1);
  } else {
    // The prefill reserve: the pending prefill step that has gone longest
    // without a chunk (at least 2 iterations; ties: FIFO) gets g tokens of
    // this iteration before decodes are picked.
    SchedulerClient* reserved = nullptr;
    for (SchedulerClient* p : prefills_) {
      if (p->waited_ >= 2 && (reserved == nullptr || p->waited_ > reserved->waited_)) reserved = p;
    }
    int64_t g = 0;
    if (reserved != nullptr) {
      g = std::min({remaining(reserved), options_.max_chunk, std::max<int64_t>(1, budget / 4)});
    }
    const int64_t n_dec = std::min<int64_t>(static_cast<int64_t>(decodes_.size()), budget - g);
    for (int64_t i = 0; i < n_dec; ++i) add(decodes_[static_cast<size_t>(i)], 1);
    int64_t left = budget - n_dec - g;
    for (SchedulerClient* p : prefills_) {
      int64_t count;
      if (p == reserved) {
        count = g;
      } else {
        count = std::min({remaining(p), options_.max_chunk, left});
        left -= count;
      }
      if (count > 0) add(p, count);
    }
  }

  ++pick_no_;
  for (SchedulerClient* p : prefills_) ++p->waited_;  // reset below for the picked ones
  for (const ScheduledChunk& chunk : chunks_) {
    chunk.client->in_pass_ = true;
    chunk.client->last_served_ = pick_no_;
    chunk.client->waited_ = 0;
  }
}

void Scheduler::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    sleeping_ = true;
    work_cv_.wait(lock, [&] { return stop_ || n_pending_ > 0; });
    sleeping_ = false;
    if (stop_) break;

    // The gather window (docs/SCHEDULER.md): clients whose step completed in
    // the last pass usually resubmit within microseconds; wait briefly for
    // them so the batch does not split into alternating halves.
    if (n_expected_ > 0) {
      const Clock::duration window =
          std::min<Clock::duration>(std::chrono::milliseconds(2), last_pass_ / 4);
      if (window > Clock::duration::zero()) {
        gathering_ = true;
        work_cv_.wait_for(lock, window, [&] { return stop_ || n_expected_ == 0; });
        gathering_ = false;
      }
      ClearExpected();  // a client that did not resubmit is waited for once only
      if (stop_) break;
    }

    try {
      Pick();
    } catch (const std::bad_alloc&) {
      // Only the scratch vectors allocate, and they keep their capacity, so
      // this happens at most while they grow: fail the waiting steps rather
      // than the process.
      chunks_.clear();
      for (SchedulerClient* c = head_; c != nullptr; c = c->next_) {
        if (c->state_ == SchedulerClient::State::kPending) {
          EndStep(c, out_of_memory_);
        }
      }
    }
    if (chunks_.empty()) continue;

    // The pass, without mu_: clients may Submit/Poll/Cancel meanwhile. The
    // picked clients are in_pass_, so Detach waits for them and nobody else
    // changes their step.
    lock.unlock();
    const Clock::time_point start = Clock::now();
    prepared_.clear();
    run_.clear();
    bool prepare_failed = false;
    for (const ScheduledChunk& chunk : chunks_) {
      prepared_.push_back(Guarded([&] { return executor_->Prepare(chunk); }, executor_oom_,
                                  executor_threw_));  // capacity reserved
      if (prepared_.back().ok()) {
        run_.push_back(chunk);
      } else {
        prepare_failed = true;
      }
    }
    if (prepare_failed) {
      // End the refused steps now, so their owners need not wait for the pass.
      lock.lock();
      for (size_t i = 0; i < chunks_.size(); ++i) {
        if (!prepared_[i].ok()) EndStep(chunks_[i].client, std::move(prepared_[i]));
      }
      lock.unlock();
    }
    absl::Status run_status;
    if (!run_.empty())
      run_status = Guarded([&] { return executor_->Run(run_); }, executor_oom_, executor_threw_);
    const Clock::duration elapsed = Clock::now() - start;
    lock.lock();

    last_pass_ = elapsed;
    if (!run_.empty()) {
      ++stats_.iterations;
      bool any_decode = false;
      for (const ScheduledChunk& chunk : run_) {
        if (chunk.client->tokens_.size() == 1) {
          any_decode = true;
          ++stats_.decode_rows;
        } else {
          ++stats_.prefill_chunks;
        }
        stats_.tokens += chunk.tokens.size();
      }
      if (any_decode) ++stats_.decode_iterations;
      stats_.max_chunks_in_pass = std::max<uint64_t>(stats_.max_chunks_in_pass, run_.size());
    }
    for (const ScheduledChunk& chunk : run_) {
      SchedulerClient* c = chunk.client;
      c->iterations.fetch_add(1, std::memory_order_relaxed);
      if (c->tokens_.size() > 1) c->chunks.fetch_add(1, std::memory_order_relaxed);
      if (!run_status.ok()) {
        EndStep(c, run_status);
        continue;
      }
      c->done_ += static_cast<int64_t>(chunk.tokens.size());
      if (c->done_ == static_cast<int64_t>(c->tokens_.size())) {
        EndStep(c, absl::OkStatus());  // completed, even if cancelled meanwhile
        if (!c->expected_) {
          c->expected_ = true;
          ++n_expected_;
        }
      } else if (c->cancel_) {
        EndStep(c, cancelled_);
      } else {
        c->in_pass_ = false;
        c->done_cv_.notify_all();  // a Detach may wait for the pass to return
      }
    }
    chunks_.clear();
    run_.clear();
    prepared_.clear();
  }
}

}  // namespace llm
