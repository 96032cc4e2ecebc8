// How a model's layers share KV block tables (docs/SLIDING_WINDOW.md).
//
// A model whose layers all have the same attention window keeps one KV
// group: every block holds every layer (kv_layout.h). A model mixing a
// window with full attention (Gemma 2/3: local and global layers) keeps two:
// group 0 holds the full-attention layers, group 1 the windowed ones, each
// in its own pool whose blocks hold only that group's layers, so a session's
// group-1 table can release the blocks its window has left while group 0
// keeps every position.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "kv/kv_layout.h"

namespace llm {

struct KvGroup {
  int64_t window = 0;           // the attention window of its layers (0: full)
  std::vector<int64_t> layers;  // model layers, ascending; layers[s] sits at slot s
};

struct KvGroups {
  std::vector<KvGroup> groups;  // 1 or 2
  std::vector<int32_t> group_of;  // [n_layer]: each layer's group
  std::vector<int64_t> slot_of;   // [n_layer]: its slot in the group's blocks

  size_t size() const { return groups.size(); }
  // The layout of group g's blocks: model's row shape, the group's layers.
  KvLayout Layout(const KvLayout& model, size_t g) const {
    return KvLayout{static_cast<int64_t>(groups[g].layers.size()), model.n_head_kv,
                    model.head_dim};
  }

  // The groups for per-layer windows (LlamaHParams::layer_window, 0 = full):
  // one group when every layer has the same window (or there are no
  // layers); two when the layers mix exactly two windows (the smaller, 0 for
  // full attention, is group 0); otherwise (more than two different windows,
  // which no supported architecture has) one full-attention group, which is
  // correct for any window, only not smaller.
  static KvGroups ForWindows(absl::Span<const int64_t> layer_window);
};

}  // namespace llm
