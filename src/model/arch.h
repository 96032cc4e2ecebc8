// What distinguishes the decoder-only architectures libllm runs, as data:
// one forward pass (model/llama.cpp) reads these switches instead of a copy
// of the pass per family. Names, tensors and metadata keys follow llama.cpp's
// GGUF converter (tensor names in model/llama.cpp).
//
//   family   rope    attention                     FFN            norms
//   llama    normal  [rope_freqs] (Llama 3)        SwiGLU         pre
//   qwen2    neox    Q/K/V biases                  SwiGLU         pre
//   qwen3    neox    per-head Q/K RMSNorm          SwiGLU         pre
//   phi3     neox    fused attn_qkv, LongRoPE      SwiGLU, fused  pre
//                    factors, Q scaled             gate|up
//   gemma2   neox    attention soft-cap, SWA 1:1   GeGLU          pre + post
//   gemma3   neox    per-head Q/K RMSNorm, SWA 5:1 GeGLU          pre + post
//                    with a local rope base
// Gemma also scales the embeddings by sqrt(n_embd) and soft-caps the final
// logits (when the metadata asks).
#pragma once

#include <cstdint>
#include <string_view>

namespace llm {

enum class FfnActivation { kSwiGlu, kGeGlu };

struct ArchSpec {
  const char* name = "";
  bool rope_neox = false;              // neox rope pairs (i, i + d/2)
  bool qkv_bias = false;               // attn_{q,k,v}.bias required (present ones are always used)
  bool qk_norm = false;                // attn_q_norm / attn_k_norm [head_dim], per head
  bool post_norms = false;             // post_attention_norm / post_ffw_norm on each block's output
  bool embed_scale = false;            // embeddings *= sqrt(n_embd)
  bool fused_gate_up = false;          // ffn_up holds [gate | up] (2 n_ff rows), no ffn_gate
  bool longrope = false;               // rope_factors_short / _long (Phi-3)
  bool attn_softcap = false;           // attention soft-capping (attn_logit_softcapping, 50)
  bool final_softcap = false;          // final-logit soft-capping (final_logit_softcapping)
  float final_softcap_default = 0.0f;  // when the key is absent (gemma2: 30)
  int swa_pattern = 0;      // 0: no sliding window; n: layer l is local unless l % n == n - 1
  int64_t swa_default = 0;  // window when attention.sliding_window is absent
  bool uniform_swa = false;      // attention.sliding_window windows every layer (Mistral-style)
  bool swa_rope_is_global = false;  // local layers rotate as global ones (Gemma 2), else
                                    // with rope.freq_base_swa (default 10000) unscaled
  FfnActivation ffn = FfnActivation::kSwiGlu;
};

// The spec of a `general.architecture` name, or nullptr when unsupported.
const ArchSpec* FindArch(std::string_view name);

// The supported names, comma-separated (for messages).
const char* SupportedArchNames();

}  // namespace llm
