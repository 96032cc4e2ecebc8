#include "engine/executor.h"

#include <exception>
#include <new>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/session.h"

namespace llm {

ModelExecutor::ModelExecutor(const LlamaModel& llama, int n_threads, bool deterministic)
    : llama_(llama), n_threads_(n_threads), pool_(std::make_unique<ThreadPool>(n_threads)) {
  scratch_.linear.batch_invariant = deterministic;
  scratch_.batch_invariant = deterministic;
}

ModelExecutor::~ModelExecutor() = default;

absl::Status ModelExecutor::Prepare(const ScheduledChunk& chunk) {
  Session* session = static_cast<Session*>(chunk.client->owner);
  return session->PrepareChunk(static_cast<int64_t>(chunk.tokens.size()));
}

absl::Status ModelExecutor::Run(absl::Span<const ScheduledChunk> chunks) {
  // Runs on the scheduler thread: nothing may escape as an exception.
  try {
    std::vector<SequenceStep> steps;
    steps.reserve(chunks.size());
    for (const ScheduledChunk& chunk : chunks) {
      steps.push_back(static_cast<Session*>(chunk.client->owner)->StepFor(chunk));
    }
    LLM_RETURN_IF_ERROR(llama_.Forward(steps, pool_.get(), n_threads_, scratch_));
    for (const ScheduledChunk& chunk : chunks) {
      static_cast<Session*>(chunk.client->owner)->CommitChunk(chunk);
    }
    return absl::OkStatus();
  } catch (const std::bad_alloc&) {
    return Error(LLM_ERR_OUT_OF_MEMORY, "out of memory in the batched forward pass");
  } catch (const std::exception& e) {
    return Errorf(LLM_ERR_INTERNAL, "internal error in the batched forward pass: %s", e.what());
  } catch (...) {
    return Error(LLM_ERR_INTERNAL, "internal error in the batched forward pass");
  }
}

}  // namespace llm
