// Chat templates: detection of real template texts, rendering equal to jinja2
// renderings of the official templates (tests/data/chat/goldens.json.gz, made by
// tools/gen_chat_goldens.py), and refusals with messages.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>
#include <zlib.h>

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

// The whole decompressed text of a gzip file ("" if it cannot be read).
std::string ReadGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return "";
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  const bool ok = n == 0;
  gzclose(f);
  return ok ? out : "";
}

const std::string kChatDir = std::string(LLM_TEST_DATA_DIR) + "/chat";

const Json& Goldens() {
  static const Json* goldens = [] {
    auto* j = new Json;
    const std::string text = ReadGzip(kChatDir + "/goldens.json.gz");
    if (!JsonParser(text).Parse(j)) j->kind = Json::kNull;
    return j;
  }();
  return *goldens;
}

std::string TemplateText(const std::string& file) {
  return ReadFile(kChatDir + "/templates/" + file + ".jinja");
}

std::vector<std::string> AllNames() {
  std::vector<std::string> names;
  for (ChatTemplate t : AllChatTemplates()) names.emplace_back(ChatTemplateName(t));
  return names;
}

TEST(ChatTemplateGoldens, FileParses) {
  const Json& g = Goldens();
  ASSERT_EQ(g.kind, Json::kObject) << "cannot read " << kChatDir << "/goldens.json.gz";
  EXPECT_GT(g["cases"].a.size(), 800u);
  EXPECT_EQ(g["detect"].o.size(), 19u);
  EXPECT_GE(g["unsupported"].a.size(), 13u);
}

TEST(ChatTemplateDetect, DetectsEveryTemplateText) {
  const Json& detect = Goldens()["detect"];
  ASSERT_EQ(detect.kind, Json::kObject);
  for (const auto& [file, kind] : detect.o) {
    SCOPED_TRACE(file);
    const std::string text = TemplateText(file);
    ASSERT_FALSE(text.empty());
    auto got = DetectChatTemplate(text);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(ChatTemplateName(*got), kind.s);
    auto expected = ChatTemplateFromName(kind.s);
    ASSERT_TRUE(expected.ok());
    EXPECT_EQ(*got, *expected);
  }
}

// Real templates of other families, or of these families with features we
// do not render (tools in the prompt, reasoning formats, other defaults):
// reported unsupported, never rendered by the nearest family.
TEST(ChatTemplateDetect, OtherRealTemplatesAreUnsupported) {
  const Json& unsupported = Goldens()["unsupported"];
  ASSERT_EQ(unsupported.kind, Json::kArray);
  for (const Json& file : unsupported.a) {
    SCOPED_TRACE(file.s);
    const std::string text = TemplateText("unsupported/" + file.s);
    ASSERT_FALSE(text.empty());
    auto got = DetectChatTemplateInfo(text);
    ASSERT_FALSE(got.ok()) << "recognised as " << ChatTemplateName(got->kind);
    EXPECT_EQ(ToLlmStatus(got.status()), LLM_ERR_UNSUPPORTED);
    const std::string msg(got.status().message());
    EXPECT_NE(msg.find("fnv1a64"), std::string::npos) << msg;
    EXPECT_NE(msg.find("qwen3"), std::string::npos) << msg;
  }
}

// Small edits to a supported template (a tool block, a changed default, a
// different turn format) make it unsupported: the signatures pin what the
// renderer reproduces.
TEST(ChatTemplateDetect, EditedTemplatesAreUnsupported) {
  struct Edit {
    const char* file;
    std::string from, to;
  };
  const std::vector<Edit> edits = {
      {"llama3.1", "Cutting Knowledge Date: December 2023", "Cutting Knowledge Date: June 2024"},
      {"llama3.1", "\"26 Jul 2024\"", "\"01 Jan 2025\""},
      {"llama3.2", "message['content'] | trim + '<|eot_id|>'", "message['content'] + '<|eot_id|>'"},
      {"qwen3", "enable_thinking is defined and enable_thinking is false", "enable_thinking"},
      {"qwen3", "reasoning_content.strip('\\n')", "reasoning_content"},
      {"qwen2.5", "(message.role == \"system\" and not loop.first)",
       "(message.role == \"system\")"},
      {"mistral-v3", "\" \" + message[\"content\"]|trim + eos_token",
       "\" \" + message[\"content\"] + eos_token"},
      {"mistral-v3-tekken", "loop.last and system_message is defined",
       "loop.first and system_message is defined"},
      {"gemma2", "System role not supported", "System role is not supported"},
      {"gemma", "{{ message['content'] | trim }}", "{{ message['content'] }}"},
      {"phi3", "{% else %}{{ eos_token }}", "{% else %}"},
      {"smollm2", "{% endfor %}", "{% endfor %}{{ tools }}"},
  };
  for (const Edit& e : edits) {
    SCOPED_TRACE(std::string(e.file) + ": " + e.from);
    std::string text = TemplateText(e.file);
    ASSERT_TRUE(DetectChatTemplate(text).ok());
    const size_t at = text.find(e.from);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, e.from.size(), e.to);
    auto got = DetectChatTemplate(text);
    ASSERT_FALSE(got.ok()) << "recognised as " << ChatTemplateName(*got);
    EXPECT_EQ(ToLlmStatus(got.status()), LLM_ERR_UNSUPPORTED);
  }
}

