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
// [\p{P}\$\+<=>\^~\|`] (falcon)
inline bool ClassPunctOrAsciiSymbol(uint32_t c) {
  if (c < 128 && c != 0 && std::strchr("$+<=>^~|`", static_cast<int>(c)) != nullptr) return true;
  return ClassPunct(c);
}
// [\p{P}\$\+<=>\^~\|] (the default list): as falcon's without the backtick,
// which is a symbol (Sk), not punctuation, so " `" stays one word for GPT-2's
// " ?[^\s\p{L}\p{N}]+" and can merge (GPT-NeoX's " `" token).
inline bool ClassPunctOrAsciiSymbolNoBacktick(uint32_t c) {
  return c != '`' && ClassPunctOrAsciiSymbol(c);
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

// The Unicode flags of position p of a fragment [b, e) of `cpts`. Positions
// outside the fragment have no flags at all (every predicate is false), which
// is what makes lookaheads such as (?!\S) succeed at a fragment's end.
struct PositionFlags {
  bool valid = false;
  CodepointFlags f;
  bool letter() const { return valid && f.is_letter(); }
  bool mark() const { return valid && f.category == kUcAccentMark; }
  bool number() const { return valid && f.is_number(); }
  bool space() const { return valid && f.whitespace; }
  bool other() const { return valid && !f.whitespace && !f.is_letter() && !f.is_number(); }
};

class FragmentFlags {
 public:
  FragmentFlags(const std::vector<uint32_t>& cpts, size_t b, size_t e) : cpts_(cpts), b_(b), e_(e) {}
  PositionFlags operator()(size_t p) const {
    PositionFlags r;
    if (p >= b_ && p < e_) {
      r.valid = true;
      r.f = GetCodepointFlags(cpts_[p]);
    }
    return r;
  }

 private:
  const std::vector<uint32_t>& cpts_;
  size_t b_, e_;
};

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
    const FragmentFlags flags(cpts, b, e);
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
      const PositionFlags f2 = sp ? flags(pos + 1) : flags(pos);
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

// The Llama 3 family, llama.cpp's hand-written unicode_regex_split_custom_
// llama3 / _qwen2 / _qwen35 (real Unicode categories, not collapsed):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with D = max_digits (Llama 3: 3, Qwen2: 1). marks_are_letters (Qwen3.5):
// [\p{L}\p{M}] wherever the list says \p{L}, except in the optional prefix.
Offsets SplitLlama3Family(const std::vector<uint32_t>& cpts, const Offsets& in, size_t max_digits,
                          bool marks_are_letters) {
  Offsets out;
  out.reserve(in.size() * 2);
  size_t start = 0;
  for (size_t len : in) {
    const size_t b = start;
    const size_t e = start + len;
    start = e;
    const FragmentFlags flags(cpts, b, e);
    auto word_char = [&](const PositionFlags& f) { return f.letter() || (marks_are_letters && f.mark()); };
    // [^\s\p{L}\p{N}] (and not \p{M} when marks are letters).
    auto other = [&](const PositionFlags& f) {
      return f.valid && !f.space() && !f.letter() && !f.number() &&
             !(marks_are_letters && f.mark());
    };
    auto lower = [](uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; };
    size_t prev_end = b;
    auto add = [&](size_t end) {
      if (end > prev_end) out.push_back(end - prev_end);
      prev_end = end;
    };
    size_t pos = b;
    while (pos < e) {
      const uint32_t c = cpts[pos];
      const PositionFlags f = flags(pos);
      // (?i:'s|'t|'re|'ve|'m|'ll|'d)
      if (c == '\'' && pos + 1 < e) {
        const uint32_t n1 = lower(cpts[pos + 1]);
        if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
          pos += 2;
          add(pos);
          continue;
        }
        if (pos + 2 < e) {
          const uint32_t n2 = lower(cpts[pos + 2]);
          if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
            pos += 3;
            add(pos);
            continue;
          }
        }
      }
      // [^\r\n\p{L}\p{N}]?\p{L}+
      if (c != '\r' && c != '\n' && !f.number() && (word_char(f) || word_char(flags(pos + 1)))) {
        ++pos;
        while (word_char(flags(pos))) ++pos;
        add(pos);
        continue;
      }
      // \p{N}{1,D}: a run of digits in groups of D.
      if (f.number()) {
        size_t group = 0;
        while (flags(pos).number()) {
          ++pos;
          if (++group == max_digits) {
            add(pos);
            group = 0;
          }
        }
        add(pos);
        continue;
      }
      // " ?[^\s\p{L}\p{N}]+[\r\n]*"
      const PositionFlags f2 = (c == ' ') ? flags(pos + 1) : f;
      if (other(f2) || (c == ' ' && !f2.valid)) {
        pos += (c == ' ');
        while (other(flags(pos))) ++pos;
        while (pos < e && (cpts[pos] == '\r' || cpts[pos] == '\n')) ++pos;
        add(pos);
        continue;
      }
      size_t n_ws = 0;
      size_t last_newline_end = 0;
      while (flags(pos + n_ws).space()) {
        const uint32_t w = cpts[pos + n_ws];
        if (w == '\r' || w == '\n') last_newline_end = pos + n_ws + 1;
        ++n_ws;
      }
      if (last_newline_end > 0) {  // \s*[\r\n]+
        pos = last_newline_end;
        add(pos);
        continue;
      }
      if (n_ws > 1 && pos + n_ws < e) {  // \s+(?!\S): the last space goes with the next word
        pos += n_ws - 1;
        add(pos);
        continue;
      }
      if (n_ws > 0) {  // \s+
        pos += n_ws;
        add(pos);
        continue;
      }
      add(++pos);  // no alternative matches
    }
  }
  return out;
}

