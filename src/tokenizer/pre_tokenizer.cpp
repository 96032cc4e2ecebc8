#include "tokenizer/pre_tokenizer.h"

#include <cstring>

#include "core/status.h"
#include "tokenizer/unicode.h"

namespace llm {
namespace {

// ---- character classes as llama.cpp's collapsed std::regex sees them ------
// ASCII codepoints keep their identity; any other codepoint is whitespace if
// it has White_Space (collapsed to \v), else it belongs to its category.

inline bool IsAsciiLetter(uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
inline bool IsAsciiDigit(uint32_t c) { return c >= '0' && c <= '9'; }

// \s
inline bool ClassSpace(uint32_t c) {
  if (c < 128) return c == ' ' || (c >= '\t' && c <= '\r');
  return GetCodepointFlags(c).whitespace;
}
// \p{L}
inline bool ClassLetter(uint32_t c) {
  if (c < 128) return IsAsciiLetter(c);
  const CodepointFlags f = GetCodepointFlags(c);
  return !f.whitespace && f.is_letter();
}
// \p{N}
inline bool ClassNumber(uint32_t c) {
  if (c < 128) return IsAsciiDigit(c);
  const CodepointFlags f = GetCodepointFlags(c);
  return !f.whitespace && f.is_number();
}
// \p{P}: ASCII punctuation is !"#%&'()*,-./:;?@[\]_{}
inline bool ClassPunct(uint32_t c) {
  if (c < 128)
    return c != 0 && std::strchr("!\"#%&'()*,-./:;?@[\\]_{}", static_cast<int>(c)) != nullptr;
  const CodepointFlags f = GetCodepointFlags(c);
  return !f.whitespace && f.is_punctuation();
}
// [\p{P}\$\+<=>\^~\|`]
inline bool ClassPunctOrAsciiSymbol(uint32_t c) {
  if (c < 128 && c != 0 && std::strchr("$+<=>^~|`", static_cast<int>(c)) != nullptr) return true;
  return ClassPunct(c);
}
// [\r\n]
inline bool ClassNewline(uint32_t c) { return c == '\r' || c == '\n'; }
// [一-龥ࠀ-一가-퟿] on the text where non-ASCII whitespace became \v.
inline bool ClassCjkRange(uint32_t c) {
  const bool in =
      (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x0800 && c <= 0x4E00) || (c >= 0xAC00 && c <= 0xD7FF);
  return in && !GetCodepointFlags(c).whitespace;
}

using Offsets = std::vector<size_t>;

// Runs `find` (which returns the end of a match starting at pos, or pos if no
// match starts there) over every fragment, like std::regex_iterator: matches
// are searched left to right without overlap; matches and the gaps between
// them become fragments.
template <typename FindAt>
Offsets SplitByMatches(const std::vector<uint32_t>& cpts, const Offsets& in, FindAt find) {
  Offsets out;
  out.reserve(in.size() * 2);
  size_t start = 0;
  for (size_t len : in) {
    const size_t end = start + len;
    size_t gap_start = start;
    size_t pos = start;
    while (pos < end) {
      const size_t match_end = find(cpts, pos, end);
      if (match_end == pos) {
        ++pos;
        continue;
      }
      if (pos > gap_start) out.push_back(pos - gap_start);
      out.push_back(match_end - pos);
      pos = gap_start = match_end;
    }
    if (end > gap_start) out.push_back(end - gap_start);
    start = end;
  }
  return out;
}

// X+ : a maximal run of class X.
template <bool (*Cls)(uint32_t)>
size_t MatchRun(const std::vector<uint32_t>& c, size_t pos, size_t end) {
  while (pos < end && Cls(c[pos])) ++pos;
  return pos;
}
// X : one codepoint of class X.
template <bool (*Cls)(uint32_t)>
size_t MatchOne(const std::vector<uint32_t>& c, size_t pos, size_t /*end*/) {
  return Cls(c[pos]) ? pos + 1 : pos;
}
// \s?X+ : greedy optional whitespace, backtracking to none if X+ then fails.
template <bool (*Cls)(uint32_t)>
size_t MatchSpaceRun(const std::vector<uint32_t>& c, size_t pos, size_t end) {
  if (ClassSpace(c[pos]) && pos + 1 < end && Cls(c[pos + 1])) return MatchRun<Cls>(c, pos + 1, end);
  return MatchRun<Cls>(c, pos, end);
}
// [0-9][0-9][0-9]
size_t MatchThreeDigits(const std::vector<uint32_t>& c, size_t pos, size_t end) {
  if (pos + 3 <= end && IsAsciiDigit(c[pos]) && IsAsciiDigit(c[pos + 1]) &&
      IsAsciiDigit(c[pos + 2])) {
    return pos + 3;
  }
  return pos;
}

// GPT-2's 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with real Unicode categories (not collapsed), as llama.cpp's hand-written
// unicode_regex_split_custom_gpt2. Positions outside the fragment have no
// flags at all, which is what makes (?!\S) succeed at a fragment's end.
Offsets SplitGpt2(const std::vector<uint32_t>& cpts, const Offsets& in) {
  Offsets out;
  out.reserve(in.size() * 2);
  size_t start = 0;
  for (size_t len : in) {
    const size_t b = start;
    const size_t e = start + len;
    start = e;
    struct F {
      bool valid = false;
      CodepointFlags f;
      bool letter() const { return valid && f.is_letter(); }
      bool number() const { return valid && f.is_number(); }
      bool space() const { return valid && f.whitespace; }
      bool other() const { return valid && !f.whitespace && !f.is_letter() && !f.is_number(); }
    };
    auto flags = [&](size_t p) {
      F r;
      if (p >= b && p < e) {
        r.valid = true;
        r.f = GetCodepointFlags(cpts[p]);
      }
      return r;
    };
    size_t prev_end = b;
    auto add = [&](size_t end) {
      if (end > prev_end) out.push_back(end - prev_end);
      prev_end = end;
    };
    size_t pos = b;
    while (pos < e) {
      const uint32_t c = cpts[pos];
      if (c == '\'' && pos + 1 < e) {
        const uint32_t n1 = cpts[pos + 1];
        if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
          pos += 2;
          add(pos);
          continue;
        }
        if (pos + 2 < e) {
          const uint32_t n2 = cpts[pos + 2];
          if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
            pos += 3;
            add(pos);
            continue;
          }
        }
      }
      const bool sp = (c == ' ');
      const F f2 = sp ? flags(pos + 1) : flags(pos);
      if (f2.letter()) {
        pos += sp;
        while (flags(pos).letter()) ++pos;
        add(pos);
        continue;
      }
      if (f2.number()) {
        pos += sp;
        while (flags(pos).number()) ++pos;
        add(pos);
        continue;
      }
      if (f2.other()) {
        pos += sp;
        while (flags(pos).other()) ++pos;
        add(pos);
        continue;
      }
      size_t n_ws = 0;
      while (flags(pos + n_ws).space()) ++n_ws;
      if (n_ws > 1 && pos + n_ws < e) {
        // \s+(?!\S): leave the last whitespace to prefix the next word.
        pos += n_ws - 1;
        add(pos);
        continue;
      }
      if (n_ws > 0) {
        pos += n_ws;
        add(pos);
        continue;
      }
      add(++pos);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<PreTokenizerType> ParsePreTokenizer(std::string_view pre) {
  if (pre.empty() || pre == "default") return PreTokenizerType::kDefault;
  for (const char* name : {"gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "gigachat",
                           "mellum", "exaone4", "a.x-4.0", "granite-docling"}) {
    if (pre == name) return PreTokenizerType::kGpt2;
  }
  for (const char* name : {"starcoder", "smollm", "refact", "command-r", "codeshell", "exaone",
                           "minerva-7b", "mellum2"}) {
    if (pre == name) return PreTokenizerType::kStarcoder;
  }
  if (pre == "falcon") return PreTokenizerType::kFalcon;
  if (pre == "deepseek-coder") return PreTokenizerType::kDeepseekCoder;
  return Errorf(LLM_ERR_UNSUPPORTED, "unsupported tokenizer.ggml.pre pre-tokenizer '%s'",
                std::string(pre));
}

std::vector<size_t> PreTokenize(PreTokenizerType type, const std::vector<uint32_t>& cpts) {
  if (cpts.empty()) return {};
  Offsets o = {cpts.size()};
  switch (type) {
    case PreTokenizerType::kGpt2:
      o = SplitGpt2(cpts, o);
      break;
    case PreTokenizerType::kStarcoder:
      // \p{N}, then GPT-2: every digit is its own word.
      o = SplitByMatches(cpts, o, MatchOne<ClassNumber>);
      o = SplitGpt2(cpts, o);
      break;
    case PreTokenizerType::kFalcon:
      o = SplitByMatches(cpts, o, MatchRun<ClassPunctOrAsciiSymbol>);
      o = SplitGpt2(cpts, o);
      o = SplitByMatches(cpts, o, MatchThreeDigits);
      break;
    case PreTokenizerType::kDeepseekCoder:
      o = SplitByMatches(cpts, o, MatchOne<ClassNewline>);
      o = SplitByMatches(cpts, o, MatchSpaceRun<ClassLetter>);
      o = SplitByMatches(cpts, o, MatchSpaceRun<ClassPunct>);
      o = SplitByMatches(cpts, o, MatchRun<ClassCjkRange>);
      o = SplitByMatches(cpts, o, MatchOne<ClassNumber>);
      break;
    case PreTokenizerType::kDefault:
      o = SplitByMatches(cpts, o, MatchRun<ClassPunctOrAsciiSymbol>);
      o = SplitGpt2(cpts, o);
      o = SplitByMatches(cpts, o, MatchRun<ClassNumber>);
      o = SplitByMatches(cpts, o, MatchThreeDigits);
      break;
  }
  return o;
}

}  // namespace llm
