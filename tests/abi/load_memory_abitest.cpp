// The load's memory report (llm_model_info.mapped_weight_bytes and
// weight_copy_bytes, 0.3) and the load progress it goes with: the two byte
// counts cover the weights without counting any twice and the copies never
// exceed the file; the progress callback is called once per bound weight and
// per prefaulted weight, monotonically, ending at exactly 1.
#include <sys/stat.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "llm/llm.h"
#include "test_util.h"

namespace {

uint64_t FileSize(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

int32_t Record(float p, void *user) {
  static_cast<std::vector<float> *>(user)->push_back(p);
  return 0;
}

TEST(AbiLoadMemory, ReportCoversTheWeightsOnceAndProgressEndsAtOne) {
  for (const char *type : {"Q4_0", "Q8_0", "F16"}) {
    SCOPED_TRACE(type);
    const std::string path = llm_abi_test::TinyModelPath(type);
    const uint64_t file = FileSize(path);
    ASSERT_GT(file, 0u);
    std::vector<float> calls;
    llm_model_params mp;
    llm_model_params_init(&mp);
    mp.n_threads = 1;
    mp.progress = Record;
    mp.progress_user = &calls;
    llm_model *m = nullptr;
    ASSERT_EQ(llm_model_load(path.c_str(), &mp, &m), LLM_OK) << llm_last_error();
    llm_model_info info;
    llm_model_info_init(&info);
    ASSERT_EQ(llm_model_get_info(m, &info), LLM_OK);
    llm_model_free(m);
    // Some weight is read in place (at least the embedding table), the
    // copies are at most the file, and together they are no more than the
    // file's weights once (the f32 norm vectors may double an f16 norm:
    // a few hundred bytes here).
    EXPECT_GT(info.mapped_weight_bytes, 0u);
    EXPECT_LE(info.weight_copy_bytes, file);
    EXPECT_LE(info.mapped_weight_bytes + info.weight_copy_bytes, file + file / 10);
    // Progress: 0 first, 1 last, never decreasing, one call per weight at least.
    ASSERT_GE(calls.size(), 10u);
    EXPECT_EQ(calls.front(), 0.0f);
    EXPECT_EQ(calls.back(), 1.0f);
    for (size_t i = 1; i < calls.size(); ++i) EXPECT_GE(calls[i], calls[i - 1]) << "call " << i;
  }
}

TEST(AbiLoadMemory, VocabOnlyReportsNoWeights) {
  llm_model_params mp;
  llm_model_params_init(&mp);
  mp.vocab_only = 1;
  llm_model *m = nullptr;
  ASSERT_EQ(llm_model_load(llm_abi_test::TinyModelPath("Q4_0").c_str(), &mp, &m), LLM_OK)
      << llm_last_error();
  llm_model_info info;
  llm_model_info_init(&info);
  ASSERT_EQ(llm_model_get_info(m, &info), LLM_OK);
  EXPECT_EQ(info.mapped_weight_bytes, 0u);
  EXPECT_EQ(info.weight_copy_bytes, 0u);
  llm_model_free(m);
}

}  // namespace
