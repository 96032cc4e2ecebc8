// The decoder-only forward pass of every supported architecture (llama,
// qwen2, qwen3, phi3, gemma2, gemma3: model/arch.h describes what differs)
// over a ragged batch: several sequences (sessions), each with its own new
// tokens, start position and KV cache, run through one pass so that every
// matrix product sees all their rows at once. Written once against the
// backend interface (backend/backend.h): the same code drives every device.
//
//   embeddings [* sqrt(n_embd)]
//   -> n_layer x [RMSNorm -> Q/K/V [+ bias] [-> per-head Q/K RMSNorm] -> RoPE
//                -> attention(KV) -> out [-> RMSNorm] -> +
//                 RMSNorm -> SwiGLU / GeGLU FFN [-> RMSNorm] -> +]
//   -> RMSNorm -> logits [soft-capped] (only for the sequences that sample)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend/backend.h"
#include "model/llama_hparams.h"

namespace llm {

class GgufFile;
class SessionKv;

// One sequence's part of a batch.
struct SequenceStep {
  SessionKv* kv = nullptr;           // receives K/V of positions [pos0, pos0 + n)
  absl::Span<const int32_t> tokens;  // n new tokens (ids already validated)
  int64_t pos0 = 0;                  // absolute position of tokens[0]
  float* logits = nullptr;           // [n_vocab] for the last token, or nullptr
  bool rope_long = false;            // LongRoPE long factors (LlamaModel::UsesLongRope)
};

// Host-side description of one pass, reused between passes.
struct ForwardScratch {
  std::vector<PassSequence> sequences;
  std::vector<int32_t> tokens;  // [n_rows]
};

// Unset ids (index -1) are the tensors an architecture does not have.
struct LlamaLayer {
  WeightId attn_norm, ffn_norm;            // [n_embd]
  WeightId attn_post_norm, ffn_post_norm;  // [n_embd] (Gemma)
  WeightId wq, wk, wv, wo;  // [q_dim x n_embd], [kv_dim x n_embd] x2, [n_embd x q_dim]
  WeightId bq, bk, bv;      // [q_dim], [kv_dim] x2 (Qwen 2)
  WeightId q_norm, k_norm;  // [head_dim] (Qwen 3, Gemma 3)
  WeightId w_gate, w_up, w_down;  // [n_ff x n_embd] x2, [n_embd x n_ff]
};

// The pass's activation buffers ([rows][width] f32 on the backend).
struct LlamaActivations {
  ActivationId x;         // [rows][n_embd] the residual stream
  ActivationId xn;        // [rows][n_embd] normed input / a block's output
  ActivationId q, k, v;   // [rows][q_dim], [rows][kv_dim] x2
  ActivationId attn;      // [rows][q_dim] attention output
  ActivationId gate, up;  // [rows][n_ff]
  ActivationId logits;    // [logit rows][n_vocab]
};

class LlamaModel {
 public:
  // Checks every tensor's presence, type and shape (LLM_ERR_BAD_MODEL
  // otherwise) and hands the weights to backend, which must outlive the
  // model (gguf too: the CPU backend keeps pointers into it). A tensor the
  // architecture's pass would not use (an unexpected bias, say) is
  // LLM_ERR_UNSUPPORTED naming it, rather than silently ignored.
  // progress (may be empty) is called after each weight is bound with the
  // fraction of the file's tensor bytes bound so far (0..1, monotonic; the
  // backend may repack a weight as it binds it, the slow part of a load);
  // false from it stops the load with LLM_ERR_CANCELLED.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(
      const GgufFile& gguf, const LlamaHParams& hparams, Backend& backend,
      const std::function<bool(float)>& progress = {});

  // A weight as bound: its id and the source bytes it was bound from
  // ([data, data + n_bytes): a whole tensor, or the rows of a fused one).
  struct BoundWeight {
    WeightId id;
    const uint8_t* data = nullptr;
    size_t n_bytes = 0;
  };
  // Every weight bound by Create, in binding order.
  const std::vector<BoundWeight>& bound_weights() const { return bound_; }

  const LlamaHParams& hparams() const { return hp_; }
  uint64_t n_params() const { return n_params_; }

  // Whether a sequence of context n_ctx (a session's llm_session_params
  // n_ctx) rotates with the LongRoPE long factors: Phi-3 with n_ctx above
  // rope.scaling.original_context_length (llama.cpp's rule, per sequence).
  // Fixed for a session's life: its whole KV cache is rotated one way.
  bool UsesLongRope(int64_t n_ctx) const;

  // Runs all steps as one pass on backend (the one given to Create).
  absl::Status Forward(absl::Span<const SequenceStep> steps, Backend& backend,
                       ForwardScratch& scratch) const;

 private:
  LlamaModel() = default;

  LlamaHParams hp_;
  uint64_t n_params_ = 0;
  WeightId token_embd_;   // [n_vocab x n_embd]
  WeightId output_;       // [n_vocab x n_embd] (token_embd_ when tied)
  WeightId output_norm_;  // [n_embd]
  WeightId rope_factors_;  // [rope_dims / 2]: rope_freqs (Llama 3) or rope_factors_short (Phi-3)
  WeightId rope_factors_long_;  // [rope_dims / 2]: rope_factors_long (Phi-3) or unset
  std::vector<LlamaLayer> layers_;
  LlamaActivations act_;
  std::vector<BoundWeight> bound_;
};

}  // namespace llm
