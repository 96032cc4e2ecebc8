#include "engine/executor.h"

#include <exception>
#include <new>
#include <vector>

#include "core/status.h"

namespace llm {

ModelExecutor::ModelExecutor(const LlamaModel& llama, Backend& backend)
    : llama_(llama), backend_(backend) {}

ModelExecutor::~ModelExecutor() = default;

absl::Status ModelExecutor::Prepare(const ScheduledChunk& chunk) {
  return chunk.client->step_client->PrepareChunk(static_cast<int64_t>(chunk.tokens.size()));
}

absl::Status ModelExecutor::Run(absl::Span<const ScheduledChunk> chunks) {
  // Runs on the scheduler thread: nothing may escape as an exception.
  try {
    std::vector<SequenceStep> steps;
    steps.reserve(chunks.size());
    for (const ScheduledChunk& chunk : chunks) {
      steps.push_back(chunk.client->step_client->StepFor(chunk));
    }
    LLM_RETURN_IF_ERROR(llama_.Forward(steps, backend_, scratch_));
    for (const ScheduledChunk& chunk : chunks) {
      chunk.client->step_client->CommitChunk(chunk);
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
