// What a load keeps in memory: with the CPU backend's repacking on, the
// copied matrices are no longer read from the file mapping (so the load does
// not prefault their pages and resident memory is about the file's size, not
// file + copy), the copy is no larger than the file, and the logits are the
// same bits as with repacking off (LLM_CPU_REPACK=0). Tiny generated models
// (tests/data/tiny, n_embd 64: every matrix a whole number of 32-blocks).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/quant_matmul.h"
#include "engine/model.h"
#include "engine/session.h"
#include "engine_test_util.h"
#include "format/gguf.h"
#include "gtest/gtest.h"

namespace llm {
namespace {

std::string TinyPath(const std::string& type) {
  return std::string(LLM_TEST_DATA_DIR) + "/tiny/tiny-llama-" + type + ".gguf";
}

// Sets LLM_CPU_REPACK for one scope (the CPU backend reads it per matrix).
class RepackEnv {
 public:
  explicit RepackEnv(bool on) {
    if (const char* v = std::getenv("LLM_CPU_REPACK")) saved_ = v, had_ = true;
    if (on) {
      unsetenv("LLM_CPU_REPACK");
    } else {
      setenv("LLM_CPU_REPACK", "0", 1);
    }
  }
  ~RepackEnv() {
    if (had_) {
      setenv("LLM_CPU_REPACK", saved_.c_str(), 1);
    } else {
      unsetenv("LLM_CPU_REPACK");
    }
  }

 private:
  std::string saved_;
  bool had_ = false;
};

struct Loaded {
  std::shared_ptr<Model> model;
  std::vector<std::vector<float>> logits;  // after the prompt, then after each decode step
};

Loaded LoadAndRun(const std::string& path, bool repack) {
  RepackEnv env(repack);
  Loaded out;
  ModelLoadOptions options;
  options.n_threads = 2;
  auto model = Model::LoadFile(path, options);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return out;
  out.model = *model;
  SessionOptions so;
  so.n_ctx = 64;
  so.n_threads = 2;
  so.sampler.temperature = 0;
  auto s = Session::Create(out.model, so);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return out;
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 5, 63, 7};  // 7 rows: a batch kernel
  EXPECT_TRUE((*s)->Prefill(prompt).ok());
  out.logits.emplace_back((*s)->logits().begin(), (*s)->logits().end());
  for (int i = 0; i < 3; ++i) {  // one-row kernel
    EXPECT_TRUE((*s)->Decode().ok());
    out.logits.emplace_back((*s)->logits().begin(), (*s)->logits().end());
  }
  return out;
}

struct FileBytes {
  uint64_t file = 0;      // the whole file
  uint64_t matrices = 0;  // tensors with two dims (what the backend multiplies or embeds)
  uint64_t embd = 0;      // token_embd.weight
};

FileBytes Measure(const std::string& path) {
  FileBytes b;
  auto gguf = GgufFile::Open(path);
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  if (!gguf.ok()) return b;
  b.file = (*gguf)->size();
  for (const GgufTensor& t : (*gguf)->tensors()) {
    if (t.dims.size() == 2) b.matrices += t.n_bytes;
    if (t.name == "token_embd.weight") b.embd = t.n_bytes;
  }
  return b;
}

class WeightMemoryTest : public ::testing::TestWithParam<const char*> {};

TEST_P(WeightMemoryTest, RepackedMatricesAreNotReadFromTheMappingAndGiveTheSameLogits) {
  const std::string path = TinyPath(GetParam());
  const FileBytes file = Measure(path);
  ASSERT_GT(file.matrices, 0u);
  const Loaded off = LoadAndRun(path, false);
  const Loaded on = LoadAndRun(path, true);
  ASSERT_NE(off.model, nullptr);
  ASSERT_NE(on.model, nullptr);

  // (a) The same bits, prompt and decode steps.
  ASSERT_EQ(off.logits.size(), on.logits.size());
  for (size_t i = 0; i < off.logits.size(); ++i) {
    ASSERT_EQ(off.logits[i].size(), on.logits[i].size());
    EXPECT_EQ(std::memcmp(off.logits[i].data(), on.logits[i].data(),
                          off.logits[i].size() * sizeof(float)),
              0)
        << "step " << i;
  }

  // Without repacking, every matrix is read from the mapping; the only
  // copies are the f32 norm vectors (small).
  EXPECT_EQ(off.model->mapped_weight_bytes(), file.matrices);
  EXPECT_LT(off.model->weight_copy_bytes(), file.file / 10);

  // (b) With it, only the embedding table (Embed reads its rows) is still
  // read from the mapping; the copies (the rows16 layout on AVX-512 hosts,
  // else the rows as they are) replace the rest and are no larger than the
  // file.
  EXPECT_EQ(on.model->mapped_weight_bytes(), file.embd);
  const uint64_t copied = on.model->weight_copy_bytes() - off.model->weight_copy_bytes();
  EXPECT_GE(copied, file.matrices - file.embd);  // every other matrix has a copy
  EXPECT_LE(on.model->weight_copy_bytes(), file.file);
  EXPECT_LE(on.model->mapped_weight_bytes() + on.model->weight_copy_bytes(),
            file.file + file.file / 10);
}

// Q4_0 / Q8_0: rows16 copies (AVX-512); Q4_K: rows16 on AVX-512 without AMX,
// else plain; F16 and Q6_K: plain copies.
INSTANTIATE_TEST_SUITE_P(Types, WeightMemoryTest,
                         ::testing::Values("Q4_0", "Q8_0", "F16", "Q4_K", "Q6_K"));

// From a caller's buffer, which is never released, a plain copy would only
// add memory: a type without a rows16 layout (F16) is read in place.
TEST(WeightMemoryLoadTest, CallersBufferGetsNoPlainCopies) {
  const std::string path = TinyPath("F16");
  const FileBytes file = Measure(path);
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), file.file);
  RepackEnv env(true);
  auto model = Model::LoadMemory(bytes.data(), bytes.size(), ModelLoadOptions{});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->mapped_weight_bytes(), file.matrices);
  EXPECT_LT((*model)->weight_copy_bytes(), file.file / 10);
}

