// A model mixing attention windows (Gemma 2/3) splits its KV into a
// full-attention group and a windowed group (kv/kv_groups.h,
// kv/session_kv.h, docs/SLIDING_WINDOW.md). The split must change no logit:
// every layer attends over the same rows, read from its group's blocks
// instead of one table of all layers. Checked bit for bit against the same
// model loaded with ModelLoadOptions::split_kv_groups = false (one full
// table: the engine before the split), over prefill, decode, a batch of
// sessions, fork and save/load; plus the grouping rule and the joint table
// operations.
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/model.h"
#include "engine/session.h"
#include "gtest/gtest.h"
#include "kv/block_pool.h"
#include "kv/kv_groups.h"
#include "kv/session_kv.h"
#include "tests/engine/recording_backend.h"

namespace llm {
namespace {

std::string ArchModel(const std::string& name) {
  return std::string(LLM_TEST_DATA_DIR) + "/arch/" + name + ".gguf";
}

std::vector<int32_t> Tokens(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(3 + (salt * 37 + i * 13 + i * i) % 500);
  return t;
}

std::shared_ptr<Model> Load(const std::string& path, bool split,
                            std::shared_ptr<testing::BackendLog> log = nullptr) {
  ModelLoadOptions options;
  options.n_threads = 2;
  options.split_kv_groups = split;
  if (log != nullptr) options.backend_factory = testing::RecordingBackend::Factory(log);
  auto m = Model::LoadFile(path, options);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : nullptr;
}

std::unique_ptr<Session> NewSession(const std::shared_ptr<Model>& model, KvType type) {
  SessionOptions options;
  options.n_ctx = 512;
  options.kv_type = type;
  options.sampler.temperature = 0;
  auto s = Session::Create(model, options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

std::vector<float> Logits(const Session& s) {
  return std::vector<float>(s.logits().begin(), s.logits().end());
}

TEST(KvGroups, OneGroupForOneWindowTwoForAMix) {
  const KvGroups none = KvGroups::ForWindows({0, 0, 0});
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none.groups[0].window, 0);
  EXPECT_EQ(none.groups[0].layers, (std::vector<int64_t>{0, 1, 2}));
  const KvGroups mistral = KvGroups::ForWindows({64, 64});
  ASSERT_EQ(mistral.size(), 1u);
  EXPECT_EQ(mistral.groups[0].window, 64);
  // Gemma 3: layer l is global when l % 6 == 5.
  const KvGroups gemma3 = KvGroups::ForWindows({512, 512, 512, 512, 512, 0, 512, 512});
  ASSERT_EQ(gemma3.size(), 2u);
  EXPECT_EQ(gemma3.groups[0].window, 0);
  EXPECT_EQ(gemma3.groups[0].layers, (std::vector<int64_t>{5}));
  EXPECT_EQ(gemma3.groups[1].window, 512);
  EXPECT_EQ(gemma3.groups[1].layers, (std::vector<int64_t>{0, 1, 2, 3, 4, 6, 7}));
  EXPECT_EQ(gemma3.group_of[6], 1);
  EXPECT_EQ(gemma3.slot_of[6], 5);
  EXPECT_EQ(gemma3.slot_of[5], 0);
  const KvGroups layout_check = KvGroups::ForWindows({4, 0});
  EXPECT_EQ(layout_check.Layout(KvLayout{2, 3, 8}, 1).n_layer, 1);
  // More than two windows: one full group (correct, not smaller).
  const KvGroups three = KvGroups::ForWindows({0, 4, 8});
  ASSERT_EQ(three.size(), 1u);
  EXPECT_EQ(three.groups[0].window, 0);
  EXPECT_TRUE(KvGroups::ForWindows({}).size() == 1);
}

class KvSplitTest : public ::testing::TestWithParam<const char*> {};

TEST_P(KvSplitTest, SplitChangesNoLogit) {
  std::shared_ptr<Model> split = Load(ArchModel(GetParam()), true);
  std::shared_ptr<Model> one = Load(ArchModel(GetParam()), false);
  ASSERT_NE(split, nullptr);
  ASSERT_NE(one, nullptr);
  ASSERT_EQ(split->kv_groups().size(), 2u);
  ASSERT_EQ(one->kv_groups().size(), 1u);
  for (const KvType type : {KvType::kF16, KvType::kF32}) {
    SCOPED_TRACE(type == KvType::kF16 ? "F16" : "F32");
    auto a = NewSession(split, type);
    auto b = NewSession(one, type);
    const std::vector<int32_t> prompt = Tokens(150, 1);
    ASSERT_TRUE(a->Prefill(prompt).ok());
    ASSERT_TRUE(b->Prefill(prompt).ok());
    ASSERT_EQ(Logits(*a), Logits(*b));
    // The local table released what its window left; the one table did not.
    EXPECT_LT(a->session_kv().table(1).blocks_held(), a->session_kv().table(0).blocks_held());
    EXPECT_EQ(b->kv().blocks_held(), a->kv().blocks_held());
    // A second session with the same prompt adopts the cached prefix (from
    // both pools of the split model): the same logits as on the unsplit model.
    auto a2 = NewSession(split, type);
    auto b2 = NewSession(one, type);
    ASSERT_TRUE(a2->Prefill(prompt).ok());
    ASSERT_TRUE(b2->Prefill(prompt).ok());
    EXPECT_GT(a2->cached_tokens(), 100u);
    EXPECT_EQ(a2->cached_tokens(), b2->cached_tokens());
    ASSERT_EQ(Logits(*a2), Logits(*b2));
    ASSERT_TRUE(a2->Decode().ok());
    ASSERT_TRUE(b2->Decode().ok());
    ASSERT_EQ(Logits(*a2), Logits(*b2));
    auto fork = a->Fork();
    ASSERT_TRUE(fork.ok()) << fork.status();
    std::vector<uint8_t> saved(a->SaveSize());
    ASSERT_TRUE(a->Save(saved.data(), saved.size()).ok());
    std::vector<uint8_t> saved_one(b->SaveSize());
    ASSERT_TRUE(b->Save(saved_one.data(), saved_one.size()).ok());
    ASSERT_EQ(saved.size(), saved_one.size());
    auto loaded = NewSession(split, type);
    ASSERT_TRUE(loaded->Load(saved.data(), saved.size()).ok());
    for (int i = 0; i < 50; ++i) {
      auto x = a->Decode();
      auto y = b->Decode();
      auto z = (*fork)->Decode();
      auto w = loaded->Decode();
      ASSERT_TRUE(x.ok() && y.ok() && z.ok() && w.ok());
      ASSERT_EQ(*x, *y);
      ASSERT_EQ(Logits(*a), Logits(*b)) << "step " << i;
      ASSERT_EQ(Logits(*a), Logits(**fork)) << "step " << i;
      ASSERT_EQ(Logits(*a), Logits(*loaded)) << "step " << i;
    }
  }
}

TEST_P(KvSplitTest, BatchedSplitSessionsMatchTheUnsplitModel) {
  std::shared_ptr<Model> split = Load(ArchModel(GetParam()), true);
  std::shared_ptr<Model> one = Load(ArchModel(GetParam()), false);
  ASSERT_NE(split, nullptr);
  ASSERT_NE(one, nullptr);
  const int lens[3] = {90, 33, 170};
  std::vector<std::vector<float>> alone(3), together(3);
  for (int i = 0; i < 3; ++i) {
    auto s = NewSession(one, KvType::kF16);
    ASSERT_TRUE(s->Prefill(Tokens(lens[i], i)).ok());
    for (int k = 0; k < 30; ++k) ASSERT_TRUE(s->Decode().ok());
    alone[i] = Logits(*s);
  }
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < 3; ++i) sessions.push_back(NewSession(split, KvType::kF16));
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      if (!sessions[i]->Prefill(Tokens(lens[i], i)).ok()) return;
      for (int k = 0; k < 30; ++k) {
        if (!sessions[i]->Decode().ok()) return;
      }
      together[i] = Logits(*sessions[i]);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(together[i].size(), alone[i].size()) << "session " << i << " failed";
    double m = 0;
    for (size_t k = 0; k < alone[i].size(); ++k) {
      m = std::max<double>(m, std::abs(static_cast<double>(together[i][k]) - alone[i][k]));
    }
    EXPECT_LE(m, 1e-3) << "session " << i;  // batched rows may sum in another order
  }
}

// The recording double sees two KV groups: every layer of the model is a
// StoreKv / Attention layer of one of them, and no pass breaks the
// protocol.
TEST_P(KvSplitTest, RecordingBackendSeesEveryLayer) {
  auto log = std::make_shared<testing::BackendLog>();
  std::shared_ptr<Model> model = Load(ArchModel(GetParam()), true, log);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(log->n_layer(), model->hparams().n_layer);
  auto s = NewSession(model, KvType::kF16);
  ASSERT_TRUE(s->Prefill(Tokens(100, 7)).ok());
  for (int k = 0; k < 5; ++k) ASSERT_TRUE(s->Decode().ok());
  EXPECT_TRUE(log->Violations().empty()) << log->Violations()[0];
  // The last pass (a decode at position 104) handed the second group's list
  // with the blocks the window released as -1, and the local layers'
  // attention saw their window.
  const std::vector<testing::PassRecord> passes = log->Passes();
  ASSERT_FALSE(passes.empty());
  const testing::SequenceRecord& seq = passes.back().sequences[0];
  ASSERT_EQ(seq.blocks_group1.size(), seq.blocks.size());
  EXPECT_EQ(seq.blocks_group1[0], -1);
  EXPECT_GE(seq.blocks[0], 0);
  int64_t windowed = 0;
  for (const testing::OpRecord& op : passes.back().ops) {
    if (op.name == "Attention" && op.window == 64) ++windowed;
  }
  EXPECT_EQ(windowed, static_cast<int64_t>(model->kv_groups().groups[1].layers.size()));
}

INSTANTIATE_TEST_SUITE_P(Gemma, KvSplitTest, ::testing::Values("tiny-gemma2", "tiny-gemma3"));

// Host storage good enough for block bookkeeping (never addressed).
std::unique_ptr<KvStorage> SessionKvTest_Storage() {
  class Host : public KvStorage {
   public:
    bool AddBlocks(int32_t, int64_t) noexcept override { return true; }
    absl::Status CopyBlock(int32_t, int32_t) override { return absl::OkStatus(); }
    absl::Status ReadBlock(int32_t, uint8_t*) const override { return absl::OkStatus(); }
    absl::Status WriteBlock(int32_t, const uint8_t*) override { return absl::OkStatus(); }
  };
  return std::make_unique<Host>();
}

// SessionKv over two pools: the tables move together.
class SessionKvTest : public ::testing::Test {
 protected:
  // Layers 0 and 2 full, 1 windowed (window 16 = one F16 block).
  KvGroups groups_ = KvGroups::ForWindows({0, 16, 0});
  KvBlockPool full_{groups_.Layout(KvLayout{3, 1, 8}, 0), 64 * 1024, Storage(0)};
  KvBlockPool local_{groups_.Layout(KvLayout{3, 1, 8}, 1), 64 * 1024, Storage(1)};
  KvBlockPool* pools_[2] = {&full_, &local_};

