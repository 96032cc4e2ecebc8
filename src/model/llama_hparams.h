// Hyper-parameters of the decoder-only GGUF architectures (model/arch.h:
// llama, qwen2, qwen3, phi3, gemma2, gemma3), read and validated from the
// `<arch>.*` metadata keys llama.cpp's converter writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace llm {

class GgufFile;
struct ArchSpec;

struct LlamaHParams {
  std::string architecture;        // general.architecture
  const ArchSpec* arch = nullptr;  // its description (never null after ReadLlamaHParams)
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;   // attention.key_length, else n_embd / n_head
  int64_t rope_dims = 0;  // rotated dims per head (<= head_dim)
  float rope_freq_base = 10000.0f;
  bool rope_neox = false;  // llama uses the "normal" (interleaved pairs) mode
  float rms_eps = 1e-5f;
  // Attention window of each layer ([n_layer]; 0 = full causal attention):
  // Mistral-style `<arch>.attention.sliding_window` windows every layer of a
  // llama model; Gemma windows its local layers (IsSwaLayer) with n_swa.
  std::vector<int64_t> layer_window;

  // RoPE scaling (ggml rope_ext without YaRN): theta *= rope_freq_scale
  // (1 / rope.scaling.factor for linear scaling, else 1); cos/sin *=
  // rope_attn_factor (rope.scaling.attn_factor, Phi-3 LongRoPE).
  float rope_freq_scale = 1.0f;
  float rope_attn_factor = 1.0f;
  int64_t n_ctx_orig = 0;  // rope.scaling.original_context_length, else n_ctx_train

  // Sliding-window attention: layer l is local when swa_pattern > 0 and
  // l % swa_pattern != swa_pattern - 1; local layers see the last n_swa
  // positions and rotate with rope_freq_base_swa.
  int64_t n_swa = 0;
  int swa_pattern = 0;
  float rope_freq_base_swa = 10000.0f;
  float rope_freq_scale_swa = 1.0f;

  float attn_scale = 0.0f;     // score scale; 0: 1 / sqrt(head_dim)
  float attn_softcap = 0.0f;   // > 0: attention scores soft-capped (Gemma 2)
  float final_softcap = 0.0f;  // > 0: logits soft-capped (Gemma 2/3)

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  bool IsSwaLayer(int64_t layer) const {
    return swa_pattern > 0 && n_swa > 0 && layer % swa_pattern != swa_pattern - 1;
  }
};

// Reads the architecture name, vocabulary size and (ReadComputeHParams) the
// compute hyper-parameters. Missing/inconsistent values -> LLM_ERR_BAD_MODEL,
// an architecture model/arch.h does not describe -> LLM_ERR_UNSUPPORTED.
// n_vocab falls back to the tokenizer's token count when
// `<arch>.vocab_size` is absent.
absl::StatusOr<LlamaHParams> ReadLlamaHParams(const GgufFile& gguf);

// The compute part of ReadLlamaHParams (everything but the architecture name
// and n_vocab, which *hp must already hold): dimensions, RoPE, norms,
// windows, soft-caps. A vocab-only load need not call it.
absl::Status ReadComputeHParams(const GgufFile& gguf, LlamaHParams* hp);

}  // namespace llm
