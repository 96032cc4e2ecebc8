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
#include "backend/cpu/attention.h"
#include "kv/block_pool.h"
#include "kv/kv_layout.h"

namespace llm {

class KvBlockTable {
 public:
  KvBlockTable(KvBlockPool* pool, KvType type, int64_t n_ctx);
  ~KvBlockTable();  // releases every block
  KvBlockTable(const KvBlockTable&) = delete;
  KvBlockTable& operator=(const KvBlockTable&) = delete;

  KvType type() const { return type_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t block_tokens() const { return block_tokens_; }
  // Positions whose KV is valid (Commit / AdoptCachedPrefix / Truncate).
  int64_t n_positions() const { return n_positions_; }
  // Block ids in order (tests, stats).
  const std::vector<int32_t>& blocks() const { return blocks_; }

  // Makes positions [begin, end) writable: allocates missing blocks, copies
  // shared blocks the range touches (copy-on-write) and unregisters the
  // range's registered blocks. begin <= n_positions(), end <= n_ctx
  // (else LLM_ERR_CONTEXT_FULL). On failure (LLM_ERR_KV_FULL,
  // LLM_ERR_OUT_OF_MEMORY) positions [0, n_positions()) are unchanged; blocks
  // already obtained are kept for a retry. Idempotent.
  absl::Status PrepareWrite(int64_t begin, int64_t end);

  // Stores one position's K and V rows ([n_head_kv * head_dim] f32 each,
  // converted to the cache type) into a prepared position.
  void Store(int64_t layer, int64_t pos, const float* k_row, const float* v_row);

  // Attention's view of a layer: every block of the table (valid until the
  // next non-const call).
  KvView View(int64_t layer) const;

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

  // Raw access for save/load: the K or V row of one (layer, position) in the
  // cache's element type (row_bytes() bytes).
  size_t row_bytes() const;
  const uint8_t* KRow(int64_t layer, int64_t pos) const;
  const uint8_t* VRow(int64_t layer, int64_t pos) const;
  uint8_t* MutableKRow(int64_t layer, int64_t pos);  // prepared positions only
  uint8_t* MutableVRow(int64_t layer, int64_t pos);

 private:
  KvBlockPool* pool_;
  KvType type_;
  int64_t n_ctx_;
  int64_t block_tokens_;
  int64_t n_positions_ = 0;
  std::vector<int32_t> blocks_;
  std::vector<uint64_t> full_hashes_;   // chained hash of each full, committed block
  std::vector<const uint8_t*> block_data_;  // Data() of each block, for KvView
};

}  // namespace llm
