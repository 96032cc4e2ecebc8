// The engine against a recording test double of the backend
// (tests/engine/recording_backend.h): prefill, decode, fork, rewind and
// save/load run on a tiny model through RecordingBackend, and the tests
// check what the passes were -- an iteration is one pass, chunks stay within
// batch_tokens, logits are produced only for sampling rows, KV moves only
// through the storage's block calls -- and that the double itself refuses
// misuse of the interface.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "engine/model.h"
#include "engine/session.h"
#include "gtest/gtest.h"
#include "tests/engine/recording_backend.h"

namespace llm {
namespace {

using testing::BackendLog;
using testing::KvOpRecord;
using testing::OpRecord;
using testing::PassRecord;
using testing::RecordingBackend;
using testing::SequenceRecord;

std::string TinyModel(const char* file = "tiny-llama-Q8_0.gguf") {
  const char* dir = std::getenv("LLM_TINY_MODEL_DIR");
  const std::string d =
      (dir != nullptr && *dir != '\0') ? dir : std::string(LLM_TEST_DATA_DIR) + "/tiny";
  return d + "/" + file;
}

// n token ids, different for each salt from the first token on (so no
// prompt adopts another's cached prefix).
std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(3 + (salt * 37 + i * 13) % 500);
  return t;
}

std::vector<int32_t> Slice(const std::vector<int32_t>& v, size_t first, size_t n) {
  return std::vector<int32_t>(v.begin() + first, v.begin() + first + n);
}

std::vector<std::string> OpNames(const PassRecord& p) {
  std::vector<std::string> names;
  for (const OpRecord& o : p.ops) names.push_back(o.name);
  return names;
}

class BackendDoubleTest : public ::testing::Test {
 protected:
  void Load(int64_t batch_tokens, const std::string& model_path = TinyModel()) {
    if (log_ != nullptr) ExpectCleanLog();  // the previous model's
    log_ = std::make_shared<BackendLog>();
    ModelLoadOptions options;
    options.n_threads = 1;
    options.batch_tokens = batch_tokens;
    options.backend_factory = RecordingBackend::Factory(log_);
    auto model = Model::LoadFile(model_path, options);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
    batch_tokens_ = batch_tokens;
    ASSERT_EQ(log_->NumPasses(), 0u);
    n_layer_ = log_->n_layer();
    ASSERT_EQ(n_layer_, model_->hparams().n_layer);
  }

  Session* NewSession() {
    SessionOptions options;
    options.n_ctx = 256;
    options.sampler.temperature = 0;  // greedy
    auto s = Session::Create(model_, options);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return nullptr;
    sessions_.push_back(std::move(*s));
    return sessions_.back().get();
  }

  // Invariants of every pass the double saw: rows within batch_tokens, the
  // logit rows are the sequences that want logits, each read once, in order.
  void CheckAllPasses() {
    for (const PassRecord& p : log_->Passes()) {
      SCOPED_TRACE("pass " + std::to_string(p.index));
      EXPECT_TRUE(p.ended);
      EXPECT_GE(p.rows(), 1);
      EXPECT_LE(p.rows(), batch_tokens_);
      EXPECT_EQ(p.logit_rows, p.wanting_logits());
      EXPECT_EQ(p.logits_read(), p.logit_rows);
      int64_t next = 0;
      for (const OpRecord& o : p.ops) {
        if (o.name == "ReadLogits") {
          EXPECT_EQ(o.logit_row, next++);
        }
      }
    }
  }

  // Checks every pass, then releases the sessions and the model and checks
  // that the double saw no protocol violation.
  void ExpectCleanLog() {
    CheckAllPasses();
    sessions_.clear();
    model_.reset();
    const std::vector<std::string> v = log_->Violations();
    EXPECT_TRUE(v.empty()) << v.size() << " protocol violations, the first: " << v.front();
  }

  void TearDown() override {
    if (log_ != nullptr) ExpectCleanLog();
  }

  SchedulerStats Stats() const { return model_->scheduler().stats(); }

