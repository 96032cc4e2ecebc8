#include "tokenizer/spm.h"

#include <algorithm>
#include <queue>

#include "tokenizer/unicode.h"

namespace llm {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

struct Sym {
  uint32_t start, len;
  int32_t prev, next;
};
struct Pair {
  float score;
  int32_t left, right;
  uint32_t size;  // bytes of left+right when pushed
};
struct Lower {
  bool operator()(const Pair& a, const Pair& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};
using Queue = std::priority_queue<Pair, std::vector<Pair>, Lower>;

void EncodeChunk(const SpmVocab& vocab, std::string_view text, std::vector<Sym>& syms, Queue& queue,
                 std::vector<int32_t>* out) {
  syms.clear();
  for (size_t off = 0; off < text.size();) {
    const size_t n = std::min(text.size() - off, Utf8SeqLen(static_cast<uint8_t>(text[off])));
    const int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back(Sym{static_cast<uint32_t>(off), static_cast<uint32_t>(n), idx - 1, -1});
    off += n;
    if (off < text.size()) syms.back().next = idx + 1;
  }
  auto add_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t size = syms[l].len + syms[r].len;
    if (size > vocab.max_token_bytes) return;
    auto it = vocab.token_to_id->find(AbslView(text.substr(syms[l].start, size)));
    if (it == vocab.token_to_id->end()) return;
    queue.push(Pair{(*vocab.scores)[static_cast<size_t>(it->second)], l, r, size});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(syms.size()); ++i) add_pair(i - 1, i);
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Sym& l = syms[p.left];
    Sym& r = syms[p.right];
    // Symbols only grow, so an unchanged total size means an unchanged pair.
    if (l.len == 0 || r.len == 0 || l.len + r.len != p.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = p.left;
    add_pair(l.prev, p.left);
    add_pair(p.left, l.next);
  }
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    const Sym& s = syms[i];
    auto it = vocab.token_to_id->find(AbslView(text.substr(s.start, s.len)));
    if (it != vocab.token_to_id->end()) {
      out->push_back(it->second);
      continue;
    }
    for (uint32_t k = 0; k < s.len; ++k) {
      const int32_t t = vocab.byte_tokens[static_cast<uint8_t>(text[s.start + k])];
      if (t >= 0) {
        out->push_back(t);
      } else if (vocab.unk >= 0) {
        out->push_back(vocab.unk);
      }
    }
  }
}

}  // namespace

bool SpmHasInnerSpace(std::string_view t) {
  for (size_t k = t.find(kSpace, 1); k != std::string_view::npos; k = t.find(kSpace, k + 1)) {
    if (k < 3 || t.substr(k - 3, 3) != kSpace) return true;
  }
  return false;
}

void SpmEncode(const SpmVocab& vocab, std::string_view text, std::vector<int32_t>* out) {
  std::vector<Sym> syms;
  Queue queue;  // always drained by EncodeChunk
  if (!vocab.split_before_spaces) {
    EncodeChunk(vocab, text, syms, queue, out);
    return;
  }
  // Chunks end before each U+2581 symbol that follows a non-U+2581 symbol.
  // Walking symbols the way EncodeChunk splits them keeps chunk boundaries on
  // symbol boundaries even for invalid UTF-8.
  size_t begin = 0;
  bool prev_space = false;
  for (size_t off = 0; off < text.size();) {
    const size_t n = std::min(text.size() - off, Utf8SeqLen(static_cast<uint8_t>(text[off])));
    const bool space = text.substr(off, n) == kSpace;
    if (space && !prev_space && off > begin) {
      EncodeChunk(vocab, text.substr(begin, off - begin), syms, queue, out);
      begin = off;
    }
    prev_space = space;
    off += n;
  }
  EncodeChunk(vocab, text.substr(begin), syms, queue, out);
}

}  // namespace llm
