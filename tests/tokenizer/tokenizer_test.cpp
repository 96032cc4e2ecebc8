// Tokenizer construction from hand-built GGUF metadata: a tiny valid
// vocabulary works, malformed metadata of every kind is refused with a
// status (never a crash), and special-token handling follows the rules in
// tokenizer.h.
#include "tokenizer/tokenizer.h"

#include <string>
#include <vector>

#include "core/status.h"
#include "format/gguf.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/gguf_builder.h"

namespace llm {
namespace {

using testing_gguf::GgufBuilder;

struct Built {
  std::vector<uint8_t> bytes;
  std::unique_ptr<GgufFile> gguf;
};

absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const GgufBuilder& b, Built* keep) {
  keep->bytes = b.Build();
  auto gguf = GgufFile::Parse(keep->bytes.data(), keep->bytes.size());
  if (!gguf.ok()) return gguf.status();
  keep->gguf = std::move(*gguf);
  return Tokenizer::FromGguf(*keep->gguf);
}

// A byte-level BPE vocabulary: single letters, "Ġ" (space), merges building
// "ab", "Ġab" and "abc", one control token and one user-defined token.
GgufBuilder TinyBpe() {
  GgufBuilder b;
  b.Str("tokenizer.ggml.model", "gpt2")
      .Str("tokenizer.ggml.pre", "gpt-2")
      .StrArray("tokenizer.ggml.tokens", {"a", "b", "c", "\xC4\xA0", "ab",
                                          "\xC4\xA0"
                                          "ab",
                                          "abc", "<|im_end|>", "<ctl>", "@@"})
      .I32Array("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1, 1, 3, 3, 4})
      .StrArray("tokenizer.ggml.merges", {"a b", "\xC4\xA0 ab", "ab c"})
      .U32("tokenizer.ggml.eos_token_id", 7);
  return b;
}

TEST(TokenizerMetadata, TinyBpeWorks) {
  Built keep;
  auto tok = Load(TinyBpe(), &keep);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.n_vocab(), 10);
  EXPECT_EQ(t.eos(), 7);
  EXPECT_EQ(t.bos(), -1);
  EXPECT_EQ(t.pad(), -1);
  EXPECT_FALSE(t.add_bos());
  EXPECT_TRUE(t.IsEog(7));
  EXPECT_EQ(t.eot(), 7);  // found by its text "<|im_end|>"
  EXPECT_FALSE(t.IsEog(8));
  EXPECT_TRUE(t.IsControl(8));
  EXPECT_EQ(*t.Tokenize("abc ab", false, false), (std::vector<int32_t>{6, 5}));
  EXPECT_EQ(*t.Tokenize("ba", false, false), (std::vector<int32_t>{1, 0}));
  // Control text only with parse_special; user-defined text always.
  EXPECT_EQ(*t.Tokenize("a<ctl>", false, true), (std::vector<int32_t>{0, 8}));
  auto plain = *t.Tokenize("a<ctl>", false, false);
  for (int32_t id : plain) EXPECT_NE(id, 8);
  EXPECT_EQ(*t.Tokenize("a@@b", false, false), (std::vector<int32_t>{0, 9, 1}));
  EXPECT_EQ(t.TokenToPiece(5, false), " ab");
  EXPECT_EQ(t.TokenToPiece(7, false), "");
  EXPECT_EQ(t.TokenToPiece(7, true), "<|im_end|>");
  EXPECT_EQ(t.TokenId("abc"), 6);
  EXPECT_EQ(t.TokenId("zzz"), -1);
  // Bytes without a token are dropped (no byte fallback in this vocabulary).
  EXPECT_EQ(*t.Tokenize("az", false, false), (std::vector<int32_t>{0}));
}

TEST(TokenizerMetadata, TinySpmWorks) {
  GgufBuilder b;
  // U+2581 is SentencePiece's space.
  b.Str("tokenizer.ggml.model", "llama")
      .StrArray("tokenizer.ggml.tokens",
                {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "h", "i", "\xE2\x96\x81h",
                 "\xE2\x96\x81hi", "<0x21>", "<0xC3>", "<0xA9>"})
      .F32Array("tokenizer.ggml.scores", {0, 0, 0, -5, -5, -5, -2, -1, 0, 0, 0})
      .I32Array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1, 1, 6, 6, 6});
  Built keep;
  auto tok = Load(b, &keep);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.type(), TokenizerType::kSpm);
  EXPECT_EQ(t.bos(), 1);  // SentencePiece defaults
  EXPECT_EQ(t.eos(), 2);
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(*t.Tokenize("hi!", true, false), (std::vector<int32_t>{1, 7, 8}));
  // "é" (C3 A9) is not a token: byte fallback.
  EXPECT_EQ(*t.Tokenize("\xC3\xA9", false, false), (std::vector<int32_t>{3, 9, 10}));
  EXPECT_EQ(t.Detokenize(*t.Tokenize("hi \xC3\xA9", false, false), false), " hi \xC3\xA9");
  EXPECT_EQ(t.TokenToPiece(9, false), "\xC3");
  EXPECT_EQ(t.TokenToPiece(0, false), "");  // unknown renders only as special
  EXPECT_EQ(t.TokenToPiece(0, true), "<unk>");
}

