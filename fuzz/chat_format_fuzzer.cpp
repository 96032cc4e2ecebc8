// Chat template detection and rendering on arbitrary input.
//
// Input layout: byte 0 = option bits, then chunks separated by '\0':
//   chunk 0          template text -> DetectChatTemplateInfo, ChatTemplateFromName,
//                    StripPythonWhitespace
//   chunks 1..n      messages: first byte selects the role (bits 0-1: system,
//                    user, assistant, or the rest of a custom role up to the
//                    first '\x01'), the rest is the content
// Option bits: 0 add_generation_prompt, 1 bos_text "<s>", 2 eos_text "</s>"
// (else "" = family default), 3 default_system from the detected template,
// 4 date_string "" (else unset), 5-6 enable_thinking (0 default, 1 true,
// 2 false, 3 default).
// Every built-in template renders the messages; an error must carry a message.
// Invariant: rendering is deterministic and the output is valid UTF-8
// whenever all inputs are (no renderer may split a code point).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t opts = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::string_view> chunks;
  while (true) {
    size_t z = rest.find('\0');
    chunks.push_back(rest.substr(0, z));
    if (z == std::string_view::npos) break;
    rest.remove_prefix(z + 1);
    if (chunks.size() >= 64) break;  // bounded work per input
  }
  const std::string_view tmpl_text = chunks[0];

  auto info = llm::DetectChatTemplateInfo(tmpl_text);
  if (info.ok()) {
    auto kind = llm::DetectChatTemplate(tmpl_text);
    LLM_FUZZ_CHECK(kind.ok() && *kind == info->kind);
  } else {
    LLM_FUZZ_CHECK(!info.status().message().empty());
  }
  auto by_name = llm::ChatTemplateFromName(tmpl_text);
  if (by_name.ok()) LLM_FUZZ_CHECK(llm::ChatTemplateName(*by_name) == tmpl_text);
  std::string_view stripped = llm::StripPythonWhitespace(tmpl_text);
  LLM_FUZZ_CHECK(stripped.data() >= tmpl_text.data() &&
                 stripped.data() + stripped.size() <= tmpl_text.data() + tmpl_text.size());

  static const char* const kRoles[3] = {"system", "user", "assistant"};
  std::vector<llm::ChatMessage> messages;
  bool all_valid = llm_fuzz::IsValidUtf8(tmpl_text);
  for (size_t i = 1; i < chunks.size(); ++i) {
    std::string_view c = chunks[i];
    llm::ChatMessage m;
    if (c.empty()) {
      m.role = "user";
    } else if ((c[0] & 3) != 3) {
      m.role = kRoles[c[0] & 3];
      m.content = c.substr(1);
    } else {
      c.remove_prefix(1);
      size_t sep = c.find('\x01');
      m.role = c.substr(0, sep);
      m.content = sep == std::string_view::npos ? std::string_view() : c.substr(sep + 1);
    }
    all_valid = all_valid && llm_fuzz::IsValidUtf8(m.role) && llm_fuzz::IsValidUtf8(m.content);
    messages.push_back(m);
  }

  llm::ChatFormatOptions options;
  options.add_generation_prompt = opts & 1;
  options.bos_text = (opts & 2) ? "<s>" : "";
  options.eos_text = (opts & 4) ? "</s>" : "";
  if ((opts & 8) && info.ok()) options.default_system = info->default_system_prompt;
  if (opts & 16) options.date_string = std::string_view();
  const int thinking = (opts >> 5) & 3;
  options.enable_thinking = thinking == 1   ? llm::ThinkingMode::kEnabled
                            : thinking == 2 ? llm::ThinkingMode::kDisabled
                                            : llm::ThinkingMode::kDefault;
  for (llm::ChatTemplate t : llm::AllChatTemplates()) {
    auto out = llm::FormatChat(t, messages, options);
    if (!out.ok()) {
      LLM_FUZZ_CHECK(!out.status().message().empty());
      continue;
    }
    if (all_valid) LLM_FUZZ_CHECK(llm_fuzz::IsValidUtf8(*out));
    auto again = llm::FormatChat(t, messages, options);
    LLM_FUZZ_CHECK(again.ok() && *again == *out);
  }
  return 0;
}