  std::shared_ptr<BackendLog> log_;
  std::shared_ptr<Model> model_;
  std::vector<std::unique_ptr<Session>> sessions_;
  int64_t batch_tokens_ = 0;
  int64_t n_layer_ = 0;
};

TEST_F(BackendDoubleTest, TheEngineReachesKvOnlyThroughTheDoublesStorage) {
  ASSERT_NO_FATAL_FAILURE(Load(16));
  ASSERT_NE(log_->storage(), nullptr);
  // The pool holds the recording wrapper, not the CPU backend's storage.
  EXPECT_EQ(&model_->kv_pool().storage(), log_->storage());
  EXPECT_NE(dynamic_cast<const testing::RecordingKvStorage*>(log_->storage()), nullptr);
}

TEST_F(BackendDoubleTest, RecordingDoesNotChangeTheLogits) {
  ModelLoadOptions plain_options;
  plain_options.n_threads = 1;
  plain_options.batch_tokens = 16;
  auto plain = Model::LoadFile(TinyModel(), plain_options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_NO_FATAL_FAILURE(Load(16));
  SessionOptions options;
  options.n_ctx = 256;
  options.sampler.temperature = 0;
  auto a = Session::Create(*plain, options);
  ASSERT_TRUE(a.ok());
  Session* b = NewSession();
  const std::vector<int32_t> prompt = Prompt(37, 1);
  ASSERT_TRUE((*a)->Prefill(prompt).ok());
  ASSERT_TRUE(b->Prefill(prompt).ok());
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(std::vector<float>((*a)->logits().begin(), (*a)->logits().end()),
              std::vector<float>(b->logits().begin(), b->logits().end()))
        << "step " << i;
    auto ta = (*a)->Decode();
    auto tb = b->Decode();
    ASSERT_TRUE(ta.ok() && tb.ok());
    ASSERT_EQ(*ta, *tb);
  }
  a->reset();
}

TEST_F(BackendDoubleTest, PrefillRunsOnePassPerChunkWithinBatchTokens) {
  struct Case {
    int64_t batch_tokens;
    int n;
  };
  for (const Case c : {Case{16, 40}, Case{16, 48}, Case{16, 5}, Case{7, 30}, Case{64, 50}}) {
    SCOPED_TRACE("batch_tokens " + std::to_string(c.batch_tokens) + ", " + std::to_string(c.n) +
                 " tokens");
    ASSERT_NO_FATAL_FAILURE(Load(c.batch_tokens));
    Session* s = NewSession();
    const std::vector<int32_t> prompt = Prompt(c.n, c.n);
    const SchedulerStats before = Stats();
    ASSERT_TRUE(s->Prefill(prompt).ok());
    EXPECT_EQ(s->cached_tokens(), 0u);
    const int64_t chunks = (c.n + c.batch_tokens - 1) / c.batch_tokens;
    const std::vector<PassRecord> passes = log_->Passes();
    ASSERT_EQ(static_cast<int64_t>(passes.size()), chunks);
    for (int64_t i = 0; i < chunks; ++i) {
      const PassRecord& p = passes[i];
      const bool last = i == chunks - 1;
      const int64_t pos0 = i * c.batch_tokens;
      const int64_t rows = std::min<int64_t>(c.batch_tokens, c.n - pos0);
      ASSERT_EQ(p.sequences.size(), 1u);
      const SequenceRecord& q = p.sequences[0];
      EXPECT_EQ(q.row0, 0);
      EXPECT_EQ(q.n_rows, rows);
      EXPECT_EQ(q.pos0, pos0);
      EXPECT_EQ(q.wants_logits, last);
      EXPECT_EQ(q.n_blocks(), (pos0 + rows + 15) / 16);  // F16 blocks of 16 positions
      EXPECT_EQ(p.tokens, Slice(prompt, static_cast<size_t>(pos0), static_cast<size_t>(rows)));
      EXPECT_EQ(p.logit_rows, last ? 1 : 0);
      EXPECT_EQ(p.logits_read(), last ? 1 : 0);
      EXPECT_EQ(p.Count("Logits"), last ? 1 : 0);  // no Logits in a pass without logit rows
    }
    const SchedulerStats after = Stats();
    EXPECT_EQ(after.iterations - before.iterations, static_cast<uint64_t>(chunks));
    EXPECT_EQ(after.prefill_chunks - before.prefill_chunks, static_cast<uint64_t>(chunks));
    EXPECT_EQ(after.tokens - before.tokens, static_cast<uint64_t>(c.n));
    EXPECT_EQ(s->iterations(), static_cast<uint64_t>(chunks));
    EXPECT_EQ(s->prefill_chunks(), static_cast<uint64_t>(chunks));
    EXPECT_TRUE(s->has_logits());
  }
}

TEST_F(BackendDoubleTest, DecodeIsOnePassOfOneRowWithOneLogitRow) {
  ASSERT_NO_FATAL_FAILURE(Load(16));
  Session* s = NewSession();
  ASSERT_TRUE(s->Prefill(Prompt(21, 2)).ok());
  for (int step = 0; step < 12; ++step) {  // crosses into the third block at position 32
    SCOPED_TRACE("decode " + std::to_string(step));
    const size_t mark = log_->NumPasses();
    const SchedulerStats before = Stats();
    auto token = s->Decode();
    ASSERT_TRUE(token.ok()) << token.status();
    const std::vector<PassRecord> passes = log_->PassesSince(mark);
    ASSERT_EQ(passes.size(), 1u);
    const PassRecord& p = passes[0];
    EXPECT_EQ(p.tokens, std::vector<int32_t>{*token});
    ASSERT_EQ(p.sequences.size(), 1u);
    EXPECT_EQ(p.sequences[0].n_rows, 1);
    EXPECT_EQ(p.sequences[0].pos0, 21 + step);
    EXPECT_TRUE(p.sequences[0].wants_logits);
    EXPECT_EQ(p.sequences[0].n_blocks(), (21 + step + 1 + 15) / 16);
    EXPECT_EQ(p.sequences[0].blocks, s->kv().blocks());
    EXPECT_EQ(p.logit_rows, 1);
    EXPECT_EQ(p.logits_read(), 1);
    EXPECT_EQ(Stats().iterations - before.iterations, 1u);
    EXPECT_EQ(Stats().decode_rows - before.decode_rows, 1u);
  }
  EXPECT_EQ(s->iterations(), 2u + 12u);  // two prefill chunks of 16 + 5
}

TEST_F(BackendDoubleTest, ConcurrentDecodesMergeIntoOnePass) {
  constexpr int k = 4;
  ASSERT_NO_FATAL_FAILURE(Load(16));
  Session* blocker = NewSession();
  ASSERT_TRUE(blocker->Prefill(Prompt(3, 100)).ok());
  std::vector<Session*> s;
  for (int i = 0; i < k; ++i) {
    s.push_back(NewSession());
    ASSERT_TRUE(s.back()->Prefill(Prompt(5 + i, 10 + i)).ok());
  }
  const size_t mark = log_->NumPasses();
  const SchedulerStats before = Stats();
  // The blocker's pass waits at BeginPass while the others queue behind it,
  // so the next iteration finds all k decodes pending.
  log_->HoldPasses();
  ASSERT_TRUE(blocker->SubmitDecode().ok());
  ASSERT_TRUE(log_->WaitForHeldPass());
  for (Session* x : s) ASSERT_TRUE(x->SubmitDecode().ok());
  log_->ReleasePasses();
  ASSERT_TRUE(blocker->Wait(nullptr).ok());
  std::vector<int32_t> tokens(k);
  for (int i = 0; i < k; ++i) ASSERT_TRUE(s[i]->Wait(&tokens[i]).ok());

  const std::vector<PassRecord> passes = log_->PassesSince(mark);
  ASSERT_EQ(passes.size(), 2u);
  EXPECT_EQ(passes[0].sequences.size(), 1u);
  const PassRecord& p = passes[1];
  ASSERT_EQ(p.sequences.size(), static_cast<size_t>(k));
  EXPECT_EQ(p.rows(), k);
  EXPECT_EQ(p.logit_rows, k);
  EXPECT_EQ(p.logits_read(), k);
  EXPECT_EQ(p.tokens, tokens);  // least recently served first: submit order here
  for (int i = 0; i < k; ++i) {
    EXPECT_EQ(p.sequences[i].row0, i);
    EXPECT_EQ(p.sequences[i].n_rows, 1);
    EXPECT_EQ(p.sequences[i].pos0, 5 + i);
    EXPECT_TRUE(p.sequences[i].wants_logits);
  }
  const SchedulerStats after = Stats();
  EXPECT_EQ(after.iterations - before.iterations, passes.size());
  EXPECT_EQ(after.decode_rows - before.decode_rows, static_cast<uint64_t>(k + 1));
  EXPECT_GE(after.max_chunks_in_pass, static_cast<uint64_t>(k));
  // Every pass of the model ran on one thread: the scheduler's.
  const std::vector<PassRecord> all = log_->Passes();
  EXPECT_EQ(all.size(), after.iterations);
  for (const PassRecord& q : all) {
    EXPECT_EQ(q.thread, all[0].thread);
    EXPECT_NE(q.thread, std::this_thread::get_id());
  }
}

TEST_F(BackendDoubleTest, ForkCopiesOnlyTheSharedPartlyFilledBlock) {
  ASSERT_NO_FATAL_FAILURE(Load(16));
  Session* parent = NewSession();
  ASSERT_TRUE(parent->Prefill(Prompt(21, 3)).ok());  // block 0 full, block 1 holds 5
  const std::vector<int32_t> parent_blocks = parent->kv().blocks();
  ASSERT_EQ(parent_blocks.size(), 2u);
  auto forked = parent->Fork();
  ASSERT_TRUE(forked.ok()) << forked.status();
  sessions_.push_back(std::move(*forked));
  Session* child = sessions_.back().get();
  EXPECT_EQ(child->kv().blocks(), parent_blocks);

  size_t kv_mark = log_->NumKvOps();
  size_t mark = log_->NumPasses();
  ASSERT_TRUE(child->Decode().ok());
  std::vector<KvOpRecord> copies = log_->KvOpsSince(kv_mark, "CopyBlock");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].block, parent_blocks[1]);
  EXPECT_EQ(copies[0].dst, child->kv().blocks()[1]);
  EXPECT_NE(copies[0].dst, parent_blocks[1]);
  EXPECT_FALSE(copies[0].during_pass);  // before the pass, on the scheduler thread
  std::vector<PassRecord> passes = log_->PassesSince(mark);
  ASSERT_EQ(passes.size(), 1u);
  EXPECT_EQ(passes[0].sequences[0].blocks, (std::vector<int32_t>{parent_blocks[0], copies[0].dst}));
  EXPECT_EQ(copies[0].thread, passes[0].thread);

  // The parent's block 1 is its own again: written in place.
  kv_mark = log_->NumKvOps();
  mark = log_->NumPasses();
  ASSERT_TRUE(parent->Decode().ok());
  EXPECT_TRUE(log_->KvOpsSince(kv_mark, "CopyBlock").empty());
  passes = log_->PassesSince(mark);
  ASSERT_EQ(passes.size(), 1u);
  EXPECT_EQ(passes[0].sequences[0].blocks, parent_blocks);
  EXPECT_EQ(parent->kv().blocks(), parent_blocks);
}