void ExpectStatus(const GgufBuilder& b, llm_status want, const std::string& needle) {
  Built keep;
  auto tok = Load(b, &keep);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(ToLlmStatus(tok.status()), want) << tok.status();
  EXPECT_NE(std::string(tok.status().message()).find(needle), std::string::npos) << tok.status();
}

TEST(TokenizerMetadata, UnknownModelIsUnsupported) {
  GgufBuilder b;
  b.Str("tokenizer.ggml.model", "bert").StrArray("tokenizer.ggml.tokens", {"a"});
  ExpectStatus(b, LLM_ERR_UNSUPPORTED, "bert");
}

// llama.cpp's ignore_merges (llama-bpe, tekken): a word that is itself a
// token is emitted whole even where the merges cannot build it; other
// pre-tokenizers run the merges. "ba" is a token here, but no merge makes it.
TEST(TokenizerMetadata, IgnoreMergesEmitsWholeWordTokens) {
  for (const char* pre : {"llama-bpe", "qwen2"}) {
    SCOPED_TRACE(pre);
    GgufBuilder b;
    b.Str("tokenizer.ggml.model", "gpt2")
        .Str("tokenizer.ggml.pre", pre)
        .StrArray("tokenizer.ggml.tokens", {"a", "b", "ab", "ba", "<s>"})
        .StrArray("tokenizer.ggml.merges", {"a b"})
        .U32("tokenizer.ggml.bos_token_id", 4);
    Built keep;
    auto tok = Load(b, &keep);
    ASSERT_TRUE(tok.ok()) << tok.status();
    const bool llama3 = std::string(pre) == "llama-bpe";
    const std::vector<int32_t> want_ba =
        llama3 ? std::vector<int32_t>{3} : std::vector<int32_t>{1, 0};
    EXPECT_EQ(*(*tok)->Tokenize("ba", false, false), want_ba);
    EXPECT_EQ(*(*tok)->Tokenize("ab", false, false), (std::vector<int32_t>{2}));
    // llama-bpe adds BOS by default (no tokenizer.ggml.add_bos_token here).
    EXPECT_EQ((*tok)->add_bos(), llama3);
  }
}

TEST(TokenizerMetadata, UnknownPreIsUnsupported) {
  GgufBuilder b;
  b.Str("tokenizer.ggml.model", "gpt2")
      .Str("tokenizer.ggml.pre", "no-such-pre")
      .StrArray("tokenizer.ggml.tokens", {"a", "b", "ab"})
      .StrArray("tokenizer.ggml.merges", {"a b"});
  ExpectStatus(b, LLM_ERR_UNSUPPORTED, "no-such-pre");
}

TEST(TokenizerMetadata, MissingModelOrTokens) {
  GgufBuilder none;
  none.StrArray("tokenizer.ggml.tokens", {"a"});
  ExpectStatus(none, LLM_ERR_BAD_MODEL, "tokenizer.ggml.model");
  GgufBuilder no_tokens;
  no_tokens.Str("tokenizer.ggml.model", "gpt2").StrArray("tokenizer.ggml.merges", {"a b"});
  ExpectStatus(no_tokens, LLM_ERR_BAD_MODEL, "tokenizer.ggml.tokens");
}

TEST(TokenizerMetadata, TokenTypeCountMismatch) {
  GgufBuilder c;
  c.Str("tokenizer.ggml.model", "gpt2")
      .StrArray("tokenizer.ggml.tokens", {"a", "b", "ab"})
      .I32Array("tokenizer.ggml.token_type", {1, 1})
      .StrArray("tokenizer.ggml.merges", {"a b"});
  ExpectStatus(c, LLM_ERR_BAD_MODEL, "token_type");
}

TEST(TokenizerMetadata, BadTokenTypeValue) {
  GgufBuilder c;
  c.Str("tokenizer.ggml.model", "gpt2")
      .StrArray("tokenizer.ggml.tokens", {"a", "b", "ab"})
      .I32Array("tokenizer.ggml.token_type", {1, 9, 1})
      .StrArray("tokenizer.ggml.merges", {"a b"});
  ExpectStatus(c, LLM_ERR_BAD_MODEL, "token_type[1]");
}

