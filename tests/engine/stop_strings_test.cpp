#include "engine/stop_strings.h"

#include "gtest/gtest.h"

namespace llm {
namespace {

// Feeds pieces one at a time; returns everything emitted and whether it stopped.
std::pair<std::string, bool> Feed(const std::vector<std::string>& stops,
                                  const std::vector<std::string>& pieces) {
  StopStringFilter filter(stops);
  std::string out;
  bool stopped = false;
  for (const std::string& p : pieces) {
    out += filter.Push(p, &stopped);
    if (stopped) return {out, true};
  }
  return {out + filter.Flush(), false};
}

TEST(StopStringFilter, StopStringSplitOverPiecesIsNeverEmitted) {
  auto [out, stopped] = Feed({"\nUser:"}, {"Hello", " there\nU", "se", "r: more"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(out, "Hello there");
}

TEST(StopStringFilter, PartialMatchThatFailsIsReleased) {
  StopStringFilter filter({"END"});
  bool stopped = false;
  EXPECT_EQ(filter.Push("abcE", &stopped), "abc");  // "E" might start "END"
  EXPECT_EQ(filter.Push("N", &stopped), "");
  EXPECT_EQ(filter.Push("x", &stopped), "ENx");
  EXPECT_FALSE(stopped);
}

TEST(StopStringFilter, EarliestOfSeveralStopStringsWins) {
  auto [out, stopped] = Feed({"bb", "a"}, {"xxbbya"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(out, "xx");
}

TEST(StopStringFilter, NoStopStringsPassesEverythingThrough) {
  auto [out, stopped] = Feed({}, {"a", "b", "c"});
  EXPECT_FALSE(stopped);
  EXPECT_EQ(out, "abc");
}

TEST(StopStringFilter, HeldTailIsFlushedAtTheEnd) {
  auto [out, stopped] = Feed({"STOP"}, {"go ST"});
  EXPECT_FALSE(stopped);
  EXPECT_EQ(out, "go ST");
}

}  // namespace
}  // namespace llm
