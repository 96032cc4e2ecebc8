// Pre-tokenizers of byte-level BPE vocabularies: split text into words before
// BPE merges run inside each word. Each `tokenizer.ggml.pre` value names a list
// of regular expressions applied in sequence (each one splits every fragment
// the previous ones produced; matches and the gaps between them both become
// fragments). The lists are llama.cpp's (llama-vocab.cpp), and each regex is
// implemented here by hand with the same semantics llama.cpp gets from its
// hand-written GPT-2 splitter and from std::regex on its "collapsed" text
// (one byte per codepoint: ASCII kept, other codepoints replaced by a byte for
// their category, non-ASCII whitespace by \v). No regex engine is used.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace llm {

enum class PreTokenizerType {
  kDefault,        // no / "default" pre: llama.cpp's generic BPE list
  kGpt2,           // "gpt-2" and aliases
  kStarcoder,      // "starcoder", "smollm", "refact", "command-r", ...
  kFalcon,         // "falcon"
  kDeepseekCoder,  // "deepseek-coder"
  kDeepseekLlm,    // "deepseek-llm"
  kLlama3,         // "llama-bpe" (Llama 3.x), "llama3", "dbrx", "smaug-bpe", ...
  kQwen2,          // "qwen2" (Qwen2, Qwen2.5, Qwen3), "stablelm2", ... : digits one by one
  kQwen35,         // "qwen35": as kQwen2, combining marks join letter runs
  kTekken,         // "tekken" (Mistral Nemo, Ministral): case-aware letter runs
};

// What a tokenizer.ggml.pre value selects. Besides the split, llama.cpp ties
// two options to the name: ignore_merges (a word that is itself a vocabulary
// token is emitted whole, without running the merges) and whether BOS is
// added by default (tokenizer.ggml.add_bos_token, when present, overrides).
struct PreTokenizerSpec {
  PreTokenizerType type = PreTokenizerType::kDefault;
  bool ignore_merges = false;
  bool add_bos = false;
};

// Maps a tokenizer.ggml.pre value ("" = absent) to its spec;
// LLM_ERR_UNSUPPORTED naming the value for pre-tokenizers libllm does not
// implement.
absl::StatusOr<PreTokenizerSpec> ParsePreTokenizer(std::string_view pre);

// Splits codepoints into words. Returns the length (in codepoints) of each
// word, in order; the lengths sum to cpts.size(). Empty input -> no words.
std::vector<size_t> PreTokenize(PreTokenizerType type, const std::vector<uint32_t>& cpts);

}  // namespace llm
