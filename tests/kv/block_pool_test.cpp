// KvBlockPool: cap and KV_FULL, reuse, refcounts, lazily grown storage, LRU
// eviction of cached blocks, exact-key prefix lookup, thread safety.
#include "kv/block_pool.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "core/status.h"
#include "gtest/gtest.h"
#include "tests/kv/kv_test_util.h"

namespace llm {
namespace {

// Odd sizes: 3 layers, 2 kv heads of 5 -> 2*3*10*2*16 = 1920 bytes per block.
KvLayout TestLayout() { return KvLayout{3, 2, 5}; }

BlockKey Key(uint64_t prefix, KvType type, int32_t first) {
  BlockKey k;
  k.prefix_hash = prefix;
  k.type = type;
  for (int64_t i = 0; i < KvLayout::block_tokens(type); ++i)
    k.tokens.push_back(first + 7 * static_cast<int32_t>(i));
  return k;
}

TEST(KvBlockPool, BlockBytesAndTotal) {
  const KvLayout l = TestLayout();
  EXPECT_EQ(l.block_bytes(), 2u * 3 * 2 * 5 * 2 * 16);
  HostKvPool pool(l, 7 * l.block_bytes() + l.block_bytes() - 1);
  const KvPoolStats s = pool.Stats();
  EXPECT_EQ(s.block_bytes, 1920u);
  EXPECT_EQ(s.blocks_total, 7u);
  EXPECT_EQ(s.budget_bytes, 8u * 1920 - 1);
  EXPECT_GT(s.block_overhead_bytes, 0u);
  EXPECT_EQ(s.blocks_allocated, 0u);                      // nothing obtained before first use
  EXPECT_EQ(HostKvPool(l, 0).Stats().blocks_total, 1u);  // at least one block
}

TEST(KvBlockPool, AllocateUntilFullThenReuse) {
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 5 * l.block_bytes());
  std::set<int32_t> ids;
  std::set<uint8_t*> data;
  for (int i = 0; i < 5; ++i) {
    auto b = pool.Allocate();
    ASSERT_TRUE(b.ok()) << b.status();
    ids.insert(*b);
    data.insert(pool.Data(*b));
    EXPECT_EQ(pool.RefCount(*b), 1);
    EXPECT_FALSE(pool.IsRegistered(*b));
    std::memset(pool.Data(*b), i + 1, l.block_bytes());  // storage is writable, block-sized
  }
  EXPECT_EQ(ids.size(), 5u);
  EXPECT_EQ(data.size(), 5u);
  auto full = pool.Allocate();
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(ToLlmStatus(full.status()), LLM_ERR_KV_FULL);
  EXPECT_NE(full.status().message().find("5 of 5 blocks"), std::string::npos) << full.status();
  EXPECT_NE(full.status().message().find("kv_budget_bytes"), std::string::npos);

  const int32_t victim = *std::next(ids.begin(), 2);
  pool.Release(victim);
  EXPECT_EQ(pool.RefCount(victim), 0);
  EXPECT_EQ(pool.Stats().blocks_used, 4u);
  auto again = pool.Allocate();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, victim);
  EXPECT_EQ(ToLlmStatus(pool.Allocate().status()), LLM_ERR_KV_FULL);
}

TEST(KvBlockPool, RefCountsAndStats) {
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 10 * l.block_bytes());
  const int32_t a = *pool.Allocate();
  const int32_t b = *pool.Allocate();
  const int32_t c = *pool.Allocate();
  pool.Retain(a);
  pool.Retain(a);
  pool.Retain(b);
  EXPECT_EQ(pool.RefCount(a), 3);
  EXPECT_EQ(pool.RefCount(b), 2);
  KvPoolStats s = pool.Stats();
  EXPECT_EQ(s.blocks_used, 3u);
  EXPECT_EQ(s.blocks_shared, 2u);
  EXPECT_EQ(s.blocks_cached, 0u);
  EXPECT_EQ(s.blocks_allocated, 10u);  // one slab (min(64, 10))
  pool.Register(c, Key(0, KvType::kF16, 3));
  pool.Release(c);
  pool.Release(a);
  s = pool.Stats();
  EXPECT_EQ(pool.RefCount(a), 2);
  EXPECT_EQ(s.blocks_used, 2u);
  EXPECT_EQ(s.blocks_shared, 2u);
  EXPECT_EQ(s.blocks_cached, 1u);  // c: registered, unheld
  pool.Release(a);
  pool.Release(a);
  pool.Release(b);
  pool.Release(b);
  s = pool.Stats();
  EXPECT_EQ(s.blocks_used, 0u);
  EXPECT_EQ(s.blocks_shared, 0u);
  EXPECT_EQ(s.blocks_cached, 1u);
}

