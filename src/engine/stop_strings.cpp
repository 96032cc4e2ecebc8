#include "engine/stop_strings.h"

#include <algorithm>

namespace llm {

std::string StopStringFilter::Push(std::string_view text, bool* stopped) {
  pending_.append(text);
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) {
    if (!s.empty()) cut = std::min(cut, pending_.find(s));
  }
  if (cut != std::string::npos) {
    *stopped = true;
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stop_) {
    if (s.empty()) continue;
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

}  // namespace llm
