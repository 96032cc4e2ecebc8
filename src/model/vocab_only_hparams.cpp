#include "model/vocab_only_hparams.h"

#include <optional>
#include <string>

#include "core/status.h"
#include "format/gguf.h"

namespace llm {
namespace {

// The value of an optional count key, or 0 when it is missing, not an
// unsigned scalar (e.g. Gemma 3n's per-layer arrays) or outside [1, max]:
// informational only, so an odd value is not worth refusing the file.
int64_t OptionalCount(const GgufFile& gguf, const std::string& key, int64_t max) {
  absl::StatusOr<std::optional<uint64_t>> v = gguf.GetUint(key);
  if (!v.ok() || !v->has_value() || **v == 0 || **v > static_cast<uint64_t>(max)) return 0;
  return static_cast<int64_t>(**v);
}

}  // namespace

absl::StatusOr<LlamaHParams> ReadVocabOnlyHParams(const GgufFile& gguf) {
  LlamaHParams hp;
  LLM_ASSIGN_OR_RETURN(std::optional<std::string_view> arch,
                       gguf.GetString("general.architecture"));
  if (!arch) return Error(LLM_ERR_BAD_MODEL, "model metadata lacks 'general.architecture'");
  hp.architecture = std::string(*arch);
  const std::string p = hp.architecture + ".";
  constexpr int64_t kMaxDim = int64_t{1} << 20;
  hp.n_ctx_train = OptionalCount(gguf, p + "context_length", int64_t{1} << 24);
  hp.n_embd = OptionalCount(gguf, p + "embedding_length", kMaxDim);
  hp.n_layer = OptionalCount(gguf, p + "block_count", 1024);
  hp.n_ff = OptionalCount(gguf, p + "feed_forward_length", kMaxDim);
  hp.n_head = OptionalCount(gguf, p + "attention.head_count", kMaxDim);
  hp.n_head_kv = OptionalCount(gguf, p + "attention.head_count_kv", kMaxDim);
  if (hp.n_head_kv == 0) hp.n_head_kv = hp.n_head;
  return hp;
}

}  // namespace llm
