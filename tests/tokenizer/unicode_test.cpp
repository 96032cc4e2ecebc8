// Unicode helpers: category table spot checks, lenient decoding (llama.cpp's
// rules), strict validation, and GPT-2's byte mapping.
#include "tokenizer/unicode.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tokenizer/pre_tokenizer.h"

namespace llm {
namespace {

TEST(TokenizerUnicode, Categories) {
  EXPECT_TRUE(GetCodepointFlags('a').is_letter());
  EXPECT_TRUE(GetCodepointFlags(0x00E9).is_letter());       // é
  EXPECT_TRUE(GetCodepointFlags(0x4F60).is_letter());       // 你 (Lo)
  EXPECT_TRUE(GetCodepointFlags(0x0661).is_number());       // Arabic-Indic one
  EXPECT_TRUE(GetCodepointFlags(0x00BD).is_number());       // ½ (No)
  EXPECT_TRUE(GetCodepointFlags(0x3002).is_punctuation());  // 。
  EXPECT_EQ(GetCodepointFlags(0x0301).category, kUcAccentMark);
  EXPECT_EQ(GetCodepointFlags(0x1F600).category, kUcSymbol);
  EXPECT_EQ(GetCodepointFlags(0x200D).category, kUcControl);  // ZWJ (Cf)
  EXPECT_EQ(GetCodepointFlags(0x0378).category, kUcUndefined);
  EXPECT_EQ(GetCodepointFlags(0x110000).category, kUcUndefined);
  for (uint32_t ws : {0x09u, 0x0Au, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x2003u, 0x3000u}) {
    EXPECT_TRUE(GetCodepointFlags(ws).whitespace) << ws;
  }
  for (uint32_t nws : {0x1Cu, 0x200Bu, 0x78u})
    EXPECT_FALSE(GetCodepointFlags(nws).whitespace) << nws;
}

TEST(TokenizerUnicode, LenientDecodeMatchesLlamaCpp) {
  EXPECT_EQ(DecodeUtf8Lenient("a\xC3\xA9"), (std::vector<uint32_t>{'a', 0xE9}));
  EXPECT_EQ(DecodeUtf8Lenient("\x80z"), (std::vector<uint32_t>{0xFFFD, 'z'}));
  EXPECT_EQ(DecodeUtf8Lenient("\xE4\xB8"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
  EXPECT_EQ(DecodeUtf8Lenient("\xC0\x80"), (std::vector<uint32_t>{0}));           // overlong kept
  EXPECT_EQ(DecodeUtf8Lenient("\xED\xA0\x80"), (std::vector<uint32_t>{0xD800}));  // surrogate kept
  EXPECT_EQ(DecodeUtf8Lenient("\xF5\x80\x80\x80"), (std::vector<uint32_t>{0xFFFD}));  // > U+10FFFF
  EXPECT_EQ(DecodeUtf8Lenient("\xFF"), (std::vector<uint32_t>{0xFFFD}));
}

TEST(TokenizerUnicode, StrictValidation) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80"));
  for (const char* bad :
       {"\x80", "\xC0\x80", "\xC3", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xFF", "\xE0\x80\x80"}) {
    EXPECT_FALSE(IsValidUtf8(bad)) << bad;
  }
  size_t inv = 0;
  EXPECT_EQ(Utf8WellFormedPrefix("\xF0\x9F\x98", &inv), 0);  // incomplete
  EXPECT_EQ(Utf8WellFormedPrefix("\xF0\x9F\x98x", &inv), -1);
  EXPECT_EQ(inv, 3u);
}

TEST(TokenizerUnicode, ByteMappingIsABijection) {
  std::vector<bool> seen(256, false);
  for (int b = 0; b < 256; ++b) {
    const std::string& u = ByteToUnicodeUtf8(static_cast<uint8_t>(b));
    const std::vector<uint32_t> cps = DecodeUtf8Lenient(u);
    ASSERT_EQ(cps.size(), 1u);
    EXPECT_EQ(UnicodeToByte(cps[0]), b);
    seen[b] = true;
  }
  EXPECT_EQ(ByteToUnicodeUtf8(' '), "\xC4\xA0");  // Ġ
  EXPECT_EQ(ByteToUnicodeUtf8('a'), "a");
  EXPECT_EQ(UnicodeToByte(0x4E00), -1);
}

std::vector<std::string> Words(PreTokenizerType type, const std::string& text) {
  const std::vector<uint32_t> cpts = DecodeUtf8Lenient(text);
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t len : PreTokenize(type, cpts)) {
    std::string w;
    for (size_t i = pos; i < pos + len; ++i) AppendUtf8(cpts[i], &w);
    out.push_back(w);
    pos += len;
  }
  EXPECT_EQ(pos, cpts.size());
  return out;
}

TEST(TokenizerUnicode, PreTokenizerSplits) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Words(PreTokenizerType::kGpt2, "Hello  world's 123!!\n"),
            (V{"Hello", " ", " world", "'s", " 123", "!!", "\n"}));
  EXPECT_EQ(Words(PreTokenizerType::kStarcoder, "x 123"), (V{"x", " ", "1", "2", "3"}));
  EXPECT_EQ(Words(PreTokenizerType::kFalcon, "12345 a.b"), (V{"123", "45", " a", ".", "b"}));
  EXPECT_EQ(Words(PreTokenizerType::kDeepseekCoder, "ab\n 12"), (V{"ab", "\n", " ", "1", "2"}));
  EXPECT_TRUE(Words(PreTokenizerType::kGpt2, "").empty());
  // The default list leaves the backtick (a symbol) to GPT-2's rule, so a
  // space joins it (GPT-NeoX has a " `" token); falcon's list splits it off.
  EXPECT_EQ(Words(PreTokenizerType::kDefault, "a `b`"), (V{"a", " `", "b", "`"}));
  EXPECT_EQ(Words(PreTokenizerType::kFalcon, "a `b`"), (V{"a", " ", "`", "b", "`"}));
  // Llama 3: digits in threes, punctuation takes the newlines after it.
  EXPECT_EQ(Words(PreTokenizerType::kLlama3, "Hello  world's 12345!!\n\n x"),
            (V{"Hello", " ", " world", "'s", " ", "123", "45", "!!\n\n", " x"}));
  // Qwen2: digits one by one; the contraction match is case-insensitive.
  EXPECT_EQ(Words(PreTokenizerType::kQwen2, "IT'S 12\t\n\nok"),
            (V{"IT", "'S", " ", "1", "2", "\t\n\n", "ok"}));
  // Qwen3.5: a combining mark continues a letter run (Qwen2 splits it off).
  EXPECT_EQ(Words(PreTokenizerType::kQwen35, "cafe\xCC\x81!"), (V{"cafe\xCC\x81", "!"}));
  EXPECT_EQ(Words(PreTokenizerType::kQwen2, "cafe\xCC\x81!"), (V{"cafe", "\xCC\x81!"}));
  // Tekken: an upper-case run joins the lower-case run after it.
  EXPECT_EQ(Words(PreTokenizerType::kTekken, "HelloWORLDfoo BARbaz ABC."),
            (V{"Hello", "WORLDfoo", " BARbaz", " ABC", "."}));
  // DeepSeek LLM: its own letter and punctuation classes, trailing spaces.
  EXPECT_EQ(Words(PreTokenizerType::kDeepseekLlm, "Hello, \xE4\xB8\x96\xE7\x95\x8C 123  "),
            (V{"Hello", ",", " ", "\xE4\xB8\x96\xE7\x95\x8C", " ", "123", "  "}));
  for (const char* pre : {"llama-bpe", "qwen2", "qwen35", "deepseek-llm", "tekken", "smollm"}) {
    EXPECT_TRUE(ParsePreTokenizer(pre).ok()) << pre;
  }
  EXPECT_TRUE(ParsePreTokenizer("llama-bpe")->ignore_merges);
  EXPECT_TRUE(ParsePreTokenizer("llama-bpe")->add_bos);
  EXPECT_FALSE(ParsePreTokenizer("qwen2")->add_bos);
  auto unknown = ParsePreTokenizer("no-such-pre");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no-such-pre"), std::string::npos);
}

}  // namespace
}  // namespace llm