// Resident bytes of the first mapping whose smaps header line `is` says
// (e.g. ends with a file's path), or -1.
template <typename Is>
long long SmapsRssBytes(const Is& is_header) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    if (!in && is_header(line)) {
      in = true;
    } else if (in && line.rfind("Rss:", 0) == 0) {
      std::istringstream is(line.substr(4));
      long long kb = 0;
      is >> kb;
      return kb * 1024;
    }
  }
  return -1;
}

// Resident bytes of the mapping that starts at `start` (/proc/self/smaps),
// or -1 when it is not found.
long long MappingRssBytes(const void* start) {
  char want[32];
  std::snprintf(want, sizeof want, "%lx-", reinterpret_cast<unsigned long>(start));
  return SmapsRssBytes([&](const std::string& line) { return line.rfind(want, 0) == 0; });
}

// A model loaded from a caller's buffer: the caller's memory is only read,
// never released -- here a private file mapping the caller made, whose pages
// all stay resident through a load that repacks. The real model (SmolLM2
// Q4_1): the tiny models' matrices are smaller than a page, so nothing of
// theirs could be released anyway.
TEST(WeightMemoryLoadTest, CallersBufferIsNeverReleased) {
  // A caller's buffer gets rows16 copies only (no plain copies): SmolLM2's
  // Q4_1 matrices have one at the AVX-512 level.
  if (!QuantMatMulReadsRows16(DType::kQ4_1)) GTEST_SKIP() << "no rows16 copy of Q4_1 here";
  const std::string path = testing::RealModelPath();
  LLM_REQUIRE_MODEL(path);
  FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::fseek(f, 0, SEEK_END);
  const long size = std::ftell(f);
  void* map = mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fileno(f), 0);
  std::fclose(f);
  ASSERT_NE(map, MAP_FAILED);
  volatile uint8_t sink = 0;
  for (long off = 0; off < size; off += 4096) sink = sink + static_cast<const uint8_t*>(map)[off];
  (void)sink;
  const long long before = MappingRssBytes(map);
  ASSERT_GE(before, size - 4096);
  {
    RepackEnv env(true);
    auto model = Model::LoadMemory(static_cast<const uint8_t*>(map), static_cast<size_t>(size),
                                   ModelLoadOptions{});
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_GT((*model)->weight_copy_bytes(), 0u);
    EXPECT_EQ(MappingRssBytes(map), before) << "the caller's pages were released";
  }
  munmap(map, static_cast<size_t>(size));
}

// The library's own mapping of the file: after a load that repacks, the
// repacked matrices' pages are not resident (dropped after packing and not
// prefaulted again), so the mapping's resident bytes are about what passes
// read in place plus the metadata, not the whole file; without repacking
// the whole file is resident. SmolLM2 Q4_1 (tied embedding table).
TEST(WeightMemoryLoadTest, RepackedPagesOfTheLibrarysMappingAreNotResident) {
  // At every level: matrices without a rows16 copy get plain copies.
  const std::string path = testing::RealModelPath();
  LLM_REQUIRE_MODEL(path);
  char resolved[4096];
  ASSERT_NE(realpath(path.c_str(), resolved), nullptr);
  const std::string suffix = std::string(" ") + resolved;
  auto mapping_rss = [&] {
    return SmapsRssBytes([&](const std::string& line) {
      return line.size() > suffix.size() &&
             line.compare(line.size() - suffix.size(), suffix.size(), suffix) == 0;
    });
  };
  const FileBytes file = Measure(path);
  for (bool repack : {true, false}) {
    SCOPED_TRACE(repack ? "repack on" : "repack off");
    RepackEnv env(repack);
    auto model = Model::LoadFile(path, ModelLoadOptions{});
    ASSERT_TRUE(model.ok()) << model.status();
    const long long rss = mapping_rss();
    ASSERT_GE(rss, 0) << "no mapping of " << resolved;
    if (repack) {
      // Slack: the partial pages at both ends of every tensor (4 MiB).
      EXPECT_LE(static_cast<uint64_t>(rss),
                (*model)->mapped_weight_bytes() + (file.file - file.matrices) + (4u << 20));
      EXPECT_LT(static_cast<uint64_t>(rss), file.file / 2);
    } else {
      EXPECT_GE(static_cast<uint64_t>(rss), file.matrices);
    }
  }
}

}  // namespace
}  // namespace llm
