// KvBlockPool: lazily grown slabs of fixed-size KV blocks, a free list, an
// intrusive LRU of cached (unheld, registered) blocks and the prefix-cache
// index. Every public method takes the pool's mutex.
//
// Block states:
//   free    refcount 0, unregistered, on free_ (its storage exists)
//   held    refcount >= 1 (registered or not)
//   cached  refcount 0, registered, on the LRU list (oldest release first)
// Ids >= the number of blocks with storage are "unallocated".
//
// Out-of-memory safety: metadata and the free list's capacity grow inside one
// try block in Grow(), then the storage (all or nothing); afterwards Release,
// Retain, Lookup and eviction never allocate. Register allocates (a hash-map
// node and the key's tokens) and, on failure, simply leaves the block
// unregistered: prefix caching is an optimisation.
#include "kv/block_pool.h"

#include <algorithm>
#include <limits>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/status.h"

namespace llm {
namespace {

// splitmix64's finaliser: a bijective 64-bit mixer with full avalanche.
uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr int32_t kNone = -1;
// Blocks per slab: storage for up to this many blocks is asked for at a time,
// so memory follows use without one allocation per block.
constexpr int64_t kSlabBlocks = 64;

}  // namespace

uint64_t BlockKey::Hash() const {
  // Chained: the prefix's hash, the type, then each token in order. In-process
  // only (never persisted), so the constants are free to change.
  uint64_t h = Mix64(prefix_hash ^ 0x6b76626c6f636b31ull);  // "kvblock1"
  h = Mix64(h ^ (type == KvType::kF16 ? 0x16u : 0x32u));
  if (variant != 0) h = Mix64(h ^ (0x76617200ull | variant));  // "var"
  for (const int32_t t : tokens) h = Mix64(h ^ static_cast<uint32_t>(t));
  h = Mix64(h ^ tokens.size());
  // 0 means "no prefix" to tables; never produce it.
  return h == 0 ? 1 : h;
}

namespace {

bool SameKey(const BlockKey& a, const BlockKey& b) {
  return a.prefix_hash == b.prefix_hash && a.type == b.type && a.variant == b.variant &&
         a.tokens == b.tokens;
}

struct BlockMeta {
  int32_t refcount = 0;
  bool registered = false;
  // Intrusive LRU links (cached blocks only).
  int32_t lru_prev = kNone;
  int32_t lru_next = kNone;
  uint64_t hash = 0;  // key.Hash() while registered
  BlockKey key;       // while registered
};

}  // namespace

struct KvBlockPool::Impl {
  mutable std::mutex mu;
  uint64_t budget_bytes = 0;
  size_t block_bytes = 0;
  int64_t blocks_total = 0;
  KvStorage* storage = nullptr;
  std::vector<BlockMeta> meta;  // [blocks with storage]
  std::vector<int32_t> free;    // capacity >= meta.size(): push_back never allocates
  int32_t lru_head = kNone;     // least recently released cached block
  int32_t lru_tail = kNone;
  int64_t n_cached = 0;
  uint64_t prefix_hits = 0;
  // Key hash -> block. One block per hash: a second key with the same hash
  // (a collision or a duplicate) is simply not registered.
  std::unordered_map<uint64_t, int32_t> by_hash;

  bool Valid(int32_t b) const { return b >= 0 && static_cast<size_t>(b) < meta.size(); }

  void LruPushBack(int32_t b) {
    BlockMeta& m = meta[b];
    m.lru_prev = lru_tail;
    m.lru_next = kNone;
    (lru_tail != kNone ? meta[lru_tail].lru_next : lru_head) = b;
    lru_tail = b;
    ++n_cached;
  }
  void LruRemove(int32_t b) {
    BlockMeta& m = meta[b];
    (m.lru_prev != kNone ? meta[m.lru_prev].lru_next : lru_head) = m.lru_next;
    (m.lru_next != kNone ? meta[m.lru_next].lru_prev : lru_tail) = m.lru_prev;
    m.lru_prev = m.lru_next = kNone;
    --n_cached;
  }
  // Drops b's registration (no allocation). The caller handles list membership.
  void Forget(int32_t b) {
    BlockMeta& m = meta[b];
    if (!m.registered) return;
    auto it = by_hash.find(m.hash);
    if (it != by_hash.end() && it->second == b) by_hash.erase(it);
    m.registered = false;
    m.hash = 0;
    m.key.prefix_hash = 0;
    std::vector<int32_t>().swap(m.key.tokens);
  }

