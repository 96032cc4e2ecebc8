// The device choice of llm_model_params (0.3): AUTO and CPU run on the CPU
// and llm_model_get_info says so; CUDA in a build without the CUDA backend is
// LLM_ERR_UNSUPPORTED with a message, never a silent CPU fallback; bad values
// are refused. The same for vocab_only loads.
#include <cstddef>
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "llm/llm.h"
#include "test_util.h"

namespace {

std::string TinyModel() { return llm_abi_test::TinyModelDir() + "/tiny-llama-Q8_0.gguf"; }

llm_status Load(int32_t device, int32_t index, int32_t vocab_only, llm_model **out) {
  llm_model_params p;
  llm_model_params_init(&p);
  p.device = device;
  p.device_index = index;
  p.vocab_only = vocab_only;
  p.n_threads = 1;
  return llm_model_load(TinyModel().c_str(), &p, out);
}

TEST(AbiDevice, AutoAndCpuRunOnTheCpu) {
  for (int32_t device : {LLM_DEVICE_AUTO, LLM_DEVICE_CPU}) {
    for (int32_t vocab_only : {0, 1}) {
      llm_model *m = nullptr;
      ASSERT_EQ(Load(device, 0, vocab_only, &m), LLM_OK) << llm_last_error();
      llm_model_info info;
      llm_model_info_init(&info);
      ASSERT_EQ(llm_model_get_info(m, &info), LLM_OK);
      EXPECT_EQ(info.device, LLM_DEVICE_CPU);
      EXPECT_EQ(info.device_index, 0);
      llm_model_free(m);
    }
  }
}

TEST(AbiDevice, CudaWithoutTheCudaBackendIsUnsupported) {
  for (int32_t vocab_only : {0, 1}) {
    llm_model *m = nullptr;
    EXPECT_EQ(Load(LLM_DEVICE_CUDA, 0, vocab_only, &m), LLM_ERR_UNSUPPORTED);
    EXPECT_EQ(m, nullptr);
    EXPECT_NE(std::string(llm_last_error()).find("CUDA"), std::string::npos) << llm_last_error();
  }
}

TEST(AbiDevice, BadChoicesAreRefused) {
  llm_model *m = nullptr;
  EXPECT_EQ(Load(3, 0, 0, &m), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("device"), std::string::npos);
  EXPECT_EQ(Load(-1, 0, 0, &m), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Load(LLM_DEVICE_AUTO, -1, 0, &m), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Load(LLM_DEVICE_CPU, 1, 0, &m), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("device_index"), std::string::npos);
  EXPECT_EQ(m, nullptr);
}

TEST(AbiDevice, OlderCallersGetTheCpuInfoTheyKnow) {
  // A 0.1 caller's llm_model_info (224 bytes) ends before device_index; the
  // getter writes no more than that.
  llm_model *m = nullptr;
  ASSERT_EQ(Load(LLM_DEVICE_AUTO, 0, 0, &m), LLM_OK);
  unsigned char buf[sizeof(llm_model_info) + 8];
  memset(buf, 0xA5, sizeof buf);
  llm_model_info *info = reinterpret_cast<llm_model_info *>(buf);
  info->struct_size = offsetof(llm_model_info, device_index);
  ASSERT_EQ(llm_model_get_info(m, info), LLM_OK) << llm_last_error();
  for (size_t i = offsetof(llm_model_info, device_index); i < sizeof buf; ++i) {
    ASSERT_EQ(buf[i], 0xA5) << "written at byte " << i;
  }
  llm_model_free(m);
}

}  // namespace
