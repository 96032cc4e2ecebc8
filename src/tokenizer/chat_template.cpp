#include "tokenizer/chat_template.h"

#include <array>
#include <cstdint>
#include <utility>

#include "core/status.h"

namespace llm {
namespace {

constexpr std::array<std::pair<std::string_view, ChatTemplate>, 7> kNames = {{
    {"chatml", ChatTemplate::kChatML},
    {"llama2", ChatTemplate::kLlama2},
    {"llama3", ChatTemplate::kLlama3},
    {"mistral", ChatTemplate::kMistral},
    {"zephyr", ChatTemplate::kZephyr},
    {"phi3", ChatTemplate::kPhi3},
    {"gemma", ChatTemplate::kGemma},
}};

constexpr std::string_view kBuiltinList = "chatml, llama2, llama3, mistral, zephyr, phi3, gemma";

// Debian's Abseil has its own absl::string_view (not std::string_view), so
// the absl::StrCat family does not take our std::string_view: small helpers.
template <typename... Parts>
void Append(std::string* out, const Parts&... parts) {
  (out->append(std::string_view(parts)), ...);
}

template <typename... Parts>
std::string Cat(const Parts&... parts) {
  std::string out;
  Append(&out, parts...);
  return out;
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool IsPythonSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Decodes the UTF-8 sequence s[0..len) as one code point; false if it is not
// exactly one well-formed sequence.
bool DecodeOne(std::string_view s, uint32_t* cp) {
  if (s.empty()) return false;
  const auto b0 = static_cast<unsigned char>(s[0]);
  size_t n;
  uint32_t v;
  if (b0 < 0x80) {
    n = 1, v = b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    n = 2, v = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, v = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, v = b0 & 0x07;
  } else {
    return false;
  }
  if (s.size() != n) return false;
  for (size_t i = 1; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if ((b & 0xC0) != 0x80) return false;
    v = (v << 6) | (b & 0x3F);
  }
  *cp = v;
  return true;
}

size_t LeadLength(unsigned char b0) {
  if (b0 < 0x80) return 1;
  if ((b0 & 0xE0) == 0xC0) return 2;
  if ((b0 & 0xF0) == 0xE0) return 3;
  if ((b0 & 0xF8) == 0xF0) return 4;
  return 0;
}

bool IsStandardRole(std::string_view role) {
  return role == "system" || role == "user" || role == "assistant";
}

absl::Status CheckStandardRoles(ChatTemplate tmpl, absl::Span<const ChatMessage> messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!IsStandardRole(messages[i].role)) {
      return Errorf(LLM_ERR_INVALID_ARGUMENT,
                    "chat template %s: message %d has role \"%s\"; only system, user and "
                    "assistant are supported",
                    ChatTemplateName(tmpl), i, messages[i].role);
    }
  }
  return absl::OkStatus();
}

// Llama-2, Mistral, Gemma: after an optional leading system message, roles
// must go user, assistant, user, ... (the official templates raise otherwise).
absl::Status CheckAlternating(ChatTemplate tmpl, absl::Span<const ChatMessage> loop_messages) {
  for (size_t i = 0; i < loop_messages.size(); ++i) {
    const std::string_view want = (i % 2 == 0) ? "user" : "assistant";
    if (loop_messages[i].role != want) {
      return Errorf(LLM_ERR_INVALID_ARGUMENT,
                    "chat template %s: after the optional first system message, roles must "
                    "alternate user/assistant/user/...; got \"%s\" where \"%s\" belongs",
                    ChatTemplateName(tmpl), loop_messages[i].role, want);
    }
  }
  return absl::OkStatus();
}

std::string RenderChatML(absl::Span<const ChatMessage> messages, const ChatFormatOptions& o) {
  std::string out;
  if (!o.default_system.empty() && messages[0].role != "system") {
    Append(&out, "<|im_start|>system\n", o.default_system, "<|im_end|>\n");
  }
  for (const ChatMessage& m : messages) {
    Append(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  }
  if (o.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string RenderLlama2(std::string_view system, bool has_system,
                         absl::Span<const ChatMessage> loop, std::string_view bos,
                         std::string_view eos) {
  std::string out;
  for (size_t i = 0; i < loop.size(); ++i) {
    std::string content;
    if (i == 0 && has_system) {
      content = Cat("<<SYS>>\n", system, "\n<</SYS>>\n\n", loop[i].content);
    } else {
      content = std::string(loop[i].content);
    }
    const std::string_view stripped = StripPythonWhitespace(content);
    if (loop[i].role == "user") {
      Append(&out, bos, "[INST] ", stripped, " [/INST]");
    } else {
      Append(&out, " ", stripped, " ", eos);
    }
  }
  return out;
}

std::string RenderLlama3(absl::Span<const ChatMessage> messages, const ChatFormatOptions& o) {
  std::string out(o.bos_text);
  for (const ChatMessage& m : messages) {
    Append(&out, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n",
           StripPythonWhitespace(m.content), "<|eot_id|>");
  }
  if (o.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string RenderMistral(std::string_view system, bool has_system,
                          absl::Span<const ChatMessage> loop, std::string_view bos,
                          std::string_view eos) {
  std::string out(bos);
  for (size_t i = 0; i < loop.size(); ++i) {
    if (loop[i].role == "user") {
      if (i == 0 && has_system) {
        Append(&out, " [INST] ", system, "\n\n", loop[i].content, " [/INST]");
      } else {
        Append(&out, " [INST] ", loop[i].content, " [/INST]");
      }
    } else {
      Append(&out, " ", loop[i].content, eos);
    }
  }
  return out;
}

std::string RenderZephyr(absl::Span<const ChatMessage> messages, const ChatFormatOptions& o,
                         std::string_view eos) {
  std::string out;
  for (const ChatMessage& m : messages) {
    Append(&out, "<|", m.role, "|>\n", m.content, eos, "\n");
  }
  if (o.add_generation_prompt) out += "<|assistant|>\n";
  return out;
}

std::string RenderPhi3(absl::Span<const ChatMessage> messages, const ChatFormatOptions& o,
                       std::string_view eos) {
  std::string out;
  for (const ChatMessage& m : messages) {
    if (m.role == "system" && m.content.empty()) continue;
    Append(&out, "<|", m.role, "|>\n", m.content, "<|end|>\n");
  }
  if (o.add_generation_prompt) {
    out += "<|assistant|>\n";
  } else {
    out += eos;
  }
  return out;
}

std::string RenderGemma(std::string_view system, bool has_system,
                        absl::Span<const ChatMessage> loop, const ChatFormatOptions& o) {
  std::string out(o.bos_text);
  for (size_t i = 0; i < loop.size(); ++i) {
    const std::string_view role = loop[i].role == "assistant" ? "model" : loop[i].role;
    Append(&out, "<start_of_turn>", role, "\n");
    if (i == 0 && has_system) Append(&out, system, "\n\n");
    Append(&out, StripPythonWhitespace(loop[i].content), "<end_of_turn>\n");
  }
  if (o.add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

// Unescapes the few Jinja string-literal escapes a default system prompt may
// carry ("\\n", "\\'", "\\\"", "\\\\"); false if it holds anything that makes
// it not a plain literal (quotes, Jinja delimiters).
bool PlainLiteral(std::string_view raw, std::string* out) {
  out->clear();
  for (size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '\\' && i + 1 < raw.size()) {
      const char e = raw[++i];
      if (e == 'n') {
        *out += '\n';
      } else if (e == 't') {
        *out += '\t';
      } else if (e == '\'' || e == '"' || e == '\\') {
        *out += e;
      } else {
        return false;
      }
      continue;
    }
    if (c == '\'' || c == '"' || c == '{' || c == '}') return false;
    *out += c;
  }
  return true;
}

// ChatML templates of the Qwen2/SmolLM2 kind insert a fixed system message
// when messages[0] is not a system message. Returns it, or "".
std::string ExtractChatMLDefaultSystem(std::string_view t) {
  if (!Contains(t, "!= 'system'") && !Contains(t, "!= \"system\"")) return "";
  constexpr std::string_view kHead = "<|im_start|>system";
  size_t pos = 0;
  while ((pos = t.find(kHead, pos)) != std::string_view::npos) {
    pos += kHead.size();
    std::string_view rest = t.substr(pos);
    if (StartsWith(rest, "\n")) {
      rest.remove_prefix(1);
    } else if (StartsWith(rest, "\\n")) {
      rest.remove_prefix(2);
    } else {
      continue;
    }
    const size_t end = rest.find("<|im_end|>");
    if (end == std::string_view::npos || end == 0) continue;
    std::string literal;
    if (PlainLiteral(rest.substr(0, end), &literal)) return literal;
  }
  return "";
}

}  // namespace

std::string_view StripPythonWhitespace(std::string_view text) {
  // Leading code points.
  while (!text.empty()) {
    const size_t n = LeadLength(static_cast<unsigned char>(text[0]));
    uint32_t cp;
    if (n == 0 || n > text.size() || !DecodeOne(text.substr(0, n), &cp) || !IsPythonSpace(cp)) {
      break;
    }
    text.remove_prefix(n);
  }
  // Trailing code points: back up over at most 3 continuation bytes.
  while (!text.empty()) {
    size_t start = text.size() - 1;
    while (start > 0 && text.size() - start < 4 &&
           (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
      --start;
    }
    uint32_t cp;
    if (!DecodeOne(text.substr(start), &cp) || !IsPythonSpace(cp)) break;
    text.remove_suffix(text.size() - start);
  }
  return text;
}

std::string_view ChatTemplateName(ChatTemplate tmpl) {
  for (const auto& [name, t] : kNames) {
    if (t == tmpl) return name;
  }
  return "unknown";
}

absl::StatusOr<ChatTemplate> ChatTemplateFromName(std::string_view name) {
  for (const auto& [n, t] : kNames) {
    if (n == name) return t;
  }
  return Errorf(LLM_ERR_UNSUPPORTED, "unknown chat template name \"%s\"; built-in templates: %s",
                name, kBuiltinList);
}

absl::StatusOr<ChatTemplateInfo> DetectChatTemplateInfo(std::string_view t) {
  ChatTemplateInfo info;
  auto has = [t](std::string_view marker) { return Contains(t, marker); };
  if (has("<|im_start|>")) {
    info.kind = ChatTemplate::kChatML;
    info.default_system_prompt = ExtractChatMLDefaultSystem(t);
  } else if (has("<|start_header_id|>")) {
    info.kind = ChatTemplate::kLlama3;
  } else if (has("<start_of_turn>")) {
    info.kind = ChatTemplate::kGemma;
  } else if (has("<|user|>") && has("<|end|>")) {
    info.kind = ChatTemplate::kPhi3;
  } else if (has("<|user|>") && (has("eos_token") || has("</s>"))) {
    info.kind = ChatTemplate::kZephyr;
  } else if (has("[INST]") && has("<<SYS>>")) {
    info.kind = ChatTemplate::kLlama2;
  } else if (has("[INST]")) {
    info.kind = ChatTemplate::kMistral;
  } else {
    return Errorf(LLM_ERR_UNSUPPORTED,
                  "the model's chat template was not recognised (%d bytes); pass one of the "
                  "built-in templates by name: %s",
                  t.size(), kBuiltinList);
  }
  return info;
}

absl::StatusOr<ChatTemplate> DetectChatTemplate(std::string_view jinja_text) {
  LLM_ASSIGN_OR_RETURN(ChatTemplateInfo info, DetectChatTemplateInfo(jinja_text));
  return info.kind;
}

absl::StatusOr<std::string> FormatChat(ChatTemplate tmpl, absl::Span<const ChatMessage> messages,
                                       const ChatFormatOptions& options) {
  if (messages.empty()) {
    return Error(LLM_ERR_INVALID_ARGUMENT, "chat formatting needs at least one message");
  }
  std::string_view eos = options.eos_text;
  if (eos.empty()) eos = tmpl == ChatTemplate::kPhi3 ? "<|endoftext|>" : "</s>";
  if (tmpl == ChatTemplate::kChatML) return RenderChatML(messages, options);
  LLM_RETURN_IF_ERROR(CheckStandardRoles(tmpl, messages));

  // Families whose template splits off a leading system message.
  const bool has_system = messages[0].role == "system";
  const std::string_view system = has_system ? messages[0].content : std::string_view();
  const absl::Span<const ChatMessage> loop = has_system ? messages.subspan(1) : messages;

  switch (tmpl) {
    case ChatTemplate::kLlama2:
      LLM_RETURN_IF_ERROR(CheckAlternating(tmpl, loop));
      return RenderLlama2(system, has_system, loop, options.bos_text, eos);
    case ChatTemplate::kLlama3:
      return RenderLlama3(messages, options);
    case ChatTemplate::kMistral:
      LLM_RETURN_IF_ERROR(CheckAlternating(tmpl, loop));
      return RenderMistral(system, has_system, loop, options.bos_text, eos);
    case ChatTemplate::kZephyr:
      return RenderZephyr(messages, options, eos);
    case ChatTemplate::kPhi3:
      return RenderPhi3(messages, options, eos);
    case ChatTemplate::kGemma:
      LLM_RETURN_IF_ERROR(CheckAlternating(tmpl, loop));
      return RenderGemma(system, has_system, loop, options);
    case ChatTemplate::kChatML:
      break;
  }
  return Errorf(LLM_ERR_INVALID_ARGUMENT, "unknown chat template value %d", static_cast<int>(tmpl));
}

absl::StatusOr<std::string> FormatChat(ChatTemplate tmpl, absl::Span<const ChatMessage> messages,
                                       bool add_generation_prompt, std::string_view bos_text) {
  ChatFormatOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.bos_text = bos_text;
  return FormatChat(tmpl, messages, options);
}

}  // namespace llm
