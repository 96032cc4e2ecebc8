// Sliding-window KvBlockTable (docs/SLIDING_WINDOW.md): the release rule,
// the rollback pin, rewind limits, fork, prefix sharing, save/load restore,
// and the KV bytes of a Gemma-3-shaped model (5 local : 1 global layers,
// separate tables) at 8k context against full attention.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kv/block_table.h"
#include "tests/kv/kv_test_util.h"

namespace llm {
namespace {

// 2 layers, 3 kv heads of 5: odd rows.
KvLayout TestLayout() { return KvLayout{2, 3, 5}; }

std::vector<int32_t> Tokens(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % 30000);
  return t;
}

// A deterministic, position-dependent value for element e of (layer, pos,
// k or v): random-looking and never zero.
float RowValue(int64_t layer, int64_t pos, bool v, int64_t e) {
  uint32_t h = static_cast<uint32_t>(layer * 1000003 + pos * 7919 + e * 131 + (v ? 17 : 0));
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return 0.25f + static_cast<float>(h % 1000) / 250.0f;
}

void Store(KvBlockTable& t, int64_t begin, int64_t end) {
  const int64_t n = t.pool().layout().row_elems();
  std::vector<float> k(static_cast<size_t>(n)), v(k.size());
  for (int64_t l = 0; l < t.pool().layout().n_layer; ++l) {
    for (int64_t p = begin; p < end; ++p) {
      for (int64_t e = 0; e < n; ++e) {
        k[static_cast<size_t>(e)] = RowValue(l, p, false, e);
        v[static_cast<size_t>(e)] = RowValue(l, p, true, e);
      }
      StoreKvRow(t, l, p, k.data(), v.data());
    }
  }
}

// Positions [begin, end) hold their RowValue rows (F32 tables: exact).
void ExpectRows(const KvBlockTable& t, int64_t begin, int64_t end) {
  const int64_t n = t.pool().layout().row_elems();
  for (int64_t l = 0; l < t.pool().layout().n_layer; ++l) {
    for (int64_t p = begin; p < end; ++p) {
      const float* k = reinterpret_cast<const float*>(KvRow(t, l, false, p));
      const float* v = reinterpret_cast<const float*>(KvRow(t, l, true, p));
      for (int64_t e = 0; e < n; ++e) {
        ASSERT_EQ(k[e], RowValue(l, p, false, e)) << "layer " << l << " pos " << p;
        ASSERT_EQ(v[e], RowValue(l, p, true, e)) << "layer " << l << " pos " << p;
      }
    }
  }
}

// One call of a session: pin at its start (as Session::MarkCallStart does),
// then positions up to end written and committed.
void Call(KvBlockTable& t, const std::vector<int32_t>& tokens, int64_t end) {
  t.SetPin(t.n_positions());
  ASSERT_TRUE(t.PrepareWrite(t.n_positions(), end).ok());
  Store(t, t.n_positions(), end);
  t.Commit(absl::MakeConstSpan(tokens.data(), static_cast<size_t>(end)));
}

// Whether block i of t holds a position in [end - window, end).
bool InWindow(const KvBlockTable& t, size_t i, int64_t end) {
  const int64_t first = static_cast<int64_t>(i) * t.block_tokens();
  return first < end && first + t.block_tokens() > std::max<int64_t>(0, end - t.window());
}

TEST(WindowedKvBlockTable, ReleasesExactlyTheBlocksOutOfTheWindowAndPin) {
  const KvLayout l = TestLayout();
  for (const int64_t window : {1, 5, 8, 20, 33}) {
    SCOPED_TRACE("window " + std::to_string(window));
    HostKvPool pool(l, 200 * l.block_bytes());
    KvBlockTable t(&pool, KvType::kF32, 400, window);  // F32: 8 positions per block
    EXPECT_EQ(t.window(), window);
    const std::vector<int32_t> tokens = Tokens(400, 3);
    int64_t n = 0;
    for (const int64_t step : {1, 7, 1, 16, 3, 40, 1, 1, 9, 64, 2}) {
      const int64_t pin = n;
      Call(t, tokens, n + step);
      n += step;
      ASSERT_EQ(t.n_positions(), n);
      int64_t held = 0;
      for (size_t i = 0; i < t.blocks().size(); ++i) {
        const bool keep = static_cast<int64_t>(i) >= n / t.block_tokens() || InWindow(t, i, n) ||
                          InWindow(t, i, pin);
        EXPECT_EQ(t.blocks()[i] != KvBlockTable::kReleased, keep) << "block " << i << " at " << n;
        held += keep ? 1 : 0;
      }
      EXPECT_EQ(t.blocks_held(), held);
      EXPECT_EQ(pool.Stats().blocks_used, static_cast<uint64_t>(held));
      // What the next query reads, and the rollback target's window, are intact.
      ExpectRows(t, std::max<int64_t>(0, n - window), n);
      ExpectRows(t, std::max<int64_t>(0, pin - window), pin);
      EXPECT_TRUE(t.CanResumeAt(n));
      EXPECT_TRUE(t.CanResumeAt(pin));
    }
    // The pin moves on: only the window of the end stays.
    t.SetPin(-1);
    EXPECT_LE(t.blocks_held(), (window + t.block_tokens() - 1) / t.block_tokens() + 1);
    // Deep rewinds are refused; positions in the last window are not.
    EXPECT_FALSE(t.CanResumeAt(window + 1));
    EXPECT_FALSE(t.CanResumeAt(n + 1));
    // CanResumeAt(m) is exactly "every block holding [m - window, m) is held".
    for (int64_t m = 0; m <= n; ++m) {
      bool held_all = true;
      for (int64_t p = std::max<int64_t>(0, m - window); p < m; ++p) {
        held_all = held_all &&
                   t.blocks()[static_cast<size_t>(p / t.block_tokens())] != KvBlockTable::kReleased;
      }
      EXPECT_EQ(t.CanResumeAt(m), held_all) << "m " << m;
    }
    // Truncating to a resumable position keeps its window's rows.
    int64_t back = n - 1;
    while (!t.CanResumeAt(back)) ++back;
    ASSERT_LE(back, n);
    t.Truncate(back);
    ExpectRows(t, std::max<int64_t>(0, back - window), back);
    // ... and the table continues from there.
    Call(t, tokens, back + 30);
    ExpectRows(t, std::max<int64_t>(0, back + 30 - window), back + 30);
  }
}

TEST(WindowedKvBlockTable, FullTableNeverReleases) {
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 100 * l.block_bytes());
  KvBlockTable t(&pool, KvType::kF32, 400);
  const std::vector<int32_t> tokens = Tokens(400, 5);
  Call(t, tokens, 150);
  t.SetPin(-1);
  EXPECT_EQ(t.blocks_held(), static_cast<int64_t>(t.blocks().size()));
  EXPECT_TRUE(t.CanResumeAt(1));
  ExpectRows(t, 0, 150);
}