TEST(ChatTemplateDetect, ExtractsDefaultSystemPrompt) {
  auto smol = DetectChatTemplateInfo(TemplateText("smollm2"));
  ASSERT_TRUE(smol.ok()) << smol.status();
  EXPECT_EQ(smol->kind, ChatTemplate::kChatML);
  EXPECT_EQ(smol->default_system_prompt,
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  auto qwen = DetectChatTemplateInfo(TemplateText("qwen2"));
  ASSERT_TRUE(qwen.ok());
  EXPECT_EQ(qwen->default_system_prompt, "You are a helpful assistant.");
  auto qwen25 = DetectChatTemplateInfo(TemplateText("qwen2.5"));
  ASSERT_TRUE(qwen25.ok());
  EXPECT_EQ(qwen25->kind, ChatTemplate::kQwen25);
  EXPECT_EQ(qwen25->default_system_prompt, kQwen25DefaultSystem);
  // A Qwen2.5-shaped template with another default keeps its own.
  std::string math = TemplateText("qwen2.5");
  for (size_t at; (at = math.find("You are Qwen, created by Alibaba Cloud. You are a helpful "
                                  "assistant.")) != std::string::npos;) {
    math.replace(at, 68, "Please reason step by step.");
  }
  auto qwen25_math = DetectChatTemplateInfo(math);
  ASSERT_TRUE(qwen25_math.ok());
  EXPECT_EQ(qwen25_math->default_system_prompt, "Please reason step by step.");
  auto plain = DetectChatTemplateInfo(TemplateText("chatml"));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->default_system_prompt, "");
  // A Jinja-escaped newline ("\\n" in the source) is understood too, and a
  // literal holding an expression is not taken for a default prompt.
  auto escaped = DetectChatTemplateInfo(
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
      "'<|im_start|>system\\nBe nice.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
      "message['role'] + '\\n' + message['content'] + '<|im_end|>\\n'}}{% endfor %}{% if "
      "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");
  ASSERT_TRUE(escaped.ok()) << escaped.status();
  EXPECT_EQ(escaped->default_system_prompt, "Be nice.");
  auto expr = DetectChatTemplateInfo(
      "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n' + x + '<|im_end|>' }}"
      "{% endif %}{% if add_generation_prompt %}{% endif %}");
  ASSERT_TRUE(expr.ok()) << expr.status();
  EXPECT_EQ(expr->default_system_prompt, "");
}

