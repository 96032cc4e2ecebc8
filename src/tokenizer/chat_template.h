// Chat templates: turn a list of {role, content} messages into the prompt text
// a chat model was trained on.
//
// We do not run Jinja. A model's `tokenizer.chat_template` text is recognised
// by distinctive markers (as llama.cpp's llm_chat_detect_template does) and
// mapped to one of a few built-in renderers, each written to reproduce the
// official Hugging Face template of that family byte for byte (checked against
// jinja2 renderings in tests/data/chat/goldens.json, made by
// tools/gen_chat_goldens.py).
//
// The output contains control tokens as text ("<|im_start|>", "[INST]"...);
// tokenize it with parse_special = true. Message content is copied verbatim
// (or trimmed where the official template trims it), so content containing
// control-token text is NOT escaped, exactly like the Jinja templates.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace llm {

struct ChatMessage {
  std::string_view role;     // "system", "user", "assistant" (ChatML: any role)
  std::string_view content;  // UTF-8
};

enum class ChatTemplate { kChatML, kLlama2, kLlama3, kMistral, kZephyr, kPhi3, kGemma };

// What a model's template text says: the renderer family plus the default
// system prompt some ChatML templates insert when the conversation does not
// start with a system message (SmolLM2: "You are a helpful AI assistant named
// SmolLM, trained by Hugging Face"; Qwen2: "You are a helpful assistant.").
// default_system_prompt is "" when the template has none.
struct ChatTemplateInfo {
  ChatTemplate kind = ChatTemplate::kChatML;
  std::string default_system_prompt;
};

// Recognise a Jinja chat template by markers, checked in this order:
//   "<|im_start|>"                      -> ChatML
//   "<|start_header_id|>"               -> Llama-3
//   "<start_of_turn>"                   -> Gemma
//   "<|user|>" and "<|end|>"            -> Phi-3
//   "<|user|>" (eos_token / "</s>")     -> Zephyr
//   "[INST]" and "<<SYS>>"              -> Llama-2
//   "[INST]"                            -> Mistral
// Anything else (including "") -> LLM_ERR_UNSUPPORTED naming the built-in
// templates. The default system prompt is extracted for ChatML only: the first
// string literal of the form '<|im_start|>system\n...<|im_end|>' that holds no
// Jinja expression (the Qwen2/SmolLM2 pattern).
absl::StatusOr<ChatTemplateInfo> DetectChatTemplateInfo(std::string_view jinja_text);

// DetectChatTemplateInfo(jinja_text)->kind.
absl::StatusOr<ChatTemplate> DetectChatTemplate(std::string_view jinja_text);

// Built-in names: "chatml", "llama2", "llama3", "mistral", "zephyr", "phi3",
// "gemma" (exact, lower case). Unknown -> LLM_ERR_UNSUPPORTED listing them.
absl::StatusOr<ChatTemplate> ChatTemplateFromName(std::string_view name);

// The built-in name of a template ("chatml", ...).
std::string_view ChatTemplateName(ChatTemplate tmpl);

struct ChatFormatOptions {
  // Append the assistant header so the model continues as the assistant.
  // Llama-2's official template has no such switch and always ends a user turn
  // with " [/INST]"; Phi-3's appends eos_text when this is false.
  bool add_generation_prompt = true;
  // The model's BOS token text; Llama-2/Llama-3/Mistral/Gemma start with it.
  // "" if the model has none (nothing is written then).
  std::string_view bos_text;
  // The model's EOS token text, written after assistant turns by Llama-2,
  // Mistral and Zephyr and at the end by Phi-3 without a generation prompt.
  // "" -> the family's usual one ("</s>"; Phi-3: "<|endoftext|>").
  std::string_view eos_text;
  // ChatML only: inserted as a system message when the first message is not a
  // system message (ChatTemplateInfo::default_system_prompt). "" -> none.
  std::string_view default_system;
};

// Render messages. Errors (LLM_ERR_INVALID_ARGUMENT, nothing rendered):
//  - no messages;
//  - a role other than system/user/assistant (ChatML accepts any role);
//  - Llama-2, Mistral, Gemma: a system message anywhere but first, or turns
//    that do not alternate user/assistant starting with user (these official
//    templates raise_exception on that).
// Per family, as the official templates do:
//  - Llama-2: system goes in "<<SYS>>\n...\n<</SYS>>\n\n" inside the first
//    user turn; turn text is trimmed (Python str.strip whitespace).
//  - Llama-3, Gemma: content trimmed; Gemma merges the system message as
//    "system\n\n" before the first user message and names the assistant
//    "model".
//  - Mistral: system merged as "system\n\n" before the first user message.
//  - Phi-3: an empty system message is skipped.
absl::StatusOr<std::string> FormatChat(ChatTemplate tmpl, absl::Span<const ChatMessage> messages,
                                       const ChatFormatOptions& options);

// Convenience: options {add_generation_prompt, bos_text}, family default EOS,
// no default system prompt.
absl::StatusOr<std::string> FormatChat(ChatTemplate tmpl, absl::Span<const ChatMessage> messages,
                                       bool add_generation_prompt, std::string_view bos_text);

// Python str.strip() on UTF-8 text: removes leading/trailing code points
// that Python considers whitespace (ASCII whitespace, U+001C..U+001F, U+0085,
// U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000).
// Invalid UTF-8 stops the trimming (it is never whitespace).
std::string_view StripPythonWhitespace(std::string_view text);

}  // namespace llm
