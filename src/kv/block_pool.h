// The model's pool of KV blocks (DESIGN.md §2): fixed-size blocks
// (kv_layout.h) handed out under a byte cap, reference counted so that forked
// sessions share them, and indexed by a chained hash of their tokens so that
// a session whose prompt starts with blocks already in the pool reuses them
// (automatic prefix caching).
//
// Storage is obtained lazily from the backend's KvStorage (kv_storage.h), in
// slabs, as blocks are first used, so memory follows use rather than the
// cap. The pool never touches the bytes: block ids are all it hands out. A block nobody holds but whose
// tokens are registered stays "cached" and is reused by a matching prompt, or
// evicted (least recently released first) when a fresh block is needed.
//
// Thread-safe: every method takes the pool's mutex (sessions allocate on the
// scheduler thread and adopt cached prefixes on their callers' threads).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kv/kv_layout.h"
#include "kv/kv_storage.h"

namespace llm {

struct KvPoolStats {
  uint64_t budget_bytes = 0;     // the cap
  uint64_t block_bytes = 0;      // bytes of KV data per block
  uint64_t block_overhead_bytes = 0;  // bookkeeping per block (metadata, hash entry)
  uint64_t blocks_total = 0;     // blocks that fit in the cap
  uint64_t blocks_allocated = 0; // blocks with storage obtained so far (<= total)
  uint64_t blocks_used = 0;      // held by at least one session
  uint64_t blocks_shared = 0;    // held by two or more sessions
  uint64_t blocks_cached = 0;    // held by none, kept for prefix reuse
  uint64_t prefix_hits = 0;      // blocks handed out by Lookup since creation
};

// Identity of a full block's content: the chained hash of its prefix, its
// tokens, the KV type and the variant (a hash match is confirmed by comparing
// these, so a 64-bit collision cannot hand out wrong KV).
struct BlockKey {
  uint64_t prefix_hash = 0;        // hash of all blocks before it (0 for the first)
  KvType type = KvType::kF16;
  // How the KV was computed besides its tokens: 0 normally, 1 with Phi-3's
  // LongRoPE long factors (the same tokens give other K rows).
  uint32_t variant = 0;
  std::vector<int32_t> tokens;     // block_tokens(type) ids
  uint64_t Hash() const;           // the chained hash of this block
};

class KvBlockPool {
 public:
  // budget_bytes: cap on block storage (at least one block is always allowed).
  // storage: where the blocks' bytes live (the model's backend provides it).
  KvBlockPool(const KvLayout& layout, uint64_t budget_bytes, std::unique_ptr<KvStorage> storage);
  ~KvBlockPool();
  KvBlockPool(const KvBlockPool&) = delete;
  KvBlockPool& operator=(const KvBlockPool&) = delete;

  const KvLayout& layout() const { return layout_; }
  // The blocks' bytes: copy, read and write whole blocks the caller holds.
  KvStorage& storage() const { return *storage_; }

  // A fresh block (refcount 1, unregistered). Evicts a cached block when the
  // cap is reached; LLM_ERR_KV_FULL when every block is held;
  // LLM_ERR_OUT_OF_MEMORY when storage cannot be obtained.
  absl::StatusOr<int32_t> Allocate();
  void Retain(int32_t block);
  // refcount - 1; at 0 the block is cached (if registered) or free.
  void Release(int32_t block);
  int32_t RefCount(int32_t block) const;
  // Whether the block has storage (ids below blocks_allocated).
  bool HasStorage(int32_t block) const;

  // A registered block with exactly this key, retained for the caller
  // (refcount + 1), or nullopt.
  std::optional<int32_t> Lookup(const BlockKey& key);
  // Records that block (full, its KV written) holds key's tokens. A block
  // already registered under another key, or a key already registered to
  // another block, leaves things as they are.
  void Register(int32_t block, BlockKey key);
  // Forgets block's registration (before its content changes).
  void Unregister(int32_t block);
  bool IsRegistered(int32_t block) const;

  KvPoolStats Stats() const;

 private:
  // implementation-defined members
  struct Impl;
  KvLayout layout_;
  std::unique_ptr<KvStorage> storage_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llm