  // Obtains storage for up to n more blocks (at least one) and puts them on
  // the free list. false when memory is exhausted (nothing changed).
  bool Grow(int64_t n) {
    const size_t old = meta.size();
    try {
      meta.reserve(old + static_cast<size_t>(n));
      free.reserve(old + static_cast<size_t>(n));
      if (!storage->AddBlocks(static_cast<int32_t>(old), n)) return false;
      meta.resize(old + static_cast<size_t>(n));  // capacity reserved: no throw
      // Lowest id handed out first.
      for (int64_t i = n - 1; i >= 0; --i) free.push_back(static_cast<int32_t>(old + i));
      return true;
    } catch (const std::bad_alloc&) {
      return false;
    }
  }
};

KvBlockPool::KvBlockPool(const KvLayout& layout, uint64_t budget_bytes,
                         std::unique_ptr<KvStorage> storage)
    : layout_(layout), storage_(std::move(storage)), impl_(std::make_unique<Impl>()) {
  impl_->storage = storage_.get();
  impl_->budget_bytes = budget_bytes;
  impl_->block_bytes = std::max<size_t>(layout.block_bytes(), 1);
  const uint64_t fit = budget_bytes / impl_->block_bytes;
  impl_->blocks_total = static_cast<int64_t>(
      std::clamp<uint64_t>(fit, 1, static_cast<uint64_t>(std::numeric_limits<int32_t>::max())));
}

KvBlockPool::~KvBlockPool() = default;

absl::StatusOr<int32_t> KvBlockPool::Allocate() {
  Impl& p = *impl_;
  std::lock_guard<std::mutex> lock(p.mu);
  // 1. A free block with storage.
  // 2. New storage while under the cap: a slab of up to kSlabBlocks, or a
  //    single block when the bigger slab cannot be had.
  // 3. Evict the least recently released cached block.
  bool oom = false;
  if (p.free.empty()) {
    const int64_t left = p.blocks_total - static_cast<int64_t>(p.meta.size());
    if (left > 0) {
      const int64_t n = std::min(kSlabBlocks, left);
      if (!p.Grow(n) && (n == 1 || !p.Grow(1))) oom = true;
    }
  }
  if (!p.free.empty()) {
    const int32_t b = p.free.back();
    p.free.pop_back();
    p.meta[b].refcount = 1;
    return b;
  }
  if (p.lru_head != kNone) {
    const int32_t b = p.lru_head;
    p.LruRemove(b);
    p.Forget(b);
    p.meta[b].refcount = 1;
    return b;
  }
  const double cap_mib = static_cast<double>(p.budget_bytes) / (1024.0 * 1024.0);
  if (oom) {
    return Errorf(LLM_ERR_OUT_OF_MEMORY,
                  "out of memory growing the KV pool: %d of %d blocks (%d bytes each) have "
                  "storage and all are held; no memory for another",
                  p.meta.size(), p.blocks_total, p.block_bytes);
  }
  return Errorf(LLM_ERR_KV_FULL,
                "KV pool is full: %d of %d blocks (%.1f MiB cap, %d bytes per block) are held by "
                "sessions; raise kv_budget_bytes or free sessions",
                p.meta.size(), p.blocks_total, cap_mib, p.block_bytes);
}

void KvBlockPool::Retain(int32_t block) {
  Impl& p = *impl_;
  std::lock_guard<std::mutex> lock(p.mu);
  if (!p.Valid(block)) return;
  BlockMeta& m = p.meta[block];
  if (m.refcount == 0) {
    if (!m.registered) return;  // a free block: not ours to revive
    p.LruRemove(block);
  }
  ++m.refcount;
}

void KvBlockPool::Release(int32_t block) {
  Impl& p = *impl_;
  std::lock_guard<std::mutex> lock(p.mu);
  if (!p.Valid(block)) return;
  BlockMeta& m = p.meta[block];
  if (m.refcount <= 0) return;  // free or cached: ignore a stray release
  if (--m.refcount > 0) return;
  if (m.registered)
    p.LruPushBack(block);
  else
    p.free.push_back(block);  // capacity reserved in Grow
}

int32_t KvBlockPool::RefCount(int32_t block) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->Valid(block) ? impl_->meta[block].refcount : 0;
}