TEST_F(BackendDoubleTest, ForkAtABlockBoundaryCopiesNothing) {
  ASSERT_NO_FATAL_FAILURE(Load(16));
  Session* parent = NewSession();
  ASSERT_TRUE(parent->Prefill(Prompt(32, 4)).ok());  // two full blocks
  const std::vector<int32_t> parent_blocks = parent->kv().blocks();
  ASSERT_EQ(parent_blocks.size(), 2u);
  auto forked = parent->Fork();
  ASSERT_TRUE(forked.ok());
  sessions_.push_back(std::move(*forked));
  Session* child = sessions_.back().get();
  const size_t kv_mark = log_->NumKvOps();
  const size_t mark = log_->NumPasses();
  ASSERT_TRUE(child->Decode().ok());
  ASSERT_TRUE(parent->Decode().ok());
  EXPECT_TRUE(log_->KvOpsSince(kv_mark, "CopyBlock").empty());
  const std::vector<PassRecord> passes = log_->PassesSince(mark);
  ASSERT_EQ(passes.size(), 2u);
  for (const PassRecord& p : passes) {
    ASSERT_EQ(p.sequences.size(), 1u);
    ASSERT_EQ(p.sequences[0].n_blocks(), 3);
    EXPECT_EQ(p.sequences[0].blocks[0], parent_blocks[0]);  // shared, read only
    EXPECT_EQ(p.sequences[0].blocks[1], parent_blocks[1]);
    EXPECT_EQ(p.sequences[0].pos0, 32);
  }
  EXPECT_NE(passes[0].sequences[0].blocks[2], passes[1].sequences[0].blocks[2]);
}

