// Holds back generated text while its tail could still grow into a stop
// string, so a stop string is never shown to the user, even when it arrives
// split over several tokens.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llm {

class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stop) : stop_(std::move(stop)) {}

  // Appends text. Returns the text that is safe to emit; sets *stopped when a
  // stop string appeared (the text before it is returned, the rest dropped).
  std::string Push(std::string_view text, bool* stopped);

  // The held-back text, once generation ended without a stop string.
  std::string Flush() { return std::exchange(pending_, std::string()); }

 private:
  std::vector<std::string> stop_;
  std::string pending_;
};

}  // namespace llm
