// DequantizeRow against goldens from the gguf Python package
// (tools/gen_dequant_goldens.py -> tests/data/dequant/<TYPE>.bin): the float32
// output must be bit-identical for every element.
#include "backend/cpu/dequantize.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "gtest/gtest.h"

namespace llm {
namespace {

struct Golden {
  DType type;
  uint32_t n_elements = 0;
  std::vector<uint8_t> src;
  std::vector<float> expected;
};

// Layout documented in tools/gen_dequant_goldens.py.
bool LoadGolden(const std::string& name, Golden* g, std::string* err) {
  const std::string path = std::string(LLM_TEST_DATA_DIR) + "/dequant/" + name + ".bin";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *err = "cannot open " + path;
    return false;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 16 || std::memcmp(bytes.data(), "DQG1", 4) != 0) {
    *err = "bad golden header in " + path;
    return false;
  }
  uint32_t type_id, n, n_src;
  std::memcpy(&type_id, bytes.data() + 4, 4);
  std::memcpy(&n, bytes.data() + 8, 4);
  std::memcpy(&n_src, bytes.data() + 12, 4);
  if (bytes.size() != 16 + static_cast<size_t>(n_src) + 4 * static_cast<size_t>(n)) {
    *err = "bad golden size in " + path;
    return false;
  }
  g->type = static_cast<DType>(type_id);
  g->n_elements = n;
  g->src.assign(bytes.begin() + 16, bytes.begin() + 16 + n_src);
  g->expected.resize(n);
  std::memcpy(g->expected.data(), bytes.data() + 16 + n_src, 4 * static_cast<size_t>(n));
  return true;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

class DequantizeGoldenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DequantizeGoldenTest, BitExactWithGgufPackage) {
  Golden g;
  std::string err;
  ASSERT_TRUE(LoadGolden(GetParam(), &g, &err)) << err;
  const auto traits = GetDTypeTraits(static_cast<uint32_t>(g.type));
  ASSERT_TRUE(traits.has_value());
  ASSERT_STREQ(traits->name, GetParam());
  ASSERT_EQ(RowBytes(g.type, g.n_elements), g.src.size());

  // Whole buffer at once, from a deliberately misaligned source address.
  std::vector<uint8_t> shifted(g.src.size() + 1);
  std::memcpy(shifted.data() + 1, g.src.data(), g.src.size());
  std::vector<float> out(g.n_elements, -12345.0f);
  ASSERT_TRUE(DequantizeRow(g.type, shifted.data() + 1, g.n_elements, out.data()).ok());
  int mismatches = 0;
  for (uint32_t j = 0; j < g.n_elements; ++j) {
    if (Bits(out[j]) != Bits(g.expected[j]) && ++mismatches <= 5) {
      ADD_FAILURE() << GetParam() << " element " << j << " (block " << j / traits->block_elems << "): got "
                    << out[j] << " expected " << g.expected[j];
    }
  }
  EXPECT_EQ(mismatches, 0);

  // Block by block (as a kernel dequantizing one block of a row would).
  std::vector<float> out2(traits->block_elems);
  for (size_t b = 0; b * traits->block_elems < g.n_elements; ++b) {
    ASSERT_TRUE(
        DequantizeRow(g.type, g.src.data() + b * traits->block_bytes, traits->block_elems, out2.data()).ok());
    ASSERT_EQ(0, std::memcmp(out2.data(), g.expected.data() + b * traits->block_elems, 4 * traits->block_elems))
        << "block " << b;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantizeGoldenTest,
                         ::testing::Values("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0",
                                           "Q5_1", "IQ4_NL", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
                                           "Q6_K", "IQ4_XS"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

TEST(DequantizeTest, RejectsPartialBlocks) {
  std::vector<uint8_t> src(1024, 0);
  std::vector<float> dst(512);
  EXPECT_EQ(ToLlmStatus(DequantizeRow(DType::kQ4_0, src.data(), 33, dst.data())), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ToLlmStatus(DequantizeRow(DType::kQ4_K, src.data(), 128, dst.data())), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ToLlmStatus(DequantizeRow(DType::kQ8_0, nullptr, 32, dst.data())), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ToLlmStatus(DequantizeRow(DType::kQ8_0, src.data(), 32, nullptr)), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(DequantizeRow(DType::kQ8_0, nullptr, 0, nullptr).ok());
}

TEST(DequantizeTest, RejectsUnsupportedTypes) {
  std::vector<uint8_t> src(1024, 0);
  std::vector<float> dst(256);
  EXPECT_EQ(ToLlmStatus(DequantizeRow(DType::kQ8_K, src.data(), 256, dst.data())), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(ToLlmStatus(DequantizeRow(DType::kI32, src.data(), 4, dst.data())), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(ToLlmStatus(DequantizeRow(static_cast<DType>(99), src.data(), 4, dst.data())), LLM_ERR_UNSUPPORTED);
}

// Hand-built blocks checked against the GGML formulas written out directly
// (independent of the golden files).
TEST(DequantizeTest, HandBuiltQ8_0AndQ4_1) {
  uint8_t q8[34];
  const uint16_t d = 0x3800;  // 0.5 in f16
  std::memcpy(q8, &d, 2);
  for (int j = 0; j < 32; ++j) q8[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 7 - 100));
  float out[32];
  ASSERT_TRUE(DequantizeRow(DType::kQ8_0, q8, 32, out).ok());
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * static_cast<float>(j * 7 - 100)) << j;

  uint8_t q41[20];
  const uint16_t m = 0xBC00;  // -1.0
  std::memcpy(q41, &d, 2);
  std::memcpy(q41 + 2, &m, 2);
  for (int j = 0; j < 16; ++j) q41[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  ASSERT_TRUE(DequantizeRow(DType::kQ4_1, q41, 32, out).ok());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * j - 1.0f) << j;
    EXPECT_EQ(out[j + 16], 0.5f * (15 - j) - 1.0f) << j;
  }
}

}  // namespace
}  // namespace llm