TEST_F(BackendDoubleTest, ForkedSessionsDecodingInOnePassWriteOnlyTheirOwnBlocks) {
  ASSERT_NO_FATAL_FAILURE(Load(16));
  Session* blocker = NewSession();
  ASSERT_TRUE(blocker->Prefill(Prompt(3, 101)).ok());
  Session* parent = NewSession();
  ASSERT_TRUE(parent->Prefill(Prompt(21, 5)).ok());
  const std::vector<int32_t> parent_blocks = parent->kv().blocks();
  auto forked = parent->Fork();
  ASSERT_TRUE(forked.ok());
  sessions_.push_back(std::move(*forked));
  Session* child = sessions_.back().get();
  const size_t kv_mark = log_->NumKvOps();
  const size_t mark = log_->NumPasses();
  log_->HoldPasses();
  ASSERT_TRUE(blocker->SubmitDecode().ok());
  ASSERT_TRUE(log_->WaitForHeldPass());
  ASSERT_TRUE(parent->SubmitDecode().ok());
  ASSERT_TRUE(child->SubmitDecode().ok());
  log_->ReleasePasses();
  ASSERT_TRUE(blocker->Wait(nullptr).ok());
  int32_t tp = -1, tc = -1;
  ASSERT_TRUE(parent->Wait(&tp).ok());
  ASSERT_TRUE(child->Wait(&tc).ok());
  EXPECT_EQ(tp, tc);  // same history, greedy
  const std::vector<PassRecord> passes = log_->PassesSince(mark);
  ASSERT_EQ(passes.size(), 2u);
  ASSERT_EQ(passes[1].sequences.size(), 2u);
  // Exactly one of the two copied the shared partly filled block; the full
  // block 0 stays shared by both rows of the pass (the double refuses a pass
  // in which one sequence writes a block another holds).
  const std::vector<KvOpRecord> copies = log_->KvOpsSince(kv_mark, "CopyBlock");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].block, parent_blocks[1]);
  EXPECT_EQ(passes[1].sequences[0].blocks[0], parent_blocks[0]);
  EXPECT_EQ(passes[1].sequences[1].blocks[0], parent_blocks[0]);
  EXPECT_NE(passes[1].sequences[0].blocks[1], passes[1].sequences[1].blocks[1]);
  EXPECT_EQ(std::vector<float>(parent->logits().begin(), parent->logits().end()),
            std::vector<float>(child->logits().begin(), child->logits().end()));
}

TEST_F(BackendDoubleTest, RewindIsOnePassOfOneRowAtTheLastKeptPosition) {
  ASSERT_NO_FATAL_FAILURE(Load(16));
  Session* s = NewSession();
  ASSERT_TRUE(s->Prefill(Prompt(30, 6)).ok());
  ASSERT_TRUE(s->Decode().ok());
  ASSERT_TRUE(s->Decode().ok());
  const std::vector<int32_t> history = s->tokens();
  ASSERT_EQ(history.size(), 32u);
  for (int64_t n : {20, 16, 1}) {
    SCOPED_TRACE("rewind to " + std::to_string(n));
    const size_t mark = log_->NumPasses();
    const size_t kv_mark = log_->NumKvOps();
    ASSERT_TRUE(s->Rewind(n).ok());
    const std::vector<PassRecord> passes = log_->PassesSince(mark);
    ASSERT_EQ(passes.size(), 1u);
    const PassRecord& p = passes[0];
    EXPECT_EQ(p.tokens, std::vector<int32_t>{history[n - 1]});
    ASSERT_EQ(p.sequences.size(), 1u);
    EXPECT_EQ(p.sequences[0].n_rows, 1);
    EXPECT_EQ(p.sequences[0].pos0, n - 1);
    EXPECT_EQ(p.sequences[0].n_blocks(), (n + 15) / 16);
    EXPECT_TRUE(p.sequences[0].wants_logits);
    EXPECT_EQ(p.logits_read(), 1);
    EXPECT_TRUE(log_->KvOpsSince(kv_mark, "CopyBlock").empty());
    EXPECT_EQ(static_cast<int64_t>(s->tokens().size()), n);
    EXPECT_TRUE(s->has_logits());
    // Already there with logits: no pass at all.
    ASSERT_TRUE(s->Rewind(n).ok());
    EXPECT_EQ(log_->NumPasses(), mark + 1);
  }
}

TEST_F(BackendDoubleTest, SaveReadsEveryBlockAndLoadWritesThem) {
  ASSERT_NO_FATAL_FAILURE(Load(16));
  Session* a = NewSession();
  ASSERT_TRUE(a->Prefill(Prompt(21, 7)).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a->Decode().ok());
  const std::vector<int32_t> a_blocks = a->kv().blocks();
  ASSERT_EQ(a_blocks.size(), 2u);  // 24 positions

  std::vector<uint8_t> buffer(a->SaveSize());
  size_t kv_mark = log_->NumKvOps();
  size_t mark = log_->NumPasses();
  auto saved = a->Save(buffer.data(), buffer.size());
  ASSERT_TRUE(saved.ok()) << saved.status();
  std::vector<KvOpRecord> ops = log_->KvOpsSince(kv_mark);
  ASSERT_EQ(ops.size(), a_blocks.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i].name, "ReadBlock");
    EXPECT_EQ(ops[i].block, a_blocks[i]);
    EXPECT_EQ(ops[i].thread, std::this_thread::get_id());
  }
  EXPECT_EQ(log_->NumPasses(), mark);

  Session* b = NewSession();
  kv_mark = log_->NumKvOps();
  ASSERT_TRUE(b->Load(buffer.data(), *saved).ok());
  const std::vector<int32_t> b_blocks = b->kv().blocks();
  ASSERT_EQ(b_blocks.size(), a_blocks.size());
  std::vector<KvOpRecord> writes = log_->KvOpsSince(kv_mark, "WriteBlock");
  ASSERT_EQ(writes.size(), b_blocks.size());
  for (size_t i = 0; i < writes.size(); ++i) {
    EXPECT_EQ(writes[i].block, b_blocks[i]);
    EXPECT_EQ(std::count(a_blocks.begin(), a_blocks.end(), b_blocks[i]), 0);
  }
  EXPECT_TRUE(log_->KvOpsSince(kv_mark, "ReadBlock").empty());
  EXPECT_TRUE(log_->KvOpsSince(kv_mark, "CopyBlock").empty());
  EXPECT_EQ(log_->NumPasses(), mark);
  EXPECT_EQ(b->tokens(), a->tokens());

  // The loaded KV gives the original's next logits, bit for bit.
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE("decode " + std::to_string(i));
    ASSERT_EQ(std::vector<float>(a->logits().begin(), a->logits().end()),
              std::vector<float>(b->logits().begin(), b->logits().end()));
    auto ta = a->Decode();
    auto tb = b->Decode();
    ASSERT_TRUE(ta.ok() && tb.ok());
    ASSERT_EQ(*ta, *tb);
  }
  EXPECT_EQ(std::vector<float>(a->logits().begin(), a->logits().end()),
            std::vector<float>(b->logits().begin(), b->logits().end()));
}

