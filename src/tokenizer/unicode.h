// Locale-independent Unicode helpers for the tokenizer: UTF-8 decoding the way
// llama.cpp does it (so ids match its goldens), strict UTF-8 validation for
// the streaming detokenizer, codepoint categories from the generated tables,
// and GPT-2's byte <-> unicode mapping used by byte-level BPE vocabularies.
// Nothing here consults the C locale (<cctype> is never used).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/unicode_tables.h"

namespace llm {

constexpr uint32_t kReplacementChar = 0xFFFD;

struct CodepointFlags {
  uint8_t category = kUcUndefined;  // UnicodeCategory
  bool whitespace = false;          // White_Space property
  bool is_letter() const { return category == kUcLetter; }
  bool is_number() const { return category == kUcNumber; }
  bool is_punctuation() const { return category == kUcPunctuation; }
};

// Category and White_Space of a codepoint (anything above U+10FFFF is
// undefined, not whitespace).
CodepointFlags GetCodepointFlags(uint32_t cp);

// Length of a UTF-8 sequence judged from its first byte only (1 for
// continuation and invalid bytes), as SentencePiece and llama.cpp split text.
inline size_t Utf8SeqLen(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

// Lenient decoding identical to llama.cpp's unicode_cpts_from_utf8: a lead
// byte followed by the right number of continuation bytes is decoded (even if
// overlong or a surrogate); any other byte becomes U+FFFD and decoding resumes
// at the next byte. Sequences decoding above U+10FFFF (lead F4..F7), which
// make llama.cpp throw, also become U+FFFD (one per sequence).
std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text);

// Append the UTF-8 encoding of cp (< 0x110000; surrogates are encoded as
// three bytes like llama.cpp does, to round-trip lenient decoding).
void AppendUtf8(uint32_t cp, std::string* out);

// Length of the well-formed UTF-8 sequence at the start of s (1..4), 0 if s
// is a proper prefix of a well-formed sequence (more bytes could complete it),
// or -1 if the first byte can never start / continue a well-formed sequence
// (then s[0..maximal invalid subpart) should be replaced by U+FFFD; the
// subpart length is returned through *invalid_len). Strict (RFC 3629): no
// overlongs, no surrogates, nothing above U+10FFFF.
int Utf8WellFormedPrefix(std::string_view s, size_t* invalid_len);

// True if the whole string is well-formed UTF-8.
bool IsValidUtf8(std::string_view s);

// GPT-2 byte-level BPE: every byte has a printable unicode stand-in
// (e.g. ' ' -> U+0120 'Ġ'). ByteToUnicodeUtf8(b) is the UTF-8 of b's stand-in;
// UnicodeToByte(cp) is the byte a stand-in codepoint represents, or -1.
const std::string& ByteToUnicodeUtf8(uint8_t byte);
int UnicodeToByte(uint32_t cp);

// ASCII-only whitespace test (space, \t \n \v \f \r), what C's isspace() means
// in the "C" locale, independent of the process locale.
inline bool IsAsciiSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

}  // namespace llm
