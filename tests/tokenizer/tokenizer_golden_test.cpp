// Token ids, detokenization, special ids and pieces must equal llama.cpp's
// (goldens written by tools/gen_tokenizer_goldens.py with llama-cpp-python)
// for every vocabulary (llama.cpp's, $LLM_VOCAB_DIR from scripts/fetch_vocabs.sh)
// and for the SmolLM2 model.
#include <clocale>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/tokenizer/json_lite.h"
#include "tests/tokenizer/tokenizer_test_util.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace llm {
namespace {

using testing_json::FromHex;
using testing_json::Value;
using namespace testing_tok;

std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

std::vector<int32_t> Ids(const Value& arr) {
  std::vector<int32_t> out;
  for (const Value& v : arr.arr) out.push_back(static_cast<int32_t>(v.i()));
  return out;
}

class TokenizerGoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    LLM_REQUIRE_VOCAB(path, GetParam());
    golden_ = testing_json::Parse(ReadFile(DataDir() + GetParam() + ".golden.json"));
    auto tok = GetParam().find('+') != std::string::npos
                   ? LoadDerivedTokenizer(GetParam(), &derived_bytes_)
                   : LoadTokenizer(path);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_ = std::move(*tok);
  }
  std::vector<uint8_t> derived_bytes_;
  Value golden_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_P(TokenizerGoldenTest, IdsMatchLlamaCpp) {
  const Value& cases = golden_["cases"];
  // ~80 strings x 4 flag combinations + llama.cpp's test strings + 220
  // generated ones (tools/gen_tokenizer_goldens.py).
  ASSERT_GE(cases.arr.size(), 500u);
  int failures = 0;
  for (const Value& c : cases.arr) {
    const std::string text = FromHex(c["text"].str);
    auto ids = tok_->Tokenize(text, c["add_special"].b, c["parse_special"].b);
    ASSERT_TRUE(ids.ok()) << ids.status();
    const std::vector<int32_t> want = Ids(c["ids"]);
    if (*ids != want && ++failures <= 10) {
      ADD_FAILURE() << "text '" << Printable(text) << "' add_special=" << c["add_special"].b
                    << " parse_special=" << c["parse_special"].b << "\n  got  "
                    << ::testing::PrintToString(*ids) << "\n  want "
                    << ::testing::PrintToString(want);
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(TokenizerGoldenTest, DetokenizeMatchesLlamaCpp) {
  int failures = 0;
  for (const Value& c : golden_["cases"].arr) {
    const std::vector<int32_t> ids = Ids(c["ids"]);
    const std::string plain = tok_->Detokenize(ids, false);
    const std::string special = tok_->Detokenize(ids, true);
    if ((plain != FromHex(c["detok"].str) || special != FromHex(c["detok_special"].str)) &&
        ++failures <= 10) {
      ADD_FAILURE() << "ids " << ::testing::PrintToString(ids) << "\n  got  '" << Printable(plain)
                    << "' / '" << Printable(special) << "'\n  want '"
                    << Printable(FromHex(c["detok"].str)) << "' / '"
                    << Printable(FromHex(c["detok_special"].str)) << "'";
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(TokenizerGoldenTest, SpecialIdsMatchLlamaCpp) {
  EXPECT_EQ(tok_->n_vocab(), golden_["n_vocab"].i());
  EXPECT_EQ(tok_->bos(), golden_["bos"].i());
  EXPECT_EQ(tok_->eos(), golden_["eos"].i());
  EXPECT_EQ(tok_->pad(), golden_["pad"].i());
  EXPECT_EQ(tok_->add_bos(), golden_["add_bos"].b);
  EXPECT_EQ(tok_->add_eos(), golden_["add_eos"].b);
  // llama.cpp picks EOT by iterating a hash map, so with several candidate
  // texts (SmolLM2 has <|im_end|> and <|endoftext|>) its pick is arbitrary;
  // ours is the first in its priority list. Both must then be EOG controls.
  const int32_t want_eot = static_cast<int32_t>(golden_["eot"].i());
  if (tok_->eot() != want_eot) {
    ASSERT_GE(want_eot, 0);
    EXPECT_TRUE(tok_->IsEog(tok_->eot()) && tok_->IsControl(tok_->eot())) << tok_->eot();
    EXPECT_TRUE(tok_->IsEog(want_eot) && tok_->IsControl(want_eot)) << want_eot;
  }
  std::vector<int32_t> eog, control;
  for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
    if (tok_->IsEog(id)) eog.push_back(id);
    if (tok_->IsControl(id)) control.push_back(id);
  }
  EXPECT_EQ(eog, Ids(golden_["eog"]));
  EXPECT_EQ(control, Ids(golden_["control"]));
  EXPECT_FALSE(tok_->IsEog(-1));
  EXPECT_FALSE(tok_->IsEog(tok_->n_vocab()));
  EXPECT_EQ(tok_->TokenToPiece(-1, true), "");
  EXPECT_EQ(tok_->TokenToPiece(tok_->n_vocab(), true), "");
  EXPECT_EQ(tok_->TokenText(tok_->n_vocab()), "");
}

TEST_P(TokenizerGoldenTest, PiecesMatchLlamaCpp) {
  const Value& pieces = golden_["pieces"];
  ASSERT_GT(pieces.arr.size(), 500u);
  int failures = 0;
  for (const Value& p : pieces.arr) {
    const int32_t id = static_cast<int32_t>(p.arr[0].i());
    const std::string plain = tok_->TokenToPiece(id, false);
    const std::string special = tok_->TokenToPiece(id, true);
    if ((plain != FromHex(p.arr[1].str) || special != FromHex(p.arr[2].str)) && ++failures <= 10) {
      ADD_FAILURE() << "id " << id << " text '" << Printable(std::string(tok_->TokenText(id)))
                    << "' got '" << Printable(plain) << "'/'" << Printable(special) << "'";
    }
  }
  EXPECT_EQ(failures, 0);
}

// detokenize(tokenize(s)) gives s back for valid UTF-8 (SentencePiece adds
// its dummy-prefix space in front).
TEST_P(TokenizerGoldenTest, RoundTrip) {
  int checked = 0;
  for (const Value& c : golden_["cases"].arr) {
    if (c["add_special"].b || c["parse_special"].b) continue;
    const std::string text = FromHex(c["text"].str);
    if (!IsValidUtf8(text)) continue;
    auto ids = tok_->Tokenize(text, false, false);
    ASSERT_TRUE(ids.ok());
    std::string want = text;
    if (tok_->type() == TokenizerType::kSpm && tok_->add_space_prefix() && !text.empty()) {
      want = " " + text;
    }
    EXPECT_EQ(tok_->Detokenize(*ids, false), want) << Printable(text);
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

// Output must not depend on the process locale.
TEST_P(TokenizerGoldenTest, LocaleIndependent) {
  const std::string old = std::setlocale(LC_ALL, nullptr);
  const char* set = nullptr;
  for (const char* loc : {"tr_TR.UTF-8", "de_DE.UTF-8", "C.UTF-8", "en_US.UTF-8"}) {
    if ((set = std::setlocale(LC_ALL, loc)) != nullptr) break;
  }
  if (set == nullptr) {
    GTEST_SKIP() << "no UTF-8 locale available";
  }
  int failures = 0;
  for (const Value& c : golden_["cases"].arr) {
    auto ids = tok_->Tokenize(FromHex(c["text"].str), c["add_special"].b, c["parse_special"].b);
    if (!ids.ok() || *ids != Ids(c["ids"])) ++failures;
  }
  std::setlocale(LC_ALL, old.c_str());
  EXPECT_EQ(failures, 0) << "under locale " << set;
}

// Streaming: feed tokens one at a time; every chunk is valid UTF-8 and the
// chunks add up to the full detokenization.
TEST_P(TokenizerGoldenTest, StreamingNeverEmitsInvalidUtf8) {
  int checked = 0;
  for (const Value& c : golden_["cases"].arr) {
    if (c["add_special"].b || !c["parse_special"].b) continue;
    const std::vector<int32_t> ids = Ids(c["ids"]);
    for (bool render : {false, true}) {
      StreamingDetokenizer stream(*tok_, render);
      std::string all;
      for (int32_t id : ids) {
        const std::string chunk = stream.Push(id);
        ASSERT_TRUE(IsValidUtf8(chunk)) << Printable(chunk);
        all += chunk;
      }
      const std::string tail = stream.Flush();
      ASSERT_TRUE(IsValidUtf8(tail));
      all += tail;
      const std::string full = tok_->Detokenize(ids, render);
      if (IsValidUtf8(full)) {
        EXPECT_EQ(all, full);
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 60);
}

TEST_P(TokenizerGoldenTest, ParseSpecialOnlyWhenAsked) {
  int checked = 0;
  for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
    if (!tok_->IsControl(id)) continue;
    const std::string text(tok_->TokenText(id));
    const std::string msg = "Say " + text + " now";
    auto plain = tok_->Tokenize(msg, false, false);
    auto parsed = tok_->Tokenize(text, false, true);
    ASSERT_TRUE(plain.ok() && parsed.ok());
    for (int32_t t : *plain)
      EXPECT_FALSE(tok_->IsControl(t)) << "'" << text << "' gave control token " << t;
    EXPECT_EQ(*parsed, std::vector<int32_t>{id}) << text;
    EXPECT_EQ(tok_->Detokenize(*plain, true).find(text) != std::string::npos, true) << text;
    if (++checked >= 64) break;
  }
  EXPECT_GE(checked, 1);
}

// Random bytes (invalid UTF-8 included) never fail and give in-range ids.
TEST_P(TokenizerGoldenTest, RandomBytesNeverFail) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 300; ++round) {
    std::string s(rng() % 40, '\0');
    for (char& ch : s) ch = static_cast<char>(rng() & 0xFF);
    for (bool special : {false, true}) {
      auto ids = tok_->Tokenize(s, true, special);
      ASSERT_TRUE(ids.ok()) << ids.status();
      for (int32_t t : *ids) ASSERT_TRUE(t >= 0 && t < tok_->n_vocab());
    }
  }
}

// Tokenize is const and thread-safe: concurrent calls give the golden ids.
TEST_P(TokenizerGoldenTest, ConcurrentTokenize) {
  const Value& cases = golden_["cases"];
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < cases.arr.size(); i += 2) {
        const Value& c = cases.arr[i];
        auto ids = tok_->Tokenize(FromHex(c["text"].str), c["add_special"].b, c["parse_special"].b);
        if (!ids.ok() || *ids != Ids(c["ids"])) ++failures[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

// A 100 KB prompt tokenizes (linear-ish algorithms; no timing asserted).
TEST_P(TokenizerGoldenTest, LargeInput) {
  std::string big;
  while (big.size() < 100000) big += "The quick brown fox, 12345 jumps! 你好世界 \n\t ";
  auto ids = tok_->Tokenize(big, true, true);
  ASSERT_TRUE(ids.ok());
  EXPECT_GT(ids->size(), 10000u);
  std::string one_word(100000, 'a');
  auto ids2 = tok_->Tokenize(one_word, false, false);
  ASSERT_TRUE(ids2.ok());
  EXPECT_EQ(tok_->Detokenize(*ids2, false).size(),
            one_word.size() + (tok_->type() == TokenizerType::kSpm && tok_->add_space_prefix()));
}

INSTANTIATE_TEST_SUITE_P(
    Vocabs, TokenizerGoldenTest,
    ::testing::Values("ggml-vocab-gpt-2", "ggml-vocab-gpt-neox", "ggml-vocab-starcoder",
                      "ggml-vocab-falcon", "ggml-vocab-deepseek-coder", "ggml-vocab-llama-spm",
                      "ggml-vocab-phi-3", "ggml-vocab-llama-bpe", "ggml-vocab-qwen2",
                      "ggml-vocab-qwen35", "ggml-vocab-deepseek-llm", "ggml-vocab-baichuan",
                      "llama-bpe+tekken", "llama-spm+no-prefix", "smollm2"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      std::string n = info.param;
      for (char& c : n) {
        if (c == '-' || c == '+') c = '_';
      }
      return n;
    });

// llama.cpp's own tokenizer test strings (<vocab>.gguf.inp, separated by
// "\n__ggml_vocab_test__\n") and their expected ids (<vocab>.gguf.out, one
// line of space-separated ids per string), shipped with the vocabularies and
// checked by llama.cpp's test-tokenizer-0: add_special and parse_special off.
class LlamaCppTestStrings : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppTestStrings, IdsMatch) {
  LLM_REQUIRE_VOCAB(path, GetParam());
  const std::string inp = ReadFile(path + ".inp"), out = ReadFile(path + ".out");
  ASSERT_FALSE(inp.empty() || out.empty()) << "missing " << path << ".inp/.out";
  std::vector<std::string> texts;
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0;;) {
    const size_t next = inp.find(sep, pos);
    texts.push_back(inp.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + sep.size();
  }
  if (!texts.empty() && texts.back().empty()) texts.pop_back();  // after the last separator
  std::vector<std::vector<int32_t>> want;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ids(line);
    want.emplace_back();
    for (int32_t id; ids >> id;) want.back().push_back(id);
  }
  ASSERT_GE(want.size(), texts.size());
  ASSERT_GE(texts.size(), 30u);
  auto tok = LoadTokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  int failures = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto ids = (*tok)->Tokenize(texts[i], false, false);
    ASSERT_TRUE(ids.ok());
    if (*ids != want[i] && ++failures <= 5) {
      ADD_FAILURE() << "text '" << Printable(texts[i]) << "'\n  got  "
                    << ::testing::PrintToString(*ids) << "\n  want "
                    << ::testing::PrintToString(want[i]);
    }
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, LlamaCppTestStrings,
                         ::testing::Values("ggml-vocab-gpt-2", "ggml-vocab-starcoder",
                                           "ggml-vocab-falcon", "ggml-vocab-deepseek-coder",
                                           "ggml-vocab-llama-spm", "ggml-vocab-phi-3",
                                           "ggml-vocab-llama-bpe", "ggml-vocab-qwen2",
                                           "ggml-vocab-qwen35", "ggml-vocab-deepseek-llm",
                                           "ggml-vocab-mpt", "ggml-vocab-refact"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace llm
