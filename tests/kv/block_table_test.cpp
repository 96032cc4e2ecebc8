// KvBlockTable: rows stored at random positions across blocks read back
// through ReadBlock and the blocks' bytes (F16 and F32), fork +
// copy-on-write, prefix
// registration and adoption, truncation, failure paths.
#include "kv/block_table.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "gtest/gtest.h"
#include "tests/kv/kv_test_util.h"

namespace llm {
namespace {

// 3 layers, 3 kv heads of 7: odd row of 21 elements.
KvLayout TestLayout() { return KvLayout{3, 3, 7}; }

// Random K/V rows for (layer, pos), regenerated on demand from a seed.
struct Rows {
  explicit Rows(const KvLayout& l, uint32_t seed, int64_t n_pos) : layout(l) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 2.0f);
    k.resize(static_cast<size_t>(l.n_layer * n_pos * l.row_elems()));
    v.resize(k.size());
    for (float& x : k) x = dist(rng);
    for (float& x : v) x = dist(rng);
    n = n_pos;
  }
  const float* K(int64_t layer, int64_t pos) const { return &k[Off(layer, pos)]; }
  const float* V(int64_t layer, int64_t pos) const { return &v[Off(layer, pos)]; }
  size_t Off(int64_t layer, int64_t pos) const {
    return static_cast<size_t>((layer * n + pos) * layout.row_elems());
  }
  KvLayout layout;
  int64_t n;
  std::vector<float> k, v;
};

// The expected bytes of a stored row in the cache's type.
std::vector<uint8_t> Encoded(const float* row, int64_t n, KvType type) {
  std::vector<uint8_t> out(static_cast<size_t>(n) * KvLayout::elem_bytes(type));
  if (type == KvType::kF16) {
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = F32ToF16(row[i]);
      std::memcpy(&out[static_cast<size_t>(i) * 2], &h, 2);
    }
  } else {
    std::memcpy(out.data(), row, out.size());
  }
  return out;
}

void StoreAll(KvBlockTable& t, const Rows& rows, int64_t begin, int64_t end) {
  for (int64_t layer = 0; layer < rows.layout.n_layer; ++layer) {
    for (int64_t p = begin; p < end; ++p) StoreKvRow(t, layer, p, rows.K(layer, p), rows.V(layer, p));
  }
}

// Checks positions [begin, end) of t hold rows (through the blocks' bytes
// and through ReadBlock, as session save reads them).
void ExpectRows(const KvBlockTable& t, const Rows& rows, int64_t begin, int64_t end) {
  const KvLayout& l = rows.layout;
  const int64_t n = l.row_elems();
  std::vector<uint8_t> block(l.block_bytes());
  for (int64_t layer = 0; layer < l.n_layer; ++layer) {
    for (int64_t p = begin; p < end; ++p) {
      const std::vector<uint8_t> k = Encoded(rows.K(layer, p), n, t.type());
      const std::vector<uint8_t> v = Encoded(rows.V(layer, p), n, t.type());
      ASSERT_EQ(std::memcmp(KvRow(t, layer, false, p), k.data(), k.size()), 0)
          << "layer " << layer << " pos " << p;
      ASSERT_EQ(std::memcmp(KvRow(t, layer, true, p), v.data(), v.size()), 0)
          << "layer " << layer << " pos " << p;
      ASSERT_TRUE(t.ReadBlock(static_cast<size_t>(p / t.block_tokens()), block.data()).ok());
      const size_t row = static_cast<size_t>(p % t.block_tokens()) * t.row_bytes();
      ASSERT_EQ(std::memcmp(block.data() + l.k_offset(t.type(), layer) + row, k.data(), k.size()), 0);
      ASSERT_EQ(std::memcmp(block.data() + l.v_offset(t.type(), layer) + row, v.data(), v.size()), 0);
    }
  }
}

std::vector<int32_t> Tokens(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % 50000);
  return t;
}

// A table holding n committed positions of rows / tokens.
void Fill(KvBlockTable& t, const Rows& rows, const std::vector<int32_t>& tokens, int64_t n) {
  ASSERT_TRUE(t.PrepareWrite(t.n_positions(), n).ok());
  StoreAll(t, rows, t.n_positions(), n);
  t.Commit(absl::MakeConstSpan(tokens.data(), static_cast<size_t>(n)));
}

