// Turns a stream of generated token ids into text that is always valid UTF-8.
//
// A token's piece may end in the middle of a UTF-8 sequence (byte-level BPE
// and SentencePiece byte tokens split emoji and CJK characters across
// tokens). Push() returns only complete, well-formed sequences and holds back
// an incomplete tail (at most 3 bytes) until the next token completes it.
// Bytes that can never become well-formed (stray continuation bytes, a lead
// byte followed by a non-continuation, overlongs, surrogates, > U+10FFFF) are
// replaced by U+FFFD as soon as they are seen ("maximal subpart" rule).
// Flush() returns what is held back, as U+FFFD, and resets the stream.
//
// One object per stream; not thread-safe. The Tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <string>

namespace llm {

class Tokenizer;

class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer& tokenizer, bool render_special);

  // Text completed by this token (possibly empty).
  std::string Push(int32_t token);
  // The held-back incomplete tail as U+FFFD ("" if none); the stream is then
  // empty again.
  std::string Flush();
  // Bytes currently held back.
  size_t pending() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool render_special_;
  std::string pending_;
};

}  // namespace llm
