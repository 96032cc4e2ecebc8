// Gemma 2/3 through the C ABI: a model mixing sliding-window ("local") and
// full ("global") layers keeps the two kinds' KV in separate pools, and a
// session's local table releases the blocks its window has left
// (docs/SLIDING_WINDOW.md, "Mixed models"). Models: tests/data/arch/
// tiny-gemma2.gguf (2 layers: local, global) and tiny-gemma3.gguf (6 layers:
// 5 local, 1 global), both with window 64; and, generated here, a Gemma-3
// shape (6 layers, 5 local with window 512, one KV head of 256) run to 8k
// positions. Logit agreement with llama.cpp is the teacher-forced test's
// (Arch/Gemma2, Arch/Gemma3); that the split changes no logit at all is
// tests/engine/kv_split_test.cpp's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gguf_writer.h"
#include "gtest/gtest.h"
#include "llm/llm.h"
#include "session_util.h"
#include "test_util.h"

namespace {

constexpr int64_t kWindow = 64;  // both tiny Gemma models

using llm_abi_test::Logits;
using llm_abi_test::MaxAbsDiff;
using llm_abi_test::ModelPtr;
using llm_abi_test::RandomTokens;
using llm_abi_test::SessionPtr;

// Bytes of KV a model's pools hold in use: each pool's used blocks times its
// block size.
uint64_t HeldBytes(const llm_kv_stats &s) {
  return s.blocks_used * s.block_bytes + s.local_blocks_used * s.local_block_bytes;
}

class GemmaKvSplitTest : public ::testing::TestWithParam<const char *> {
 protected:
  void SetUp() override {
    path_ = llm_abi_test::TestDataPath(std::string("arch/") + GetParam() + ".gguf");
    LLM_ABI_REQUIRE_FILE(path_);
    llm_model *m = nullptr;
    ASSERT_EQ(llm_model_load(path_.c_str(), nullptr, &m), LLM_OK) << llm_last_error();
    model_.reset(m);
  }
  SessionPtr NewSession(int32_t kv_type = LLM_KV_F16) {
    llm_session_params sp;
    EXPECT_EQ(llm_session_params_init(&sp), LLM_OK);
    sp.n_ctx = 512;
    sp.kv_type = kv_type;
    llm_session *s = nullptr;
    EXPECT_EQ(llm_session_create(model_.get(), &sp, &s), LLM_OK) << llm_last_error();
    return SessionPtr(s);
  }
  llm_kv_stats Stats() {
    llm_kv_stats st;
    EXPECT_EQ(llm_kv_stats_init(&st), LLM_OK);
    EXPECT_EQ(llm_model_kv_stats(model_.get(), &st), LLM_OK);
    return st;
  }
  size_t NTokens(llm_session *s) {
    size_t n = 0;
    EXPECT_EQ(llm_session_n_tokens(s, &n), LLM_OK);
    return n;
  }
  std::string path_;
  ModelPtr model_;
};

TEST_P(GemmaKvSplitTest, TwoPoolsAndTheLocalOneHoldsOnlyTheWindow) {
  const llm_kv_stats before = Stats();
  EXPECT_EQ(before.n_pools, 2u);
  EXPECT_EQ(before.local_window, static_cast<uint32_t>(kWindow));
  // The budget is split by layer count: together the two shares are the
  // whole budget (up to rounding), and each pool holds the same number of
  // positions.
  EXPECT_LE(before.budget_bytes + before.local_budget_bytes, before.bytes_per_token_f16 * 64 * 4096);
  EXPECT_EQ(before.block_bytes + before.local_block_bytes,
            before.bytes_per_token_f16 * before.block_tokens);
  EXPECT_EQ(before.blocks_total, before.local_blocks_total);

  SessionPtr s = NewSession();
  const std::vector<llm_token> prompt = RandomTokens(300, 1);
  ASSERT_EQ(llm_session_prefill(s.get(), prompt.data(), prompt.size()), LLM_OK) << llm_last_error();
  llm_token tok = -1;
  ASSERT_EQ(llm_session_decode(s.get(), &tok), LLM_OK) << llm_last_error();
  const llm_kv_stats after = Stats();
  const uint64_t all_blocks = (301 + after.block_tokens - 1) / after.block_tokens;  // 19
  const uint64_t window_blocks = kWindow / after.block_tokens + 2;                  // 6
  const uint64_t global_held = after.blocks_used - before.blocks_used;
  const uint64_t local_held = after.local_blocks_used - before.local_blocks_used;
  const uint64_t full_bytes = all_blocks * (after.block_bytes + after.local_block_bytes);
  std::printf("%s, 301 positions: global pool %llu blocks, local pool %llu blocks; KV bytes "
              "held %.3f x full attention\n",
              GetParam(), static_cast<unsigned long long>(global_held),
              static_cast<unsigned long long>(local_held),
              static_cast<double>(HeldBytes(after) - HeldBytes(before)) / full_bytes);
  EXPECT_EQ(global_held, all_blocks);  // the global layers keep every position
  EXPECT_LE(local_held, window_blocks);
  EXPECT_GE(local_held, 2u);
  // The local blocks released were registered: they stay cached.
  EXPECT_GE(after.local_blocks_cached, all_blocks - window_blocks);
  s.reset();
  EXPECT_EQ(Stats().blocks_used, before.blocks_used);
  EXPECT_EQ(Stats().local_blocks_used, before.local_blocks_used);
}

TEST_P(GemmaKvSplitTest, RewindIntoTheReleasedRegionFailsCleanlyAndWithinTheWindowWorks) {
  SessionPtr s = NewSession();
  const std::vector<llm_token> prompt = RandomTokens(200, 2);
  ASSERT_EQ(llm_session_prefill(s.get(), prompt.data(), prompt.size()), LLM_OK);
  const std::vector<float> logits = Logits(s.get());
  const llm_kv_stats held = Stats();
  EXPECT_EQ(llm_session_rewind(s.get(), 10), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(llm_last_error()).find("sliding window"), std::string::npos)
      << llm_last_error();
  EXPECT_EQ(NTokens(s.get()), prompt.size());
  EXPECT_EQ(Logits(s.get()), logits) << "a refused rewind changed the session";
  EXPECT_EQ(Stats().blocks_used, held.blocks_used);
  EXPECT_EQ(Stats().local_blocks_used, held.local_blocks_used);
  // The prefill kept [136, 200) in whole blocks of 16, from 128: rewinding
  // to 190 needs [126, 190), whose block 7 is gone; to 195, [131, 195), held.
  EXPECT_EQ(llm_session_rewind(s.get(), 190), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(Logits(s.get()), logits);
  ASSERT_EQ(llm_session_rewind(s.get(), 195), LLM_OK) << llm_last_error();
  SessionPtr fresh = NewSession();
  ASSERT_EQ(llm_session_prefill(fresh.get(), prompt.data(), 195), LLM_OK);
  EXPECT_LE(MaxAbsDiff(Logits(s.get()), Logits(fresh.get())), 1e-3);
  for (int i = 0; i < 20; ++i) {
    llm_token a = -1, b = -1;
    ASSERT_EQ(llm_session_decode(s.get(), &a), LLM_OK);
    ASSERT_EQ(llm_session_decode(fresh.get(), &b), LLM_OK);
    EXPECT_LE(MaxAbsDiff(Logits(s.get()), Logits(fresh.get())), 1e-3) << "step " << i;
    if (a != b) break;  // a near tie broken differently: the rest differs
  }
}

TEST_P(GemmaKvSplitTest, ForkAndSaveLoadContinueExactly) {
  for (const int32_t kv : {LLM_KV_F16, LLM_KV_F32}) {
    SCOPED_TRACE(kv == LLM_KV_F16 ? "F16 KV" : "F32 KV");
    SessionPtr s = NewSession(kv);
    const std::vector<llm_token> prompt = RandomTokens(150, 3);
    ASSERT_EQ(llm_session_prefill(s.get(), prompt.data(), prompt.size()), LLM_OK);
    llm_token t0 = -1;
    ASSERT_EQ(llm_session_decode(s.get(), &t0), LLM_OK);

    llm_session *child_raw = nullptr;
    ASSERT_EQ(llm_session_fork(s.get(), &child_raw), LLM_OK) << llm_last_error();
    SessionPtr child(child_raw);
    size_t size = 0;
    ASSERT_EQ(llm_session_save(s.get(), nullptr, 0, &size), LLM_ERR_BUFFER_TOO_SMALL);
    std::vector<uint8_t> saved(size);
    ASSERT_EQ(llm_session_save(s.get(), saved.data(), saved.size(), &size), LLM_OK)
        << llm_last_error();
    const llm_kv_stats before_load = Stats();
    SessionPtr loaded = NewSession(kv);
    ASSERT_EQ(llm_session_load(loaded.get(), saved.data(), size), LLM_OK) << llm_last_error();
    // The load materialized every global block and only the window's local ones.
    const llm_kv_stats after_load = Stats();
    const uint64_t bt = kv == LLM_KV_F16 ? 16 : 8;
    EXPECT_EQ(after_load.blocks_used - before_load.blocks_used, (151 + bt - 1) / bt);
    EXPECT_LE(after_load.local_blocks_used - before_load.local_blocks_used,
              static_cast<uint64_t>(kWindow) / bt + 2);
    // Saving the loaded session gives the same bytes (its released rows are
    // zeros, as in the original's save).
    std::vector<uint8_t> again(size);
    size_t size2 = 0;
    ASSERT_EQ(llm_session_save(loaded.get(), again.data(), again.size(), &size2), LLM_OK);
    EXPECT_EQ(again, saved);

    for (int i = 0; i < 60; ++i) {  // past another window's worth of positions
      llm_token a = -1, b = -1, c = -1;
      ASSERT_EQ(llm_session_decode(s.get(), &a), LLM_OK);
      ASSERT_EQ(llm_session_decode(child.get(), &b), LLM_OK);
      ASSERT_EQ(llm_session_decode(loaded.get(), &c), LLM_OK) << llm_last_error();
      ASSERT_EQ(a, b) << "step " << i;
      ASSERT_EQ(a, c) << "step " << i;
      ASSERT_EQ(Logits(s.get()), Logits(child.get())) << "step " << i;
      ASSERT_EQ(Logits(s.get()), Logits(loaded.get())) << "step " << i;
    }
    EXPECT_EQ(llm_session_rewind(loaded.get(), 5), LLM_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(llm_session_rewind(child.get(), 5), LLM_ERR_INVALID_ARGUMENT);
  }
}

TEST_P(GemmaKvSplitTest, PrefixSharingAdoptsFromBothPools) {
  const std::vector<llm_token> prompt = RandomTokens(120, 4);
  SessionPtr a = NewSession();
  ASSERT_EQ(llm_session_prefill(a.get(), prompt.data(), prompt.size()), LLM_OK);
  const llm_kv_stats before = Stats();
  SessionPtr b = NewSession();
  ASSERT_EQ(llm_session_prefill(b.get(), prompt.data(), prompt.size()), LLM_OK);
  llm_session_stats st;
  ASSERT_EQ(llm_session_stats_init(&st), LLM_OK);
  ASSERT_EQ(llm_session_get_stats(b.get(), &st), LLM_OK);
  // 7 whole blocks of 16 below the last token: every one adopted, in both
  // pools (the local pool still caches the blocks a's window released).
  EXPECT_EQ(st.cached_tokens, 112u);
  const llm_kv_stats after = Stats();
  EXPECT_GT(after.prefix_hits, before.prefix_hits);
  EXPECT_GT(after.local_prefix_hits, before.local_prefix_hits);
  // b computed only the last 8 positions over the adopted KV; a ran all 120
  // in one pass, whose products sum in another order (a few 1e-3 after six
  // layers). That adoption itself changes nothing is kv_split_test.cpp's
  // check against the unsplit model, bit for bit.
  EXPECT_LE(MaxAbsDiff(Logits(a.get()), Logits(b.get())), 1e-2);
  for (int i = 0; i < 10; ++i) {
    llm_token x = -1, y = -1;
    ASSERT_EQ(llm_session_decode(a.get(), &x), LLM_OK);
    ASSERT_EQ(llm_session_decode(b.get(), &y), LLM_OK);
    EXPECT_LE(MaxAbsDiff(Logits(a.get()), Logits(b.get())), 1e-2) << "step " << i;
    if (x != y) break;  // a near tie broken differently: the rest differs
  }
}

TEST_P(GemmaKvSplitTest, BatchedSessionsMatchSessionsRunAlone) {
  llm_abi_test::ExpectBatchedSessionsMatchAlone([this] { return NewSession(); });
}

INSTANTIATE_TEST_SUITE_P(Tiny, GemmaKvSplitTest,
                         ::testing::Values("tiny-gemma2", "tiny-gemma3"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                           return std::string(i.param == std::string("tiny-gemma2") ? "Gemma2"
                                                                                    : "Gemma3");
                         });

// A model of Gemma 3's KV shape -- 6 layers, 5 local with window 512 and 1
// global, one KV head of 256 -- with tiny everything else (n_embd 32, one
// query head, the ABI tests' 269-token vocabulary, random weights), so an
// 8k-position prefill runs in seconds.
llm_abi_test::GgufImage BuildGemma3Shape(uint32_t window) {
  using namespace llm_abi_test;
  GgufWriter w;
  const std::string a = "gemma3";
  const uint64_t E = 32, H = 256, F = 32, L = 6;
  w.Str("general.architecture", a);
  w.Str("general.name", "gemma3-kv-shape");
  w.U32("general.alignment", 32);
  w.U32(a + ".context_length", 8192);
  w.U32(a + ".embedding_length", E);
  w.U32(a + ".block_count", L);
  w.U32(a + ".feed_forward_length", F);
  w.U32(a + ".attention.head_count", 1);
  w.U32(a + ".attention.head_count_kv", 1);
  w.U32(a + ".attention.key_length", H);
  w.U32(a + ".attention.value_length", H);
  w.U32(a + ".attention.sliding_window", window);
  w.F32(a + ".rope.freq_base", 1000000.0f);
  w.F32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  w.Str("tokenizer.ggml.model", "gpt2");
  w.Str("tokenizer.ggml.pre", "smollm");
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  std::vector<int32_t> types = {3, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(Gpt2ByteSymbol(b));
    types.push_back(1);
  }
  std::vector<std::string> merges;
  for (const auto &m : TinyVocab::Merges()) {
    merges.push_back(m.first + " " + m.second);
    tokens.push_back(m.first + m.second);
    types.push_back(1);
  }
  w.StrArray("tokenizer.ggml.tokens", tokens);
  w.I32Array("tokenizer.ggml.token_type", types);
  w.StrArray("tokenizer.ggml.merges", merges);
  w.U32("tokenizer.ggml.bos_token_id", TinyVocab::kImStart);
  w.U32("tokenizer.ggml.eos_token_id", TinyVocab::kImEnd);
  std::mt19937 rng(20261202);
  auto add = [&](const std::string &name, uint64_t cols, uint64_t rows) {
    std::vector<uint64_t> dims = rows ? std::vector<uint64_t>{cols, rows} : std::vector<uint64_t>{cols};
    w.Tensor(name, kGgmlF32, dims, TinyF32(cols * (rows ? rows : 1), &rng));
  };
  add("token_embd.weight", E, TinyVocab::kVocab);
  add("output_norm.weight", E, 0);
  for (uint64_t l = 0; l < L; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", E, 0);
    add(p + "attn_q.weight", E, H);
    add(p + "attn_k.weight", E, H);
    add(p + "attn_v.weight", E, H);
    add(p + "attn_q_norm.weight", H, 0);
    add(p + "attn_k_norm.weight", H, 0);
    add(p + "attn_output.weight", H, E);
    add(p + "post_attention_norm.weight", E, 0);
    add(p + "ffn_norm.weight", E, 0);
    add(p + "ffn_gate.weight", E, F);
    add(p + "ffn_up.weight", E, F);
    add(p + "ffn_down.weight", F, E);
    add(p + "post_ffw_norm.weight", E, 0);
  }
  return w.Build();
}

// The requirement of the split: at 8k positions a Gemma-3-shaped session
// holds at most 0.3x the KV bytes of full attention over every layer.
// Measured through llm_model_kv_stats after an 8191-token prefill and one
// decode (8192 positions).
TEST(GemmaKvSplit, Gemma3ShapeAt8kHoldsAtMostThreeTenthsOfFullAttention) {
  const llm_abi_test::GgufImage image = BuildGemma3Shape(512);
  llm_model *m = nullptr;
  ASSERT_EQ(llm_model_load_from_memory(image.bytes.data(), image.bytes.size(), nullptr, &m),
            LLM_OK)
      << llm_last_error();
  ModelPtr model(m);
  llm_kv_stats st;
  ASSERT_EQ(llm_kv_stats_init(&st), LLM_OK);
  ASSERT_EQ(llm_model_kv_stats(model.get(), &st), LLM_OK);
  ASSERT_EQ(st.n_pools, 2u);
  ASSERT_EQ(st.local_window, 512u);
  // One global layer, five local: a block of each pool is 1/6 and 5/6 of a
  // block of every layer.
  EXPECT_EQ(st.local_block_bytes, 5 * st.block_bytes);
  const uint64_t held_before = HeldBytes(st);

  llm_session_params sp;
  ASSERT_EQ(llm_session_params_init(&sp), LLM_OK);
  sp.n_ctx = 8192;
  llm_session *s_raw = nullptr;
  ASSERT_EQ(llm_session_create(model.get(), &sp, &s_raw), LLM_OK) << llm_last_error();
  SessionPtr s(s_raw);
  const std::vector<llm_token> prompt = RandomTokens(8191, 5, 269);
  ASSERT_EQ(llm_session_prefill(s.get(), prompt.data(), prompt.size()), LLM_OK)
      << llm_last_error();
  llm_token tok = -1;
  ASSERT_EQ(llm_session_decode(s.get(), &tok), LLM_OK) << llm_last_error();
  ASSERT_EQ(llm_model_kv_stats(model.get(), &st), LLM_OK);
  const double held = static_cast<double>(HeldBytes(st) - held_before);
  const double full = 8192.0 * static_cast<double>(st.bytes_per_token_f16);
  std::printf("Gemma-3 shape (window 512), 8192 positions: %.2f MiB held, %.2f MiB with full "
              "attention: %.3f\n",
              held / (1 << 20), full / (1 << 20), held / full);
  EXPECT_LE(held / full, 0.3);
  EXPECT_GT(held / full, 1.0 / 6);  // the global layer alone is 1/6
}

}  // namespace