// Tekken, as llama.cpp runs it with std::regex on the collapsed text:
//   [^\r\n\p{L}\p{N}]?U*L+|[^\r\n\p{L}\p{N}]?U+L*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// where U = a letter other than a-z and L = a letter other than A-Z
// (`(?=[\p{L}])([^a-z])` and `(?=[\p{L}])([^A-Z])`; non-ASCII letters collapse
// to one byte, so they are both U and L). ECMAScript takes the first
// alternative that matches, each quantifier as greedy as still lets the rest
// match. Every codepoint is matched by some alternative, so the matches tile
// the fragment.
Offsets SplitTekken(const std::vector<uint32_t>& cpts, const Offsets& in) {
  auto upper_or_other_letter = [](uint32_t c) { return ClassLetter(c) && !(c >= 'a' && c <= 'z'); };
  auto lower_or_other_letter = [](uint32_t c) { return ClassLetter(c) && !(c >= 'A' && c <= 'Z'); };
  auto prefix = [](uint32_t c) {
    return c != '\r' && c != '\n' && !ClassLetter(c) && !ClassNumber(c);
  };
  // Not \s, \p{L} or \p{N} in the collapsed text.
  auto other = [](uint32_t c) { return !ClassSpace(c) && !ClassLetter(c) && !ClassNumber(c); };
  Offsets out;
  out.reserve(in.size() * 2);
  size_t start = 0;
  for (size_t len : in) {
    const size_t e = start + len;
    size_t pos = start;
    start = e;
    while (pos < e) {
      const size_t begin = pos;
      const uint32_t c = cpts[pos];
      // The two letter alternatives (the optional prefix can only be taken
      // when c is not a letter, and without it they fail on a non-letter).
      const size_t q = prefix(c) ? pos + 1 : pos;
      size_t n_upper = 0;
      while (q + n_upper < e && upper_or_other_letter(cpts[q + n_upper])) ++n_upper;
      size_t match_end = begin;
      for (size_t k = n_upper + 1; k-- > 0;) {  // U* backtracks from its longest
        if (q + k < e && lower_or_other_letter(cpts[q + k])) {
          size_t m = q + k;
          while (m < e && lower_or_other_letter(cpts[m])) ++m;
          match_end = m;
          break;
        }
      }
      if (match_end == begin && n_upper > 0) match_end = q + n_upper;  // U+L* (L* is empty here)
      if (match_end > begin) {
        out.push_back(match_end - begin);
        pos = match_end;
        continue;
      }
      if (ClassNumber(c)) {  // \p{N}
        out.push_back(1);
        ++pos;
        continue;
      }
      // " ?[^\s\p{L}\p{N}]+[\r\n/]*"
      const size_t o = (c == ' ' && pos + 1 < e && other(cpts[pos + 1])) ? pos + 1 : pos;
      if (other(cpts[o])) {
        size_t m = o;
        while (m < e && other(cpts[m])) ++m;
        while (m < e && (cpts[m] == '\r' || cpts[m] == '\n' || cpts[m] == '/')) ++m;
        out.push_back(m - begin);
        pos = m;
        continue;
      }
      // Whitespace (c is \s here): \s*[\r\n]+ | \s+(?!\S) | \s+
      size_t n_ws = 0;
      size_t last_newline_end = 0;
      while (pos + n_ws < e && ClassSpace(cpts[pos + n_ws])) {
        const uint32_t w = cpts[pos + n_ws];
        if (w == '\r' || w == '\n') last_newline_end = pos + n_ws + 1;
        ++n_ws;
      }
      size_t m;
      if (last_newline_end > 0) {
        m = last_newline_end;
      } else if (n_ws > 1 && pos + n_ws < e) {
        m = pos + n_ws - 1;
      } else {
        m = pos + n_ws;
      }
      out.push_back(m - begin);
      pos = m;
    }
  }
  return out;
}

