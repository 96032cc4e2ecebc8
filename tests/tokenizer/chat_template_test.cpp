// Chat templates: detection of real template texts, rendering equal to jinja2
// renderings of the official templates (tests/data/chat/goldens.json, made by
// tools/gen_chat_goldens.py), and refusals with messages.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/status.h"

namespace llm {
namespace {

// ---- a minimal JSON reader (objects, arrays, strings, bools, null) ------
// Only what goldens.json uses; numbers are not needed.
struct Json {
  enum Kind { kNull, kBool, kString, kArray, kObject } kind = kNull;
  bool b = false;
  std::string s;
  std::vector<Json> a;
  std::map<std::string, Json> o;
  const Json& operator[](const std::string& key) const {
    static const Json null;
    auto it = o.find(key);
    return it == o.end() ? null : it->second;
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : t_(text) {}
  bool Parse(Json* out) {
    if (!Value(out)) return false;
    Ws();
    return p_ == t_.size();
  }

 private:
  void Ws() {
    while (p_ < t_.size() &&
           (t_[p_] == ' ' || t_[p_] == '\n' || t_[p_] == '\r' || t_[p_] == '\t')) {
      ++p_;
    }
  }
  bool Lit(const char* lit) {
    const std::string l(lit);
    if (t_.compare(p_, l.size(), l) != 0) return false;
    p_ += l.size();
    return true;
  }
  static void AppendUtf8(uint32_t cp, std::string* s) {
    if (cp < 0x80) {
      *s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *s += static_cast<char>(0xC0 | (cp >> 6));
      *s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *s += static_cast<char>(0xE0 | (cp >> 12));
      *s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *s += static_cast<char>(0xF0 | (cp >> 18));
      *s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  bool Hex4(uint32_t* v) {
    if (p_ + 4 > t_.size()) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = t_[p_++];
      *v <<= 4;
      if (c >= '0' && c <= '9') {
        *v |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        *v |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        *v |= c - 'A' + 10;
      } else {
        return false;
      }
    }
    return true;
  }
  bool String(std::string* s) {
    if (p_ >= t_.size() || t_[p_] != '"') return false;
    ++p_;
    while (p_ < t_.size()) {
      const char c = t_[p_++];
      if (c == '"') return true;
      if (c != '\\') {
        *s += c;
        continue;
      }
      if (p_ >= t_.size()) return false;
      const char e = t_[p_++];
      switch (e) {
        case '"':
          *s += '"';
          break;
        case '\\':
          *s += '\\';
          break;
        case '/':
          *s += '/';
          break;
        case 'b':
          *s += '\b';
          break;
        case 'f':
          *s += '\f';
          break;
        case 'n':
          *s += '\n';
          break;
        case 'r':
          *s += '\r';
          break;
        case 't':
          *s += '\t';
          break;
        case 'u': {
          uint32_t cp;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {
            uint32_t lo;
            if (!Lit("\\u") || !Hex4(&lo)) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          AppendUtf8(cp, s);
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }
  bool Value(Json* v) {
    Ws();
    if (p_ >= t_.size()) return false;
    const char c = t_[p_];
    if (c == '"') {
      v->kind = Json::kString;
      return String(&v->s);
    }
    if (c == '[') {
      ++p_;
      v->kind = Json::kArray;
      Ws();
      if (p_ < t_.size() && t_[p_] == ']') return ++p_, true;
      while (true) {
        v->a.emplace_back();
        if (!Value(&v->a.back())) return false;
        Ws();
        if (p_ < t_.size() && t_[p_] == ',') {
          ++p_;
          continue;
        }
        if (p_ < t_.size() && t_[p_] == ']') return ++p_, true;
        return false;
      }
    }
    if (c == '{') {
      ++p_;
      v->kind = Json::kObject;
      Ws();
      if (p_ < t_.size() && t_[p_] == '}') return ++p_, true;
      while (true) {
        Ws();
        std::string key;
        if (!String(&key)) return false;
        Ws();
        if (p_ >= t_.size() || t_[p_] != ':') return false;
        ++p_;
        if (!Value(&v->o[key])) return false;
        Ws();
        if (p_ < t_.size() && t_[p_] == ',') {
          ++p_;
          continue;
        }
        if (p_ < t_.size() && t_[p_] == '}') return ++p_, true;
        return false;
      }
    }
    if (Lit("true")) return v->kind = Json::kBool, v->b = true, true;
    if (Lit("false")) return v->kind = Json::kBool, v->b = false, true;
    if (Lit("null")) return v->kind = Json::kNull, true;
    return false;
  }

  const std::string& t_;
  size_t p_ = 0;
};

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string kChatDir = std::string(LLM_TEST_DATA_DIR) + "/chat";

const Json& Goldens() {
  static const Json* goldens = [] {
    auto* j = new Json;
    const std::string text = ReadFile(kChatDir + "/goldens.json");
    if (!JsonParser(text).Parse(j)) j->kind = Json::kNull;
    return j;
  }();
  return *goldens;
}

TEST(ChatTemplateGoldens, FileParses) {
  const Json& g = Goldens();
  ASSERT_EQ(g.kind, Json::kObject) << "cannot read " << kChatDir << "/goldens.json";
  EXPECT_GT(g["cases"].a.size(), 100u);
  EXPECT_EQ(g["detect"].o.size(), 11u);
}

TEST(ChatTemplateDetect, DetectsEveryTemplateText) {
  const Json& detect = Goldens()["detect"];
  ASSERT_EQ(detect.kind, Json::kObject);
  for (const auto& [file, kind] : detect.o) {
    SCOPED_TRACE(file);
    const std::string text = ReadFile(kChatDir + "/templates/" + file + ".jinja");
    ASSERT_FALSE(text.empty());
    auto got = DetectChatTemplate(text);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(ChatTemplateName(*got), kind.s);
    auto expected = ChatTemplateFromName(kind.s);
    ASSERT_TRUE(expected.ok());
    EXPECT_EQ(*got, *expected);
  }
}

TEST(ChatTemplateDetect, ExtractsDefaultSystemPrompt) {
  auto smol = DetectChatTemplateInfo(ReadFile(kChatDir + "/templates/smollm2.jinja"));
  ASSERT_TRUE(smol.ok()) << smol.status();
  EXPECT_EQ(smol->kind, ChatTemplate::kChatML);
  EXPECT_EQ(smol->default_system_prompt,
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  auto qwen = DetectChatTemplateInfo(ReadFile(kChatDir + "/templates/qwen2.jinja"));
  ASSERT_TRUE(qwen.ok());
  EXPECT_EQ(qwen->default_system_prompt, "You are a helpful assistant.");
  auto plain = DetectChatTemplateInfo(ReadFile(kChatDir + "/templates/chatml.jinja"));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->default_system_prompt, "");
  // A Jinja-escaped newline ("\\n" in the source) is understood too, and a
  // literal holding an expression is not taken for a default prompt.
  auto escaped = DetectChatTemplateInfo(
      "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nBe nice.<|im_end|>\\n' "
      "}}{% endif %}");
  ASSERT_TRUE(escaped.ok());
  EXPECT_EQ(escaped->default_system_prompt, "Be nice.");
  auto expr = DetectChatTemplateInfo(
      "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n' + x + '<|im_end|>' }}");
  ASSERT_TRUE(expr.ok());
  EXPECT_EQ(expr->default_system_prompt, "");
}

TEST(ChatTemplateDetect, UnknownTemplateIsUnsupportedWithMessage) {
  for (const std::string& text :
       {std::string(), std::string("{% for m in messages %}{{ m['content'] }}{% endfor %}"),
        std::string("### Instruction:\n{{ prompt }}\n### Response:")}) {
    auto got = DetectChatTemplate(text);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(ToLlmStatus(got.status()), LLM_ERR_UNSUPPORTED);
    const std::string msg(got.status().message());
    EXPECT_NE(msg.find("not recognised"), std::string::npos) << msg;
    for (const char* name : {"chatml", "llama2", "llama3", "mistral", "zephyr", "phi3", "gemma"}) {
      EXPECT_NE(msg.find(name), std::string::npos) << msg;
    }
  }
}

TEST(ChatTemplateNames, RoundTripAndUnknown) {
  for (const char* name : {"chatml", "llama2", "llama3", "mistral", "zephyr", "phi3", "gemma"}) {
    auto t = ChatTemplateFromName(name);
    ASSERT_TRUE(t.ok()) << name;
    EXPECT_EQ(ChatTemplateName(*t), name);
  }
  for (const char* bad : {"", "ChatML", "llama-3", "vicuna", "chatml "}) {
    auto t = ChatTemplateFromName(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(ToLlmStatus(t.status()), LLM_ERR_UNSUPPORTED);
    const std::string msg(t.status().message());
    EXPECT_NE(msg.find("gemma"), std::string::npos) << msg;
    EXPECT_NE(msg.find("chatml"), std::string::npos) << msg;
  }
}

TEST(ChatTemplateGoldens, RenderingEqualsJinja) {
  const Json& cases = Goldens()["cases"];
  ASSERT_EQ(cases.kind, Json::kArray);
  int rendered = 0, refused = 0;
  for (const Json& c : cases.a) {
    SCOPED_TRACE(c["name"].s);
    auto kind = ChatTemplateFromName(c["kind"].s);
    ASSERT_TRUE(kind.ok());
    std::vector<ChatMessage> messages;
    for (const Json& m : c["messages"].a) messages.push_back({m["role"].s, m["content"].s});
    ChatFormatOptions options;
    options.add_generation_prompt = c["add_generation_prompt"].b;
    options.bos_text = c["bos"].s;
    options.eos_text = c["eos"].s;
    // The default system prompt comes from detecting the template text, as
    // the engine does with a model's tokenizer.chat_template.
    auto info =
        DetectChatTemplateInfo(ReadFile(kChatDir + "/templates/" + c["template"].s + ".jinja"));
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->kind, *kind);
    EXPECT_EQ(info->default_system_prompt, c["default_system"].s);
    options.default_system = info->default_system_prompt;
    auto got = FormatChat(*kind, messages, options);
    if (c["error"].b) {
      ASSERT_FALSE(got.ok()) << *got;
      EXPECT_EQ(ToLlmStatus(got.status()), LLM_ERR_INVALID_ARGUMENT);
      EXPECT_FALSE(got.status().message().empty());
      ++refused;
    } else {
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, c["expected"].s);
      ++rendered;
    }
  }
  EXPECT_GT(rendered, 100);
  EXPECT_GT(refused, 5);
}

TEST(ChatTemplateFormat, ShortOverloadUsesFamilyEos) {
  const std::vector<ChatMessage> msgs = {{"user", "Hi"}, {"assistant", "Yo"}};
  auto l2 = FormatChat(ChatTemplate::kLlama2, msgs, false, "<s>");
  ASSERT_TRUE(l2.ok());
  EXPECT_EQ(*l2, "<s>[INST] Hi [/INST] Yo </s>");
  auto phi = FormatChat(ChatTemplate::kPhi3, msgs, false, "");
  ASSERT_TRUE(phi.ok());
  EXPECT_EQ(*phi, "<|user|>\nHi<|end|>\n<|assistant|>\nYo<|end|>\n<|endoftext|>");
  auto chatml = FormatChat(ChatTemplate::kChatML, msgs, true, "<|im_start|>");
  ASSERT_TRUE(chatml.ok());
  EXPECT_EQ(*chatml,
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateFormat, RefusesBadInput) {
  const std::vector<ChatMessage> none;
  const std::vector<ChatMessage> tool = {{"user", "a"}, {"tool", "b"}};
  const std::vector<ChatMessage> late_system = {{"user", "a"}, {"assistant", "b"}, {"system", "c"}};
  for (const auto& [name, tmpl] :
       std::vector<std::pair<std::string, ChatTemplate>>{{"chatml", ChatTemplate::kChatML},
                                                         {"llama2", ChatTemplate::kLlama2},
                                                         {"llama3", ChatTemplate::kLlama3},
                                                         {"mistral", ChatTemplate::kMistral},
                                                         {"zephyr", ChatTemplate::kZephyr},
                                                         {"phi3", ChatTemplate::kPhi3},
                                                         {"gemma", ChatTemplate::kGemma}}) {
    SCOPED_TRACE(name);
    auto empty = FormatChat(tmpl, none, true, "");
    ASSERT_FALSE(empty.ok());
    EXPECT_EQ(ToLlmStatus(empty.status()), LLM_ERR_INVALID_ARGUMENT);
    auto t = FormatChat(tmpl, tool, true, "");
    if (tmpl == ChatTemplate::kChatML) {
      EXPECT_TRUE(t.ok());
    } else {
      ASSERT_FALSE(t.ok());
      EXPECT_EQ(ToLlmStatus(t.status()), LLM_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(t.status().message()).find("tool"), std::string::npos);
    }
    auto ls = FormatChat(tmpl, late_system, true, "");
    const bool needs_alternation = tmpl == ChatTemplate::kLlama2 ||
                                   tmpl == ChatTemplate::kMistral || tmpl == ChatTemplate::kGemma;
    EXPECT_EQ(ls.ok(), !needs_alternation);
  }
  // An out-of-range enum value is refused, not rendered.
  auto bogus = FormatChat(static_cast<ChatTemplate>(99), tool, true, "");
  EXPECT_FALSE(bogus.ok());
}

TEST(ChatTemplateStrip, MatchesPythonStrip) {
  EXPECT_EQ(StripPythonWhitespace(" \t\n\v\f\r x y \x1c\x1f"), "x y");
  EXPECT_EQ(StripPythonWhitespace("\u3000\u00a0\u2028a\u2009\u0085"), "a");
  EXPECT_EQ(StripPythonWhitespace("\u200b a"), "\u200b a");  // ZWSP is not whitespace
  EXPECT_EQ(StripPythonWhitespace("   "), "");
  EXPECT_EQ(StripPythonWhitespace(""), "");
  // Invalid UTF-8 at either end stops trimming and is kept.
  EXPECT_EQ(StripPythonWhitespace("\xa0 x \xc2"), "\xa0 x \xc2");
  EXPECT_EQ(StripPythonWhitespace(" \x80\x80\x80\x80 "), "\x80\x80\x80\x80");
}

}  // namespace
}  // namespace llm
