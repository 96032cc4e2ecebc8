// The committed tiny models (tools/make_tiny_models.py -> tests/data/tiny/)
// parse, carry the documented hyper-parameters and tokenizer metadata, and
// every weight matrix dequantizes to finite values with the generator's
// statistics (std ~0.02), so a layout slip in either side shows up here.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/dequantize.h"
#include "core/status.h"
#include "format/gguf.h"
#include "gtest/gtest.h"

namespace llm {
namespace {

std::string TinyPath(const std::string& type) {
  const char* dir = std::getenv("LLM_TINY_MODEL_DIR");
  const std::string d = (dir != nullptr && *dir != '\0') ? dir : std::string(LLM_TEST_DATA_DIR) + "/tiny";
  return d + "/tiny-llama-" + type + ".gguf";
}

class TinyModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TinyModelTest, ParsesAndDequantizes) {
  const std::string type = GetParam();
  auto f = GgufFile::Open(TinyPath(type));
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  EXPECT_EQ(**g.GetString("general.architecture"), "llama");
  EXPECT_EQ(**g.GetUint("llama.embedding_length"), 256u);
  EXPECT_EQ(**g.GetUint("llama.feed_forward_length"), 512u);
  EXPECT_EQ(**g.GetUint("llama.block_count"), 2u);
  EXPECT_EQ(**g.GetUint("llama.attention.head_count"), 4u);
  EXPECT_EQ(**g.GetUint("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(**g.GetUint("llama.context_length"), 256u);
  EXPECT_FLOAT_EQ(static_cast<float>(**g.GetFloat("llama.rope.freq_base")), 10000.0f);
  EXPECT_FLOAT_EQ(static_cast<float>(**g.GetFloat("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(**g.GetString("tokenizer.ggml.model"), "llama");
  auto tokens = g.GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  EXPECT_EQ((*tokens)[3], "<0x00>");
  EXPECT_EQ((*tokens)[258], "<0xFF>");
  EXPECT_EQ(g.GetFloatArray("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ(g.GetIntArray("tokenizer.ggml.token_type")->size(), 512u);
  EXPECT_EQ(**g.GetUint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(**g.GetUint("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(g.tensors().size(), 3u + 2 * 9);

  const GgufTensor* k = g.FindTensor("blk.1.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->dims, (std::vector<uint64_t>{256, 128}));  // rows of 256, 2 kv heads x 64
  ASSERT_NE(g.FindTensor("output.weight"), nullptr);

  for (const GgufTensor& t : g.tensors()) {
    std::vector<float> row(t.dims[0]);
    const uint64_t rows = t.n_elements / t.dims[0];
    const size_t row_bytes = t.n_bytes / rows;
    double sum = 0, sum2 = 0;
    for (uint64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(DequantizeRow(t.type, t.data + r * row_bytes, row.size(), row.data()).ok()) << t.name;
      for (float v : row) {
        ASSERT_TRUE(std::isfinite(v)) << t.name;
        sum += v;
        sum2 += static_cast<double>(v) * v;
      }
    }
    const double mean = sum / t.n_elements;
    const double sd = std::sqrt(sum2 / t.n_elements - mean * mean);
    if (t.dims.size() == 1) {  // norms: F32, 1 + N(0, 0.05)
      EXPECT_EQ(t.type, DType::kF32) << t.name;
      EXPECT_NEAR(mean, 1.0, 0.02) << t.name;
    } else {
      EXPECT_EQ(GetDTypeTraits(static_cast<uint32_t>(t.type))->name, type) << t.name;
      EXPECT_NEAR(mean, 0.0, 0.002) << t.name;
      EXPECT_NEAR(sd, 0.02, 0.002) << t.name;
    }
  }
}

TEST_P(TinyModelTest, SameWeightsAcrossTypes) {
  // Every file holds the same float weights: each dequantized matrix is close
  // to the F16 one (within the type's quantization step).
  auto q = GgufFile::Open(TinyPath(GetParam()));
  auto ref = GgufFile::Open(TinyPath("F16"));
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_TRUE(ref.ok()) << ref.status();
  const GgufTensor* a = (*q)->FindTensor("blk.0.ffn_down.weight");
  const GgufTensor* b = (*ref)->FindTensor("blk.0.ffn_down.weight");
  ASSERT_TRUE(a != nullptr && b != nullptr);
  std::vector<float> x(a->n_elements), y(b->n_elements);
  ASSERT_TRUE(DequantizeRow(a->type, a->data, x.size(), x.data()).ok());
  ASSERT_TRUE(DequantizeRow(b->type, b->data, y.size(), y.data()).ok());
  double max_err = 0;
  for (size_t j = 0; j < x.size(); ++j) max_err = std::max(max_err, static_cast<double>(std::fabs(x[j] - y[j])));
  EXPECT_LT(max_err, 0.025) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(AllTypes, TinyModelTest, ::testing::Values("F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace llm
