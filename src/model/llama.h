// The `llama` architecture's forward pass over a ragged batch: several
// sequences (sessions), each with its own new tokens, start position and KV
// cache, run through one pass so that every matrix product sees all their
// rows at once.
//
//   embeddings -> n_layer x [RMSNorm -> attention(KV) -> + -> RMSNorm -> SwiGLU FFN -> +]
//   -> RMSNorm -> logits (only for each sequence's last new token)
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend/cpu/attention.h"
#include "model/linear.h"
#include "model/llama_hparams.h"
#include "model/weight.h"

namespace llm {

class GgufFile;
class KvBlockTable;
class ThreadPool;

// One sequence's part of a batch.
struct SequenceStep {
  KvBlockTable* kv = nullptr;         // receives K/V of positions [pos0, pos0 + n)
  absl::Span<const int32_t> tokens;   // n new tokens (ids already validated)
  int64_t pos0 = 0;                   // absolute position of tokens[0]
  float* logits = nullptr;            // [n_vocab] for the last token, or nullptr
};

// Reusable activations of one forward pass; sized on demand.
struct ForwardScratch {
  std::vector<float> x, xn, q, k, v, attn, gate, up, last;
  std::vector<float> rope_cos, rope_sin;     // [n_rows][RoPE pairs] per pass
  std::vector<AttentionJob> attention_jobs;  // one per step of the batch
  LinearContext linear;
  // Batch-invariant attention (see backend/cpu/attention.h); the matrix
  // products follow linear.batch_invariant.
  bool batch_invariant = false;
};

struct LlamaLayer {
  std::vector<float> attn_norm;  // [n_embd]
  std::vector<float> ffn_norm;   // [n_embd]
  Weight wq, wk, wv, wo;         // [q_dim x n_embd], [kv_dim x n_embd] x2, [n_embd x q_dim]
  Weight w_gate, w_up, w_down;   // [n_ff x n_embd] x2, [n_embd x n_ff]
};

class LlamaModel {
 public:
  // Binds the weights inside gguf (which must outlive the model) and checks
  // every tensor's presence, type and shape (LLM_ERR_BAD_MODEL otherwise).
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(const GgufFile& gguf,
                                                            const LlamaHParams& hparams);

  const LlamaHParams& hparams() const { return hp_; }
  uint64_t n_params() const { return n_params_; }

  // Runs all steps as one batch. pool may be null (single-threaded).
  absl::Status Forward(absl::Span<const SequenceStep> steps, ThreadPool* pool, int n_threads,
                       ForwardScratch& scratch) const;

 private:
  LlamaModel() = default;
  absl::Status Attention(absl::Span<const SequenceStep> steps, int64_t layer, ThreadPool* pool,
                         ForwardScratch& s) const;

  LlamaHParams hp_;
  uint64_t n_params_ = 0;
  Weight token_embd_;               // [n_vocab x n_embd]
  Weight output_;                   // [n_vocab x n_embd] (token_embd_ when tied)
  std::vector<float> output_norm_;  // [n_embd]
  std::vector<LlamaLayer> layers_;
};

}  // namespace llm