TEST(ChatTemplateDetect, UnknownTemplateIsUnsupportedWithMessage) {
  for (const std::string& text :
       {std::string(), std::string("{% for m in messages %}{{ m['content'] }}{% endfor %}"),
        std::string("### Instruction:\n{{ prompt }}\n### Response:"),
        std::string("{{ '<|im_start|>' }}\x01\xff \"quoted\" \xe6\x97\xa5\xe6\x9c\xac and a long "
                    "tail that does not fit in the excerpt")}) {
    auto got = DetectChatTemplate(text);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(ToLlmStatus(got.status()), LLM_ERR_UNSUPPORTED);
    const std::string msg(got.status().message());
    EXPECT_NE(msg.find("not supported"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(text.size()) + " bytes"), std::string::npos) << msg;
    for (const std::string& name : AllNames()) {
      EXPECT_NE(msg.find(name), std::string::npos) << name << ": " << msg;
    }
  }
  // The excerpt: escaped control bytes and quotes, whole code points, "...".
  auto got = DetectChatTemplate(
      "{{ '<|im_start|>' }}\x01\xff \"q\" \xe6\x97\xa5 and a long tail past the excerpt");
  const std::string msg(got.status().message());
  EXPECT_NE(msg.find("begins \"{{ '<|im_start|>' }}\\x01\\xff \\\"q\\\" \xe6\x97\xa5 and a long"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("...\")"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ChatML/Qwen"), std::string::npos) << msg;
  // The hash tells two templates of the same size apart.
  auto a = DetectChatTemplate("abcd");
  auto b = DetectChatTemplate("abce");
  EXPECT_NE(std::string(a.status().message()), std::string(b.status().message()));
  EXPECT_NE(std::string(a.status().message()).find("fnv1a64 fc179f83ee0724dd"), std::string::npos)
      << a.status();
}

TEST(ChatTemplateNames, RoundTripAndUnknown) {
  EXPECT_EQ(AllChatTemplates().size(), 15u);
  for (const std::string& name : AllNames()) {
    auto t = ChatTemplateFromName(name);
    ASSERT_TRUE(t.ok()) << name;
    EXPECT_EQ(ChatTemplateName(*t), name);
    EXPECT_NE(std::string(kChatTemplateNameList).find(name), std::string::npos) << name;
  }
  for (const char* bad : {"", "ChatML", "llama-3", "vicuna", "chatml ", "llama3.3", "qwen2"}) {
    auto t = ChatTemplateFromName(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(ToLlmStatus(t.status()), LLM_ERR_UNSUPPORTED);
    const std::string msg(t.status().message());
    EXPECT_NE(msg.find("gemma2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("chatml"), std::string::npos) << msg;
  }
}

TEST(ChatTemplateGoldens, RenderingEqualsJinja) {
  const Json& g = Goldens();
  const Json& cases = g["cases"];
  ASSERT_EQ(cases.kind, Json::kArray);
  std::map<std::string, int> rendered_per_kind;
  int rendered = 0, refused = 0;
  for (const Json& c : cases.a) {
    const Json& vars = c["variables"];
    std::string trace = c["template"].s + "/" + c["conversation"].s + "/" +
                        (c["add_generation_prompt"].b ? "gen" : "nogen");
    for (const auto& [k, v] : vars.o)
      trace +=
          "/" + k + "=" + (v.kind == Json::kBool ? (v.b ? "true" : "false") : "\"" + v.s + "\"");
    SCOPED_TRACE(trace);
    auto kind = ChatTemplateFromName(c["kind"].s);
    ASSERT_TRUE(kind.ok());
    const Json& conversation = g["conversations"][c["conversation"].s];
    ASSERT_EQ(conversation.kind, Json::kArray);
    std::vector<ChatMessage> messages;
    for (const Json& m : conversation.a) messages.push_back({m["role"].s, m["content"].s});
    ChatFormatOptions options;
    options.add_generation_prompt = c["add_generation_prompt"].b;
    options.bos_text = c["bos"].s;
    options.eos_text = c["eos"].s;
    if (vars["date_string"].kind == Json::kString) options.date_string = vars["date_string"].s;
    if (vars["enable_thinking"].kind == Json::kBool) {
      options.enable_thinking =
          vars["enable_thinking"].b ? ThinkingMode::kEnabled : ThinkingMode::kDisabled;
    }
    // The default system prompt comes from detecting the template text, as
    // the engine does with a model's tokenizer.chat_template.
    auto info = DetectChatTemplateInfo(TemplateText(c["template"].s));
    ASSERT_TRUE(info.ok()) << info.status();
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
      ++rendered_per_kind[c["kind"].s];
    }
  }
  EXPECT_GT(rendered, 700);
  EXPECT_GT(refused, 50);
  // Every renderer is covered by goldens.
  for (const std::string& name : AllNames()) EXPECT_GE(rendered_per_kind[name], 16) << name;
}

// Picked by name (no template text), Qwen2.5 uses its official default
// system prompt; a given one replaces it.
TEST(ChatTemplateFormat, Qwen25DefaultSystemByName) {
  const std::vector<ChatMessage> msgs = {{"user", "Hi"}};
  auto by_name = FormatChat(ChatTemplate::kQwen25, msgs, true, "");
  ASSERT_TRUE(by_name.ok());
  EXPECT_EQ(*by_name,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  ChatFormatOptions o;
  o.default_system = "Be brief.";
  auto custom = FormatChat(ChatTemplate::kQwen25, msgs, o);
  ASSERT_TRUE(custom.ok());
  EXPECT_EQ(custom->substr(0, 32), "<|im_start|>system\nBe brief.<|im");
}

TEST(ChatTemplateFormat, VariablesOnlyReachTheTemplatesThatReadThem) {
  const std::vector<ChatMessage> msgs = {{"system", "S"}, {"user", "Hi"}};
  ChatFormatOptions plain, vars;
  vars.date_string = "01 Jan 2030";
  vars.enable_thinking = ThinkingMode::kDisabled;
  for (ChatTemplate t : AllChatTemplates()) {
    SCOPED_TRACE(ChatTemplateName(t));
    if (t == ChatTemplate::kGemma2) continue;  // refuses the system message
    auto a = FormatChat(t, msgs, plain);
    auto b = FormatChat(t, msgs, vars);
    ASSERT_TRUE(a.ok() && b.ok());
    const bool reads =
        t == ChatTemplate::kLlama31 || t == ChatTemplate::kLlama32 || t == ChatTemplate::kQwen3;
    EXPECT_EQ(*a != *b, reads);
  }
  auto l31 = FormatChat(ChatTemplate::kLlama31, msgs, plain);
  EXPECT_NE(l31->find("Today Date: 26 Jul 2024\n\nS<|eot_id|>"), std::string::npos) << *l31;
  auto q3 = FormatChat(ChatTemplate::kQwen3, msgs, vars);
  const std::string tail = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  ASSERT_GE(q3->size(), tail.size());
  EXPECT_EQ(q3->substr(q3->size() - tail.size()), tail);
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
  auto tekken = FormatChat(ChatTemplate::kMistralV3Tekken, msgs, true, "<s>");
  ASSERT_TRUE(tekken.ok());
  EXPECT_EQ(*tekken, "<s>[INST]Hi[/INST]Yo</s>");
}

TEST(ChatTemplateFormat, RefusesBadInput) {
  const std::vector<ChatMessage> none;
  const std::vector<ChatMessage> custom = {{"user", "a"}, {"developer", "b"}};
  const std::vector<ChatMessage> tool = {{"user", "a"}, {"tool", "b"}};
  const std::vector<ChatMessage> late_system = {{"user", "a"}, {"assistant", "b"}, {"system", "c"}};
  const std::vector<ChatMessage> system_first = {{"system", "s"}, {"user", "a"}};
  for (ChatTemplate tmpl : AllChatTemplates()) {
    SCOPED_TRACE(ChatTemplateName(tmpl));
    auto empty = FormatChat(tmpl, none, true, "");
    ASSERT_FALSE(empty.ok());
    EXPECT_EQ(ToLlmStatus(empty.status()), LLM_ERR_INVALID_ARGUMENT);
    const bool qwen = tmpl == ChatTemplate::kQwen25 || tmpl == ChatTemplate::kQwen3;
    auto c = FormatChat(tmpl, custom, true, "");
    if (tmpl == ChatTemplate::kChatML) {
      EXPECT_TRUE(c.ok());
    } else {
      ASSERT_FALSE(c.ok());
      EXPECT_EQ(ToLlmStatus(c.status()), LLM_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(c.status().message()).find("developer"), std::string::npos);
    }
    EXPECT_EQ(FormatChat(tmpl, tool, true, "").ok(), tmpl == ChatTemplate::kChatML || qwen);
    auto ls = FormatChat(tmpl, late_system, true, "");
    const bool needs_alternation =
        tmpl == ChatTemplate::kLlama2 || tmpl == ChatTemplate::kMistral ||
        tmpl == ChatTemplate::kMistralV3 || tmpl == ChatTemplate::kMistralV3Tekken ||
        tmpl == ChatTemplate::kGemma || tmpl == ChatTemplate::kGemma2;
    EXPECT_EQ(ls.ok(), !needs_alternation);
    if (!ls.ok()) {
      EXPECT_NE(std::string(ls.status().message()).find("alternate"), std::string::npos);
    }
    auto sf = FormatChat(tmpl, system_first, true, "");
    EXPECT_EQ(sf.ok(), tmpl != ChatTemplate::kGemma2);
    if (!sf.ok()) {
      EXPECT_EQ(ToLlmStatus(sf.status()), LLM_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(sf.status().message()).find("System role not supported"),
                std::string::npos);
    }
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