class KvBlockTableTypes : public ::testing::TestWithParam<KvType> {};

TEST_P(KvBlockTableTypes, StoresRandomRowsAtRandomPositions) {
  const KvType type = GetParam();
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 64 * l.block_bytes());
  KvBlockTable t(&pool, type, 100);
  EXPECT_EQ(t.block_tokens(), KvLayout::block_tokens(type));
  const int64_t n = 61;  // several blocks, last one partial
  const Rows rows(l, 7, n);
  // Prepared in growing ranges.
  ASSERT_TRUE(t.PrepareWrite(0, 13).ok());
  ASSERT_TRUE(t.PrepareWrite(0, 13).ok());  // idempotent
  ASSERT_TRUE(t.PrepareWrite(0, n).ok());   // begin must not pass n_positions (0)
  EXPECT_EQ(t.blocks().size(), static_cast<size_t>((n + t.block_tokens() - 1) / t.block_tokens()));
  EXPECT_EQ(t.row_bytes(), static_cast<size_t>(l.row_elems()) * KvLayout::elem_bytes(type));
  // Random order of (layer, pos).
  std::vector<int64_t> order(static_cast<size_t>(l.n_layer * n));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(3));
  for (int64_t i : order) {
    const int64_t layer = i / n, p = i % n;
    StoreKvRow(t, layer, p, rows.K(layer, p), rows.V(layer, p));
  }
  ExpectRows(t, rows, 0, n);

  t.Commit(Tokens(n, 1));
  EXPECT_EQ(t.n_positions(), n);
  ExpectRows(t, rows, 0, n);
  // WriteBlock replaces a block's bytes; the others keep theirs.
  std::vector<uint8_t> block(l.block_bytes());
  const size_t b40 = static_cast<size_t>(40 / t.block_tokens());
  ASSERT_TRUE(t.ReadBlock(b40, block.data()).ok());
  std::memset(block.data() + l.k_offset(type, 1) + (40 % t.block_tokens()) * t.row_bytes(), 0x5a,
              t.row_bytes());
  ASSERT_TRUE(t.WriteBlock(b40, block.data()).ok());
  EXPECT_EQ(KvRow(t, 1, false, 40)[t.row_bytes() - 1], 0x5a);
  ExpectRows(t, rows, 0, 40);
  ExpectRows(t, rows, 41, n);
  EXPECT_FALSE(t.ReadBlock(t.blocks().size(), block.data()).ok());
}

