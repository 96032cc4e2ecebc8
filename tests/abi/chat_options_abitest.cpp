// llm_chat_format_ex and llm_chat_options through the public C ABI: models
// generated in memory that carry the official Llama 3.1, Qwen3 and Gemma 2
// templates (tests/data/chat/templates), the template variables
// (date_string, enable_thinking), the BOS/EOS overrides, an unknown template
// with the fallback to a built-in one, raise_exception refusals, and the
// options struct's size rules. Expected texts are jinja2 renderings of the
// official templates (tools/gen_chat_goldens.py renders the same way; the
// full goldens are checked in tests/tokenizer/chat_template_test.cpp).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gguf_writer.h"
#include "gtest/gtest.h"
#include "llm/llm.h"
#include "test_util.h"

namespace {

using llm_abi_test::BuildTinyModel;
using llm_abi_test::GgufImage;
using llm_abi_test::TinyModelOptions;

std::string ReadTemplate(const std::string &name) {
  std::ifstream f(llm_abi_test::TestDataPath("chat/templates/" + name + ".jinja"),
                  std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

::testing::AssertionResult Ok(llm_status got) {
  if (got == LLM_OK) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << llm_status_string(got) << ": " << llm_last_error();
}

::testing::AssertionResult Fails(llm_status got, llm_status want,
                                 const std::vector<std::string> &mentions) {
  const std::string msg = llm_last_error();
  if (got != want) {
    return ::testing::AssertionFailure() << "returned " << llm_status_string(got) << " (" << msg
                                         << "), expected " << llm_status_string(want);
  }
  for (const std::string &m : mentions) {
    if (msg.find(m) == std::string::npos)
      return ::testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << m << "\"";
  }
  return ::testing::AssertionSuccess();
}

// A tiny model (BOS "<|im_start|>", EOS "<|im_end|>") whose
// tokenizer.chat_template is `tmpl`.
class ChatModel {
 public:
  explicit ChatModel(const std::string &tmpl) {
    TinyModelOptions o;
    o.chat_template = tmpl;
    const GgufImage img = BuildTinyModel(o);
    EXPECT_TRUE(Ok(llm_model_load_from_memory(img.bytes.data(), img.bytes.size(), nullptr, &m_)));
  }
  ~ChatModel() { llm_model_free(m_); }
  llm_model *get() const { return m_; }

 private:
  llm_model *m_ = nullptr;
};

const llm_chat_message kSystemUser[2] = {{"system", "be brief"}, {"user", "hello"}};

// Formats with llm_chat_format_ex; "" and the status in *status on failure.
std::string Format(const llm_model *model, const char *name, const llm_chat_message *msgs, size_t n,
                   const llm_chat_options *options, llm_status *status) {
  char buf[1024];
  size_t len = 0;
  *status = llm_chat_format_ex(model, name, msgs, n, sizeof(llm_chat_message), options, buf,
                               sizeof buf, &len);
  return *status == LLM_OK ? std::string(buf, len) : std::string();
}

TEST(AbiChatOptions, InitDefaults) {
  llm_chat_options o;
  std::memset(&o, 0xA5, sizeof o);
  ASSERT_TRUE(Ok(llm_chat_options_init(&o)));
  EXPECT_EQ(o.struct_size, sizeof o);
  EXPECT_EQ(o.add_generation_prompt, 1);
  EXPECT_EQ(o.enable_thinking, LLM_CHAT_THINKING_DEFAULT);
  EXPECT_EQ(o.date_string, nullptr);
  EXPECT_EQ(o.bos_token, nullptr);
  EXPECT_EQ(o.eos_token, nullptr);
  EXPECT_TRUE(
      Fails(llm_chat_options_init_v(nullptr, sizeof o), LLM_ERR_INVALID_ARGUMENT, {"options"}));
}

TEST(AbiChatOptions, Llama31DateAndBos) {
  ChatModel m(ReadTemplate("llama3.1"));
  ASSERT_NE(m.get(), nullptr);
  llm_status s;
  // Defaults: the model's BOS text, the template's own date.
  const std::string by_default = Format(m.get(), nullptr, kSystemUser, 2, nullptr, &s);
  ASSERT_TRUE(Ok(s));
  EXPECT_EQ(by_default,
            "<|im_start|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
            "December 2023\nToday Date: 26 Jul 2024\n\nbe "
            "brief<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|><|start_"
            "header_id|>assistant<|end_header_id|>\n\n");
  // The old entry points give the same text.
  char buf[1024];
  size_t len = 0;
  ASSERT_TRUE(Ok(llm_chat_format(m.get(), nullptr, kSystemUser, 2, 1, buf, sizeof buf, &len)));
  EXPECT_EQ(std::string(buf, len), by_default);

  llm_chat_options o;
  ASSERT_TRUE(Ok(llm_chat_options_init(&o)));
  o.add_generation_prompt = 0;
  o.date_string = "02 Dec 2026";
  o.bos_token = "";
  EXPECT_EQ(Format(m.get(), nullptr, kSystemUser, 2, &o, &s),
            "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December "
            "2023\nToday Date: 02 Dec 2026\n\nbe "
            "brief<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>");
  EXPECT_TRUE(Ok(s));
  // Picked by name without a model: no BOS unless given.
  o.bos_token = nullptr;
  o.date_string = "";
  const std::string named = Format(nullptr, "llama3.1", kSystemUser, 2, &o, &s);
  ASSERT_TRUE(Ok(s));
  EXPECT_EQ(named.substr(0, 45), "<|start_header_id|>system<|end_header_id|>\n\nC");
  EXPECT_NE(named.find("Today Date: \n\nbe brief"), std::string::npos) << named;
}

TEST(AbiChatOptions, Qwen3EnableThinking) {
  ChatModel m(ReadTemplate("qwen3"));
  ASSERT_NE(m.get(), nullptr);
  llm_chat_options o;
  ASSERT_TRUE(Ok(llm_chat_options_init(&o)));
  const std::string head =
      "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n"
      "<|im_start|>assistant\n";
  llm_status s;
  EXPECT_EQ(Format(m.get(), nullptr, kSystemUser, 2, &o, &s), head);
  o.enable_thinking = LLM_CHAT_THINKING_ON;
  EXPECT_EQ(Format(m.get(), nullptr, kSystemUser, 2, &o, &s), head);
  o.enable_thinking = LLM_CHAT_THINKING_OFF;
  EXPECT_EQ(Format(m.get(), nullptr, kSystemUser, 2, &o, &s), head + "<think>\n\n</think>\n\n");
  for (int32_t bad : {-1, 3, 1000}) {
    o.enable_thinking = bad;
    char buf[8];
    size_t len = 7;
    EXPECT_TRUE(Fails(llm_chat_format_ex(m.get(), nullptr, kSystemUser, 2, sizeof(llm_chat_message),
                                         &o, buf, sizeof buf, &len),
                      LLM_ERR_INVALID_ARGUMENT, {"enable_thinking"}));
    EXPECT_EQ(len, 7u);
  }
}

TEST(AbiChatOptions, Gemma2RefusesSystemLikeTheTemplate) {
  ChatModel m(ReadTemplate("gemma2"));
  ASSERT_NE(m.get(), nullptr);
  llm_status s;
  EXPECT_EQ(Format(m.get(), nullptr, kSystemUser + 1, 1, nullptr, &s),
            "<|im_start|><start_of_turn>user\nhello<end_of_turn>\n<start_of_turn>model\n");
  Format(m.get(), nullptr, kSystemUser, 2, nullptr, &s);
  EXPECT_TRUE(Fails(s, LLM_ERR_INVALID_ARGUMENT, {"gemma2", "System role not supported"}));
}

TEST(AbiChatOptions, UnknownTemplateNamedThenOverridden) {
  const std::string tmpl = "{{ messages[0]['content'] }} ### Response:";
  ChatModel m(tmpl);
  ASSERT_NE(m.get(), nullptr);
  llm_status s;
  Format(m.get(), nullptr, kSystemUser, 2, nullptr, &s);
  EXPECT_TRUE(Fails(s, LLM_ERR_UNSUPPORTED,
                    {std::to_string(tmpl.size()) + " bytes", "fnv1a64",
                     "begins \"{{ messages[0]['content'] }} ### Response:\"", "qwen3", "llama3.1",
                     "mistral-v3-tekken"}));
  // The caller picks a built-in template; the model's BOS/EOS still apply.
  llm_chat_options o;
  ASSERT_TRUE(Ok(llm_chat_options_init(&o)));
  o.eos_token = "</s>";
  const llm_chat_message turns[3] = {{"user", "hi"}, {"assistant", "yo"}, {"user", "again"}};
  EXPECT_EQ(Format(m.get(), "mistral-v3", turns, 3, &o, &s),
            "<|im_start|>[INST] hi[/INST] yo</s>[INST] again[/INST]");
  EXPECT_TRUE(Ok(s));
}

TEST(AbiChatOptions, BadArgumentsLeaveOutputsAlone) {
  llm_chat_options o;
  ASSERT_TRUE(Ok(llm_chat_options_init(&o)));
  char buf[16] = "untouched";
  size_t len = 7;
  const size_t es = sizeof(llm_chat_message);
  EXPECT_TRUE(
      Fails(llm_chat_format_ex(nullptr, nullptr, kSystemUser, 2, es, &o, buf, sizeof buf, &len),
            LLM_ERR_INVALID_ARGUMENT, {"model", "template_name"}));
  EXPECT_TRUE(Fails(llm_chat_format_ex(nullptr, "qwen3", nullptr, 2, es, &o, buf, sizeof buf, &len),
                    LLM_ERR_INVALID_ARGUMENT, {"messages"}));
  EXPECT_TRUE(
      Fails(llm_chat_format_ex(nullptr, "qwen3", kSystemUser, 0, es, &o, buf, sizeof buf, &len),
            LLM_ERR_INVALID_ARGUMENT, {"n_messages"}));
  EXPECT_TRUE(
      Fails(llm_chat_format_ex(nullptr, "qwen3", kSystemUser, 2, 8, &o, buf, sizeof buf, &len),
            LLM_ERR_INVALID_ARGUMENT, {"message_size"}));
  EXPECT_TRUE(
      Fails(llm_chat_format_ex(nullptr, "qwen3", kSystemUser, 2, es, &o, buf, sizeof buf, nullptr),
            LLM_ERR_INVALID_ARGUMENT, {"len_out"}));
  EXPECT_TRUE(
      Fails(llm_chat_format_ex(nullptr, "qwen4", kSystemUser, 2, es, &o, buf, sizeof buf, &len),
            LLM_ERR_UNSUPPORTED, {"qwen4", "qwen3"}));
  const llm_chat_message tool[2] = {{"user", "u"}, {"developer", "d"}};
  EXPECT_TRUE(Fails(llm_chat_format_ex(nullptr, "qwen3", tool, 2, es, &o, buf, sizeof buf, &len),
                    LLM_ERR_INVALID_ARGUMENT, {"developer"}));
  EXPECT_EQ(len, 7u);
  EXPECT_STREQ(buf, "untouched");
  // Too small a buffer: the needed size comes back, nothing else.
  EXPECT_TRUE(
      Fails(llm_chat_format_ex(nullptr, "qwen3", kSystemUser, 2, es, &o, buf, sizeof buf, &len),
            LLM_ERR_BUFFER_TOO_SMALL, {"buf"}));
  EXPECT_EQ(len, std::string("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhello"
                             "<|im_end|>\n<|im_start|>assistant\n")
                     .size());
}

TEST(AbiChatOptions, StructSizes) {
  // Larger (a newer header): accepted with a zero tail, refused otherwise.
  struct Wider {
    llm_chat_options o;
    int32_t newer_field;
    int32_t pad;
  } w;
  ASSERT_TRUE(Ok(llm_chat_options_init_v(&w.o, sizeof w)));
  EXPECT_EQ(w.o.struct_size, sizeof w);
  EXPECT_EQ(w.newer_field, 0);
  llm_status s;
  EXPECT_FALSE(Format(nullptr, "chatml", kSystemUser, 2, &w.o, &s).empty());
  EXPECT_TRUE(Ok(s));
  w.newer_field = 1;
  Format(nullptr, "chatml", kSystemUser, 2, &w.o, &s);
  EXPECT_TRUE(Fails(s, LLM_ERR_INVALID_ARGUMENT,
                    {"options", "offset " + std::to_string(sizeof(llm_chat_options))}));
  // Too small, or absurd.
  for (uint32_t bad : {0u, 4u, static_cast<uint32_t>(sizeof(llm_chat_options) - 8), 4097u}) {
    llm_chat_options o;
    ASSERT_TRUE(Ok(llm_chat_options_init(&o)));
    o.struct_size = bad;
    Format(nullptr, "chatml", kSystemUser, 2, &o, &s);
    EXPECT_TRUE(Fails(s, LLM_ERR_INVALID_ARGUMENT, {"struct_size"})) << bad;
  }
  // NULL options: the defaults (a generation prompt).
  const std::string with_null = Format(nullptr, "chatml", kSystemUser, 2, nullptr, &s);
  ASSERT_TRUE(Ok(s));
  EXPECT_EQ(with_null.substr(with_null.size() - 22), "<|im_start|>assistant\n");
}

}  // namespace
