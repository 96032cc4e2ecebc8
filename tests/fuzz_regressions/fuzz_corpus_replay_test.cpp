// Replays the committed libFuzzer corpora (fuzz/corpus/<target>/) through the
// same entry points as the fuzz targets, in the ordinary test binary, so that
// every build (Release, ASan/UBSan, TSan) re-checks the inputs the long fuzz
// runs kept: each must give a result or a status with a message — never a
// crash, sanitizer report or leak. Crash-specific regression tests live next
// to this file (one per finding, see docs/FUZZING.md).
#include <dirent.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/model.h"
#include "format/gguf.h"
#include "gtest/gtest.h"
#include "tokenizer/chat_template.h"

namespace llm {
namespace {

std::vector<std::string> CorpusFiles(const std::string& target) {
  const std::string dir = std::string(LLM_SOURCE_DIR) + "/fuzz/corpus/" + target;
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') files.push_back(dir + "/" + e->d_name);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

TEST(FuzzCorpusReplay, GgufParse) {
  const auto files = CorpusFiles("gguf_parse_fuzzer");
  ASSERT_FALSE(files.empty()) << "fuzz/corpus/gguf_parse_fuzzer is missing";
  int ok = 0;
  for (const std::string& path : files) {
    const std::vector<uint8_t> bytes = ReadAll(path);
    auto f = GgufFile::Parse(bytes.data(), bytes.size());
    if (f.ok()) {
      ++ok;
      for (const GgufTensor& t : (*f)->tensors()) {
        ASSERT_LE(t.offset, bytes.size()) << path;
        ASSERT_LE(t.n_bytes, bytes.size() - t.offset) << path;
      }
    } else {
      EXPECT_FALSE(f.status().message().empty()) << path;
    }
  }
  EXPECT_GT(ok, 0) << "no corpus file parses: the seeds are gone";
}

TEST(FuzzCorpusReplay, ModelLoad) {
  const auto files = CorpusFiles("model_load_fuzzer");
  ASSERT_FALSE(files.empty()) << "fuzz/corpus/model_load_fuzzer is missing";
  ModelLoadOptions options;
  options.n_threads = 1;
  int ok = 0;
  for (const std::string& path : files) {
    const std::vector<uint8_t> bytes = ReadAll(path);
    auto m = Model::LoadMemory(bytes.data(), bytes.size(), options);
    if (m.ok()) {
      ++ok;
      EXPECT_EQ((*m)->tokenizer().n_vocab(), (*m)->hparams().n_vocab) << path;
    } else {
      EXPECT_FALSE(m.status().message().empty()) << path;
    }
  }
  EXPECT_GT(ok, 0) << "no corpus model loads: the seeds are gone";
}

TEST(FuzzCorpusReplay, ChatTemplateDetect) {
  const auto files = CorpusFiles("chat_format_fuzzer");
  ASSERT_FALSE(files.empty()) << "fuzz/corpus/chat_format_fuzzer is missing";
  for (const std::string& path : files) {
    const std::vector<uint8_t> bytes = ReadAll(path);
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    auto info = DetectChatTemplateInfo(text);
    if (!info.ok()) {
      EXPECT_FALSE(info.status().message().empty()) << path;
    }
    const ChatMessage msgs[] = {{"user", text}, {"assistant", text}};
    auto out = FormatChat(ChatTemplate::kChatML, msgs, true, "");
    EXPECT_TRUE(out.ok()) << path;
  }
}

}  // namespace
}  // namespace llm
