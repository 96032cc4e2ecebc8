// The real StepExecutor: runs the scheduler's chunks of many sessions as one
// forward pass of the model (model/llama.h) over their KV block tables.
//
// Owns the forward pass's thread pool (the model's n_threads) and scratch,
// both used only on the scheduler thread.
#pragma once

#include <memory>

#include "engine/scheduler.h"
#include "model/llama.h"

namespace llm {

class ThreadPool;

class ModelExecutor : public StepExecutor {
 public:
  // Starts n_threads - 1 worker threads (throws std::bad_alloc if it cannot).
  // deterministic: batch-invariant kernels (LinearContext / Attention).
  ModelExecutor(const LlamaModel& llama, int n_threads, bool deterministic);
  ~ModelExecutor() override;

  // Obtains KV blocks for the chunk's positions (LLM_ERR_KV_FULL, ...).
  absl::Status Prepare(const ScheduledChunk& chunk) override;
  // One forward pass; on success each session records its chunk's tokens
  // (and logits for a last chunk). Never throws.
  absl::Status Run(absl::Span<const ScheduledChunk> chunks) override;

 private:
  const LlamaModel& llama_;
  int n_threads_;
  std::unique_ptr<ThreadPool> pool_;
  ForwardScratch scratch_;
};

}  // namespace llm
