#include "model/llama_hparams.h"

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "format/gguf.h"

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

}  // namespace

absl::StatusOr<LlamaHParams> ReadLlamaHParams(const GgufFile& gguf) {
  LlamaHParams hp;
  LLM_ASSIGN_OR_RETURN(std::optional<std::string_view> arch, gguf.GetString("general.architecture"));
  if (!arch) return Error(LLM_ERR_BAD_MODEL, "model metadata lacks 'general.architecture'");
  hp.architecture = std::string(*arch);
  if (hp.architecture != "llama") {
    return Errorf(LLM_ERR_UNSUPPORTED,
                  "model architecture '%s' is not supported (this build runs 'llama')",
                  hp.architecture);
  }
  const std::string p = hp.architecture + ".";
  LLM_ASSIGN_OR_RETURN(hp.n_embd, RequiredCount(gguf, p + "embedding_length", kMaxDim));
  LLM_ASSIGN_OR_RETURN(hp.n_layer, RequiredCount(gguf, p + "block_count", kMaxLayers));
  LLM_ASSIGN_OR_RETURN(hp.n_ff, RequiredCount(gguf, p + "feed_forward_length", kMaxDim));
  LLM_ASSIGN_OR_RETURN(hp.n_head, RequiredCount(gguf, p + "attention.head_count", kMaxDim));
  LLM_ASSIGN_OR_RETURN(hp.n_ctx_train, RequiredCount(gguf, p + "context_length", int64_t{1} << 24));

  LLM_ASSIGN_OR_RETURN(std::optional<uint64_t> n_head_kv, gguf.GetUint(p + "attention.head_count_kv"));
  hp.n_head_kv = n_head_kv ? static_cast<int64_t>(*n_head_kv) : hp.n_head;
  if (hp.n_head_kv <= 0 || hp.n_head_kv > hp.n_head || hp.n_head % hp.n_head_kv != 0) {
    return Errorf(LLM_ERR_BAD_MODEL, "attention.head_count_kv = %d does not divide head_count = %d",
                  hp.n_head_kv, hp.n_head);
  }
  if (hp.n_embd % hp.n_head != 0) {
    return Errorf(LLM_ERR_BAD_MODEL, "embedding_length %d is not a multiple of head_count %d",
                  hp.n_embd, hp.n_head);
  }
  hp.head_dim = hp.n_embd / hp.n_head;

  LLM_ASSIGN_OR_RETURN(std::optional<uint64_t> rope_dims, gguf.GetUint(p + "rope.dimension_count"));
  hp.rope_dims = rope_dims ? static_cast<int64_t>(*rope_dims) : hp.head_dim;
  if (hp.rope_dims <= 0 || hp.rope_dims > hp.head_dim || hp.rope_dims % 2 != 0) {
    return Errorf(LLM_ERR_BAD_MODEL, "rope.dimension_count = %d is invalid for head size %d",
                  hp.rope_dims, hp.head_dim);
  }
  LLM_ASSIGN_OR_RETURN(std::optional<double> base, gguf.GetFloat(p + "rope.freq_base"));
  if (base) hp.rope_freq_base = static_cast<float>(*base);
  if (!(hp.rope_freq_base > 0.0f)) return Error(LLM_ERR_BAD_MODEL, "rope.freq_base must be > 0");

  LLM_ASSIGN_OR_RETURN(std::optional<std::string_view> scaling, gguf.GetString(p + "rope.scaling.type"));
  LLM_ASSIGN_OR_RETURN(std::optional<double> factor, gguf.GetFloat(p + "rope.scaling.factor"));
  if (scaling && *scaling != "none" && *scaling != "linear") {
    return Errorf(LLM_ERR_UNSUPPORTED, "rope.scaling.type '%s' is not supported", *scaling);
  }
  if (factor && *factor != 1.0 && (!scaling || *scaling == "linear")) {
    return Errorf(LLM_ERR_UNSUPPORTED, "linear rope scaling (factor %g) is not supported yet", *factor);
  }
  if (gguf.FindTensor("rope_freqs.weight") != nullptr) {
    return Error(LLM_ERR_UNSUPPORTED, "per-dimension rope frequency factors (rope_freqs) are not supported yet");
  }

  LLM_ASSIGN_OR_RETURN(std::optional<double> eps, gguf.GetFloat(p + "attention.layer_norm_rms_epsilon"));
  if (eps) hp.rms_eps = static_cast<float>(*eps);
  if (!(hp.rms_eps > 0.0f)) return Error(LLM_ERR_BAD_MODEL, "attention.layer_norm_rms_epsilon must be > 0");

  // Mistral-style sliding window: every layer attends to the last `window`
  // positions (docs/SLIDING_WINDOW.md). 0 or absent: full attention.
  LLM_ASSIGN_OR_RETURN(std::optional<uint64_t> window, gguf.GetUint(p + "attention.sliding_window"));
  if (window && *window > static_cast<uint64_t>(int64_t{1} << 24)) {
    return Errorf(LLM_ERR_BAD_MODEL, "attention.sliding_window = %d is too large", *window);
  }
  hp.layer_window.assign(static_cast<size_t>(hp.n_layer), window ? static_cast<int64_t>(*window) : 0);

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
  return hp;
}

}  // namespace llm
