// The contract suite's float64 dequantizer (ref_dequantize.h) against the
// gguf package's goldens (tests/data/dequant, written by
// tools/gen_dequant_goldens.py; float32 values). float32 rounds each term of
// a value, so the float64 value is within a few float32 ulps of the golden,
// relative to the magnitude of its terms.
#include "tests/backend/contract/ref_dequantize.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "gtest/gtest.h"

namespace llm {
namespace contract {
namespace {

class RefDequantize : public ::testing::TestWithParam<const char*> {};

TEST_P(RefDequantize, MatchesGgufGoldens) {
  const std::string path = std::string(LLM_TEST_DATA_DIR) + "/dequant/" + GetParam() + ".bin";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path;
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), 16u);
  ASSERT_EQ(0, std::memcmp(bytes.data(), "DQG1", 4));
  uint32_t type_id, n, n_src;
  std::memcpy(&type_id, bytes.data() + 4, 4);
  std::memcpy(&n, bytes.data() + 8, 4);
  std::memcpy(&n_src, bytes.data() + 12, 4);
  ASSERT_EQ(bytes.size(), 16 + static_cast<size_t>(n_src) + 4 * static_cast<size_t>(n));
  const DType t = static_cast<DType>(type_id);
  ASSERT_TRUE(RefDequantizeSupports(t));
  std::vector<double> got(n), scale(n);
  ASSERT_TRUE(RefDequantizeRow(t, bytes.data() + 16, n, got.data(), scale.data()));
  int bad = 0;
  for (uint32_t i = 0; i < n; ++i) {
    float want;
    std::memcpy(&want, bytes.data() + 16 + n_src + 4 * i, 4);
    if (!(std::fabs(got[i] - want) <= 4e-7 * scale[i]) && ++bad <= 5) {
      ADD_FAILURE() << GetParam() << " element " << i << ": float64 " << got[i] << " golden "
                    << want;
    }
  }
  EXPECT_EQ(bad, 0);
}

INSTANTIATE_TEST_SUITE_P(BackendContractOracle, RefDequantize,
                         ::testing::Values("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K",
                                           "Q6_K", "Q5_0", "Q5_1", "IQ4_NL", "Q2_K", "Q3_K",
                                           "Q5_K", "IQ4_XS"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace contract
}  // namespace llm