TEST_F(BackendDoubleTest, LogitsOnlyForSamplingRowsInAMixedPass) {
  ASSERT_NO_FATAL_FAILURE(Load(16));
  Session* blocker = NewSession();
  ASSERT_TRUE(blocker->Prefill(Prompt(3, 102)).ok());
  Session* d1 = NewSession();
  Session* d2 = NewSession();
  Session* p = NewSession();
  ASSERT_TRUE(d1->Prefill(Prompt(5, 8)).ok());
  ASSERT_TRUE(d2->Prefill(Prompt(6, 9)).ok());
  const std::vector<int32_t> prompt = Prompt(40, 11);
  const size_t mark = log_->NumPasses();
  const SchedulerStats before = Stats();
  log_->HoldPasses();
  ASSERT_TRUE(blocker->SubmitDecode().ok());
  ASSERT_TRUE(log_->WaitForHeldPass());
  ASSERT_TRUE(p->SubmitPrefill(prompt).ok());
  ASSERT_TRUE(d1->SubmitDecode().ok());
  ASSERT_TRUE(d2->SubmitDecode().ok());
  log_->ReleasePasses();
  int32_t t1 = -1, t2 = -1;
  ASSERT_TRUE(blocker->Wait(nullptr).ok());
  ASSERT_TRUE(d1->Wait(&t1).ok());
  ASSERT_TRUE(d2->Wait(&t2).ok());
  ASSERT_TRUE(p->Wait(nullptr).ok());

  const std::vector<PassRecord> passes = log_->PassesSince(mark);
  ASSERT_EQ(passes.size(), 4u);  // blocker; d1 + d2 + 14 of the prompt; 16; 10
  const PassRecord& mixed = passes[1];
  ASSERT_EQ(mixed.sequences.size(), 3u);
  EXPECT_EQ(mixed.rows(), 16);
  EXPECT_EQ(mixed.tokens[0], t1);
  EXPECT_EQ(mixed.tokens[1], t2);
  EXPECT_TRUE(mixed.sequences[0].wants_logits);
  EXPECT_TRUE(mixed.sequences[1].wants_logits);
  EXPECT_EQ(mixed.sequences[2].n_rows, 14);
  EXPECT_EQ(mixed.sequences[2].pos0, 0);
  EXPECT_FALSE(mixed.sequences[2].wants_logits);  // not the prompt's last chunk
  EXPECT_EQ(mixed.logit_rows, 2);                 // the decode sequences only
  EXPECT_EQ(mixed.logits_read(), 2);
  EXPECT_EQ(passes[2].sequences.size(), 1u);
  EXPECT_EQ(passes[2].sequences[0].pos0, 14);
  EXPECT_EQ(passes[2].sequences[0].n_rows, 16);
  EXPECT_EQ(passes[2].logit_rows, 0);
  EXPECT_EQ(passes[3].sequences[0].pos0, 30);
  EXPECT_EQ(passes[3].sequences[0].n_rows, 10);
  EXPECT_EQ(passes[3].logit_rows, 1);
  EXPECT_EQ(Stats().iterations - before.iterations, passes.size());
  EXPECT_EQ(p->prefill_chunks(), 3u);
  EXPECT_TRUE(p->has_logits());
}

TEST_F(BackendDoubleTest, ACachedPrefixIsAdoptedNotComputed) {
  ASSERT_NO_FATAL_FAILURE(Load(16));
  Session* a = NewSession();
  const std::vector<int32_t> prompt = Prompt(40, 13);
  ASSERT_TRUE(a->Prefill(prompt).ok());
  const std::vector<int32_t> a_blocks = a->kv().blocks();
  ASSERT_EQ(a_blocks.size(), 3u);
  Session* b = NewSession();
  const size_t mark = log_->NumPasses();
  const size_t kv_mark = log_->NumKvOps();
  ASSERT_TRUE(b->Prefill(prompt).ok());
  EXPECT_EQ(b->cached_tokens(), 32u);  // the two full blocks
  const std::vector<PassRecord> passes = log_->PassesSince(mark);
  ASSERT_EQ(passes.size(), 1u);
  ASSERT_EQ(passes[0].sequences.size(), 1u);
  const SequenceRecord& q = passes[0].sequences[0];
  EXPECT_EQ(q.pos0, 32);
  EXPECT_EQ(q.n_rows, 8);
  EXPECT_EQ(passes[0].tokens, Slice(prompt, 32, 8));
  ASSERT_EQ(q.n_blocks(), 3);
  EXPECT_EQ(q.blocks[0], a_blocks[0]);  // shared, only read
  EXPECT_EQ(q.blocks[1], a_blocks[1]);
  EXPECT_NE(q.blocks[2], a_blocks[2]);
  EXPECT_TRUE(log_->KvOpsSince(kv_mark, "CopyBlock").empty());
  EXPECT_EQ(std::vector<float>(a->logits().begin(), a->logits().end()),
            std::vector<float>(b->logits().begin(), b->logits().end()));
}

