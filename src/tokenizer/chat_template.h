// Chat templates: turn a list of {role, content} messages into the prompt text
// a chat model was trained on.
//
// We do not run Jinja. A model's `tokenizer.chat_template` text is recognised
// by signatures (several distinctive fragments each, plus fragments that must
// be absent) and mapped to one of a few built-in renderers, each written to
// reproduce one official Hugging Face template byte for byte for the
// conversations it accepts (checked against jinja2 renderings in
// tests/data/chat/goldens.json.gz, made by tools/gen_chat_goldens.py). A
// template that matches no signature is reported unsupported, never rendered
// by the nearest family: docs/CHAT_TEMPLATES.md lists the templates and the
// rules.
//
// The output contains control tokens as text ("<|im_start|>", "[INST]"...);
// tokenize it with parse_special = true (and add_special = false where the
// template writes the BOS text itself). Message content is copied verbatim
// (or trimmed where the official template trims it), so content containing
// control-token text is NOT escaped, exactly like the Jinja templates.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace llm {

struct ChatMessage {
  std::string_view role;     // "system", "user", "assistant" (ChatML: any role;
                             // Qwen2.5/Qwen3 also "tool")
  std::string_view content;  // UTF-8
};

// One value per renderer. Values are internal (the C ABI names templates by
// their built-in name); new ones are appended.
enum class ChatTemplate {
  kChatML,           // "chatml": plain ChatML (SmolLM2, Qwen2, OpenHermes...)
  kLlama2,           // "llama2": Llama-2-chat
  kLlama3,           // "llama3": Llama 3 (3.0) Instruct
  kMistral,          // "mistral": Mistral 'v1' (Mistral-7B-Instruct v0.1/v0.2)
  kZephyr,           // "zephyr"
  kPhi3,             // "phi3": Phi-3.5-mini / Phi-3 (current)
  kGemma,            // "gemma": Gemma 3 (system folded into the first user turn)
  kLlama31,          // "llama3.1": Llama 3.1 and 3.3 Instruct
  kLlama32,          // "llama3.2": Llama 3.2 Instruct
  kQwen25,           // "qwen2.5": Qwen2.5 Instruct
  kQwen3,            // "qwen3": Qwen3 (hybrid thinking)
  kMistralV3,        // "mistral-v3": Mistral-Large-Instruct-2407's template
  kMistralV3Tekken,  // "mistral-v3-tekken": Mistral-Nemo-2407
  kPhi3Legacy,       // "phi3-legacy": the first Phi-3-mini template
  kGemma2,           // "gemma2": Gemma 1/2 (refuses system messages)
};

// Every ChatTemplate value, in enum order.
absl::Span<const ChatTemplate> AllChatTemplates();

// What a model's template text says: the renderer plus the default system
// prompt some templates insert when the conversation does not start with a
// system message (SmolLM2: "You are a helpful AI assistant named SmolLM,
// trained by Hugging Face"; Qwen2: "You are a helpful assistant."; Qwen2.5:
// "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.").
// default_system_prompt is "" when the template has none.
struct ChatTemplateInfo {
  ChatTemplate kind = ChatTemplate::kChatML;
  std::string default_system_prompt;
};

// Recognise a Jinja chat template by its signature (docs/CHAT_TEMPLATES.md
// has the table). Unrecognised text (including "") -> LLM_ERR_UNSUPPORTED
// naming the template (size, FNV-1a hash, first bytes, the family it
// resembles) and listing the built-in names. The default system prompt is
// the template's own literal (ChatML, Qwen2.5).
absl::StatusOr<ChatTemplateInfo> DetectChatTemplateInfo(std::string_view jinja_text);

// DetectChatTemplateInfo(jinja_text)->kind.
absl::StatusOr<ChatTemplate> DetectChatTemplate(std::string_view jinja_text);

// Built-in names (exact, lower case): see kChatTemplateNameList. Unknown ->
// LLM_ERR_UNSUPPORTED listing them.
absl::StatusOr<ChatTemplate> ChatTemplateFromName(std::string_view name);

// "chatml, llama2, ..." (every built-in name, comma separated).
extern const std::string_view kChatTemplateNameList;

// The built-in name of a template ("chatml", ...).
std::string_view ChatTemplateName(ChatTemplate tmpl);