TEST_P(KvBlockTableTypes, ForkSharesBlocksAndCopiesOnWrite) {
  const KvType type = GetParam();
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 64 * l.block_bytes());
  const int64_t bt = KvLayout::block_tokens(type);
  const int64_t n = 2 * bt + 3;  // two full blocks and a partial one
  const Rows rows(l, 21, n + 5);
  const std::vector<int32_t> tokens = Tokens(n + 5, 2);
  KvBlockTable parent(&pool, type, 200);
  Fill(parent, rows, tokens, n);
  const std::vector<int32_t> parent_blocks = parent.blocks();

  std::unique_ptr<KvBlockTable> child = parent.Fork();
  EXPECT_EQ(child->n_positions(), n);
  EXPECT_EQ(child->blocks(), parent_blocks);
  for (int32_t b : parent_blocks) EXPECT_EQ(pool.RefCount(b), 2);
  EXPECT_EQ(pool.Stats().blocks_shared, 3u);
  ExpectRows(*child, rows, 0, n);

  // The child diverges at position n: only the partial block is copied.
  const Rows other(l, 99, n + 5);
  ASSERT_TRUE(child->PrepareWrite(n, n + 1).ok());
  EXPECT_EQ(child->blocks()[0], parent_blocks[0]);
  EXPECT_EQ(child->blocks()[1], parent_blocks[1]);
  EXPECT_NE(child->blocks()[2], parent_blocks[2]);
  EXPECT_EQ(pool.RefCount(parent_blocks[2]), 1);
  EXPECT_EQ(pool.RefCount(child->blocks()[2]), 1);
  EXPECT_EQ(pool.Stats().blocks_shared, 2u);
  StoreAll(*child, other, n, n + 1);
  std::vector<int32_t> child_tokens(tokens.begin(), tokens.begin() + n);
  child_tokens.push_back(7);
  child->Commit(child_tokens);
  // The child keeps the copied history and sees its own write ...
  ExpectRows(*child, rows, 0, n);
  ExpectRows(*child, other, n, n + 1);
  // ... the parent's rows are untouched, and the parent writes without copying.
  ExpectRows(parent, rows, 0, n);
  ASSERT_TRUE(parent.PrepareWrite(n, n + 5).ok());
  EXPECT_EQ(parent.blocks()[2], parent_blocks[2]);
  StoreAll(parent, rows, n, n + 5);
  parent.Commit(absl::MakeConstSpan(tokens));
  ExpectRows(parent, rows, 0, n + 5);
  ExpectRows(*child, other, n, n + 1);

  // Rewriting inside a shared full block copies it (history before the write kept).
  ASSERT_TRUE(child->PrepareWrite(bt + 1, bt + 2).ok());
  EXPECT_EQ(child->blocks()[0], parent_blocks[0]);
  EXPECT_NE(child->blocks()[1], parent_blocks[1]);
  StoreAll(*child, other, bt + 1, bt + 2);
  ExpectRows(*child, rows, 0, bt + 1);
  ExpectRows(*child, other, bt + 1, bt + 2);
  ExpectRows(parent, rows, 0, n + 5);

  child.reset();
  EXPECT_EQ(pool.RefCount(parent_blocks[0]), 1);
  EXPECT_EQ(pool.Stats().blocks_shared, 0u);
  EXPECT_EQ(pool.Stats().blocks_used, parent.blocks().size());
}

TEST_P(KvBlockTableTypes, CommitRegistersFullBlocksAndWritesUnregister) {
  const KvType type = GetParam();
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 64 * l.block_bytes());
  const int64_t bt = KvLayout::block_tokens(type);
  const Rows rows(l, 5, 3 * bt);
  const std::vector<int32_t> tokens = Tokens(3 * bt, 4);
  KvBlockTable t(&pool, type, 3 * bt);
  Fill(t, rows, tokens, 2 * bt - 1);
  EXPECT_TRUE(pool.IsRegistered(t.blocks()[0]));
  EXPECT_FALSE(pool.IsRegistered(t.blocks()[1]));  // not full
  Fill(t, rows, tokens, 2 * bt);
  EXPECT_TRUE(pool.IsRegistered(t.blocks()[1]));
  const int32_t b1 = t.blocks()[1];

  // Truncate into block 1: it stays registered until written.
  t.Truncate(bt + 3);
  EXPECT_EQ(t.n_positions(), bt + 3);
  EXPECT_EQ(t.blocks().size(), 2u);
  EXPECT_TRUE(pool.IsRegistered(b1));
  ASSERT_TRUE(t.PrepareWrite(bt + 3, bt + 4).ok());
  EXPECT_EQ(t.blocks()[1], b1);  // ours alone: written in place
  EXPECT_FALSE(pool.IsRegistered(b1));
  EXPECT_TRUE(pool.IsRegistered(t.blocks()[0]));
  const Rows other(l, 6, 3 * bt);
  StoreAll(t, other, bt + 3, bt + 4);
  std::vector<int32_t> new_tokens(tokens.begin(), tokens.begin() + 2 * bt);
  new_tokens[bt + 3] = -5;
  t.Commit(absl::MakeConstSpan(new_tokens.data(), bt + 4));
  EXPECT_FALSE(pool.IsRegistered(b1));  // still partial
  ASSERT_TRUE(t.PrepareWrite(bt + 4, 2 * bt).ok());
  StoreAll(t, rows, bt + 4, 2 * bt);
  t.Commit(new_tokens);
  EXPECT_TRUE(pool.IsRegistered(b1));  // re-registered under the new tokens

  // The old key no longer finds it, the new one does.
  BlockKey key;
  key.type = type;
  key.tokens.assign(tokens.begin(), tokens.begin() + bt);
  key.prefix_hash = 0;
  key.prefix_hash = key.Hash();
  key.tokens.assign(tokens.begin() + bt, tokens.begin() + 2 * bt);
  EXPECT_FALSE(pool.Lookup(key).has_value());
  key.tokens.assign(new_tokens.begin() + bt, new_tokens.begin() + 2 * bt);
  auto hit = pool.Lookup(key);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, b1);
  pool.Release(*hit);

  // Truncating away whole registered blocks caches them.
  t.Truncate(bt);
  EXPECT_EQ(t.blocks().size(), 1u);
  EXPECT_EQ(pool.Stats().blocks_cached, 1u);
  t.Truncate(0);
  EXPECT_TRUE(t.blocks().empty());
  EXPECT_EQ(pool.Stats().blocks_cached, 2u);
  EXPECT_EQ(pool.Stats().blocks_used, 0u);
}