TEST_F(BackendDoubleTest, OpsOfAPassComeInLlamaOrder) {
  ASSERT_NO_FATAL_FAILURE(Load(16));
  Session* s = NewSession();
  ASSERT_TRUE(s->Prefill(Prompt(9, 12)).ok());
  ASSERT_TRUE(s->Decode().ok());
  const std::vector<PassRecord> passes = log_->Passes();
  ASSERT_EQ(passes.size(), 2u);
  std::vector<std::string> want = {"BeginPass", "Embed"};
  for (int64_t l = 0; l < n_layer_; ++l) {
    for (const char* op : {"RmsNorm", "Linear", "Rope", "Rope", "StoreKv", "Attention", "Linear",
                           "Add", "RmsNorm", "Linear", "SwiGlu", "Linear", "Add"}) {
      want.push_back(op);
    }
  }
  for (const char* op : {"Logits", "EndPass", "ReadLogits"}) want.push_back(op);
  ASSERT_EQ(n_layer_, 2);
  for (const PassRecord& p : passes) {
    SCOPED_TRACE("pass " + std::to_string(p.index));
    EXPECT_EQ(OpNames(p), want);
    EXPECT_EQ(p.Count("StoreKv"), n_layer_);
    EXPECT_EQ(p.Count("Attention"), n_layer_);
    int64_t store_layer = 0, attention_layer = 0;
    std::vector<size_t> linear_weights;
    for (const OpRecord& o : p.ops) {
      if (o.name == "StoreKv") {
        EXPECT_EQ(o.layer, store_layer++);
      }
      if (o.name == "Attention") {
        EXPECT_EQ(o.layer, attention_layer++);
        EXPECT_EQ(o.window, 0);  // a llama without attention.sliding_window
      }
      if (o.name == "Linear" && linear_weights.size() < 4)
        linear_weights.push_back(o.weights.size());
    }
    // Q/K/V share an input, then the output projection, gate/up, down.
    EXPECT_EQ(linear_weights, (std::vector<size_t>{3, 1, 2, 1}));
  }
}

// A Mistral-style model (every layer windowed to 64): each Attention gets
// the window, and once positions fall out of it the passes hand the
// released blocks as -1 (the double checks that no Attention would read one
// and no StoreKv writes one).
TEST_F(BackendDoubleTest, SlidingWindowPassesCarryTheWindowAndReleasedBlocks) {
  ASSERT_NO_FATAL_FAILURE(Load(64, TinyModel("tiny-mistral-swa-F16.gguf")));
  Session* s = NewSession();
  ASSERT_TRUE(s->Prefill(Prompt(150, 5)).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s->Decode().ok());
  const std::vector<PassRecord> passes = log_->Passes();
  ASSERT_EQ(passes.size(), 6u);  // 64 + 64 + 22 prompt rows, 3 decodes
  for (const PassRecord& p : passes) {
    SCOPED_TRACE("pass " + std::to_string(p.index));
    for (const OpRecord& o : p.ops) {
      if (o.name == "Attention") {
        EXPECT_EQ(o.window, 64);
      }
    }
    ASSERT_EQ(p.sequences.size(), 1u);
    const SequenceRecord& q = p.sequences[0];
    // Released: the blocks wholly before [pos0 - 64, pos0) -- in the second
    // prefill chunk (pos0 64) none yet; by the decodes (pos0 >= 150) blocks
    // 0 .. 4 (positions < 80) at least.
    int64_t released = 0;
    for (const int32_t b : q.blocks) released += b == -1 ? 1 : 0;
    if (q.pos0 <= 64) {
      EXPECT_EQ(released, 0);
    }
    if (q.pos0 >= 150) {
      EXPECT_GE(released, 5);
    }
    for (int64_t k = 0; k < static_cast<int64_t>(q.blocks.size()); ++k) {
      if (q.blocks[k] == -1) {
        EXPECT_LE((k + 1) * 16, q.pos0 - 64) << "block " << k;
      }
    }
  }
}

// A generation's checkpoint pins the windowed table: after 100 decodes (far
// past the window) a rollback returns to the checkpoint with the KV its
// next step needs, and that step gives the logits a fork taken at the
// checkpoint (same KV bytes) gives. Without the pin the rollback would land
// in released blocks.
TEST_F(BackendDoubleTest, SlidingWindowRollBackToACheckpointKeepsItsWindow) {
  ASSERT_NO_FATAL_FAILURE(Load(64, TinyModel("tiny-mistral-swa-F16.gguf")));
  Session* s = NewSession();
  const std::vector<int32_t> prompt = Prompt(100, 9);
  ASSERT_TRUE(s->Prefill(prompt).ok());
  // The reference: a fork (the same KV bytes) that never goes further.
  auto fork = s->Fork();
  ASSERT_TRUE(fork.ok()) << fork.status();
  sessions_.push_back(std::move(*fork));
  Session* ref = sessions_.back().get();
  Session::Checkpoint cp = s->MakeCheckpoint();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(s->Decode().ok()) << "decode " << i;
  s->RollBack(cp);
  EXPECT_EQ(s->tokens().size(), prompt.size());
  for (int i = 0; i < 3; ++i) {
    auto a = s->Decode();
    auto b = ref->Decode();
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(*a, *b);
    const std::vector<float> la(s->logits().begin(), s->logits().end());
    const std::vector<float> lb(ref->logits().begin(), ref->logits().end());
    EXPECT_EQ(la, lb) << "step " << i;
  }
}

