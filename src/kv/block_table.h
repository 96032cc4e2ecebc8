// A session's KV cache: a table of blocks from the model's KvBlockPool.
// Position p lives in block p / block_tokens at row p % block_tokens
// (kv_layout.h). Blocks may be shared with forked sessions or other sessions'
// cached prefixes; writing into a shared block copies it first
// (copy-on-write), and writing into a registered (prefix-cached) block
// unregisters it.
//
// One thread at a time (the session's owner, or the scheduler thread while a
// step of the session runs).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kv/block_pool.h"
#include "kv/kv_layout.h"

namespace llm {

class KvBlockTable {
 public:
  KvBlockTable(KvBlockPool* pool, KvType type, int64_t n_ctx);
  ~KvBlockTable();  // releases every block
  KvBlockTable(const KvBlockTable&) = delete;
  KvBlockTable& operator=(const KvBlockTable&) = delete;

  KvBlockPool& pool() const { return *pool_; }
  KvType type() const { return type_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t block_tokens() const { return block_tokens_; }
  // Positions whose KV is valid (Commit / AdoptCachedPrefix / Truncate).
  int64_t n_positions() const { return n_positions_; }
  // Block ids in order (tests, stats).
  const std::vector<int32_t>& blocks() const { return blocks_; }
  // The table as a pass's backend addresses it (valid until the next
  // non-const call).
  KvBlockList block_list() const { return KvBlockList{blocks_, type_}; }

  // Makes positions [begin, end) writable: allocates missing blocks, copies
  // shared blocks the range touches (copy-on-write) and unregisters the
  // range's registered blocks. begin <= n_positions(), end <= n_ctx
  // (else LLM_ERR_CONTEXT_FULL). On failure (LLM_ERR_KV_FULL,
  // LLM_ERR_OUT_OF_MEMORY) positions [0, n_positions()) are unchanged; blocks
  // already obtained are kept for a retry. Idempotent.
  absl::Status PrepareWrite(int64_t begin, int64_t end);

  // Declares positions [0, tokens.size()) valid, holding KV of tokens (the
  // session's whole history), and registers every block that became full in
  // the pool's prefix cache.
  void Commit(absl::Span<const int32_t> tokens);

  // Attaches registered blocks of the pool that continue this table's
  // history with history[n_positions() ..]: only whole blocks, only while the
  // table is block-aligned, and at most up to position max_positions. Returns
  // the new n_positions() (unchanged when nothing matched).
  int64_t AdoptCachedPrefix(absl::Span<const int32_t> history, int64_t max_positions);

  // Keeps positions [0, n) (n <= n_positions()); blocks past them are released.
  void Truncate(int64_t n);

  // A table sharing every block with this one (copy-on-write on either side).
  std::unique_ptr<KvBlockTable> Fork() const;

  // Save/load: block i's bytes (KvLayout::block_bytes(), laid out as
  // kv_layout.h says) to or from host memory. WriteBlock only into a block
  // whose positions are prepared (PrepareWrite): it is this table's alone.
  absl::Status ReadBlock(size_t i, uint8_t* host) const;
  absl::Status WriteBlock(size_t i, const uint8_t* host);
  // Bytes of one (layer, position) K or V row in the cache's element type.
  size_t row_bytes() const;

 private:
  KvBlockPool* pool_;
  KvType type_;
  int64_t n_ctx_;
  int64_t block_tokens_;
  int64_t n_positions_ = 0;
  std::vector<int32_t> blocks_;
  std::vector<uint64_t> full_hashes_;   // chained hash of each full, committed block
};

}  // namespace llm