// DeepSeek LLM's letter class `\s?[A-Za-z\u00B5\u00C0-\u00D6...]+` (std::wregex on
// real codepoints), as ranges in the order of the model's tokenizer.json.
constexpr uint32_t kDeepseekLetterRanges[][2] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},
    {0xD8, 0xF6},       {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},
    {0x295, 0x2AF},     {0x370, 0x373},     {0x376, 0x376},     {0x377, 0x377},
    {0x37B, 0x37D},     {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},
    {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},
    {0x48A, 0x52F},     {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},
    {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},
    {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},
    {0x1FB6, 0x1FBC},   {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},
    {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},
    {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},
    {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},
    {0x213C, 0x213F},   {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2183},
    {0x2184, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},
    {0x2CF2, 0x2CF2},   {0x2CF3, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},
    {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},
    {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},
    {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2},
    {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
inline bool ClassDeepseekLetter(uint32_t c) {
  for (const auto& r : kDeepseekLetterRanges) {
    if (c < r[0]) return false;  // sorted
    if (c <= r[1]) return !GetCodepointFlags(c).whitespace;
  }
  return false;
}
// [!-/:-~！-／：-～‘-‟　-。] (U+3000 is whitespace, which llama.cpp turns
// into \v before matching, so it never matches).
inline bool ClassDeepseekPunct(uint32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x7E) || (c >= 0xFF01 && c <= 0xFF0F) ||
         (c >= 0xFF1A && c <= 0xFF5E) || (c >= 0x2018 && c <= 0x201F) ||
         (c >= 0x3001 && c <= 0x3002);
}

// \s+$ : the whitespace run that ends a fragment, if any.
Offsets SplitTrailingSpace(const std::vector<uint32_t>& cpts, const Offsets& in) {
  Offsets out;
  out.reserve(in.size() + 8);
  size_t start = 0;
  for (size_t len : in) {
    size_t tail = 0;
    while (tail < len && ClassSpace(cpts[start + len - 1 - tail])) ++tail;
    if (tail < len) out.push_back(len - tail);
    if (tail > 0) out.push_back(tail);
    start += len;
  }
  return out;
}

}  // namespace

absl::StatusOr<PreTokenizerSpec> ParsePreTokenizer(std::string_view pre) {
  auto is_any = [&](std::initializer_list<const char*> names) {
    for (const char* name : names) {
      if (pre == name) return true;
    }
    return false;
  };
  PreTokenizerSpec spec;
  if (pre.empty() || pre == "default") {
    spec.type = PreTokenizerType::kDefault;
  } else if (is_any({"gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "gigachat", "mellum",
                     "exaone4", "a.x-4.0", "granite-docling"})) {
    spec.type = PreTokenizerType::kGpt2;
  } else if (is_any({"starcoder", "smollm", "refact", "command-r", "codeshell", "exaone",
                     "minerva-7b", "mellum2"})) {
    spec.type = PreTokenizerType::kStarcoder;
  } else if (pre == "falcon") {
    spec.type = PreTokenizerType::kFalcon;
  } else if (pre == "deepseek-coder") {
    spec.type = PreTokenizerType::kDeepseekCoder;
  } else if (pre == "deepseek-llm") {
    spec.type = PreTokenizerType::kDeepseekLlm;
  } else if (is_any({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                     "midm-2.0", "lfm2"})) {
    spec = {PreTokenizerType::kLlama3, /*ignore_merges=*/true, /*add_bos=*/true};
  } else if (is_any({"dbrx", "smaug-bpe"})) {
    spec.type = PreTokenizerType::kLlama3;
  } else if (is_any({"qwen2", "deepseek-r1-qwen", "kormo", "megrez", "stablelm2", "hunyuan",
                     "solar-open"})) {
    spec.type = PreTokenizerType::kQwen2;
  } else if (pre == "qwen35") {
    spec.type = PreTokenizerType::kQwen35;
  } else if (pre == "tekken") {
    spec = {PreTokenizerType::kTekken, /*ignore_merges=*/true, /*add_bos=*/true};
  } else {
    return Errorf(LLM_ERR_UNSUPPORTED, "unsupported tokenizer.ggml.pre pre-tokenizer '%s'",
                  std::string(pre));
  }
  return spec;
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
    case PreTokenizerType::kDeepseekLlm:
      o = SplitByMatches(cpts, o, MatchOne<ClassNewline>);
      o = SplitByMatches(cpts, o, MatchSpaceRun<ClassDeepseekLetter>);
      o = SplitByMatches(cpts, o, MatchSpaceRun<ClassDeepseekPunct>);
      o = SplitTrailingSpace(cpts, o);
      o = SplitByMatches(cpts, o, MatchRun<ClassCjkRange>);
      o = SplitByMatches(cpts, o, MatchRun<ClassNumber>);
      break;
    case PreTokenizerType::kLlama3:
      o = SplitLlama3Family(cpts, o, /*max_digits=*/3, /*marks_are_letters=*/false);
      break;
    case PreTokenizerType::kQwen2:
      o = SplitLlama3Family(cpts, o, /*max_digits=*/1, /*marks_are_letters=*/false);
      break;
    case PreTokenizerType::kQwen35:
      o = SplitLlama3Family(cpts, o, /*max_digits=*/1, /*marks_are_letters=*/true);
      break;
    case PreTokenizerType::kTekken:
      o = SplitTekken(cpts, o);
      break;
    case PreTokenizerType::kDefault:
      o = SplitByMatches(cpts, o, MatchRun<ClassPunctOrAsciiSymbolNoBacktick>);
      o = SplitGpt2(cpts, o);
      o = SplitByMatches(cpts, o, MatchRun<ClassNumber>);
      o = SplitByMatches(cpts, o, MatchThreeDigits);
      break;
  }
  return o;
}

}  // namespace llm
