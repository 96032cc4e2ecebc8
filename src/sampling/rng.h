// The sampler's random number generator: xoshiro256** (Blackman & Vigna),
// seeded from one uint64 through splitmix64 as its authors recommend.
//
// Why not std::mt19937_64 + std::uniform_real_distribution: the standard
// distributions are not specified bit-for-bit (results differ between
// libstdc++, libc++ and MSVC), and mt19937's 2.5 KB state is awkward to save
// with a session. xoshiro256** is fast, has 32 bytes of state that state() /
// set_state() expose, and gives the same numbers on every platform.
#pragma once

#include <array>
#include <cstdint>

#include "absl/status/status.h"

namespace llm {

class Rng {
 public:
  // Seeds the four state words with four consecutive splitmix64 outputs.
  explicit Rng(uint64_t seed);

  // Next 64 random bits.
  uint64_t Next();

  // Uniform double in [0, 1): the top 53 bits of Next() times 2^-53.
  double Uniform();

  // The full generator state; set_state(state()) resumes the same sequence.
  std::array<uint64_t, 4> state() const { return s_; }

  // All-zero is the one state xoshiro can never leave (it would output zeros
  // forever), so it is refused with LLM_ERR_INVALID_ARGUMENT and the state
  // is left unchanged.
  absl::Status set_state(const std::array<uint64_t, 4>& state);

 private:
  std::array<uint64_t, 4> s_;
};

// One splitmix64 step: advances *x and returns the mixed output.
uint64_t SplitMix64(uint64_t* x);

}  // namespace llm
