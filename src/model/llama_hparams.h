// Hyper-parameters of the `llama` GGUF architecture family (Llama 2/3,
// SmolLM2, TinyLlama, Mistral-style), read and validated from metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace llm {

class GgufFile;

struct LlamaHParams {
  std::string architecture;  // "llama"
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;      // n_embd / n_head
  int64_t rope_dims = 0;     // rotated dims per head (<= head_dim)
  float rope_freq_base = 10000.0f;
  bool rope_neox = false;    // llama uses the "normal" (interleaved pairs) mode
  float rms_eps = 1e-5f;
  // Attention window of each layer ([n_layer]; 0 = full causal attention):
  // Mistral-style `<arch>.attention.sliding_window` windows every layer.
  std::vector<int64_t> layer_window;

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

// Reads `<arch>.*` keys. Missing/inconsistent values -> LLM_ERR_BAD_MODEL, an
// architecture other than "llama" -> LLM_ERR_UNSUPPORTED. n_vocab falls back to
// the tokenizer's token count when `<arch>.vocab_size` is absent.
absl::StatusOr<LlamaHParams> ReadLlamaHParams(const GgufFile& gguf);

}  // namespace llm
