// The model's tokenizer, built from GGUF metadata (tokenizer.ggml.*).
//
// Two vocabulary types, both reproducing llama.cpp's ids exactly (checked
// against llama-cpp-python goldens in tests/tokenizer/):
//   "gpt2"  byte-level BPE: text is split into words by the pre-tokenizer named
//           by tokenizer.ggml.pre (pre_tokenizer.h), each word's bytes are
//           mapped to GPT-2's printable stand-ins and merged by rank (bpe.h).
//   "llama" SentencePiece BPE: spaces become U+2581, a space is prefixed
//           (add_space_prefix), pieces merge by score (spm.h), and anything
//           left outside the vocabulary falls back to <0xXX> byte tokens.
//
// Special tokens. Control tokens (token_type 3, plus tokens llama.cpp forces
// to control by their text: end-of-generation and FIM markers) are recognised
// in text only when parse_special is true, so text inside chat messages never
// turns into control tokens. User-defined tokens (token_type 4, e.g.
// GPT-NeoX's whitespace runs) are ordinary text pieces that llama.cpp and
// HF tokenizers always match first, with or without parse_special; unknown
// tokens (type 2) only with parse_special. Longer special texts are matched
// first.
//
// Invalid UTF-8 never fails and never crashes. Byte-level BPE: each byte that
// does not start a (leniently decoded, llama.cpp-compatible) UTF-8 sequence
// becomes U+FFFD, so such text tokenizes like text containing U+FFFD.
// SentencePiece: the raw bytes are kept and come out as <0xXX> byte tokens,
// so they round-trip exactly.
//
// Thread-safety: immutable after FromGguf; all const methods may be called
// concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pre_tokenizer.h"

namespace llm {

class GgufFile;

enum class TokenizerType { kBpe, kSpm };

class Tokenizer {
 public:
  // Reads tokenizer.ggml.{model, pre, tokens, scores, token_type, merges,
  // bos/eos/unknown/padding/eot/eom/fim_*_token_id, add_bos_token,
  // add_eos_token, add_space_prefix} and general.name.
  // Errors: LLM_ERR_UNSUPPORTED naming an unknown tokenizer.ggml.model or
  // tokenizer.ggml.pre; LLM_ERR_BAD_MODEL for missing tokens/merges, array
  // lengths that differ from the token count, special ids out of range,
  // token types outside 0..6, malformed merges, duplicate token texts, or
  // add_bos/add_eos without the token. Nothing is allocated from a count that
  // the GGUF parser has not already bounded by the file size.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& gguf);

  // Text -> token ids. add_special: prepend BOS / append EOS as add_bos() /
  // add_eos() say. parse_special: see the header comment. Empty text gives
  // only the special tokens (if any). LLM_ERR_INVALID_ARGUMENT for text of
  // 1 GiB or more; LLM_ERR_OUT_OF_MEMORY if allocation fails.
  absl::StatusOr<std::vector<int32_t>> Tokenize(std::string_view utf8, bool add_special,
                                                bool parse_special) const;

  // The raw bytes a token stands for (possibly part of a UTF-8 sequence):
  // byte-level BPE stand-ins are mapped back to bytes, SentencePiece's U+2581
  // becomes a space and <0xXX> becomes the byte. Control and unknown tokens
  // give "" unless render_special, then their text; user-defined tokens give
  // their text. Out-of-range ids give "".
  std::string TokenToPiece(int32_t id, bool render_special) const;

  // Concatenated pieces of ids (no space stripping or clean-up).
  std::string Detokenize(absl::Span<const int32_t> ids, bool render_special) const;

  TokenizerType type() const { return type_; }
  int32_t n_vocab() const { return static_cast<int32_t>(texts_.size()); }
  // Special ids, -1 if absent. SentencePiece vocabularies default to
  // bos 1 / eos 2 / unk 0 (as llama.cpp) when the keys are missing. eot()
  // falls back to the first of "<|eot_id|>", "<|im_end|>", "<|end|>",
  // "<end_of_turn>", "<|endoftext|>", ... present in the vocabulary when the
  // key is missing (llama.cpp picks an arbitrary one if several exist).
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  int32_t eot() const { return eot_; }
  int32_t eom() const { return eom_; }
  int32_t pad() const { return pad_; }
  int32_t unk() const { return unk_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  // SentencePiece: a space is put in front of the text (and after each
  // special token); tokenizer.ggml.add_space_prefix, default true.
  bool add_space_prefix() const { return add_space_prefix_; }

  // End of generation: EOS, EOT, EOM, the FIM pad/repo/file-separator tokens
  // and tokens whose text is "<|im_end|>", "<|end|>", "<|eot_id|>",
  // "<end_of_turn>", "<|endoftext|>", "</s>", ... (llama.cpp's list; such
  // tokens are made control tokens). False for out-of-range ids.
  bool IsEog(int32_t id) const;
  bool IsControl(int32_t id) const;
  // The vocabulary text of a token ("" for out-of-range ids). Valid while
  // this Tokenizer lives.
  std::string_view TokenText(int32_t id) const;
  // The id whose vocabulary text is exactly `text`, or -1.
  int32_t TokenId(std::string_view text) const;

  // Token attribute bits (llama.cpp's llama_token_attr subset).
  enum Attr : uint8_t {
    kAttrNormal = 1,
    kAttrUnknown = 2,
    kAttrControl = 4,
    kAttrUserDefined = 8,
    kAttrUnused = 16,
    kAttrByte = 32,
    kAttrRstrip = 64,   // whitespace after the token's text is dropped
    kAttrLstrip = 128,  // whitespace before it is dropped
  };
  uint8_t attr(int32_t id) const;

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

 private:
  Tokenizer() = default;
  absl::Status Load(const GgufFile& gguf);
  absl::Status LoadSpecialIds(const GgufFile& gguf);
  void DetectSpecialTokens(std::string_view model_name);

  struct Fragment {
    int32_t token;  // >= 0: a special token; -1: raw text [offset, offset+length)
    size_t offset;
    size_t length;
  };
  std::vector<Fragment> PartitionSpecial(std::string_view text, bool parse_special) const;
  void TokenizeBpe(std::string_view text, std::vector<int32_t>* out) const;
  void TokenizeSpm(std::string_view text, std::vector<int32_t>* out) const;

  TokenizerType type_ = TokenizerType::kBpe;
  PreTokenizerType pre_ = PreTokenizerType::kDefault;
  bool ignore_merges_ = false;      // a word that is a token is not merged (PreTokenizerSpec)
  bool pre_add_bos_ = false;        // the pre-tokenizer's default for add_bos
  std::vector<std::string> texts_;  // [n_vocab]
  std::vector<float> scores_;       // [n_vocab]
  std::vector<uint8_t> attrs_;      // [n_vocab] Attr bits
  TokenMap token_to_id_;
  std::unique_ptr<BpeMerges> merges_;  // kBpe only
  int32_t spm_byte_tokens_[256];       // kSpm: token of byte b, or -1
  size_t max_token_bytes_ = 0;
  bool spm_split_before_spaces_ = false;
  std::vector<int32_t> special_tokens_;  // control/user-defined/unknown, longest text first
  std::vector<uint8_t> eog_;             // [n_vocab] 1 if end of generation

  int32_t bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1, pad_ = -1, unk_ = -1;
  int32_t fim_pad_ = -1, fim_rep_ = -1, fim_sep_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
};

}  // namespace llm
