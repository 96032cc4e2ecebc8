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

#include <zlib.h>

#include "engine/model.h"
#include "engine/session.h"
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

// Saved-session buffers (fuzz/session_load_fuzzer.cpp: byte 0 is the mode:
// bit 0 re-computes the CRC-32 trailer, bit 1 loads into an F32-cache
// session; the rest is the buffer), loaded into a fresh session of the tiny
// model: a status with a message, or a session that holds what it says.
TEST(FuzzCorpusReplay, SessionLoad) {
  const auto files = CorpusFiles("session_load_fuzzer");
  ASSERT_FALSE(files.empty()) << "fuzz/corpus/session_load_fuzzer is missing";
  ModelLoadOptions options;
  options.n_threads = 1;
  auto model = Model::LoadFile(std::string(LLM_TEST_DATA_DIR) + "/tiny/tiny-llama-Q8_0.gguf", options);
  ASSERT_TRUE(model.ok()) << model.status();
  int ok = 0;
  for (const std::string& path : files) {
    std::vector<uint8_t> bytes = ReadAll(path);
    if (bytes.empty()) continue;
    const uint8_t mode = bytes[0];
    bytes.erase(bytes.begin());
    if ((mode & 1) != 0 && bytes.size() >= 4) {
      const uLong crc = crc32(0L, bytes.data(), static_cast<uInt>(bytes.size() - 4));
      for (int i = 0; i < 4; ++i) bytes[bytes.size() - 4 + i] = static_cast<uint8_t>(crc >> (8 * i));
    }
    SessionOptions so;
    so.n_ctx = 48;
    so.kv_type = (mode & 2) != 0 ? KvType::kF32 : KvType::kF16;
    auto session = Session::Create(*model, so);
    ASSERT_TRUE(session.ok()) << session.status();
    const absl::Status st = (*session)->Load(bytes.data(), bytes.size());
    if (st.ok()) {
      ++ok;
      EXPECT_LE(static_cast<int64_t>((*session)->tokens().size()), (*session)->n_ctx()) << path;
      EXPECT_EQ((*session)->kv().n_positions(), static_cast<int64_t>((*session)->tokens().size()))
          << path;
    } else {
      EXPECT_FALSE(st.message().empty()) << path;
      EXPECT_TRUE((*session)->tokens().empty()) << path;
    }
  }
  EXPECT_GT(ok, 0) << "no corpus buffer loads: the seeds are gone";
}

}  // namespace
}  // namespace llm
