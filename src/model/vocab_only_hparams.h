// Hyper-parameters of a vocab_only load: what llm_model_get_info reports,
// read without judging whether this build can run the architecture. A
// vocab_only model only tokenizes, so any `general.architecture` whose
// tokenizer is supported loads (qwen2, qwen3, gemma2, gemma3, phi3, mistral,
// a llama with rope scaling, ...), independent of its compute keys.
#pragma once

#include "absl/status/statusor.h"
#include "model/llama_hparams.h"

namespace llm {

class GgufFile;

// architecture from `general.architecture` (required: LLM_ERR_BAD_MODEL when
// missing); n_ctx_train, n_embd, n_layer, n_ff, n_head, n_head_kv from the
// `<arch>.*` keys when they are present as scalars in range, else 0. n_vocab
// is left 0 for the caller to take from the tokenizer.
absl::StatusOr<LlamaHParams> ReadVocabOnlyHParams(const GgufFile& gguf);

}  // namespace llm