TEST(KvBlockPool, StrayCallsAreIgnored) {
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 2 * l.block_bytes());
  pool.Release(-1);
  pool.Release(12345);
  pool.Retain(-3);
  pool.Unregister(77);
  pool.Register(99, Key(0, KvType::kF16, 1));
  EXPECT_EQ(pool.RefCount(5), 0);
  EXPECT_EQ(pool.Data(5), nullptr);
  EXPECT_FALSE(pool.IsRegistered(-1));
  const int32_t a = *pool.Allocate();
  pool.Release(a);
  pool.Release(a);  // double release: must not put a on the free list twice
  pool.Retain(a);   // retaining a free block does nothing
  EXPECT_EQ(pool.RefCount(a), 0);
  const int32_t x = *pool.Allocate();
  const int32_t y = *pool.Allocate();
  EXPECT_NE(x, y);
  EXPECT_EQ(ToLlmStatus(pool.Allocate().status()), LLM_ERR_KV_FULL);
}

TEST(KvBlockPool, StorageGrowsWithUse) {
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 150 * l.block_bytes());
  EXPECT_EQ(pool.Stats().blocks_allocated, 0u);
  std::vector<int32_t> held;
  held.push_back(*pool.Allocate());
  EXPECT_EQ(pool.Stats().blocks_allocated, 64u);
  for (int i = 1; i < 64; ++i) held.push_back(*pool.Allocate());
  EXPECT_EQ(pool.Stats().blocks_allocated, 64u);
  held.push_back(*pool.Allocate());
  EXPECT_EQ(pool.Stats().blocks_allocated, 128u);
  while (held.size() < 129) held.push_back(*pool.Allocate());
  EXPECT_EQ(pool.Stats().blocks_allocated, 150u);  // last slab stops at the cap
  while (held.size() < 150) held.push_back(*pool.Allocate());
  EXPECT_EQ(ToLlmStatus(pool.Allocate().status()), LLM_ERR_KV_FULL);
  // Data pointers are stable and distinct, non-overlapping blocks.
  std::vector<uint8_t*> ptrs;
  for (int32_t b : held) ptrs.push_back(pool.Data(b));
  std::sort(ptrs.begin(), ptrs.end());
  for (size_t i = 1; i < ptrs.size(); ++i) {
    EXPECT_GE(static_cast<size_t>(ptrs[i] - ptrs[i - 1]), l.block_bytes());
  }
  EXPECT_EQ(pool.Stats().blocks_used, 150u);
}