TEST_P(KvBlockTableTypes, AdoptCachedPrefixReusesMatchingBlocks) {
  const KvType type = GetParam();
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 64 * l.block_bytes());
  const int64_t bt = KvLayout::block_tokens(type);
  const int64_t n = 3 * bt + 5;
  const Rows rows(l, 8, n);
  const std::vector<int32_t> history = Tokens(n, 9);
  auto a = std::make_unique<KvBlockTable>(&pool, type, 500);
  Fill(*a, rows, history, n);
  const std::vector<int32_t> a_blocks = a->blocks();

  KvBlockTable b(&pool, type, 500);
  EXPECT_EQ(b.AdoptCachedPrefix(history, 1000), 3 * bt);  // whole blocks only
  EXPECT_EQ(b.n_positions(), 3 * bt);
  ASSERT_EQ(b.blocks().size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(b.blocks()[i], a_blocks[i]);
    EXPECT_EQ(pool.RefCount(a_blocks[i]), 2);
  }
  EXPECT_EQ(pool.Stats().prefix_hits, 3u);
  EXPECT_EQ(pool.Stats().blocks_shared, 3u);
  ExpectRows(b, rows, 0, 3 * bt);
  EXPECT_EQ(b.AdoptCachedPrefix(history, 1000), 3 * bt);  // nothing more
  // b continues its own way: its next block is fresh, the shared ones stay.
  ASSERT_TRUE(b.PrepareWrite(3 * bt, 3 * bt + 1).ok());
  EXPECT_EQ(b.blocks()[2], a_blocks[2]);
  EXPECT_NE(b.blocks()[3], a_blocks[3]);

  // Stops at the first mismatching block.
  std::vector<int32_t> diverged = history;
  diverged[bt + 2] += 1;
  KvBlockTable c(&pool, type, 500);
  EXPECT_EQ(c.AdoptCachedPrefix(diverged, 1000), bt);
  EXPECT_EQ(c.blocks(), std::vector<int32_t>{a_blocks[0]});
  // Stops at max_positions, and at n_ctx.
  KvBlockTable d(&pool, type, 500);
  EXPECT_EQ(d.AdoptCachedPrefix(history, 2 * bt + bt - 1), 2 * bt);
  KvBlockTable e(&pool, type, bt + 1);
  EXPECT_EQ(e.AdoptCachedPrefix(history, 1000), bt);
  // Continues from a block-aligned table: d adopts its third block.
  EXPECT_EQ(d.AdoptCachedPrefix(history, 1000), 3 * bt);
  EXPECT_EQ(d.blocks()[2], a_blocks[2]);
  // Another KV type never matches.
  KvBlockTable f(&pool, type == KvType::kF16 ? KvType::kF32 : KvType::kF16, 500);
  EXPECT_EQ(f.AdoptCachedPrefix(history, 1000), 0);
  EXPECT_TRUE(f.blocks().empty());
  // A table not block-aligned adopts nothing.
  KvBlockTable g(&pool, type, 500);
  Fill(g, rows, history, 3);
  EXPECT_EQ(g.AdoptCachedPrefix(history, 1000), 3);
  const uint64_t hits = pool.Stats().prefix_hits;

  // Once every holder is gone, the blocks stay cached and are adopted again.
  a.reset();
  b.Truncate(0);
  c.Truncate(0);
  d.Truncate(0);
  e.Truncate(0);
  EXPECT_EQ(pool.Stats().blocks_cached, 3u);
  KvBlockTable h(&pool, type, 500);
  EXPECT_EQ(h.AdoptCachedPrefix(history, 1000), 3 * bt);
  EXPECT_EQ(h.blocks(), std::vector<int32_t>(a_blocks.begin(), a_blocks.begin() + 3));
  EXPECT_EQ(pool.Stats().blocks_cached, 0u);
  EXPECT_EQ(pool.Stats().prefix_hits, hits + 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pool.RefCount(a_blocks[i]), 1);
  ExpectRows(h, rows, 0, 3 * bt);
}

