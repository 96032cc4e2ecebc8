#include "model/llama_hparams.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "format/gguf.h"
#include "model/arch.h"

namespace llm {
namespace {

// Upper bounds that keep every later size computation far from overflow.
constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 1024;

absl::StatusOr<int64_t> RequiredCount(const GgufFile& gguf, const std::string& key, int64_t max) {
  LLM_ASSIGN_OR_RETURN(std::optional<uint64_t> value, gguf.GetUint(key));
  if (!value) return Errorf(LLM_ERR_BAD_MODEL, "model metadata lacks '%s'", key);
  if (*value == 0 || *value > static_cast<uint64_t>(max)) {
    return Errorf(LLM_ERR_BAD_MODEL, "model metadata '%s' = %d is outside [1, %d]", key, *value,
                  max);
  }
  return static_cast<int64_t>(*value);
}

// An optional positive float key: *out keeps its value when absent.
absl::Status OptionalPositive(const GgufFile& gguf, const std::string& key, float* out) {
  LLM_ASSIGN_OR_RETURN(std::optional<double> value, gguf.GetFloat(key));
  if (!value) return absl::OkStatus();
  if (!(*value > 0.0) || !std::isfinite(*value)) {
    return Errorf(LLM_ERR_BAD_MODEL, "model metadata '%s' = %g must be > 0", key, *value);
  }
  *out = static_cast<float>(*value);
  return absl::OkStatus();
}

// RoPE: base, scaling type and factor, LongRoPE attention factor.
absl::Status ReadRope(const GgufFile& gguf, const std::string& p, LlamaHParams* hp) {
  LLM_ASSIGN_OR_RETURN(std::optional<uint64_t> rope_dims, gguf.GetUint(p + "rope.dimension_count"));
  hp->rope_dims = rope_dims ? static_cast<int64_t>(*rope_dims) : hp->head_dim;
  if (hp->rope_dims <= 0 || hp->rope_dims > hp->head_dim || hp->rope_dims % 2 != 0) {
    return Errorf(LLM_ERR_BAD_MODEL, "rope.dimension_count = %d is invalid for head size %d",
                  hp->rope_dims, hp->head_dim);
  }
  LLM_RETURN_IF_ERROR(OptionalPositive(gguf, p + "rope.freq_base", &hp->rope_freq_base));
  hp->rope_freq_base_swa = 10000.0f;  // llama.cpp's default for local layers
  LLM_RETURN_IF_ERROR(OptionalPositive(gguf, p + "rope.freq_base_swa", &hp->rope_freq_base_swa));

  // llama.cpp reads an absent type as "linear"; "none" ignores the factor.
  LLM_ASSIGN_OR_RETURN(std::optional<std::string_view> scaling,
                       gguf.GetString(p + "rope.scaling.type"));
  // "longrope" (Phi-3) takes its factors from rope_factors_short / _long.
  const std::string_view type = scaling ? *scaling : "linear";
  if (type != "none" && type != "linear" && !(type == "longrope" && hp->arch->longrope)) {
    return Errorf(LLM_ERR_UNSUPPORTED,
                  "rope.scaling.type '%s' is not supported for '%s' (none, linear%s)", type,
                  hp->architecture, hp->arch->longrope ? ", longrope" : "");
  }
  LLM_ASSIGN_OR_RETURN(std::optional<double> factor, gguf.GetFloat(p + "rope.scaling.factor"));
  if (!factor) {
    LLM_ASSIGN_OR_RETURN(factor, gguf.GetFloat(p + "rope.scale_linear"));  // the old key
  }
  if (factor && *factor != 0.0 && type != "none") {
    if (!(*factor > 0.0) || !std::isfinite(*factor)) {
      return Errorf(LLM_ERR_BAD_MODEL, "rope.scaling.factor = %g must be > 0", *factor);
    }
    hp->rope_freq_scale = static_cast<float>(1.0 / *factor);
  }
  LLM_RETURN_IF_ERROR(
      OptionalPositive(gguf, p + "rope.scaling.attn_factor", &hp->rope_attn_factor));
  if (hp->arch->swa_rope_is_global) {
    hp->rope_freq_base_swa = hp->rope_freq_base;
    hp->rope_freq_scale_swa = hp->rope_freq_scale;
    LLM_RETURN_IF_ERROR(OptionalPositive(gguf, p + "rope.freq_base_swa", &hp->rope_freq_base_swa));
  }
  LLM_ASSIGN_OR_RETURN(std::optional<uint64_t> orig,
                       gguf.GetUint(p + "rope.scaling.original_context_length"));
  hp->n_ctx_orig = orig ? static_cast<int64_t>(*orig) : hp->n_ctx_train;
  return absl::OkStatus();
}

// Sliding window, soft-caps and the attention scale of the families that
// have them (model/arch.h).
absl::Status ReadAttentionVariants(const GgufFile& gguf, const std::string& p, LlamaHParams* hp) {
  const ArchSpec& a = *hp->arch;
  // Sliding windows (docs/SLIDING_WINDOW.md): Gemma's local layers
  // (swa_pattern), or Mistral-style on every layer of a llama model. The
  // other families ignore the key, as llama.cpp does (Phi-3 writes one that
  // its attention never used).
  if (a.swa_pattern > 0 || a.uniform_swa) {
    LLM_ASSIGN_OR_RETURN(std::optional<uint64_t> window,
                         gguf.GetUint(p + "attention.sliding_window"));
    if (window && *window > static_cast<uint64_t>(int64_t{1} << 24)) {
      return Errorf(LLM_ERR_BAD_MODEL, "attention.sliding_window = %d is too large", *window);
    }
    hp->n_swa = window ? static_cast<int64_t>(*window) : a.swa_default;
    hp->swa_pattern = hp->n_swa > 0 ? a.swa_pattern : 0;
  }
  hp->layer_window.assign(static_cast<size_t>(hp->n_layer), 0);
  for (int64_t l = 0; l < hp->n_layer; ++l) {
    if (a.uniform_swa || hp->IsSwaLayer(l)) hp->layer_window[l] = hp->n_swa;
  }
  if (a.attn_softcap) {
    hp->attn_softcap = 50.0f;  // llama.cpp's default
    LLM_RETURN_IF_ERROR(OptionalPositive(gguf, p + "attn_logit_softcapping", &hp->attn_softcap));
  }
  if (a.final_softcap) {
    hp->final_softcap = a.final_softcap_default;
    LLM_RETURN_IF_ERROR(OptionalPositive(gguf, p + "final_logit_softcapping", &hp->final_softcap));
  }
  // Gemma scales queries by query_pre_attn_scalar^-1/2: head_dim for every
  // size but the 27B models (n_embd / n_head), which llama.cpp recognises by
  // their layer count, as here.
  const bool gemma_27b = (a.name == std::string_view("gemma2") && hp->n_layer == 46) ||
                         (a.name == std::string_view("gemma3") && hp->n_layer == 62);
  if (gemma_27b) {
    hp->attn_scale =
        static_cast<float>(1.0 / std::sqrt(static_cast<double>(hp->n_embd / hp->n_head)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadComputeHParams(const GgufFile& gguf, LlamaHParams* hp_out) {
  LlamaHParams& hp = *hp_out;
  const std::string p = hp.architecture + ".";
  LLM_ASSIGN_OR_RETURN(hp.n_embd, RequiredCount(gguf, p + "embedding_length", kMaxDim));
  LLM_ASSIGN_OR_RETURN(hp.n_layer, RequiredCount(gguf, p + "block_count", kMaxLayers));
  LLM_ASSIGN_OR_RETURN(hp.n_ff, RequiredCount(gguf, p + "feed_forward_length", kMaxDim));
  LLM_ASSIGN_OR_RETURN(hp.n_head, RequiredCount(gguf, p + "attention.head_count", kMaxDim));
  LLM_ASSIGN_OR_RETURN(hp.n_ctx_train, RequiredCount(gguf, p + "context_length", int64_t{1} << 24));

  LLM_ASSIGN_OR_RETURN(std::optional<uint64_t> n_head_kv,
                       gguf.GetUint(p + "attention.head_count_kv"));
  hp.n_head_kv = n_head_kv ? static_cast<int64_t>(*n_head_kv) : hp.n_head;
  if (hp.n_head_kv <= 0 || hp.n_head_kv > hp.n_head || hp.n_head % hp.n_head_kv != 0) {
    return Errorf(LLM_ERR_BAD_MODEL, "attention.head_count_kv = %d does not divide head_count = %d",
                  hp.n_head_kv, hp.n_head);
  }
  // The head size: attention.key_length where the converter writes it
  // (Gemma: 256 with n_embd / n_head = 288 on Gemma-2-2B), else n_embd / n_head.
  LLM_ASSIGN_OR_RETURN(std::optional<uint64_t> key_length,
                       gguf.GetUint(p + "attention.key_length"));
  LLM_ASSIGN_OR_RETURN(std::optional<uint64_t> value_length,
                       gguf.GetUint(p + "attention.value_length"));
  if (key_length) {
    if (*key_length == 0 || *key_length > static_cast<uint64_t>(kMaxDim)) {
      return Errorf(LLM_ERR_BAD_MODEL, "attention.key_length = %d is invalid", *key_length);
    }
    hp.head_dim = static_cast<int64_t>(*key_length);
  } else {
    if (hp.n_embd % hp.n_head != 0) {
      return Errorf(LLM_ERR_BAD_MODEL, "embedding_length %d is not a multiple of head_count %d",
                    hp.n_embd, hp.n_head);
    }
    hp.head_dim = hp.n_embd / hp.n_head;
  }
  if (value_length && static_cast<int64_t>(*value_length) != hp.head_dim) {
    return Errorf(LLM_ERR_UNSUPPORTED,
                  "attention.value_length %d differs from the key length %d (not supported)",
                  *value_length, hp.head_dim);
  }
  if (hp.q_dim() > kMaxDim)
    return Errorf(LLM_ERR_BAD_MODEL, "%d heads of %d are too wide", hp.n_head, hp.head_dim);

  hp.rope_neox = hp.arch->rope_neox;
  LLM_RETURN_IF_ERROR(ReadRope(gguf, p, &hp));

  LLM_ASSIGN_OR_RETURN(std::optional<double> eps,
                       gguf.GetFloat(p + "attention.layer_norm_rms_epsilon"));
  if (eps) hp.rms_eps = static_cast<float>(*eps);
  if (!(hp.rms_eps > 0.0f))
    return Error(LLM_ERR_BAD_MODEL, "attention.layer_norm_rms_epsilon must be > 0");
  return ReadAttentionVariants(gguf, p, &hp);
}

absl::StatusOr<LlamaHParams> ReadLlamaHParams(const GgufFile& gguf) {
  LlamaHParams hp;
  LLM_ASSIGN_OR_RETURN(std::optional<std::string_view> arch,
                       gguf.GetString("general.architecture"));
  if (!arch) return Error(LLM_ERR_BAD_MODEL, "model metadata lacks 'general.architecture'");
  hp.architecture = std::string(*arch);
  hp.arch = FindArch(hp.architecture);
  if (hp.arch == nullptr) {
    return Errorf(LLM_ERR_UNSUPPORTED,
                  "model architecture '%s' is not supported (this build runs %s)", hp.architecture,
                  SupportedArchNames());
  }
  const std::string p = hp.architecture + ".";
  LLM_ASSIGN_OR_RETURN(std::optional<uint64_t> vocab, gguf.GetUint(p + "vocab_size"));
  if (vocab) {
    hp.n_vocab = static_cast<int64_t>(*vocab);
  } else {
    const GgufValue* tokens = gguf.Find("tokenizer.ggml.tokens");
    hp.n_vocab = tokens ? static_cast<int64_t>(tokens->array_count) : 0;
  }
  if (hp.n_vocab <= 0 || hp.n_vocab > (int64_t{1} << 24)) {
    return Errorf(LLM_ERR_BAD_MODEL, "vocabulary size %d is invalid", hp.n_vocab);
  }
  LLM_RETURN_IF_ERROR(ReadComputeHParams(gguf, &hp));
  return hp;
}

}  // namespace llm