TEST(KvBlockPool, CachedBlocksAreEvictedLeastRecentlyReleasedFirst) {
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 3 * l.block_bytes());
  const int32_t b0 = *pool.Allocate();
  const int32_t b1 = *pool.Allocate();
  const int32_t b2 = *pool.Allocate();
  const BlockKey k0 = Key(0, KvType::kF16, 100), k1 = Key(0, KvType::kF16, 200),
                 k2 = Key(0, KvType::kF16, 300);
  pool.Register(b0, k0);
  pool.Register(b1, k1);
  pool.Register(b2, k2);
  EXPECT_TRUE(pool.IsRegistered(b0) && pool.IsRegistered(b1) && pool.IsRegistered(b2));
  pool.Release(b1);
  pool.Release(b0);
  pool.Release(b2);
  EXPECT_EQ(pool.Stats().blocks_cached, 3u);
  EXPECT_EQ(pool.Stats().blocks_used, 0u);

  auto n = pool.Allocate();  // evicts b1, released first
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, b1);
  EXPECT_FALSE(pool.IsRegistered(b1));
  EXPECT_FALSE(pool.Lookup(k1).has_value());
  EXPECT_EQ(pool.Stats().blocks_cached, 2u);

  auto hit = pool.Lookup(k0);  // revives b0: no longer evictable
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, b0);
  EXPECT_EQ(pool.RefCount(b0), 1);
  EXPECT_TRUE(pool.IsRegistered(b0));
  EXPECT_EQ(pool.Stats().blocks_cached, 1u);
  EXPECT_EQ(pool.Stats().prefix_hits, 1u);

  auto m = pool.Allocate();  // evicts b2
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, b2);
  EXPECT_EQ(pool.Stats().blocks_cached, 0u);
  EXPECT_EQ(ToLlmStatus(pool.Allocate().status()), LLM_ERR_KV_FULL);

  // A released unregistered block is free, not cached; unregistering a cached
  // block frees it too.
  pool.Release(*m);
  EXPECT_EQ(pool.Stats().blocks_cached, 0u);
  pool.Release(b0);
  EXPECT_EQ(pool.Stats().blocks_cached, 1u);
  pool.Unregister(b0);
  EXPECT_EQ(pool.Stats().blocks_cached, 0u);
  EXPECT_FALSE(pool.Lookup(k0).has_value());
  EXPECT_TRUE(pool.Allocate().ok());
  EXPECT_TRUE(pool.Allocate().ok());
  EXPECT_EQ(ToLlmStatus(pool.Allocate().status()), LLM_ERR_KV_FULL);
}

TEST(KvBlockPool, HashIsChainedOverEveryField) {
  const BlockKey a = Key(0, KvType::kF16, 5);
  EXPECT_EQ(a.Hash(), Key(0, KvType::kF16, 5).Hash());
  EXPECT_NE(a.Hash(), 0u);
  BlockKey b = a;
  b.tokens.back() += 1;
  EXPECT_NE(a.Hash(), b.Hash());
  b = a;
  std::swap(b.tokens[0], b.tokens[1]);
  EXPECT_NE(a.Hash(), b.Hash());  // order matters
  b = a;
  b.prefix_hash = 1;
  EXPECT_NE(a.Hash(), b.Hash());
  b = a;
  b.type = KvType::kF32;
  EXPECT_NE(a.Hash(), b.Hash());
  // Chaining: a block's hash as the next one's prefix.
  EXPECT_NE(Key(a.Hash(), KvType::kF16, 9).Hash(), Key(b.Hash(), KvType::kF16, 9).Hash());
  // No trivial collisions among many random keys.
  std::mt19937 rng(11);
  std::set<uint64_t> hashes;
  std::set<std::vector<int64_t>> keys;
  for (int i = 0; i < 5000; ++i) {
    BlockKey k;
    k.prefix_hash = rng() % 4;
    k.type = (rng() & 1) ? KvType::kF16 : KvType::kF32;
    for (int64_t t = 0; t < KvLayout::block_tokens(k.type); ++t) {
      k.tokens.push_back(static_cast<int32_t>(rng() % 3));
    }
    std::vector<int64_t> flat{static_cast<int64_t>(k.prefix_hash), k.type == KvType::kF16 ? 0 : 1};
    flat.insert(flat.end(), k.tokens.begin(), k.tokens.end());
    keys.insert(flat);
    hashes.insert(k.Hash());
  }
  EXPECT_EQ(hashes.size(), keys.size());  // distinct keys, distinct hashes
}