bool KvBlockPool::HasStorage(int32_t block) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->Valid(block);
}

std::optional<int32_t> KvBlockPool::Lookup(const BlockKey& key) {
  const uint64_t h = key.Hash();
  Impl& p = *impl_;
  std::lock_guard<std::mutex> lock(p.mu);
  auto it = p.by_hash.find(h);
  if (it == p.by_hash.end()) return std::nullopt;
  const int32_t b = it->second;
  BlockMeta& m = p.meta[b];
  if (!m.registered || !SameKey(m.key, key)) return std::nullopt;  // a 64-bit collision
  if (m.refcount == 0) p.LruRemove(b);
  ++m.refcount;
  ++p.prefix_hits;
  return b;
}

void KvBlockPool::Register(int32_t block, BlockKey key) {
  const uint64_t h = key.Hash();
  Impl& p = *impl_;
  std::lock_guard<std::mutex> lock(p.mu);
  if (!p.Valid(block)) return;
  BlockMeta& m = p.meta[block];
  // Only held blocks: a free block's content is garbage, a cached one is
  // already registered.
  if (m.refcount <= 0 || m.registered) return;
  try {
    if (!p.by_hash.emplace(h, block).second) return;  // key (or its hash) taken
  } catch (const std::bad_alloc&) {
    return;  // caching is best effort
  }
  m.key = std::move(key);  // moves the tokens: no allocation
  m.hash = h;
  m.registered = true;
}

void KvBlockPool::Unregister(int32_t block) {
  Impl& p = *impl_;
  std::lock_guard<std::mutex> lock(p.mu);
  if (!p.Valid(block) || !p.meta[block].registered) return;
  if (p.meta[block].refcount == 0) {  // cached -> free
    p.LruRemove(block);
    p.Forget(block);
    p.free.push_back(block);
    return;
  }
  p.Forget(block);
}

bool KvBlockPool::IsRegistered(int32_t block) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->Valid(block) && impl_->meta[block].registered;
}

KvPoolStats KvBlockPool::Stats() const {
  const Impl& p = *impl_;
  std::lock_guard<std::mutex> lock(p.mu);
  KvPoolStats s;
  s.budget_bytes = p.budget_bytes;
  s.block_bytes = layout_.block_bytes();
  // Bookkeeping per block, approximately: its BlockMeta (which embeds the
  // BlockKey), a free-list slot, one hash-map node with its bucket pointer
  // (next pointer + key + value, rounded up for malloc's header: ~48 bytes)
  // and the heap copy of the key's tokens (16 ids + malloc's header).
  s.block_overhead_bytes = sizeof(BlockMeta) + sizeof(int32_t) + 48 +
                           static_cast<uint64_t>(kBlockTokensF16) * sizeof(int32_t) + 16;
  s.blocks_total = static_cast<uint64_t>(p.blocks_total);
  s.blocks_allocated = p.meta.size();
  for (const BlockMeta& m : p.meta) {
    if (m.refcount >= 1) ++s.blocks_used;
    if (m.refcount >= 2) ++s.blocks_shared;
  }
  s.blocks_cached = static_cast<uint64_t>(p.n_cached);
  s.prefix_hits = p.prefix_hits;
  return s;
}

}  // namespace llm
