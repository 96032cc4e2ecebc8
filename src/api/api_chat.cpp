// llm_chat_format / llm_chat_format_v / llm_chat_format_ex: messages -> prompt
// text through a recognised or named built-in chat template
// (tokenizer/chat_template.h), with the template variables of
// llm_chat_options.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "api/abi_structs.h"
#include "api/handles.h"
#include "tokenizer/chat_template.h"

using llm::api::Fail;

namespace {

// llm_chat_options_init's values: a generation prompt, every variable unset.
llm_chat_options DefaultChatOptions() {
  llm_chat_options o = llm::api::ZeroedStruct<llm_chat_options>();
  o.add_generation_prompt = 1;
  o.enable_thinking = LLM_CHAT_THINKING_DEFAULT;
  return o;
}

// The body shared by every entry point; `options` is already read and
// validated (a full-size struct).
llm_status ChatFormat(const llm_model* model, const char* template_name,
                      const llm_chat_message* messages, size_t n_messages, size_t message_size,
                      const llm_chat_options& options, char* buf, size_t capacity,
                      size_t* len_out) {
  LLM_CHECK_ARG(model != nullptr || template_name != nullptr,
                "model and template_name must not both be NULL");
  LLM_CHECK_ARG(messages != nullptr, "messages must not be NULL");
  LLM_CHECK_ARG(n_messages > 0, "n_messages must be > 0");
  LLM_CHECK_ARG(n_messages <= (size_t{1} << 20), "n_messages is larger than 1M messages");
  if (llm_status s =
          llm::api::CheckStructSize<llm_chat_message>(message_size, "messages", "message_size");
      s != LLM_OK) {
    return s;
  }
  LLM_CHECK_ARG(len_out != nullptr, "len_out must not be NULL");
  LLM_CHECK_ARG(options.enable_thinking == LLM_CHAT_THINKING_DEFAULT ||
                    options.enable_thinking == LLM_CHAT_THINKING_ON ||
                    options.enable_thinking == LLM_CHAT_THINKING_OFF,
                "options: enable_thinking must be LLM_CHAT_THINKING_DEFAULT (0), _ON (1) or "
                "_OFF (2)");
  std::shared_ptr<const llm::Model> mp;
  if (model != nullptr) {
    mp = llm::api::FindModel(model);
    LLM_CHECK_ARG(mp != nullptr,
                  "model is not a live model handle (freed, or never returned by "
                  "llm_model_load)");
  }
  // The array's stride is the caller's element size: an older element holds
  // a prefix of ours, a newer one must have zeros where ours ends.
  const auto* bytes = reinterpret_cast<const unsigned char*>(messages);
  std::vector<llm::ChatMessage> msgs(n_messages);
  for (size_t i = 0; i < n_messages; ++i) {
    const unsigned char* element = bytes + i * message_size;
    llm_chat_message m{};
    std::memcpy(&m, element, std::min(message_size, sizeof m));
    const bool tail_zero =
        message_size <= sizeof m || std::all_of(element + sizeof m, element + message_size,
                                                [](unsigned char b) { return b == 0; });
    if (!tail_zero || m.role == nullptr || m.content == nullptr) {
      // Only a failure pays for the element's name.
      const std::string what = "messages[" + std::to_string(i) + "]";
      if (!tail_zero) {
        return llm::api::CheckUnknownBytesZero(element, sizeof m, message_size, "llm_chat_message",
                                               what.c_str());
      }
      return Fail(LLM_ERR_INVALID_ARGUMENT, what + ": role and content must not be NULL");
    }
    msgs[i] = llm::ChatMessage{m.role, m.content};
  }
  llm::ChatFormatOptions fmt;
  fmt.add_generation_prompt = options.add_generation_prompt != 0;
  std::string bos, eos;
  if (model != nullptr) {
    const llm::Tokenizer& tok = mp->tokenizer();
    if (tok.bos() >= 0) bos = std::string(tok.TokenText(tok.bos()));
    if (tok.eos() >= 0) eos = std::string(tok.TokenText(tok.eos()));
  }
  if (options.bos_token != nullptr) bos = options.bos_token;
  if (options.eos_token != nullptr) eos = options.eos_token;
  fmt.bos_text = bos;
  fmt.eos_text = eos;
  if (options.date_string != nullptr) fmt.date_string = std::string_view(options.date_string);
  fmt.enable_thinking =
      options.enable_thinking == LLM_CHAT_THINKING_ON    ? llm::ThinkingMode::kEnabled
      : options.enable_thinking == LLM_CHAT_THINKING_OFF ? llm::ThinkingMode::kDisabled
                                                         : llm::ThinkingMode::kDefault;
  llm::ChatTemplate kind;
  std::string default_system;
  if (template_name != nullptr) {
    absl::StatusOr<llm::ChatTemplate> named = llm::ChatTemplateFromName(template_name);
    if (!named.ok()) return Fail(named.status());
    kind = *named;
  } else {
    const std::string& text = mp->chat_template();
    if (text.empty()) {
      return Fail(LLM_ERR_UNSUPPORTED,
                  "the model has no chat template: pass template_name (e.g. \"chatml\")");
    }
    absl::StatusOr<llm::ChatTemplateInfo> info = llm::DetectChatTemplateInfo(text);
    if (!info.ok()) return Fail(info.status());
    kind = info->kind;
    default_system = info->default_system_prompt;
  }
  fmt.default_system = default_system;
  absl::StatusOr<std::string> text = llm::FormatChat(kind, msgs, fmt);
  if (!text.ok()) return Fail(text.status());
  return llm::api::CopyOut(*text, true, buf, capacity, len_out);
}

}  // namespace

extern "C" {

LLM_API llm_status llm_chat_options_init_v(llm_chat_options* options, size_t struct_size) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(options != nullptr, "options must not be NULL");
  return llm::api::InitStruct(options, struct_size, DefaultChatOptions(), "options");
  LLM_API_END
}

LLM_API llm_status llm_chat_format_ex(const llm_model* model, const char* template_name,
                                      const llm_chat_message* messages, size_t n_messages,
                                      size_t message_size, const llm_chat_options* options,
                                      char* buf, size_t capacity, size_t* len_out) {
  LLM_API_BEGIN
  llm_chat_options o;
  if (llm_status s = llm::api::ReadStruct(options, DefaultChatOptions(), "options", &o);
      s != LLM_OK) {
    return s;
  }
  return ChatFormat(model, template_name, messages, n_messages, message_size, o, buf, capacity,
                    len_out);
  LLM_API_END
}

LLM_API llm_status llm_chat_format_v(const llm_model* model, const char* template_name,
                                     const llm_chat_message* messages, size_t n_messages,
                                     size_t message_size, int32_t add_generation_prompt, char* buf,
                                     size_t capacity, size_t* len_out) {
  LLM_API_BEGIN
  llm_chat_options o = DefaultChatOptions();
  o.add_generation_prompt = add_generation_prompt;
  return ChatFormat(model, template_name, messages, n_messages, message_size, o, buf, capacity,
                    len_out);
  LLM_API_END
}

// The unsized symbol (parenthesised: llm.h makes its name a macro) serves
// binaries built before message_size existed: 0.1 elements.
LLM_API llm_status(llm_chat_format)(const llm_model* model, const char* template_name,
                                    const llm_chat_message* messages, size_t n_messages,
                                    int32_t add_generation_prompt, char* buf, size_t capacity,
                                    size_t* len_out) {
  return llm_chat_format_v(model, template_name, messages, n_messages,
                           llm::api::FirstSize<llm_chat_message>(), add_generation_prompt, buf,
                           capacity, len_out);
}

}  // extern "C"
