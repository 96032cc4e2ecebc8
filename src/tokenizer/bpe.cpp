#include "tokenizer/bpe.h"

#include <algorithm>

#include "core/oom_safe.h"
#include "core/status.h"
#include "tokenizer/unicode.h"

namespace llm {

int32_t BpeMerges::Lookup(std::string_view text) const {
  auto it = token_to_id_->find(AbslView(text));
  if (it != token_to_id_->end()) return it->second;
  auto jt = extra_.find(AbslView(text));
  return jt != extra_.end() ? jt->second : -1;
}

int32_t BpeMerges::Intern(std::string_view text) {
  const int32_t id = Lookup(text);
  if (id >= 0) return id;
  const int32_t new_id = n_vocab_ + static_cast<int32_t>(extra_.size());
  extra_.emplace(std::string(text), new_id);
  return new_id;
}

absl::StatusOr<BpeMerges> BpeMerges::Build(const TokenMap* token_to_id, int32_t n_vocab,
                                           const std::vector<std::string_view>& merges) {
  BpeMerges m;
  m.token_to_id_ = token_to_id;
  m.n_vocab_ = n_vocab;
  if (merges.size() > static_cast<size_t>(INT32_MAX / 4)) {
    return Error(LLM_ERR_BAD_MODEL, "tokenizer.ggml.merges: too many merges");
  }
  ReserveEmpty(m.merges_, merges.size());  // core/oom_safe.h
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string_view s = merges[i];
    // Split at the first space after the first byte, as llama.cpp does (a
    // left part may itself be a space in non-byte-level vocabularies).
    const size_t sp = s.size() > 1 ? s.find(' ', 1) : std::string_view::npos;
    if (sp == std::string_view::npos || sp + 1 >= s.size()) {
      return Errorf(LLM_ERR_BAD_MODEL, "tokenizer.ggml.merges[%d] is not 'left right': '%s'",
                    static_cast<int>(i), std::string(s.substr(0, 64)));
    }
    const std::string_view left = s.substr(0, sp);
    const std::string_view right = s.substr(sp + 1);
    const int32_t l = m.Intern(left);
    const int32_t r = m.Intern(right);
    joined.assign(left.data(), left.size());
    joined.append(right.data(), right.size());
    const int32_t res = m.Intern(joined);
    const uint64_t key =
        (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
    m.merges_.emplace(key, Merge{static_cast<int32_t>(i), res});  // first rank wins
  }
  // llama.cpp falls back, for a piece outside the vocabulary, to the tokens
  // of the single bytes of its encoded text; precompute that per raw byte.
  for (int b = 0; b < 256; ++b) {
    const std::string& enc = ByteToUnicodeUtf8(static_cast<uint8_t>(b));
    m.byte_sym_[b] = m.Lookup(enc);
    for (char c : enc) {
      auto it = token_to_id->find(absl::string_view(&c, 1));
      if (it != token_to_id->end()) m.byte_fallback_[b].push_back(it->second);
    }
  }
  return m;
}

void BpeMerges::EncodeWord(std::string_view word, Scratch* scratch,
                           std::vector<int32_t>* out) const {
  using Sym = Scratch::Sym;
  using Pair = Scratch::Pair;
  // Heap order: lowest rank first, then leftmost.
  auto later = [](const Pair& a, const Pair& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  std::vector<Sym>& syms = scratch->syms;
  std::vector<Pair>& heap = scratch->heap;
  syms.clear();
  heap.clear();
  const int32_t n = static_cast<int32_t>(word.size());
  for (int32_t i = 0; i < n; ++i) {
    syms.push_back(Sym{byte_sym_[static_cast<uint8_t>(word[i])], static_cast<uint32_t>(i), 1u,
                       i - 1, i + 1 < n ? i + 1 : -1});
  }
  auto add_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const int32_t lid = syms[l].id, rid = syms[r].id;
    if (lid < 0 || rid < 0) return;
    const uint64_t key =
        (static_cast<uint64_t>(static_cast<uint32_t>(lid)) << 32) | static_cast<uint32_t>(rid);
    auto it = merges_.find(key);
    if (it == merges_.end()) return;
    heap.push_back(Pair{it->second.rank, l, r, lid, rid, it->second.result});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 1; i < n; ++i) add_pair(i - 1, i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Pair p = heap.back();
    heap.pop_back();
    Sym& l = syms[p.left];
    Sym& r = syms[p.right];
    // Stale if either side was merged away or has grown since the push.
    if (l.len == 0 || r.len == 0 || l.id != p.left_id || r.id != p.right_id) continue;
    l.id = p.result;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = p.left;
    add_pair(l.prev, p.left);
    add_pair(p.left, l.next);
  }
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = syms[i].next) {
    const Sym& s = syms[i];
    if (s.id >= 0 && s.id < n_vocab_) {
      out->push_back(s.id);
      continue;
    }
    for (uint32_t k = 0; k < s.len; ++k) {
      const auto& fb = byte_fallback_[static_cast<uint8_t>(word[s.start + k])];
      out->insert(out->end(), fb.begin(), fb.end());
    }
  }
}

}  // namespace llm
