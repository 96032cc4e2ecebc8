// Byte-level BPE merging (GPT-2 style) for one pre-tokenized word.
//
// Merges are ranked pairs of strings ("Ġ t" -> rank 3). Every string that can
// take part in a merge is interned as an integer symbol id: vocabulary tokens
// keep their token id, strings that only occur inside merges get ids from
// n_vocab upward. Merging then works on ids with a priority queue (lowest rank
// first, leftmost first on ties, the order llama.cpp uses), O(n log n) in the
// word length, with no string building in the inner loop.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llm {

using TokenMap = absl::flat_hash_map<std::string, int32_t>;

// Heterogeneous TokenMap lookups take absl::string_view, which is not
// std::string_view in every Abseil build.
inline absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

class BpeMerges {
 public:
  // token_to_id maps every vocabulary text to its id (ids < n_vocab); it must
  // outlive this object. merges are "left right" strings, rank = index.
  // LLM_ERR_BAD_MODEL for a merge that is not two non-empty strings joined by
  // one space.
  static absl::StatusOr<BpeMerges> Build(const TokenMap* token_to_id, int32_t n_vocab,
                                         const std::vector<std::string_view>& merges);

  // Scratch buffers reused across words (one per Tokenize call).
  struct Scratch {
    struct Sym {
      int32_t id;  // symbol id, -1 if the text is not a known symbol
      uint32_t start, len;
      int32_t prev, next;
    };
    struct Pair {
      int32_t rank, left, right, left_id, right_id, result;
    };
    std::vector<Sym> syms;
    std::vector<Pair> heap;
  };

  // Appends the tokens of one word given as raw bytes (the GPT-2 byte
  // encoding is implied: byte b stands for the symbol ByteToUnicodeUtf8(b)).
  // Pieces that end up outside the vocabulary fall back to one token per byte
  // of their encoded text where such a token exists (llama.cpp's behaviour),
  // else are dropped.
  void EncodeWord(std::string_view raw_word, Scratch* scratch, std::vector<int32_t>* out) const;

  size_t size() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // symbol id of left+right
  };
  int32_t Lookup(std::string_view text) const;  // symbol id or -1
  int32_t Intern(std::string_view text);

  const TokenMap* token_to_id_ = nullptr;
  int32_t n_vocab_ = 0;
  TokenMap extra_;                               // merge-only strings -> id >= n_vocab
  absl::flat_hash_map<uint64_t, Merge> merges_;  // (left id << 32 | right id)
  int32_t byte_sym_[256];                        // symbol id of byte b's stand-in, or -1
  std::vector<int32_t> byte_fallback_[256];      // tokens for the encoded bytes of byte b
};

}  // namespace llm
