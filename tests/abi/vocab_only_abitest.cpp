// vocab_only loads (llm_model_params.vocab_only) work for every architecture
// whose tokenizer is supported, whatever its compute hyper-parameters: the
// model only tokenizes, so an architecture this build cannot run (or a llama
// with rope scaling) is no reason to refuse it.
//
//  - Real vocabularies of other architectures (llama.cpp's vocab-only GGUFs:
//    phi3, qwen2, falcon, gpt2, gptneox, baichuan, ..., $LLM_VOCAB_DIR from
//    scripts/fetch_vocabs.sh): load, report the architecture and the golden
//    vocabulary size, and tokenize as llama.cpp does through llm_tokenize.
//  - Generated metadata-only files of the architectures people embed
//    (qwen2, qwen3, gemma2, gemma3, phi3, mistral, llama with linear rope
//    scaling), with each family's own keys: vocab_only loads them.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../tokenizer/json_lite.h"
#include "gguf_writer.h"
#include "gtest/gtest.h"
#include "llm/llm.h"
#include "test_util.h"

namespace {

using llm_abi_test::GgufImage;
using llm_abi_test::GgufWriter;
using llm_abi_test::TinyVocab;

llm_status LoadVocabOnly(const void *data, size_t size, llm_model **out) {
  llm_model_params p;
  llm_model_params_init(&p);
  p.vocab_only = 1;
  p.n_threads = 1;
  return llm_model_load_from_memory(data, size, &p, out);
}

std::vector<llm_token> Tokenize(const llm_model *m, const std::string &text, bool add_special,
                                bool parse_special) {
  std::vector<llm_token> toks(text.size() * 2 + 8);
  size_t n = 0;
  const llm_status st = llm_tokenize(m, text.data(), text.size(), add_special, parse_special,
                                     toks.data(), toks.size(), &n);
  EXPECT_EQ(st, LLM_OK) << llm_last_error();
  toks.resize(st == LLM_OK ? n : 0);
  return toks;
}

// A metadata-only GGUF of architecture `arch` with the tiny byte-level BPE
// vocabulary of gguf_writer.h and the family's hyper-parameter keys.
GgufImage BuildVocabFile(const std::string &arch) {
  GgufWriter w;
  const std::string a = arch + ".";
  w.Str("general.architecture", arch);
  w.Str("general.name", "vocab-only-" + arch);
  w.U32(a + "context_length", 8192);
  w.U32(a + "embedding_length", 256);
  w.U32(a + "block_count", 3);
  w.U32(a + "feed_forward_length", 512);
  w.U32(a + "attention.head_count", 4);
  w.U32(a + "attention.head_count_kv", 2);
  w.F32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.F32(a + "rope.freq_base", 1000000.0f);
  if (arch == "llama") {  // Llama with linear rope scaling
    w.Str(a + "rope.scaling.type", "linear");
    w.F32(a + "rope.scaling.factor", 4.0f);
  }
  if (arch == "qwen3" || arch == "gemma3") w.U32(a + "attention.key_length", 128);
  if (arch == "gemma2" || arch == "gemma3" || arch == "mistral") {
    w.U32(a + "attention.sliding_window", 64);
  }
  if (arch == "gemma2") {
    w.F32(a + "attn_logit_softcapping", 50.0f);
    w.F32(a + "final_logit_softcapping", 30.0f);
  }
  if (arch == "phi3") {
    w.U32(a + "rope.scaling.original_context_length", 4096);
    w.F32(a + "rope.scaling.attn_factor", 1.19f);
  }
  w.Str("tokenizer.ggml.model", "gpt2");
  w.Str("tokenizer.ggml.pre", arch == "llama" ? "llama-bpe" : "qwen2");
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  std::vector<int32_t> types = {3, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(llm_abi_test::Gpt2ByteSymbol(b));
    types.push_back(1);
  }
  std::vector<std::string> merges;
  for (const auto &m : TinyVocab::Merges()) {
    tokens.push_back(m.first + m.second);
    types.push_back(1);
    merges.push_back(m.first + " " + m.second);
  }
  w.StrArray("tokenizer.ggml.tokens", tokens);
  w.I32Array("tokenizer.ggml.token_type", types);
  w.StrArray("tokenizer.ggml.merges", merges);
  w.U32("tokenizer.ggml.bos_token_id", TinyVocab::kImStart);
  w.U32("tokenizer.ggml.eos_token_id", TinyVocab::kImEnd);
  return w.Build();
}

TEST(AbiVocabOnly, LoadsEveryArchitectureWithASupportedTokenizer) {
  for (const char *arch : {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "mistral"}) {
    SCOPED_TRACE(arch);
    const GgufImage img = BuildVocabFile(arch);
    llm_model *m = nullptr;
    ASSERT_EQ(LoadVocabOnly(img.bytes.data(), img.bytes.size(), &m), LLM_OK) << llm_last_error();
    llm_model_info info;
    ASSERT_EQ(llm_model_info_init(&info), LLM_OK);
    ASSERT_EQ(llm_model_get_info(m, &info), LLM_OK);
    EXPECT_EQ(info.vocab_only, 1);
    EXPECT_EQ(std::string(info.architecture), arch);
    EXPECT_EQ(info.n_vocab, TinyVocab::kVocab);
    EXPECT_EQ(info.n_layer, 3);
    EXPECT_EQ(info.n_embd, 256);
    EXPECT_EQ(info.n_head_kv, 2);
    EXPECT_EQ(info.n_ctx_train, 8192);
    EXPECT_EQ(info.bos_token, TinyVocab::kImStart);
    // "hello world" -> "hello", " world" (the tiny vocabulary's merges).
    EXPECT_EQ(Tokenize(m, "hello world", false, false),
              (std::vector<llm_token>{TinyVocab::kHello, TinyVocab::kSpaceWorld}));
    // The llama-bpe pre-tokenizer adds BOS by default, qwen2's does not.
    const std::vector<llm_token> with_bos = Tokenize(m, "hello", true, false);
    ASSERT_FALSE(with_bos.empty());
    EXPECT_EQ(with_bos.front() == TinyVocab::kImStart, std::string(arch) == "llama");
    llm_session *s = nullptr;
    EXPECT_EQ(llm_session_create(m, nullptr, &s), LLM_ERR_UNSUPPORTED);
    EXPECT_EQ(s, nullptr);
    llm_model_free(m);

    // A full load of the same file (no weights) is refused with a message,
    // whatever the reason this build gives.
    llm_model_params p;
    llm_model_params_init(&p);
    p.n_threads = 1;
    m = nullptr;
    EXPECT_NE(llm_model_load_from_memory(img.bytes.data(), img.bytes.size(), &p, &m), LLM_OK);
    EXPECT_EQ(m, nullptr);
    EXPECT_STRNE(llm_last_error(), "");
  }
}

TEST(AbiVocabOnly, NeedsAnArchitectureAndAValidTokenizer) {
  GgufWriter w;  // tokenizer keys but no general.architecture
  w.Str("tokenizer.ggml.model", "gpt2");
  GgufImage img = w.Build();
  llm_model *m = nullptr;
  EXPECT_EQ(LoadVocabOnly(img.bytes.data(), img.bytes.size(), &m), LLM_ERR_BAD_MODEL);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(llm_last_error()).find("architecture"), std::string::npos);