// Llama 3.1/3.2's "Today Date: ..." when the caller gives none: the value
// the official templates set when `date_string` is undefined (Llama 3.2's
// template prefers strftime_now("%d %b %Y") when the renderer defines it, as
// transformers does; jinja2 without it, and libllm, use this).
inline constexpr std::string_view kLlama3DefaultDate = "26 Jul 2024";

// Qwen2.5's default system prompt when the template is picked by name.
inline constexpr std::string_view kQwen25DefaultSystem =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

// The `enable_thinking` variable of Qwen3's template: undefined (kDefault:
// the model thinks), true, or false (an empty "<think>\n\n</think>\n\n" is
// appended to the generation prompt so that the model answers directly).
enum class ThinkingMode { kDefault, kEnabled, kDisabled };

struct ChatFormatOptions {
  // Append the assistant header so the model continues as the assistant.
  // Llama-2's, Mistral's and Phi-3-legacy's official templates have no such
  // switch (a user turn always ends ready for the answer); Phi-3's appends
  // eos_text when this is false.
  bool add_generation_prompt = true;
  // The model's BOS token text; Llama-2/Llama-3.x/Mistral/Gemma/Phi-3-legacy
  // start with it. "" if the model has none (nothing is written then).
  std::string_view bos_text;
  // The model's EOS token text, written after assistant turns by Llama-2,
  // Mistral and Zephyr and at the end by Phi-3 without a generation prompt.
  // "" -> the family's usual one ("</s>"; Phi-3: "<|endoftext|>").
  std::string_view eos_text;
  // ChatML and Qwen2.5: inserted as a system message when the first message
  // is not a system message (ChatTemplateInfo::default_system_prompt).
  // "" -> none for ChatML; kQwen25DefaultSystem for Qwen2.5.
  std::string_view default_system;
  // Llama 3.1/3.2's `date_string`; nullopt -> kLlama3DefaultDate. Other
  // templates do not read it (as with jinja2, an unused variable is ignored).
  std::optional<std::string_view> date_string;
  // Qwen3's `enable_thinking`; other templates do not read it.
  ThinkingMode enable_thinking = ThinkingMode::kDefault;
};

// Render messages. Errors (LLM_ERR_INVALID_ARGUMENT, nothing rendered), where
// the official template calls raise_exception or where it would do something
// we do not reproduce:
//  - no messages;
//  - a role other than system/user/assistant (ChatML accepts any role,
//    Qwen2.5/Qwen3 also "tool"); the Jinja templates silently drop or
//    re-route such roles, libllm refuses them rather than guess;
//  - Llama-2, Mistral (all three), Gemma, Gemma 2: a system message anywhere
//    but first, or turns that do not alternate user/assistant starting with
//    user; Gemma 2: any system message ("System role not supported").
// Per family, as the official templates do (docs/CHAT_TEMPLATES.md):
//  - Llama-2: system goes in "<<SYS>>\n...\n<</SYS>>\n\n" inside the first
//    user turn; turn text is trimmed (Python str.strip whitespace).
//  - Llama 3: content trimmed. Llama 3.1/3.2: a system header is always
//    written ("Cutting Knowledge Date: December 2023\nToday Date: <date>\n\n"
//    + the trimmed system message, if any).
//  - Gemma, Gemma 2: content trimmed, the assistant is named "model"; Gemma
//    merges the system message as "system\n\n" before the first user turn.
//  - Mistral v1: system merged before the first user message. Mistral v3 and
//    v3-tekken: system merged before the LAST message when it is a user
//    message, and dropped otherwise (exactly as the templates do).
//  - Phi-3: an empty system message is skipped. Phi-3-legacy: system
//    messages are dropped (the template has no system turn).
//  - Qwen3: reasoning in assistant turns ("<think>...</think>") is kept only
//    after the last user query; enable_thinking as above.
absl::StatusOr<std::string> FormatChat(ChatTemplate tmpl, absl::Span<const ChatMessage> messages,
                                       const ChatFormatOptions& options);

// Convenience: options {add_generation_prompt, bos_text}, family default EOS,
// no default system prompt, default variables.
absl::StatusOr<std::string> FormatChat(ChatTemplate tmpl, absl::Span<const ChatMessage> messages,
                                       bool add_generation_prompt, std::string_view bos_text);

// Python str.strip() on UTF-8 text: removes leading/trailing code points
// that Python considers whitespace (ASCII whitespace, U+001C..U+001F, U+0085,
// U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000).
// Invalid UTF-8 stops the trimming (it is never whitespace).
std::string_view StripPythonWhitespace(std::string_view text);

}  // namespace llm