TEST_P(KvBlockTableTypes, AdoptDropsPreparedUncommittedBlocks) {
  const KvType type = GetParam();
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 64 * l.block_bytes());
  const int64_t bt = KvLayout::block_tokens(type);
  const Rows rows(l, 12, 2 * bt);
  const std::vector<int32_t> history = Tokens(2 * bt, 13);
  KvBlockTable a(&pool, type, 100);
  Fill(a, rows, history, 2 * bt);
  KvBlockTable b(&pool, type, 100);
  ASSERT_TRUE(b.PrepareWrite(0, bt + 2).ok());  // prepared, never committed
  const int32_t scratch = b.blocks()[0];
  EXPECT_EQ(b.AdoptCachedPrefix(history, 100), 2 * bt);
  EXPECT_EQ(b.blocks(), a.blocks());
  EXPECT_EQ(pool.RefCount(scratch), 0);  // released
  EXPECT_EQ(pool.Stats().blocks_used, 2u);
}

TEST_P(KvBlockTableTypes, FailedPrepareKeepsPositionsAndData) {
  const KvType type = GetParam();
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 4 * l.block_bytes());
  const int64_t bt = KvLayout::block_tokens(type);
  const Rows rows(l, 31, 5 * bt);
  const std::vector<int32_t> tokens = Tokens(5 * bt, 32);
  KvBlockTable t(&pool, type, 10 * bt);
  Fill(t, rows, tokens, 2 * bt - 1);
  KvBlockTable hog(&pool, type, 10 * bt);
  ASSERT_TRUE(hog.PrepareWrite(0, 2 * bt).ok());  // the other two blocks

  absl::Status s = t.PrepareWrite(2 * bt - 1, 2 * bt + 1);
  EXPECT_EQ(ToLlmStatus(s), LLM_ERR_KV_FULL) << s;
  EXPECT_NE(s.message().find("of 4 blocks"), std::string::npos) << s;
  EXPECT_EQ(t.n_positions(), 2 * bt - 1);
  EXPECT_EQ(t.blocks().size(), 2u);
  ExpectRows(t, rows, 0, 2 * bt - 1);

  // Room for one more block of the two needed: it is kept for the retry.
  hog.Truncate(0);  // uncommitted: n_positions 0, releases both
  KvBlockTable hog2(&pool, type, 10 * bt);
  ASSERT_TRUE(hog2.PrepareWrite(0, 1).ok());
  s = t.PrepareWrite(2 * bt - 1, 4 * bt);
  EXPECT_EQ(ToLlmStatus(s), LLM_ERR_KV_FULL) << s;
  EXPECT_EQ(t.blocks().size(), 3u);
  EXPECT_EQ(t.n_positions(), 2 * bt - 1);
  ExpectRows(t, rows, 0, 2 * bt - 1);
  hog2.Truncate(0);
  ASSERT_TRUE(t.PrepareWrite(2 * bt - 1, 4 * bt).ok());
  EXPECT_EQ(t.blocks().size(), 4u);
  StoreAll(t, rows, 2 * bt - 1, 4 * bt);
  t.Commit(absl::MakeConstSpan(tokens.data(), 4 * bt));
  ExpectRows(t, rows, 0, 4 * bt);

  // A fork's copy-on-write also needs a block: KV_FULL, both sides intact.
  std::unique_ptr<KvBlockTable> child = t.Fork();
  s = child->PrepareWrite(bt, bt + 1);
  EXPECT_EQ(ToLlmStatus(s), LLM_ERR_KV_FULL) << s;
  EXPECT_EQ(child->blocks(), t.blocks());
  ExpectRows(*child, rows, 0, 4 * bt);
}