  static std::unique_ptr<KvStorage> Storage(int) { return SessionKvTest_Storage(); }
  void Run(SessionKv& kv, const std::vector<int32_t>& history, int64_t from) {
    ASSERT_TRUE(kv.PrepareWrite(from, static_cast<int64_t>(history.size())).ok());
    kv.Commit(history);
  }
};

TEST_F(SessionKvTest, TablesMoveTogether) {
  SessionKv kv(&groups_, pools_, KvType::kF16, 256);
  ASSERT_EQ(kv.n_groups(), 2u);
  EXPECT_EQ(kv.window(), 16);
  const std::vector<int32_t> h = Tokens(100, 3);
  Run(kv, h, 0);
  EXPECT_EQ(kv.table(0).n_positions(), 100);
  EXPECT_EQ(kv.table(1).n_positions(), 100);
  EXPECT_EQ(kv.table(0).blocks_held(), 7);
  EXPECT_LE(kv.table(1).blocks_held(), 2);
  EXPECT_EQ(kv.blocks_held(), kv.table(0).blocks_held() + kv.table(1).blocks_held());
  EXPECT_FALSE(kv.CanResumeAt(40));  // the local table released it
  EXPECT_TRUE(kv.table(0).CanResumeAt(40));
  EXPECT_FALSE(kv.CanResumeAt(95));  // needs [79, 95): block 4 is released
  EXPECT_TRUE(kv.CanResumeAt(97));
  kv.Truncate(97);
  EXPECT_EQ(kv.table(0).n_positions(), 97);
  EXPECT_EQ(kv.table(1).n_positions(), 97);

  // Adoption takes what both pools hold: the same history in a new session
  // adopts whole blocks from both (the local pool caches what it released).
  SessionKv other(&groups_, pools_, KvType::kF16, 256);
  other.SetPin(0);
  // 6 whole blocks of 16, in both pools (the local pool caches the blocks
  // the window released).
  EXPECT_EQ(other.AdoptCachedPrefix(h, 99), 96);
  EXPECT_EQ(other.table(0).n_positions(), other.table(1).n_positions());

  // Fork: both tables.
  std::unique_ptr<SessionKv> child = kv.Fork();
  EXPECT_EQ(child->table(0).blocks(), kv.table(0).blocks());
  EXPECT_EQ(child->table(1).blocks(), kv.table(1).blocks());

  // A restore allocates every full-group block and only the window's local ones.
  SessionKv restored(&groups_, pools_, KvType::kF16, 256);
  ASSERT_TRUE(restored.PrepareRestore(100).ok());
  EXPECT_EQ(restored.table(0).blocks_held(), 7);
  EXPECT_LE(restored.table(1).blocks_held(), 2);
}

TEST_F(SessionKvTest, AdoptionStopsWhereTheLocalPoolLostTheChain) {
  const std::vector<int32_t> h = Tokens(80, 4);
  {
    SessionKv kv(&groups_, pools_, KvType::kF16, 256);
    Run(kv, std::vector<int32_t>(h.begin(), h.begin() + 32), 0);
    // The local pool forgets block 1 (as if evicted); the full pool keeps it.
    local_.Unregister(kv.table(1).blocks()[1]);
    Run(kv, h, 32);
  }
  // The full pool alone could give 4 blocks; the local one only block 0:
  // both tables stop at 16, and the full table gives back what it adopted
  // beyond.
  SessionKv next(&groups_, pools_, KvType::kF16, 256);
  next.SetPin(0);
  EXPECT_EQ(next.AdoptCachedPrefix(h, 79), 16);
  EXPECT_EQ(next.table(0).n_positions(), 16);
  EXPECT_EQ(next.table(1).n_positions(), 16);
  EXPECT_EQ(full_.Stats().blocks_used, 1u);
  EXPECT_EQ(local_.Stats().blocks_used, 1u);
}

// Two windowed groups (no supported architecture, but the rule allows it):
// when the second pool lost the chain early, the first table, windowed,
// cannot go back to the common length -- its window released what that
// needs -- so both tables adopt nothing.
TEST(SessionKvFallback, AWindowedTableThatCannotTruncateAdoptsNothing) {
  KvGroups groups = KvGroups::ForWindows({8, 16});
  ASSERT_EQ(groups.size(), 2u);
  ASSERT_EQ(groups.groups[0].window, 8);
  const KvLayout model{2, 1, 8};
  KvBlockPool a(groups.Layout(model, 0), 64 * 1024, SessionKvTest_Storage());
  KvBlockPool b(groups.Layout(model, 1), 64 * 1024, SessionKvTest_Storage());
  KvBlockPool* pools[2] = {&a, &b};
  const std::vector<int32_t> h = Tokens(80, 5);
  {
    SessionKv kv(&groups, pools, KvType::kF16, 256);
    ASSERT_TRUE(kv.PrepareWrite(0, 32).ok());
    kv.Commit(std::vector<int32_t>(h.begin(), h.begin() + 32));
    b.Unregister(kv.table(1).blocks()[1]);
    ASSERT_TRUE(kv.PrepareWrite(32, 80).ok());
    kv.Commit(h);
  }
  SessionKv next(&groups, pools, KvType::kF16, 256);
  next.SetPin(0);
  EXPECT_EQ(next.AdoptCachedPrefix(h, 79), 0);
  EXPECT_EQ(next.table(0).n_positions(), 0);
  EXPECT_EQ(next.table(1).n_positions(), 0);
  EXPECT_EQ(a.Stats().blocks_used, 0u);
  EXPECT_EQ(b.Stats().blocks_used, 0u);
}

// A pool too small for a restore: the load fails with KV_FULL and neither
// table keeps a block; a write that does not fit fails the same way with
// the committed positions unchanged.
TEST(SessionKvFailure, RestoreAndWriteThatDoNotFitLeaveTheTablesAsTheyWere) {
  KvGroups groups = KvGroups::ForWindows({0, 16});
  const KvLayout model{2, 1, 8};
  const KvLayout local = groups.Layout(model, 1);
  KvBlockPool full(groups.Layout(model, 0), 64 * 1024, SessionKvTest_Storage());
  // Two local blocks: a window of 16 needs up to 2 (one being written).
  KvBlockPool small(local, 2 * local.block_bytes(), SessionKvTest_Storage());
  KvBlockPool* pools[2] = {&full, &small};
  {
    SessionKv kv(&groups, pools, KvType::kF16, 256);
    // Restoring 100 positions needs blocks 5 and 6 of the local table: fits.
    ASSERT_TRUE(kv.PrepareRestore(100).ok());
  }
  EXPECT_EQ(full.Stats().blocks_used, 0u);
  SessionKv a(&groups, pools, KvType::kF16, 256);
  SessionKv b(&groups, pools, KvType::kF16, 256);
  ASSERT_TRUE(a.PrepareWrite(0, 20).ok());  // both local blocks
  a.Commit(Tokens(20, 6));
  const absl::Status st = b.PrepareRestore(40);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(b.table(0).blocks_held(), 0);
  EXPECT_EQ(b.table(1).blocks_held(), 0);
  EXPECT_EQ(full.Stats().blocks_used, 2u);  // a's only
  const absl::Status w = b.PrepareWrite(0, 10);
  EXPECT_FALSE(w.ok());
  EXPECT_EQ(b.n_positions(), 0);
  EXPECT_EQ(a.n_positions(), 20);
}

}  // namespace
}  // namespace llm
