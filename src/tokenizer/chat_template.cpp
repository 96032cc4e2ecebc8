#include "tokenizer/chat_template.h"

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/status.h"

namespace llm {
namespace {

constexpr std::array<std::pair<std::string_view, ChatTemplate>, 15> kNames = {{
    {"chatml", ChatTemplate::kChatML},
    {"llama2", ChatTemplate::kLlama2},
    {"llama3", ChatTemplate::kLlama3},
    {"mistral", ChatTemplate::kMistral},
    {"zephyr", ChatTemplate::kZephyr},
    {"phi3", ChatTemplate::kPhi3},
    {"gemma", ChatTemplate::kGemma},
    {"llama3.1", ChatTemplate::kLlama31},
    {"llama3.2", ChatTemplate::kLlama32},
    {"qwen2.5", ChatTemplate::kQwen25},
    {"qwen3", ChatTemplate::kQwen3},
    {"mistral-v3", ChatTemplate::kMistralV3},
    {"mistral-v3-tekken", ChatTemplate::kMistralV3Tekken},
    {"phi3-legacy", ChatTemplate::kPhi3Legacy},
    {"gemma2", ChatTemplate::kGemma2},
}};

constexpr std::array<ChatTemplate, kNames.size()> kAll = {
    ChatTemplate::kChatML,          ChatTemplate::kLlama2,     ChatTemplate::kLlama3,
    ChatTemplate::kMistral,         ChatTemplate::kZephyr,     ChatTemplate::kPhi3,
    ChatTemplate::kGemma,           ChatTemplate::kLlama31,    ChatTemplate::kLlama32,
    ChatTemplate::kQwen25,          ChatTemplate::kQwen3,      ChatTemplate::kMistralV3,
    ChatTemplate::kMistralV3Tekken, ChatTemplate::kPhi3Legacy, ChatTemplate::kGemma2,
};

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

// Roles each renderer accepts: ChatML any, Qwen the standard ones and "tool",
// the others the standard ones.
absl::Status CheckRoles(ChatTemplate tmpl, absl::Span<const ChatMessage> messages) {
  if (tmpl == ChatTemplate::kChatML) return absl::OkStatus();
  const bool tool_ok = tmpl == ChatTemplate::kQwen25 || tmpl == ChatTemplate::kQwen3;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string_view role = messages[i].role;
    if (IsStandardRole(role) || (tool_ok && role == "tool")) continue;
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "chat template %s: message %d has role \"%s\"; only system, user and "
                  "assistant%s are supported",
                  ChatTemplateName(tmpl), i, role, tool_ok ? " and tool" : "");
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

// A leading system message split off, as most templates do:
// `messages[0]['role'] == 'system'` -> system + loop_messages = messages[1:].
struct SplitSystem {
  bool has_system = false;
  std::string_view system;
  absl::Span<const ChatMessage> loop;
};

SplitSystem SplitLeadingSystem(absl::Span<const ChatMessage> messages) {
  SplitSystem s;
  s.has_system = messages[0].role == "system";
  if (s.has_system) s.system = messages[0].content;
  s.loop = s.has_system ? messages.subspan(1) : messages;
  return s;
}

// ---- Python str helpers for the Qwen3 template ---------------------------

std::string_view LstripNewlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}

std::string_view RstripNewlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// s.split(sep)[-1]: the text after the last sep (all of s when absent).
std::string_view AfterLast(std::string_view s, std::string_view sep) {
  const size_t p = s.rfind(sep);
  return p == std::string_view::npos ? s : s.substr(p + sep.size());
}

// s.split(sep)[0]: the text before the first sep (all of s when absent).
std::string_view BeforeFirst(std::string_view s, std::string_view sep) {
  const size_t p = s.find(sep);
  return p == std::string_view::npos ? s : s.substr(0, p);
}

// ---- renderers -------------------------------------------------------------

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

std::string RenderLlama2(const SplitSystem& s, std::string_view bos, std::string_view eos) {
  std::string out;
  for (size_t i = 0; i < s.loop.size(); ++i) {
    std::string content;
    if (i == 0 && s.has_system) {
      content = Cat("<<SYS>>\n", s.system, "\n<</SYS>>\n\n", s.loop[i].content);
    } else {
      content = std::string(s.loop[i].content);
    }
    const std::string_view stripped = StripPythonWhitespace(content);
    if (s.loop[i].role == "user") {
      Append(&out, bos, "[INST] ", stripped, " [/INST]");
    } else {
      Append(&out, " ", stripped, " ", eos);
    }
  }
  return out;
}

void AppendLlama3Turn(std::string* out, std::string_view role, std::string_view content) {
  Append(out, "<|start_header_id|>", role, "<|end_header_id|>\n\n", StripPythonWhitespace(content),
         "<|eot_id|>");
}

std::string RenderLlama3(absl::Span<const ChatMessage> messages, const ChatFormatOptions& o) {
  std::string out(o.bos_text);
  for (const ChatMessage& m : messages) AppendLlama3Turn(&out, m.role, m.content);
  if (o.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Llama 3.1/3.2/3.3 without tools: the system turn is always written, with
// the knowledge cutoff and date_string before the (trimmed) system message.
std::string RenderLlama31(const SplitSystem& s, const ChatFormatOptions& o) {
  std::string out(o.bos_text);
  Append(&out,
         "<|start_header_id|>system<|end_header_id|>\n\n"
         "Cutting Knowledge Date: December 2023\nToday Date: ",
         o.date_string.value_or(kLlama3DefaultDate), "\n\n",
         s.has_system ? StripPythonWhitespace(s.system) : std::string_view(), "<|eot_id|>");
  for (const ChatMessage& m : s.loop) AppendLlama3Turn(&out, m.role, m.content);
  if (o.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Mistral 'v1': system merged into the first user turn.
std::string RenderMistral(const SplitSystem& s, std::string_view bos, std::string_view eos) {
  std::string out(bos);
  for (size_t i = 0; i < s.loop.size(); ++i) {
    if (s.loop[i].role == "user") {
      if (i == 0 && s.has_system) {
        Append(&out, " [INST] ", s.system, "\n\n", s.loop[i].content, " [/INST]");
      } else {
        Append(&out, " [INST] ", s.loop[i].content, " [/INST]");
      }
    } else {
      Append(&out, " ", s.loop[i].content, eos);
    }
  }
  return out;
}

// Mistral 'v3' ("[INST] ", assistant " " + trimmed) and 'v3-tekken' ("[INST]",
// assistant verbatim): the system message goes before the last message when
// that is a user message, and nowhere otherwise.
std::string RenderMistralV3(const SplitSystem& s, bool tekken, std::string_view bos,
                            std::string_view eos) {
  const std::string_view inst = tekken ? "[INST]" : "[INST] ";
  std::string out(bos);
  for (size_t i = 0; i < s.loop.size(); ++i) {
    const ChatMessage& m = s.loop[i];
    if (m.role == "user") {
      if (i + 1 == s.loop.size() && s.has_system) {
        Append(&out, inst, s.system, "\n\n", m.content, "[/INST]");
      } else {
        Append(&out, inst, m.content, "[/INST]");
      }
    } else if (tekken) {
      Append(&out, m.content, eos);
    } else {
      Append(&out, " ", StripPythonWhitespace(m.content), eos);
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

// The first Phi-3-mini template: every user turn opens the assistant turn,
// system messages are not written at all.
std::string RenderPhi3Legacy(absl::Span<const ChatMessage> messages, std::string_view bos) {
  std::string out(bos);
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      Append(&out, "<|user|>\n", m.content, "<|end|>\n<|assistant|>\n");
    } else if (m.role == "assistant") {
      Append(&out, m.content, "<|end|>\n");
    }
  }
  return out;
}

// Gemma 3 (system folded into the first turn) and, with has_system false,
// Gemma 1/2.
std::string RenderGemma(const SplitSystem& s, const ChatFormatOptions& o) {
  std::string out(o.bos_text);
  for (size_t i = 0; i < s.loop.size(); ++i) {
    const std::string_view role = s.loop[i].role == "assistant" ? "model" : s.loop[i].role;
    Append(&out, "<start_of_turn>", role, "\n");
    if (i == 0 && s.has_system) Append(&out, s.system, "\n\n");
    Append(&out, StripPythonWhitespace(s.loop[i].content), "<end_of_turn>\n");
  }
  if (o.add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

// Qwen2.5/Qwen3: consecutive tool messages share one user turn, each in
// <tool_response> tags.
void AppendQwenTool(std::string* out, absl::Span<const ChatMessage> messages, size_t i) {
  if (i == 0 || messages[i - 1].role != "tool") *out += "<|im_start|>user";
  Append(out, "\n<tool_response>\n", messages[i].content, "\n</tool_response>");
  if (i + 1 == messages.size() || messages[i + 1].role != "tool") *out += "<|im_end|>\n";
}

std::string RenderQwen25(absl::Span<const ChatMessage> messages, const ChatFormatOptions& o) {
  std::string out;
  if (messages[0].role == "system") {
    Append(&out, "<|im_start|>system\n", messages[0].content, "<|im_end|>\n");
  } else {
    Append(&out, "<|im_start|>system\n",
           o.default_system.empty() ? kQwen25DefaultSystem : o.default_system, "<|im_end|>\n");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      AppendQwenTool(&out, messages, i);
    } else if (m.role != "system" || i > 0) {
      Append(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
    }
  }
  if (o.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string RenderQwen3(absl::Span<const ChatMessage> messages, const ChatFormatOptions& o) {
  std::string out;
  if (messages[0].role == "system") {
    Append(&out, "<|im_start|>system\n", messages[0].content, "<|im_end|>\n");
  }
  // The last user message that is not a tool response wrapped in a user turn
  // (the template's ns.last_query_index; the last index when there is none).
  size_t last_query = messages.size() - 1;
  for (size_t k = messages.size(); k-- > 0;) {
    const ChatMessage& m = messages[k];
    if (m.role == "user" &&
        !(StartsWith(m.content, "<tool_response>") && EndsWith(m.content, "</tool_response>"))) {
      last_query = k;
      break;
    }
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      Append(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
    } else if (m.role == "assistant") {
      std::string_view content = m.content;
      std::string_view reasoning;
      if (Contains(m.content, "</think>")) {
        content = LstripNewlines(AfterLast(m.content, "</think>"));
        reasoning = LstripNewlines(
            AfterLast(RstripNewlines(BeforeFirst(m.content, "</think>")), "<think>"));
      }
      if (i > last_query && (i + 1 == messages.size() || !reasoning.empty())) {
        Append(&out, "<|im_start|>assistant\n<think>\n", RstripNewlines(LstripNewlines(reasoning)),
               "\n</think>\n\n", LstripNewlines(content));
      } else {
        Append(&out, "<|im_start|>assistant\n", content);
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      AppendQwenTool(&out, messages, i);
    }
  }
  if (o.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (o.enable_thinking == ThinkingMode::kDisabled) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

// ---- recognition -----------------------------------------------------------

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

// The first string literal '<|im_start|>system\n...<|im_end|>' holding no
// Jinja expression: the fixed system message some ChatML templates insert.
std::string FindChatMLSystemLiteral(std::string_view t) {
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

// ChatML templates of the Qwen2/SmolLM2 kind insert a fixed system message
// when messages[0] is not a system message. Returns it, or "".
std::string ExtractChatMLDefaultSystem(std::string_view t) {
  if (!Contains(t, "!= 'system'") && !Contains(t, "!= \"system\"")) return "";
  return FindChatMLSystemLiteral(t);
}

// A template signature: every fragment of all_of present, none of none_of.
// Fragments are taken from the official template texts (in their Jinja
// source spelling, e.g. "\\n" for an escaped newline inside a literal) and
// pin down the behaviour the renderer reproduces; none_of holds the marks of
// variants that render differently (tools, reasoning, other defaults).
struct Signature {
  ChatTemplate kind;
  std::vector<std::string_view> all_of;
  std::vector<std::string_view> none_of;
};

bool Matches(std::string_view t, const Signature& s) {
  for (std::string_view f : s.all_of) {
    if (!Contains(t, f)) return false;
  }
  for (std::string_view f : s.none_of) {
    if (Contains(t, f)) return false;
  }
  return true;
}

// Checked in order; the first match wins. (Built once, never destroyed.)
const std::vector<Signature>& Signatures() {
  static const auto* signatures = new std::vector<Signature>{
      // Qwen3 (hybrid thinking, Qwen3-0.6B ... Qwen3-32B).
      {ChatTemplate::kQwen3,
       {"<|im_start|>", "enable_thinking is defined and enable_thinking is false",
        "'<think>\\n\\n</think>\\n\\n'", "ns.last_query_index", "multi_step_tool",
        "reasoning_content.strip('\\n')", "'<|im_start|>' + message.role + '\\n' + content",
        "<tool_response>"},
       {}},
      // Qwen2.5 Instruct (also Coder): default system prompt, tools.
      {ChatTemplate::kQwen25,
       {"<|im_start|>", "{%- if tools %}", "(message.role == \"system\" and not loop.first)",
        "(message.role == \"assistant\" and not message.tool_calls)", "<tool_response>"},
       {"<think>", "reasoning", "enable_thinking"}},
      // Plain ChatML: one turn per message, nothing else.
      {ChatTemplate::kChatML,
       {"<|im_start|>", "<|im_end|>", "add_generation_prompt"},
       {"tool", "think", "reasoning", "<|im_sep|>", "<end_of_utterance>", "namespace",
        "raise_exception", "trim", "strip", "date", "[-1]", "loop.last", "image",
        "<|im_start|>user"}},
      // Llama 3.1 and 3.3 (byte-identical templates).
      {ChatTemplate::kLlama31,
       {"<|start_header_id|>", "{%- set date_string = \"26 Jul 2024\" %}",
        "\"Cutting Knowledge Date: December 2023\\n\"",
        "\"Today Date: \" + date_string + \"\\n\\n\"",
        "{%- set system_message = messages[0]['content']|trim %}",
        "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
        "trim + '<|eot_id|>'",
        "builtin_tools", "{{- system_message }}", "{{- bos_token }}"},
       {"strftime_now"}},
      // Llama 3.2 (1B/3B; strftime_now, no built-in tools).
      {ChatTemplate::kLlama32,
       {"<|start_header_id|>", "strftime_now(\"%d %b %Y\")",
        "{%- set date_string = \"26 Jul 2024\" %}", "\"Cutting Knowledge Date: December 2023\\n\"",
        "\"Today Date: \" + date_string + \"\\n\\n\"",
        "{%- set system_message = messages[0]['content']|trim %}",
        "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
        "trim + '<|eot_id|>'",
        "{{- system_message }}", "{{- bos_token }}"},
       {"builtin_tools"}},
      // Llama 3 (3.0) Instruct.
      {ChatTemplate::kLlama3,
       {"<|start_header_id|>", "<|end_header_id|>", "message['content'] | trim + '<|eot_id|>'",
        "bos_token + content", "add_generation_prompt"},
       {"Cutting Knowledge", "date", "tool", "function", "system_message", "ipython"}},
      // Gemma 3: system folded into the first user turn.
      {ChatTemplate::kGemma,
       {"<start_of_turn>", "first_user_prefix", "{{ message['content'] | trim }}",
        "Conversation roles must alternate user/assistant/user/assistant/...", "{{ bos_token }}"},
       {"tool", "System role not supported"}},
      // Gemma 1 and 2: system messages refused.
      {ChatTemplate::kGemma2,
       {"<start_of_turn>", "{{ raise_exception('System role not supported') }}",
        "message['content'] | trim + '<end_of_turn>", "{{ bos_token }}",
        "Conversation roles must alternate user/assistant/user/assistant/..."},
       {"tool", "first_user_prefix"}},
      // Phi-3.5-mini / Phi-3 (current).
      {ChatTemplate::kPhi3,
       {"<|user|>", "<|end|>", "message['role'] == 'system' and message['content']",
        "{% else %}{{ eos_token }}", "add_generation_prompt"},
       {"bos_token", "tool"}},
      // The first Phi-3-mini template.
      {ChatTemplate::kPhi3Legacy,
       {"<|user|>", "<|end|>", "{{ bos_token }}", "'<|assistant|>' + '",
        "message['content'] + '<|end|>'"},
       {"system", "add_generation_prompt", "tool", "eos_token"}},
      // Zephyr.
      {ChatTemplate::kZephyr,
       {"<|user|>", "<|assistant|>", "message['content'] + eos_token",
        "loop.last and add_generation_prompt"},
       {"<|end|>", "tool"}},
      // Mistral 'v3' (Mistral-Large-Instruct-2407's template).
      {ChatTemplate::kMistralV3,
       {"[INST]", "[AVAILABLE_TOOLS]", "loop.last and system_message is defined",
        "\"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\"",
        "\" \" + message[\"content\"]|trim + eos_token", "{{- bos_token }}"},
       {"[SYSTEM_PROMPT]"}},
      // Mistral 'v3-tekken' (Mistral-Nemo-2407).
      {ChatTemplate::kMistralV3Tekken,
       {"[INST]", "[AVAILABLE_TOOLS]", "loop.last and system_message is defined",
        "\"[INST]\" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\"",
        "{{- message[\"content\"] + eos_token}}", "{{- bos_token }}"},
       {"[SYSTEM_PROMPT]"}},
      // Mistral 'v1' (Mistral-7B-Instruct v0.1/v0.2, with a system prompt).
      {ChatTemplate::kMistral,
       {"[INST]", "' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]'",
        "' [INST] ' + message['content'] + ' [/INST]'", "' ' + message['content'] + eos_token",
        "{{- bos_token }}"},
       {"[SYSTEM_PROMPT]", "tool"}},
      // Llama-2-chat.
      {ChatTemplate::kLlama2,
       {"[INST]", "<<SYS>>", "bos_token + '[INST] ' + content.strip() + ' [/INST]'",
        "' '  + content.strip() + ' ' + eos_token", "loop.index0 == 0 and system_message != false"},
       {"tool"}},
  };
  return *signatures;
}

// Markers of the families, to say which one an unsupported template resembles.
constexpr std::pair<std::string_view, std::string_view> kFamilyMarkers[] = {
    {"<|im_start|>", "ChatML/Qwen"}, {"<|start_header_id|>", "Llama 3"},
    {"<start_of_turn>", "Gemma"},    {"[SYSTEM_PROMPT]", "Mistral v7"},
    {"[INST]", "Mistral/Llama 2"},   {"<|user|>", "Phi-3/Zephyr"},
};

// FNV-1a 64-bit: a short, stable name for a template text in messages.
uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// The first bytes of a template for a message: at most 48 bytes, cut on a
// UTF-8 boundary, control characters as \n, \t or \xNN.
std::string Excerpt(std::string_view t) {
  std::string out;
  size_t i = 0;
  while (i < t.size() && i < 48) {
    const auto c = static_cast<unsigned char>(t[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else {
      size_t n = LeadLength(c);
      uint32_t cp;
      if (n == 0 || i + n > t.size() || !DecodeOne(t.substr(i, n), &cp)) {
        out += "\\x";
        static constexpr char kHex[] = "0123456789abcdef";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      } else {
        out.append(t.substr(i, n));
        i += n;
        continue;
      }
    }
    ++i;
  }
  if (i < t.size()) out += "...";
  return out;
}

absl::Status Unrecognised(std::string_view t) {
  std::string resembles;
  for (const auto& [marker, family] : kFamilyMarkers) {
    if (Contains(t, marker)) {
      resembles = Cat("; it looks like a ", family,
                      " template, but not one whose rendering libllm reproduces exactly");
      break;
    }
  }
  return Errorf(LLM_ERR_UNSUPPORTED,
                "the model's chat template is not supported (%d bytes, fnv1a64 %016x, begins "
                "\"%s\")%s; pass one of the built-in templates by name: %s",
                t.size(), Fnv1a64(t), Excerpt(t), resembles, kChatTemplateNameList);
}

}  // namespace

const std::string_view kChatTemplateNameList =
    "chatml, llama2, llama3, llama3.1, llama3.2, mistral, mistral-v3, mistral-v3-tekken, zephyr, "
    "phi3, phi3-legacy, gemma, gemma2, qwen2.5, qwen3";

absl::Span<const ChatTemplate> AllChatTemplates() { return kAll; }

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
                name, kChatTemplateNameList);
}

absl::StatusOr<ChatTemplateInfo> DetectChatTemplateInfo(std::string_view t) {
  for (const Signature& s : Signatures()) {
    if (!Matches(t, s)) continue;
    ChatTemplateInfo info;
    info.kind = s.kind;
    if (s.kind == ChatTemplate::kChatML) {
      info.default_system_prompt = ExtractChatMLDefaultSystem(t);
    } else if (s.kind == ChatTemplate::kQwen25) {
      // The literal of the no-tools branch; a template without one is a
      // variant we do not know.
      info.default_system_prompt = FindChatMLSystemLiteral(t);
      if (info.default_system_prompt.empty()) break;
    }
    return info;
  }
  return Unrecognised(t);
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
  if (ChatTemplateName(tmpl) == "unknown") {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "unknown chat template value %d",
                  static_cast<int>(tmpl));
  }
  std::string_view eos = options.eos_text;
  if (eos.empty()) eos = tmpl == ChatTemplate::kPhi3 ? "<|endoftext|>" : "</s>";
  LLM_RETURN_IF_ERROR(CheckRoles(tmpl, messages));
  const SplitSystem split = SplitLeadingSystem(messages);

  switch (tmpl) {
    case ChatTemplate::kChatML:
      return RenderChatML(messages, options);
    case ChatTemplate::kLlama2:
      LLM_RETURN_IF_ERROR(CheckAlternating(tmpl, split.loop));
      return RenderLlama2(split, options.bos_text, eos);
    case ChatTemplate::kLlama3:
      return RenderLlama3(messages, options);
    case ChatTemplate::kLlama31:
    case ChatTemplate::kLlama32:
      return RenderLlama31(split, options);
    case ChatTemplate::kMistral:
      LLM_RETURN_IF_ERROR(CheckAlternating(tmpl, split.loop));
      return RenderMistral(split, options.bos_text, eos);
    case ChatTemplate::kMistralV3:
    case ChatTemplate::kMistralV3Tekken:
      LLM_RETURN_IF_ERROR(CheckAlternating(tmpl, split.loop));
      return RenderMistralV3(split, tmpl == ChatTemplate::kMistralV3Tekken, options.bos_text, eos);
    case ChatTemplate::kZephyr:
      return RenderZephyr(messages, options, eos);
    case ChatTemplate::kPhi3:
      return RenderPhi3(messages, options, eos);
    case ChatTemplate::kPhi3Legacy:
      return RenderPhi3Legacy(messages, options.bos_text);
    case ChatTemplate::kGemma:
      LLM_RETURN_IF_ERROR(CheckAlternating(tmpl, split.loop));
      return RenderGemma(split, options);
    case ChatTemplate::kGemma2:
      if (split.has_system) {
        return Error(LLM_ERR_INVALID_ARGUMENT,
                     "chat template gemma2: the template refuses system messages (\"System role "
                     "not supported\"); put the instructions in the first user message");
      }
      LLM_RETURN_IF_ERROR(CheckAlternating(tmpl, messages));
      return RenderGemma(split, options);
    case ChatTemplate::kQwen25:
      return RenderQwen25(messages, options);
    case ChatTemplate::kQwen3:
      return RenderQwen3(messages, options);
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