TEST_P(KvBlockTableTypes, ContextFullAndBadRanges) {
  const KvType type = GetParam();
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 16 * l.block_bytes());
  KvBlockTable t(&pool, type, 21);
  EXPECT_EQ(ToLlmStatus(t.PrepareWrite(0, 22)), LLM_ERR_CONTEXT_FULL);
  EXPECT_TRUE(t.blocks().empty());
  EXPECT_EQ(ToLlmStatus(t.PrepareWrite(1, 2)), LLM_ERR_INVALID_ARGUMENT);  // past n_positions
  EXPECT_EQ(ToLlmStatus(t.PrepareWrite(0, -1)), LLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(t.PrepareWrite(0, 0).ok());
  EXPECT_TRUE(t.PrepareWrite(0, 21).ok());
  EXPECT_EQ(pool.Stats().blocks_used, t.blocks().size());
}

TEST(KvBlockTable, DestructorReleasesEverything) {
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 16 * l.block_bytes());
  {
    KvBlockTable t(&pool, KvType::kF16, 100);
    ASSERT_TRUE(t.PrepareWrite(0, 40).ok());
    auto f = t.Fork();
    EXPECT_EQ(pool.Stats().blocks_shared, 3u);
  }
  const KvPoolStats s = pool.Stats();
  EXPECT_EQ(s.blocks_used, 0u);
  EXPECT_EQ(s.blocks_cached, 0u);  // never committed: nothing registered
}

INSTANTIATE_TEST_SUITE_P(Types, KvBlockTableTypes, ::testing::Values(KvType::kF16, KvType::kF32),
                         [](const ::testing::TestParamInfo<KvType>& info) {
                           return info.param == KvType::kF16 ? "F16" : "F32";
                         });

}  // namespace
}  // namespace llm

namespace llm {
namespace {

// One session rewrites a registered prefix block while another adopts and
// reads the same prefix on another thread: the writer must unregister or copy
// (never write a block the reader holds), the reader always sees the cached
// rows. (Run under TSan too.)
TEST(KvBlockTable, ConcurrentAdoptAndRewrite) {
  const KvLayout l = TestLayout();
  const KvType type = KvType::kF16;
  const int64_t bt = KvLayout::block_tokens(type);
  const int64_t n = 3 * bt;
  HostKvPool pool(l, 64 * l.block_bytes());
  const Rows rows(l, 41, n);
  const Rows other(l, 42, n);
  const std::vector<int32_t> history = Tokens(n, 43);
  std::vector<int32_t> changed = history;
  for (int64_t p = bt + 4; p < n; ++p) changed[p] = -1 - static_cast<int32_t>(p);

  std::atomic<bool> writer_done{false};
  std::thread writer([&] {
    for (int it = 0; it < 300; ++it) {
      KvBlockTable w(&pool, type, n);
      w.AdoptCachedPrefix(history, n);
      // Whatever was not cached is computed again and committed (registered).
      ASSERT_TRUE(w.PrepareWrite(w.n_positions(), n).ok());
      StoreAll(w, rows, w.n_positions(), n);
      w.Commit(history);
      // Rewind into block 1 and diverge.
      w.Truncate(bt + 4);
      ASSERT_TRUE(w.PrepareWrite(bt + 4, 2 * bt).ok());
      StoreAll(w, other, bt + 4, 2 * bt);
      w.Commit(absl::MakeConstSpan(changed.data(), 2 * bt));
      ExpectRows(w, rows, 0, bt + 4);
      ExpectRows(w, other, bt + 4, 2 * bt);
    }
    writer_done.store(true);
  });
  std::thread reader([&] {
    // Until the writer is done (and at least 100 times): adopt, read, drop.
    for (int it = 0; it < 100 || !writer_done.load(); ++it) {
      KvBlockTable r(&pool, type, n);
      const int64_t got = r.AdoptCachedPrefix(history, n);
      ExpectRows(r, rows, 0, got);
      ExpectRows(r, rows, 0, got);
    }
  });
  writer.join();
  reader.join();
  EXPECT_EQ(pool.Stats().blocks_used, 0u);
}

}  // namespace
}  // namespace llm
