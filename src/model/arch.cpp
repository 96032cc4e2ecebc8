#include "model/arch.h"

namespace llm {
namespace {

ArchSpec Llama() {
  ArchSpec a;
  a.name = "llama";
  a.uniform_swa = true;
  return a;
}

ArchSpec Qwen2() {
  ArchSpec a;
  a.name = "qwen2";
  a.rope_neox = true;
  a.qkv_bias = true;
  return a;
}

ArchSpec Qwen3() {
  ArchSpec a;
  a.name = "qwen3";
  a.rope_neox = true;
  a.qk_norm = true;
  return a;
}

ArchSpec Phi3() {
  ArchSpec a;
  a.name = "phi3";
  a.rope_neox = true;
  a.fused_gate_up = true;
  a.longrope = true;
  return a;
}

ArchSpec Gemma2() {
  ArchSpec a;
  a.name = "gemma2";
  a.rope_neox = true;
  a.post_norms = true;
  a.embed_scale = true;
  a.attn_softcap = true;
  a.final_softcap = true;
  a.final_softcap_default = 30.0f;
  a.swa_pattern = 2;
  a.swa_default = 4096;
  a.swa_rope_is_global = true;
  a.ffn = FfnActivation::kGeGlu;
  return a;
}

ArchSpec Gemma3() {
  ArchSpec a;
  a.name = "gemma3";
  a.rope_neox = true;
  a.qk_norm = true;
  a.post_norms = true;
  a.embed_scale = true;
  a.final_softcap = true;  // only when the metadata has the key
  a.swa_pattern = 6;
  a.ffn = FfnActivation::kGeGlu;
  return a;
}

const ArchSpec kArchs[] = {Llama(), Qwen2(), Qwen3(), Phi3(), Gemma2(), Gemma3()};

}  // namespace

const ArchSpec* FindArch(std::string_view name) {
  for (const ArchSpec& a : kArchs) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

const char* SupportedArchNames() { return "llama, qwen2, qwen3, phi3, gemma2, gemma3"; }

}  // namespace llm
