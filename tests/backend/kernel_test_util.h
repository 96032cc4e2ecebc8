// Helpers for the CPU kernel tests: the random inputs of random_inputs.h and
// the SIMD levels this CPU runs.
#pragma once

#include <optional>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/quant_blocks.h"
#include "tests/backend/random_inputs.h"

namespace llm {
namespace testing_util {

// SIMD levels this CPU supports, lowest first.
inline std::vector<SimdLevel> SupportedLevels() {
  std::vector<SimdLevel> levels = {SimdLevel::kScalar};
  if (static_cast<int>(DetectSimdLevel()) >= static_cast<int>(SimdLevel::kAvx2))
    levels.push_back(SimdLevel::kAvx2);
  if (DetectSimdLevel() == SimdLevel::kAvx512) levels.push_back(SimdLevel::kAvx512);
  return levels;
}

// Restores auto-detection when a test ends (even on ASSERT failure).
struct SimdLevelGuard {
  ~SimdLevelGuard() { SetSimdLevelForTesting(std::nullopt); }
};

}  // namespace testing_util
}  // namespace llm