TEST(TokenizerMetadata, ScoresCountMismatch) {
  GgufBuilder c;
  c.Str("tokenizer.ggml.model", "llama")
      .StrArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"})
      .F32Array("tokenizer.ggml.scores", {0, 0, 0});
  ExpectStatus(c, LLM_ERR_BAD_MODEL, "scores");
  GgufBuilder missing;
  missing.Str("tokenizer.ggml.model", "llama")
      .StrArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  ExpectStatus(missing, LLM_ERR_BAD_MODEL, "scores");
}

TEST(TokenizerMetadata, SpecialIdOutOfRange) {
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.padding_token_id", "tokenizer.ggml.unknown_token_id",
                          "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    GgufBuilder c;
    c.Str("tokenizer.ggml.model", "gpt2")
        .StrArray("tokenizer.ggml.tokens", {"a", "b", "ab"})
        .StrArray("tokenizer.ggml.merges", {"a b"})
        .U32(key, 3);
    ExpectStatus(c, LLM_ERR_BAD_MODEL, key);
    GgufBuilder neg;
    neg.Str("tokenizer.ggml.model", "gpt2")
        .StrArray("tokenizer.ggml.tokens", {"a", "b", "ab"})
        .StrArray("tokenizer.ggml.merges", {"a b"})
        .I32(key, -1);
    ExpectStatus(neg, LLM_ERR_BAD_MODEL, key);
  }
}

TEST(TokenizerMetadata, BadMerges) {
  for (const std::string& bad :
       {std::string("ab"), std::string("a "), std::string(" "), std::string("")}) {
    GgufBuilder c;
    c.Str("tokenizer.ggml.model", "gpt2")
        .StrArray("tokenizer.ggml.tokens", {"a", "b", "ab"})
        .StrArray("tokenizer.ggml.merges", {"a b", bad});
    ExpectStatus(c, LLM_ERR_BAD_MODEL, "merges[1]");
  }
  GgufBuilder missing;
  missing.Str("tokenizer.ggml.model", "gpt2").StrArray("tokenizer.ggml.tokens", {"a", "b", "ab"});
  ExpectStatus(missing, LLM_ERR_BAD_MODEL, "merges");
}

TEST(TokenizerMetadata, DuplicateTokens) {
  GgufBuilder c;
  c.Str("tokenizer.ggml.model", "gpt2")
      .StrArray("tokenizer.ggml.tokens", {"a", "b", "a"})
      .StrArray("tokenizer.ggml.merges", {"a b"});
  ExpectStatus(c, LLM_ERR_BAD_MODEL, "duplicate");
}

TEST(TokenizerMetadata, AddBosWithoutBos) {
  GgufBuilder c;
  c.Str("tokenizer.ggml.model", "gpt2")
      .StrArray("tokenizer.ggml.tokens", {"a", "b", "ab"})
      .StrArray("tokenizer.ggml.merges", {"a b"})
      .Bool("tokenizer.ggml.add_bos_token", true);
  ExpectStatus(c, LLM_ERR_BAD_MODEL, "add_bos_token");
}

TEST(TokenizerMetadata, WrongValueTypes) {
  GgufBuilder c;
  c.Str("tokenizer.ggml.model", "gpt2")
      .I32Array("tokenizer.ggml.tokens", {1, 2, 3})
      .StrArray("tokenizer.ggml.merges", {"a b"});
  ExpectStatus(c, LLM_ERR_BAD_MODEL, "tokenizer.ggml.tokens");
  GgufBuilder d;
  d.Str("tokenizer.ggml.model", "gpt2")
      .StrArray("tokenizer.ggml.tokens", {"a", "b", "ab"})
      .StrArray("tokenizer.ggml.merges", {"a b"})
      .Str("tokenizer.ggml.bos_token_id", "zero");
  ExpectStatus(d, LLM_ERR_BAD_MODEL, "bos_token_id");
}

TEST(TokenizerMetadata, EmptyTextAndHugeText) {
  Built keep;
  auto tok = Load(TinyBpe(), &keep);
  ASSERT_TRUE(tok.ok());
  EXPECT_TRUE((*tok)->Tokenize("", true, true)->empty());
  // A view claiming 1 GiB is refused before anything reads it.
  const char dummy = 'a';
  auto huge = (*tok)->Tokenize(std::string_view(&dummy, size_t{1} << 30), false, false);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(ToLlmStatus(huge.status()), LLM_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace llm
