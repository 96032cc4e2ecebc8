// Keeping Abseil's Swiss tables safe when an allocation fails.
//
// The Abseil in Debian 12 (20220623) is not exception-safe under
// std::bad_alloc: raw_hash_set::resize() stores the new capacity before it
// allocates, and emplace marks a slot full before it constructs the element.
// A throw at either point leaves a table whose destructor reads past its
// control bytes and frees memory it does not own (found by the OOM sweep,
// tests/robustness/oom_sweep.cpp: a crash freeing the static empty group).
//
// Two rules keep a table safe where an allocation may fail:
//  1. Grow it only while it is empty, to its final size, with ReserveEmpty
//     (on failure the table is reset to a fresh empty one without running its
//     destructor: an empty table owns no memory, so nothing leaks).
//  2. Insert only elements whose construction cannot throw: moved
//     std::strings, integers, string_views, PODs.
// Tables that grow at run time with no known final size should be
// std::unordered_map (strong guarantee on single inserts) instead.
#pragma once

#include <cstddef>
#include <new>

namespace llm {

// map must be empty. After it returns, map takes n inserts without growing.
template <typename Map>
void ReserveEmpty(Map& map, size_t n) {
  try {
    map.reserve(n);
  } catch (...) {
    new (&map) Map();  // deliberately no destructor: see above
    throw;
  }
}

}  // namespace llm