TEST(KvBlockPool, LookupMatchesTheWholeKey) {
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 8 * l.block_bytes());
  const int32_t b = *pool.Allocate();
  const BlockKey key = Key(12345, KvType::kF16, 42);
  pool.Register(b, key);
  ASSERT_TRUE(pool.IsRegistered(b));

  BlockKey other = key;
  other.tokens[3] += 1;
  EXPECT_FALSE(pool.Lookup(other).has_value());
  other = key;
  other.prefix_hash += 1;
  EXPECT_FALSE(pool.Lookup(other).has_value());
  other = key;
  other.type = KvType::kF32;
  EXPECT_FALSE(pool.Lookup(other).has_value());
  other = key;
  other.tokens.pop_back();
  EXPECT_FALSE(pool.Lookup(other).has_value());
  EXPECT_EQ(pool.Stats().prefix_hits, 0u);
  EXPECT_EQ(pool.RefCount(b), 1);

  auto hit = pool.Lookup(key);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, b);
  EXPECT_EQ(pool.RefCount(b), 2);
  EXPECT_EQ(pool.Stats().prefix_hits, 1u);
  EXPECT_EQ(pool.Stats().blocks_shared, 1u);

  // The same key on another block, or another key on b: unchanged.
  const int32_t c = *pool.Allocate();
  pool.Register(c, key);
  EXPECT_FALSE(pool.IsRegistered(c));
  pool.Register(b, Key(0, KvType::kF16, 7));
  EXPECT_FALSE(pool.Lookup(Key(0, KvType::kF16, 7)).has_value());
  EXPECT_EQ(*pool.Lookup(key), b);
  // Unregistering forgets the key; c may then take it.
  pool.Unregister(b);
  EXPECT_FALSE(pool.IsRegistered(b));
  EXPECT_FALSE(pool.Lookup(key).has_value());
  pool.Register(c, key);
  EXPECT_TRUE(pool.IsRegistered(c));
  EXPECT_EQ(*pool.Lookup(key), c);
  // A free block cannot be registered.
  pool.Release(c);
  pool.Release(c);
  EXPECT_EQ(pool.Stats().blocks_cached, 1u);
  const int32_t d = *pool.Allocate();
  pool.Release(d);
  pool.Register(d, Key(0, KvType::kF32, 1));
  EXPECT_FALSE(pool.IsRegistered(d));
}

TEST(KvBlockPool, ConcurrentAllocateReleaseLookup) {
  const KvLayout l = TestLayout();
  HostKvPool pool(l, 40 * l.block_bytes());
  constexpr int kThreads = 4;
  std::atomic<int> kv_full{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      std::vector<int32_t> mine;
      for (int it = 0; it < 3000; ++it) {
        const int op = static_cast<int>(rng() % 6);
        if (op <= 1) {
          auto b = pool.Allocate();
          if (b.ok()) {
            mine.push_back(*b);
            std::memset(pool.Data(*b), t, 64);
            if (rng() & 1)
              pool.Register(*b, Key(0, KvType::kF16, static_cast<int32_t>(rng() % 50)));
          } else {
            EXPECT_EQ(ToLlmStatus(b.status()), LLM_ERR_KV_FULL);
            kv_full.fetch_add(1);
          }
        } else if (op == 2 && !mine.empty()) {
          const size_t i = rng() % mine.size();
          pool.Release(mine[i]);
          mine.erase(mine.begin() + static_cast<ptrdiff_t>(i));
        } else if (op == 3) {
          auto hit = pool.Lookup(Key(0, KvType::kF16, static_cast<int32_t>(rng() % 50)));
          if (hit) mine.push_back(*hit);
        } else if (op == 4 && !mine.empty()) {
          const int32_t b = mine[rng() % mine.size()];
          EXPECT_GE(pool.RefCount(b), 1);
          pool.Retain(b);
          mine.push_back(b);
        } else {
          const KvPoolStats s = pool.Stats();
          EXPECT_LE(s.blocks_used + s.blocks_cached, s.blocks_allocated);
          EXPECT_LE(s.blocks_shared, s.blocks_used);
        }
      }
      for (int32_t b : mine) pool.Release(b);
    });
  }
  for (auto& th : threads) th.join();
  const KvPoolStats s = pool.Stats();
  EXPECT_EQ(s.blocks_used, 0u);
  EXPECT_EQ(s.blocks_shared, 0u);
  EXPECT_LE(s.blocks_cached, s.blocks_allocated);
  EXPECT_EQ(s.blocks_allocated, 40u);
  // Everything is reusable afterwards.
  for (int i = 0; i < 40; ++i) EXPECT_TRUE(pool.Allocate().ok());
  EXPECT_EQ(ToLlmStatus(pool.Allocate().status()), LLM_ERR_KV_FULL);
}

}  // namespace
}  // namespace llm
