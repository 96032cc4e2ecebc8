// The real StepExecutor: runs the scheduler's chunks of many sessions as one
// forward pass of the model (model/llama.h) on the model's backend, over
// their KV block tables. Used only on the scheduler thread.
#pragma once

#include <memory>

#include "engine/scheduler.h"
#include "model/llama.h"

namespace llm {

class ModelExecutor : public StepExecutor {
 public:
  // llama and backend must outlive the executor.
  ModelExecutor(const LlamaModel& llama, Backend& backend);
  ~ModelExecutor() override;

  // Obtains KV blocks for the chunk's positions (LLM_ERR_KV_FULL, ...).
  absl::Status Prepare(const ScheduledChunk& chunk) override;
  // One forward pass; on success each session records its chunk's tokens
  // (and logits for a last chunk). Never throws.
  absl::Status Run(absl::Span<const ScheduledChunk> chunks) override;

 private:
  const LlamaModel& llama_;
  Backend& backend_;
  ForwardScratch scratch_;
};

}  // namespace llm