TEST_F(BackendDoubleTest, SessionsOnThreadsPassesMatchTheSchedulersIterations) {
  ASSERT_NO_FATAL_FAILURE(Load(16));
  constexpr int kThreads = 3;
  for (int i = 0; i < kThreads; ++i) ASSERT_NE(NewSession(), nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([this, i] {
      Session* s = sessions_[i].get();
      ASSERT_TRUE(s->Prefill(Prompt(20 + 7 * i, 20 + i)).ok());
      for (int d = 0; d < 6; ++d) ASSERT_TRUE(s->Decode().ok());
      std::vector<uint8_t> buffer(s->SaveSize());
      ASSERT_TRUE(s->Save(buffer.data(), buffer.size()).ok());
      ASSERT_TRUE(s->Rewind(10).ok());
      ASSERT_TRUE(s->Load(buffer.data(), buffer.size()).ok());
      ASSERT_TRUE(s->Decode().ok());
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<PassRecord> passes = log_->Passes();
  const SchedulerStats stats = Stats();
  EXPECT_EQ(passes.size(), stats.iterations);
  uint64_t rows = 0, sequences = 0;
  for (const PassRecord& p : passes) {
    rows += static_cast<uint64_t>(p.rows());
    sequences += p.sequences.size();
    EXPECT_EQ(p.thread, passes[0].thread);
  }
  EXPECT_EQ(rows, stats.tokens);
  EXPECT_EQ(sequences, stats.decode_rows + stats.prefill_chunks);
}

// ---- the double's own checks -------------------------------------------------

class BackendDoubleProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = std::make_shared<BackendLog>();
    auto b = RecordingBackend::Factory(log_)(BackendOptions{});
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = std::move(*b);
    x_ = backend_->DeclareActivation(8, ActivationRows::kTokens);
    logits_ = backend_->DeclareActivation(8, ActivationRows::kLogitRows);
    KvLayout layout;
    layout.n_layer = 2;
    layout.n_head_kv = 1;
    layout.head_dim = 8;
    const std::vector<int64_t> layers = {0, 1};
    auto storage = backend_->CreateKvStorage(layout, layers);
    ASSERT_TRUE(storage.ok()) << storage.status();
    storage_ = std::move(*storage);
    ASSERT_TRUE(storage_->AddBlocks(0, 4));
    block_bytes_ = layout.block_bytes();
  }

  // Expects status to be a refusal whose violation mentions `what`.
  void ExpectViolation(const absl::Status& status, const std::string& what) {
    EXPECT_EQ(ToLlmStatus(status), LLM_ERR_INTERNAL) << status;
    const std::vector<std::string> v = log_->Violations();
    ASSERT_GT(v.size(), seen_) << "no violation recorded for " << what;
    EXPECT_NE(v.back().find(what), std::string::npos) << v.back();
    seen_ = v.size();
  }

  std::shared_ptr<BackendLog> log_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<KvStorage> storage_;
  ActivationId x_, logits_;
  size_t block_bytes_ = 0;
  size_t seen_ = 0;
  const std::vector<int32_t> tokens_ = {5, 6};
  const std::vector<int32_t> blocks_a_ = {0};
  const std::vector<int32_t> blocks_b_ = {1};
};

TEST_F(BackendDoubleProtocolTest, RefusesMisuse) {
  ExpectViolation(backend_->Add(x_, x_), "before any BeginPass");

  // Tokens that the sequences do not cover.
  std::vector<PassSequence> one_row = {PassSequence{0, 1, 0, KvBlockList{blocks_a_}, true, {}}};
  ExpectViolation(backend_->BeginPass(PassDesc{tokens_, one_row}), "sequences cover 1 rows");
  // Blocks that do not cover the positions.
  std::vector<PassSequence> far = {PassSequence{0, 2, 15, KvBlockList{blocks_a_}, true, {}}};
  ExpectViolation(backend_->BeginPass(PassDesc{tokens_, far}), "do not cover");
  // A block without storage.
  const std::vector<int32_t> no_storage = {9};
  std::vector<PassSequence> missing = {PassSequence{0, 2, 0, KvBlockList{no_storage}, true, {}}};
  ExpectViolation(backend_->BeginPass(PassDesc{tokens_, missing}), "has no storage");
  // Two sequences writing one block.
  std::vector<PassSequence> both = {PassSequence{0, 1, 0, KvBlockList{blocks_a_}, true, {}},
                                    PassSequence{1, 1, 3, KvBlockList{blocks_a_}, true, {}}};
  ExpectViolation(backend_->BeginPass(PassDesc{tokens_, both}), "another sequence");

  // A second group's list on a model with one KV group.
  std::vector<PassSequence> extra = {
      PassSequence{0, 2, 0, KvBlockList{blocks_a_}, false, KvBlockList{blocks_b_}}};
  ExpectViolation(backend_->BeginPass(PassDesc{tokens_, extra}), "has one KV group");

  // A well-formed pass of two rows, the second sequence wanting logits.
  std::vector<PassSequence> ok = {PassSequence{0, 1, 0, KvBlockList{blocks_a_}, false, {}},
                                  PassSequence{1, 1, 0, KvBlockList{blocks_b_}, true, {}}};
  ASSERT_TRUE(backend_->BeginPass(PassDesc{tokens_, ok}).ok());
  ExpectViolation(backend_->BeginPass(PassDesc{tokens_, ok}), "BeginPass inside a pass");
  EXPECT_TRUE(backend_->Add(x_, x_).ok());
  ExpectViolation(backend_->Add(x_, ActivationId{7, 8}), "never declared");
  ExpectViolation(backend_->Add(x_, ActivationId{x_.index, 16}), "with width 16");
  ExpectViolation(backend_->Add(x_, logits_), "as token rows");
  ExpectViolation(backend_->StoreKv(2, x_, x_), "of layer 2 of 2");
  ExpectViolation(backend_->Embed(WeightId{42, 8, 8}, x_), "never added");
  std::vector<float> host(8);
  ExpectViolation(backend_->ReadActivation(logits_, 0, host.data()), "before its EndPass");
  // KV storage calls touching the running pass's blocks.
  std::vector<uint8_t> bytes(block_bytes_);
  ExpectViolation(storage_->WriteBlock(1, bytes.data()), "the running pass uses");
  ExpectViolation(storage_->ReadBlock(0, bytes.data()), "the running pass writes");
  ExpectViolation(storage_->CopyBlock(2, 0), "the running pass uses");
  EXPECT_TRUE(storage_->CopyBlock(2, 3).ok());
  // One sequence wants logits but the pass ends without Logits.
  ExpectViolation(backend_->EndPass(), "ran no Logits");
  ExpectViolation(backend_->ReadActivation(logits_, 0, host.data()), "before its EndPass");

  // A pass without logit rows, ended properly: no row can be read.
  std::vector<PassSequence> none = {PassSequence{0, 2, 0, KvBlockList{blocks_a_}, false, {}}};
  ASSERT_TRUE(backend_->BeginPass(PassDesc{tokens_, none}).ok());
  ASSERT_TRUE(backend_->EndPass().ok());
  ExpectViolation(backend_->ReadActivation(logits_, 0, host.data()), "which has 0 logit rows");
  ExpectViolation(backend_->ReadActivation(x_, 0, host.data()), "as logit rows");
  ExpectViolation(backend_->Add(x_, x_), "outside BeginPass .. EndPass");
  ExpectViolation(storage_->ReadBlock(4, bytes.data()), "has no storage");
  // Outside a pass the storage is free to use.
  EXPECT_TRUE(storage_->WriteBlock(1, bytes.data()).ok());
  EXPECT_TRUE(storage_->ReadBlock(0, bytes.data()).ok());

  // Another thread in the middle of a pass.
  ASSERT_TRUE(backend_->BeginPass(PassDesc{tokens_, none}).ok());
  absl::Status other;
  std::thread([&] { other = backend_->Add(x_, x_); }).join();
  ExpectViolation(other, "another thread");
  ASSERT_TRUE(backend_->EndPass().ok());
  EXPECT_EQ(log_->Violations().size(), seen_);
}

// Two KV groups (a model mixing windows): layer 0 in group 0 (full), layer 1
// in group 1 (windowed); the double checks each layer's reads against its
// group's list and the second list's coverage.
TEST(BackendDoubleTwoGroups, ChecksEachLayerAgainstItsGroupsBlocks) {
  auto log = std::make_shared<BackendLog>();
  auto made = RecordingBackend::Factory(log)(BackendOptions{});
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<Backend> b = std::move(*made);
  const ActivationId x = b->DeclareActivation(8, ActivationRows::kTokens);
  const KvLayout one_layer{1, 1, 8};
  const std::vector<int64_t> g0 = {0}, g1 = {1};
  auto s0 = b->CreateKvStorage(one_layer, g0);
  auto s1 = b->CreateKvStorage(one_layer, g1);
  ASSERT_TRUE(s0.ok() && s1.ok());
  ASSERT_TRUE((*s0)->AddBlocks(0, 2));
  ASSERT_TRUE((*s1)->AddBlocks(0, 2));
  EXPECT_EQ(log->n_layer(), 2);
  size_t seen = 0;
  auto expect_violation = [&](const absl::Status& st, const std::string& what) {
    EXPECT_EQ(ToLlmStatus(st), LLM_ERR_INTERNAL) << st;
    const std::vector<std::string> v = log->Violations();
    ASSERT_GT(v.size(), seen) << "no violation recorded for " << what;
    EXPECT_NE(v.back().find(what), std::string::npos) << v.back();
    seen = v.size();
  };
  const std::vector<int32_t> tokens = {5};
  const std::vector<int32_t> full = {0, 1};
  const std::vector<int32_t> short_list = {1};
  const std::vector<int32_t> window_released = {-1, 0};  // block 0 released
  const std::vector<int32_t> write_released = {0, -1};
  // Position 20 (block 1): group 1's list must cover it and hold block 1.
  std::vector<PassSequence> uncovered = {
      PassSequence{0, 1, 20, KvBlockList{full}, false, KvBlockList{short_list}}};
  expect_violation(b->BeginPass(PassDesc{tokens, uncovered}), "of group 1 do not cover");
  std::vector<PassSequence> into_released = {
      PassSequence{0, 1, 20, KvBlockList{full}, false, KvBlockList{write_released}}};
  expect_violation(b->BeginPass(PassDesc{tokens, into_released}), "of group 1");
  std::vector<PassSequence> ok = {
      PassSequence{0, 1, 20, KvBlockList{full}, false, KvBlockList{window_released}}};
  ASSERT_TRUE(b->BeginPass(PassDesc{tokens, ok}).ok());
  ASSERT_TRUE(b->StoreKv(0, x, x).ok());
  ASSERT_TRUE(b->StoreKv(1, x, x).ok());
  // Layer 0 (group 0, all blocks held) reads everything; layer 1 with window
  // 4 reads only block 1 (keys [17, 20]); full attention over layer 1 would
  // read its group's released block 0.
  EXPECT_TRUE(b->Attention(0, 1, 0, x, x).ok());
  EXPECT_TRUE(b->Attention(1, 1, 4, x, x).ok());
  expect_violation(b->Attention(1, 1, 0, x, x), "reads released KV block index 0");
  ASSERT_TRUE(b->EndPass().ok());
  EXPECT_EQ(log->Violations().size(), seen);
  const std::vector<PassRecord> passes = log->Passes();
  ASSERT_FALSE(passes.empty());
  EXPECT_EQ(passes.back().sequences[0].blocks_group1, window_released);
}

}  // namespace
}  // namespace llm
