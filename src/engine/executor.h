// The real StepExecutor: runs the scheduler's chunks of many sessions as one
// forward pass of the model (model/llama.h) on the model's backend, over
// their KV block tables. Used only on the scheduler thread.
#pragma once

#include <memory>

#include "engine/scheduler.h"
#include "model/llama.h"

namespace llm {

// The scheduler-thread side of a session: what the executor asks of the
// session whose step a chunk belongs to (Session implements it). Called only
// on the scheduler thread, while the session's step is in a pass.
class StepClient {
 public:
  // Obtains what a chunk of n tokens needs before the pass (KV blocks for
  // its positions): LLM_ERR_KV_FULL, ... leave the chunk out of the pass.
  virtual absl::Status PrepareChunk(int64_t n) = 0;
  // The chunk's part of the pass: its tokens, positions, KV table, and where
  // its logits go when it is the step's last chunk.
  virtual SequenceStep StepFor(const ScheduledChunk& chunk) = 0;
  // The pass succeeded: the chunk's tokens (and logits) are the session's.
  virtual void CommitChunk(const ScheduledChunk& chunk) = 0;

 protected:
  ~StepClient() = default;
};

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