  GgufWriter w2;  // an architecture but an unknown pre-tokenizer
  w2.Str("general.architecture", "qwen2");
  w2.Str("tokenizer.ggml.model", "gpt2");
  w2.Str("tokenizer.ggml.pre", "no-such-pre");
  w2.StrArray("tokenizer.ggml.tokens", {"a", "b", "ab"});
  w2.StrArray("tokenizer.ggml.merges", {"a b"});
  img = w2.Build();
  EXPECT_EQ(LoadVocabOnly(img.bytes.data(), img.bytes.size(), &m), LLM_ERR_UNSUPPORTED);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(llm_last_error()).find("no-such-pre"), std::string::npos);
}

std::string ReadFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// llama.cpp's vocabularies of other architectures, loaded through the ABI.
TEST(AbiVocabOnly, RealVocabulariesOfOtherArchitecturesTokenizeLikeLlamaCpp) {
  const std::string dir = llm_abi_test::EnvOr("LLM_VOCAB_DIR", "");
  if (dir.empty()) {
    LLM_ABI_SKIP_OR_FAIL(
        "LLM_VOCAB_DIR is unset: run `export LLM_VOCAB_DIR=$(scripts/fetch_vocabs.sh)`");
  }
  struct Vocab {
    const char *name;
    const char *arch;
  };
  for (const Vocab &v :
       {Vocab{"ggml-vocab-phi-3", "phi3"}, Vocab{"ggml-vocab-qwen2", "qwen2"},
        Vocab{"ggml-vocab-qwen35", "qwen2"}, Vocab{"ggml-vocab-falcon", "falcon"},
        Vocab{"ggml-vocab-gpt-2", "gpt2"}, Vocab{"ggml-vocab-gpt-neox", "gptneox"},
        Vocab{"ggml-vocab-deepseek-llm", "llama"}, Vocab{"ggml-vocab-baichuan", "baichuan"},
        Vocab{"ggml-vocab-llama-bpe", "llama"}}) {
    SCOPED_TRACE(v.name);
    const std::string path = dir + "/" + v.name + ".gguf";
    if (!llm_abi_test::FileExists(path)) LLM_ABI_SKIP_OR_FAIL("missing " << path);
    const llm::testing_json::Value golden = llm::testing_json::Parse(
        ReadFile(llm_abi_test::TestDataPath(std::string("tokenizer/") + v.name + ".golden.json")));
    llm_model_params p;
    llm_model_params_init(&p);
    p.vocab_only = 1;
    p.n_threads = 1;
    llm_model *m = nullptr;
    ASSERT_EQ(llm_model_load(path.c_str(), &p, &m), LLM_OK) << llm_last_error();
    llm_model_info info;
    ASSERT_EQ(llm_model_info_init(&info), LLM_OK);
    ASSERT_EQ(llm_model_get_info(m, &info), LLM_OK);
    EXPECT_EQ(std::string(info.architecture), v.arch);
    EXPECT_EQ(info.n_vocab, golden["n_vocab"].i());
    EXPECT_EQ(info.bos_token, golden["bos"].i());
    EXPECT_EQ(info.add_bos, golden["add_bos"].b ? 1 : 0);
    int checked = 0, failures = 0;
    for (const auto &c : golden["cases"].arr) {
      std::vector<llm_token> want;
      for (const auto &id : c["ids"].arr) want.push_back(static_cast<llm_token>(id.i()));
      const std::string text = llm::testing_json::FromHex(c["text"].str);
      if (Tokenize(m, text, c["add_special"].b, c["parse_special"].b) != want) ++failures;
      ++checked;
    }
    EXPECT_EQ(failures, 0);
    EXPECT_GE(checked, 300);
    llm_model_free(m);
  }
}

}  // namespace
