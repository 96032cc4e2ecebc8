// SentencePiece BPE (llama.cpp's "llama" vocabulary type): the text (spaces
// already escaped to U+2581) starts as one symbol per UTF-8 character; the
// adjacent pair whose concatenation is the vocabulary token with the highest
// score is merged first (leftmost on ties) until no pair forms a token.
// Symbols left outside the vocabulary become byte tokens <0xXX>.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/bpe.h"  // TokenMap

namespace llm {

struct SpmVocab {
  const TokenMap* token_to_id = nullptr;
  const std::vector<float>* scores = nullptr;  // [n_vocab]
  const int32_t* byte_tokens = nullptr;        // [256]: <0xXX> token, or -1
  int32_t unk = -1;                            // used when a byte has no token
  size_t max_token_bytes = 0;                  // longest token text (pairs above it never match)
  // True when no token has U+2581 right after something other than U+2581:
  // then no token can span the point before such a U+2581 in the text, and
  // the text is merged chunk by chunk (same result, smaller queues).
  bool split_before_spaces = false;
};

// Appends the tokens of `text` to out. O(n log n) in the text (or chunk)
// length.
void SpmEncode(const SpmVocab& vocab, std::string_view text, std::vector<int32_t>* out);

// Whether `text` (a token) has U+2581 after anything but U+2581.
bool SpmHasInnerSpace(std::string_view text);

}  // namespace llm
