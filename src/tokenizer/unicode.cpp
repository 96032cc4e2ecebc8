#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace llm {
namespace {

uint8_t LookupCategory(uint32_t cp) {
  if (cp >= 0x110000) return kUcUndefined;
  // Last range whose first <= cp.
  const UnicodeRange* begin = kUnicodeRanges;
  const UnicodeRange* end = kUnicodeRanges + kUnicodeRangeCount;
  const UnicodeRange* it = std::upper_bound(
      begin, end, cp, [](uint32_t v, const UnicodeRange& r) { return v < r.first; });
  return it == begin ? static_cast<uint8_t>(kUcUndefined) : (it - 1)->category;
}

bool LookupWhitespace(uint32_t cp) {
  return std::binary_search(kUnicodeWhitespace, kUnicodeWhitespace + kUnicodeWhitespaceCount, cp);
}

// Flags of the first 256 codepoints, the hot path for mostly-Latin text.
const std::array<CodepointFlags, 256>& Latin1Flags() {
  static const std::array<CodepointFlags, 256> table = [] {
    std::array<CodepointFlags, 256> t{};
    for (uint32_t cp = 0; cp < 256; ++cp) {
      t[cp].category = LookupCategory(cp);
      t[cp].whitespace = LookupWhitespace(cp);
    }
    return t;
  }();
  return table;
}

struct ByteTables {
  std::array<std::string, 256> byte_to_utf8;
  std::array<int16_t, 512> cp_to_byte;  // stand-ins are all below U+0200
};

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the
// other 68 bytes to U+0100.. in byte order.
const ByteTables& GetByteTables() {
  static const ByteTables tables = [] {
    ByteTables t;
    t.cp_to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : 256u + static_cast<uint32_t>(n++);
      AppendUtf8(cp, &t.byte_to_utf8[b]);
      t.cp_to_byte[cp] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return tables;
}

inline bool IsCont(uint8_t c) { return (c & 0xC0) == 0x80; }

}  // namespace

CodepointFlags GetCodepointFlags(uint32_t cp) {
  if (cp < 256) return Latin1Flags()[cp];
  CodepointFlags f;
  f.category = LookupCategory(cp);
  f.whitespace = cp < 0x3001 && LookupWhitespace(cp);
  return f;
}

std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    if (c < 0x80) {
      out.push_back(c);
      i += 1;
    } else if ((c & 0xE0) == 0xC0) {
      if (i + 1 < n && IsCont(s[i + 1])) {
        out.push_back((static_cast<uint32_t>(c & 0x1F) << 6) | (s[i + 1] & 0x3F));
        i += 2;
      } else {
        out.push_back(kReplacementChar);
        i += 1;
      }
    } else if ((c & 0xF0) == 0xE0) {
      if (i + 2 < n && IsCont(s[i + 1]) && IsCont(s[i + 2])) {
        out.push_back((static_cast<uint32_t>(c & 0x0F) << 12) |
                      (static_cast<uint32_t>(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F));
        i += 3;
      } else {
        out.push_back(kReplacementChar);
        i += 1;
      }
    } else if ((c & 0xF8) == 0xF0) {
      if (i + 3 < n && IsCont(s[i + 1]) && IsCont(s[i + 2]) && IsCont(s[i + 3])) {
        const uint32_t cp = (static_cast<uint32_t>(c & 0x07) << 18) |
                            (static_cast<uint32_t>(s[i + 1] & 0x3F) << 12) |
                            (static_cast<uint32_t>(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
        out.push_back(cp <= 0x10FFFF ? cp : kReplacementChar);
        i += 4;
      } else {
        out.push_back(kReplacementChar);
        i += 1;
      }
    } else {
      // Continuation byte or F8..FF where a lead byte was expected.
      out.push_back(kReplacementChar);
      i += 1;
    }
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x110000) {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    AppendUtf8(kReplacementChar, out);
  }
}

int Utf8WellFormedPrefix(std::string_view str, size_t* invalid_len) {
  const auto* s = reinterpret_cast<const uint8_t*>(str.data());
  const size_t n = str.size();
  if (invalid_len) *invalid_len = 1;
  if (n == 0) return 0;
  const uint8_t c = s[0];
  if (c < 0x80) return 1;
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlongs
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;  // no overlongs
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return -1;  // continuation byte, C0, C1, F5..FF
  }
  // Unicode's "maximal subpart" rule: the invalid part is the longest prefix
  // that could have started a well-formed sequence.
  for (size_t k = 1; k < need; ++k) {
    if (k >= n) return 0;  // incomplete but still possibly valid
    const uint8_t b = s[k];
    const bool ok = (k == 1) ? (b >= lo && b <= hi) : IsCont(b);
    if (!ok) {
      if (invalid_len) *invalid_len = k;
      return -1;
    }
  }
  return static_cast<int>(need);
}

bool IsValidUtf8(std::string_view s) {
  while (!s.empty()) {
    const int len = Utf8WellFormedPrefix(s, nullptr);
    if (len <= 0) return false;
    s.remove_prefix(static_cast<size_t>(len));
  }
  return true;
}

const std::string& ByteToUnicodeUtf8(uint8_t byte) { return GetByteTables().byte_to_utf8[byte]; }

int UnicodeToByte(uint32_t cp) {
  if (cp >= 512) return -1;
  return GetByteTables().cp_to_byte[cp];
}

}  // namespace llm
