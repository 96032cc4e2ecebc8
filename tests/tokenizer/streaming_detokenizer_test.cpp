// StreamingDetokenizer never emits broken UTF-8: incomplete sequences are
// held back until completed, impossible bytes become U+FFFD at once, and
// Flush() turns a leftover tail into U+FFFD.
#include "tokenizer/streaming_detokenizer.h"

#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/gguf_builder.h"
#include "tests/tokenizer/tokenizer_test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace llm {
namespace {

// A SentencePiece vocabulary whose 256 byte tokens <0x00>..<0xFF> have ids
// 3..258, so any byte sequence can be streamed one byte per token.
struct ByteVocab {
  std::vector<uint8_t> bytes;
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tok;
  ByteVocab() {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    for (int b = 0; b < 256; ++b) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
      tokens.push_back(buf);
      types.push_back(6);
    }
    testing_gguf::GgufBuilder g;
    g.Str("tokenizer.ggml.model", "llama")
        .StrArray("tokenizer.ggml.tokens", tokens)
        .F32Array("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.0f))
        .I32Array("tokenizer.ggml.token_type", types);
    bytes = g.Build();
    gguf = std::move(*GgufFile::Parse(bytes.data(), bytes.size()));
    tok = std::move(*Tokenizer::FromGguf(*gguf));
  }
  static int32_t Id(uint8_t b) { return 3 + b; }
};

std::string Stream(const Tokenizer& tok, const std::string& bytes,
                   std::vector<std::string>* chunks) {
  StreamingDetokenizer s(tok, false);
  std::string all;
  for (unsigned char c : bytes) {
    std::string chunk = s.Push(ByteVocab::Id(c));
    if (chunks) chunks->push_back(chunk);
    all += chunk;
  }
  all += s.Flush();
  return all;
}

TEST(StreamingDetokenizer, HoldsBackIncompleteSequences) {
  ByteVocab v;
  std::vector<std::string> chunks;
  const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600, 4 bytes
  EXPECT_EQ(Stream(*v.tok, "a" + emoji + "\xE4\xBD\xA0", &chunks), "a" + emoji + "\xE4\xBD\xA0");
  ASSERT_EQ(chunks.size(), 8u);
  EXPECT_EQ(chunks[0], "a");
  EXPECT_EQ(chunks[1], "");
  EXPECT_EQ(chunks[3], "");
  EXPECT_EQ(chunks[4], emoji);
  EXPECT_EQ(chunks[6], "");
  EXPECT_EQ(chunks[7], "\xE4\xBD\xA0");
}

TEST(StreamingDetokenizer, InvalidBytesBecomeReplacementChar) {
  ByteVocab v;
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(Stream(*v.tok, "\x80x", nullptr), fffd + "x");      // stray continuation
  EXPECT_EQ(Stream(*v.tok, "\xE4\xBDx", nullptr), fffd + "x");  // truncated, maximal subpart
  EXPECT_EQ(Stream(*v.tok, "\xC0\x80", nullptr), fffd + fffd);  // overlong NUL
  EXPECT_EQ(Stream(*v.tok, "\xED\xA0\x80", nullptr), fffd + fffd + fffd);             // surrogate
  EXPECT_EQ(Stream(*v.tok, "\xF4\x90\x80\x80", nullptr), fffd + fffd + fffd + fffd);  // > U+10FFFF
  EXPECT_EQ(Stream(*v.tok, "ok\xF0\x9F\x98", nullptr), "ok" + fffd);  // tail at Flush
  StreamingDetokenizer s(*v.tok, false);
  EXPECT_EQ(s.Push(ByteVocab::Id(0xFF)), fffd);  // never valid: emitted at once
  EXPECT_EQ(s.pending(), 0u);
  EXPECT_EQ(s.Flush(), "");
}

TEST(StreamingDetokenizer, RandomBytesAlwaysValid) {
  ByteVocab v;
  std::mt19937 rng(7);
  for (int round = 0; round < 500; ++round) {
    std::string bytes(rng() % 24, '\0');
    for (char& c : bytes) {
      // Mostly plausible UTF-8 bytes so that valid sequences also occur.
      static const uint8_t kPool[] = {'a',  ' ',  0x80, 0x9F, 0xBF, 0xC3, 0xA9, 0xE4, 0xBD,
                                      0xA0, 0xF0, 0x9F, 0x98, 0x80, 0xED, 0xF4, 0xFF, 0xC0};
      c = static_cast<char>(kPool[rng() % sizeof(kPool)]);
    }
    std::vector<std::string> chunks;
    const std::string all = Stream(*v.tok, bytes, &chunks);
    for (const std::string& c : chunks) ASSERT_TRUE(IsValidUtf8(c));
    ASSERT_TRUE(IsValidUtf8(all));
    if (IsValidUtf8(bytes)) {
      EXPECT_EQ(all, bytes);
    }
  }
}

TEST(StreamingDetokenizer, RendersControlTokensOnlyWhenAsked) {
  ByteVocab v;
  StreamingDetokenizer plain(*v.tok, false), special(*v.tok, true);
  EXPECT_EQ(plain.Push(2), "");
  EXPECT_EQ(special.Push(2), "</s>");
}

// Emoji (ZWJ sequences) and CJK through a real byte-level BPE vocabulary,
// one token at a time.
TEST(StreamingDetokenizer, EmojiAndCjkWithGpt2Vocab) {
  LLM_REQUIRE_VOCAB(path, "ggml-vocab-gpt-2");
  auto tok = testing_tok::LoadTokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string text =
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 "
      "\xE4\xBD\xA0\xE5\xA5\xBD "
      "\xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88 caf\xC3\xA9";
  auto ids = (*tok)->Tokenize(text, false, false);
  ASSERT_TRUE(ids.ok());
  StreamingDetokenizer s(**tok, false);
  std::string all;
  int held = 0;
  for (int32_t id : *ids) {
    const std::string chunk = s.Push(id);
    ASSERT_TRUE(IsValidUtf8(chunk));
    if (s.pending() > 0) ++held;
    all += chunk;
  }
  all += s.Flush();
  EXPECT_EQ(all, text);
  EXPECT_GT(held, 0);  // some token really ended inside a character
}

}  // namespace
}  // namespace llm
