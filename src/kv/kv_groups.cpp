#include "kv/kv_groups.h"

#include <algorithm>

namespace llm {

KvGroups KvGroups::ForWindows(absl::Span<const int64_t> layer_window) {
  std::vector<int64_t> distinct(layer_window.begin(), layer_window.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (distinct.empty()) distinct.push_back(0);
  if (distinct.size() > 2) distinct.assign(1, 0);  // one full group
  KvGroups out;
  out.groups.resize(distinct.size());
  for (size_t g = 0; g < distinct.size(); ++g) out.groups[g].window = distinct[g];
  out.group_of.resize(layer_window.size());
  out.slot_of.resize(layer_window.size());
  for (size_t l = 0; l < layer_window.size(); ++l) {
    const size_t g = distinct.size() == 1
                         ? 0
                         : static_cast<size_t>(std::lower_bound(distinct.begin(), distinct.end(),
                                                                layer_window[l]) -
                                               distinct.begin());
    out.group_of[l] = static_cast<int32_t>(g);
    out.slot_of[l] = static_cast<int64_t>(out.groups[g].layers.size());
    out.groups[g].layers.push_back(static_cast<int64_t>(l));
  }
  return out;
}

}  // namespace llm