TEST(WindowedKvBlockTable, ForkSharesHeldBlocksAndEachSideReleasesItsOwn) {
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 100 * l.block_bytes());
  const int64_t window = 12;
  KvBlockTable a(&pool, KvType::kF32, 400, window);
  const std::vector<int32_t> tokens = Tokens(400, 7);
  Call(a, tokens, 50);
  a.SetPin(-1);
  const std::vector<int32_t> a_blocks = a.blocks();
  std::unique_ptr<KvBlockTable> b = a.Fork();
  EXPECT_EQ(b->window(), window);
  EXPECT_EQ(b->blocks(), a_blocks);  // released entries included
  for (const int32_t id : a_blocks) {
    if (id != KvBlockTable::kReleased) {
      EXPECT_EQ(pool.RefCount(id), 2);
    }
  }
  // The fork continues with other tokens (copy-on-write of the shared
  // partial block), the parent with its own.
  std::vector<int32_t> other = tokens;
  for (size_t i = 50; i < other.size(); ++i) other[i] = static_cast<int32_t>(i);
  Call(*b, other, 90);
  b->SetPin(-1);
  ExpectRows(*b, 90 - window, 90);
  ExpectRows(a, 50 - window, 50);
  Call(a, tokens, 70);
  a.SetPin(-1);
  ExpectRows(a, 70 - window, 70);
  // Nothing leaks: freeing both leaves no block used.
  b.reset();
  EXPECT_EQ(pool.Stats().blocks_used, static_cast<uint64_t>(a.blocks_held()));
}

TEST(WindowedKvBlockTable, PrefixSharingAdoptsBlocksTheFirstSessionReleased) {
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 100 * l.block_bytes());
  const int64_t window = 10;
  const std::vector<int32_t> tokens = Tokens(400, 9);
  KvBlockTable a(&pool, KvType::kF32, 400, window);
  Call(a, tokens, 64);
  a.SetPin(-1);
  EXPECT_LT(a.blocks_held(), 8);
  // Released but registered: cached in the pool, adoptable by a session
  // with the same prompt.
  EXPECT_GT(pool.Stats().blocks_cached, 0u);
  KvBlockTable b(&pool, KvType::kF32, 400, window);
  const int64_t adopted = b.AdoptCachedPrefix(tokens, 63);
  EXPECT_EQ(adopted, 56);  // whole blocks only, and not the last position
  // The cached blocks kept their content; only those a next query can read
  // stay attached (no pin: the window of position 56).
  ExpectRows(b, adopted - window, adopted);
  EXPECT_EQ(b.blocks_held(), 2);  // positions 40..55
  EXPECT_FALSE(b.CanResumeAt(20));
  // b continues and releases again.
  Call(b, tokens, 64);
  b.SetPin(-1);
  ExpectRows(b, 64 - window, 64);
  EXPECT_EQ(b.blocks_held(), a.blocks_held());
}

TEST(WindowedKvBlockTable, RestoreMaterializesOnlyTheWindowAndRegistersNothingReleased) {
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 100 * l.block_bytes());
  const int64_t window = 20;
  const std::vector<int32_t> tokens = Tokens(400, 11);
  KvBlockTable t(&pool, KvType::kF32, 400, window);
  ASSERT_TRUE(t.PrepareRestore(101).ok());
  for (size_t i = 0; i < t.blocks().size(); ++i) {
    const bool keep = static_cast<int64_t>(i) >= 101 / t.block_tokens() || InWindow(t, i, 101);
    EXPECT_EQ(t.blocks()[i] != KvBlockTable::kReleased, keep) << "block " << i;
  }
  std::vector<uint8_t> bytes(l.block_bytes());
  EXPECT_FALSE(t.WriteBlock(0, bytes.data()).ok());  // released: no storage
  EXPECT_FALSE(t.ReadBlock(0, bytes.data()).ok());
  Store(t, 101 - window, 101);
  t.Commit(absl::MakeConstSpan(tokens.data(), 101));
  ExpectRows(t, 101 - window, 101);
  // A released (never written) block must not be findable as a prefix.
  KvBlockTable other(&pool, KvType::kF32, 400, window);
  EXPECT_EQ(other.AdoptCachedPrefix(tokens, 100), 0);
  // Refused on a table that is not empty; too long for the context.
  EXPECT_FALSE(t.PrepareRestore(5).ok());
  KvBlockTable small(&pool, KvType::kF32, 50, window);
  EXPECT_FALSE(small.PrepareRestore(51).ok());
  EXPECT_EQ(small.blocks().size(), 0u);
}

// Gemma-3's shape: 5 sliding-window layers per full-attention layer, window
// 512 (Gemma 3 1B/4B...) or 1024. Local and global layers have separate
// block tables over separate pools (each block holds its group's layers
// only), so the local blocks that fall out of the window return to the
// pool. At 8k context, after an 8k prefill and a decode step, the KV bytes
// held must be <= 0.3 x those of full attention over all 6 layers.
TEST(WindowedKvBlockTable, Gemma3ShapeAt8kHoldsAtMost0_3OfFullAttentionBytes) {
  const int64_t n_ctx = 8192, n_head_kv = 1, head_dim = 256;
  const KvLayout global_layout{1, n_head_kv, head_dim}, local_layout{5, n_head_kv, head_dim};
  const KvLayout full_layout{6, n_head_kv, head_dim};
  for (const int64_t window : {512, 1024}) {
    SCOPED_TRACE("window " + std::to_string(window));
    // The local pool's cap: the window, one 512-token chunk being written
    // and a block of slack each side -- the whole 8k run must fit in it
    // (released blocks are evicted and reused), so the windowed layers'
    // memory is bounded by the window, not the context.
    const int64_t local_cap_blocks = (window + 512) / kBlockTokensF16 + 2;
    HostKvPool global_pool(global_layout, uint64_t{1} << 32);
    HostKvPool local_pool(local_layout,
                          static_cast<uint64_t>(local_cap_blocks) * local_layout.block_bytes());
    KvBlockTable global(&global_pool, KvType::kF16, n_ctx);
    KvBlockTable local(&local_pool, KvType::kF16, n_ctx, window);
    std::vector<int32_t> tokens(static_cast<size_t>(n_ctx));
    for (int64_t i = 0; i < n_ctx; ++i) tokens[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    // One prefill call (pinned at 0) run as the batcher's 512-token chunks,
    // then one decode call.
    global.SetPin(0);
    local.SetPin(0);
    for (int64_t n = 0; n < n_ctx - 1;) {
      const int64_t end = std::min(n_ctx - 1, n + 512);
      for (KvBlockTable* t : {&global, &local}) {
        ASSERT_TRUE(t->PrepareWrite(n, end).ok()) << "at " << n;
        t->Commit(absl::MakeConstSpan(tokens.data(), static_cast<size_t>(end)));
      }
      n = end;
    }
    for (KvBlockTable* t : {&global, &local}) {
      t->SetPin(n_ctx - 1);
      ASSERT_TRUE(t->PrepareWrite(n_ctx - 1, n_ctx).ok());
      t->Commit(tokens);
    }
    const double held = static_cast<double>(global_pool.Stats().blocks_used) *
                            static_cast<double>(global_layout.block_bytes()) +
                        static_cast<double>(local_pool.Stats().blocks_used) *
                            static_cast<double>(local_layout.block_bytes());
    const double full = static_cast<double>(n_ctx / kBlockTokensF16) *
                        static_cast<double>(full_layout.block_bytes());
    const double ratio = held / full;
    std::printf("Gemma-3 shape, window %lld, 8k context: %.0f of %.0f KV bytes (%.3f x full)\n",
                static_cast<long long>(window), held, full, ratio);
    EXPECT_LE(ratio, 0.3);
    // The local table holds the window and the pin's, nothing more.
    EXPECT_LE(local.blocks_held(), window / kBlockTokensF16 + 2);
    EXPECT_EQ(global.blocks_held(), n_ctx / kBlockTokensF16);
    EXPECT_LE(local_pool.Stats().blocks_allocated, static_cast<uint64_t>(local_cap_blocks));
  }
}

}  // namespace
}  // namespace llm
