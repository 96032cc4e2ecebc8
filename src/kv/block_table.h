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

// A sliding-window table (window > 0, docs/SLIDING_WINDOW.md) keeps only
// the blocks that a next query may still read: after Commit, a block none of
// whose positions lies in [n_positions() - window, n_positions()) -- nor in
// [pin - window, pin) while a pin is set (the position a failed call rolls
// back to) -- is released back to the pool and its entry becomes kReleased.
// Positions before that stay valid history (tokens, hashes, prefix
// registration) but their KV is gone: truncating below them is refused
// (CanResumeAt), a save writes them as zeros, a load never materializes them.
class KvBlockTable {
 public:
  // A blocks() entry whose block a sliding-window table released.
  static constexpr int32_t kReleased = -1;

  // window: the attention window of every layer whose K/V the table holds
  // (0: full attention, nothing is ever released). variant: BlockKey::variant
  // of the blocks it registers and adopts (1: LongRoPE long factors), so
  // prefixes are shared only between tables whose KV was computed alike.
  KvBlockTable(KvBlockPool* pool, KvType type, int64_t n_ctx, int64_t window = 0,
               uint32_t variant = 0);
  ~KvBlockTable();  // releases every block
  KvBlockTable(const KvBlockTable&) = delete;
  KvBlockTable& operator=(const KvBlockTable&) = delete;

  KvBlockPool& pool() const { return *pool_; }
  KvType type() const { return type_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t block_tokens() const { return block_tokens_; }
  int64_t window() const { return window_; }
  uint32_t variant() const { return variant_; }
  // Blocks the table holds (entries other than kReleased).
  int64_t blocks_held() const;

  // A rollback target: until the next SetPin, the blocks needed to resume at
  // position pin are kept even when the window has moved past them. -1: none.
  void SetPin(int64_t pin);
  // Whether the table can continue from position n (n <= n_positions()):
  // every block holding a position in [n - window, n) is still held (always
  // true without a window). Truncate(n) and a pass at n need it.
  bool CanResumeAt(int64_t n) const;
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

  // Keeps positions [0, n) (n <= n_positions(), CanResumeAt(n)); blocks past
  // them are released.
  void Truncate(int64_t n);

  // Restoring a saved session into this empty table: positions [0, n) get
  // writable blocks, except (windowed table) the blocks holding only
  // positions before n - window, which are marked kReleased without being
  // allocated. Then WriteBlock every held block and Commit. Same failures as
  // PrepareWrite.
  absl::Status PrepareRestore(int64_t n);

  // A table sharing every block with this one (copy-on-write on either side).
  std::unique_ptr<KvBlockTable> Fork() const;

  // Save/load: block i's bytes (KvLayout::block_bytes(), laid out as
  // kv_layout.h says) to or from host memory. WriteBlock only into a block
  // whose positions are prepared (PrepareWrite): it is this table's alone.
  // A kReleased block can be neither read nor written (LLM_ERR_INTERNAL).
  absl::Status ReadBlock(size_t i, uint8_t* host) const;
  absl::Status WriteBlock(size_t i, const uint8_t* host);
  // Bytes of one (layer, position) K or V row in the cache's element type.
  size_t row_bytes() const;

 private:
  KvBlockPool* pool_;
  KvType type_;
  uint32_t variant_ = 0;
  int64_t n_ctx_;
  int64_t block_tokens_;
  // Releases the blocks the window and the pin no longer need.
  void ReleaseOutOfWindow();
  // Whether block i holds a position in [end - window, end).
  bool NeededFor(size_t i, int64_t end) const;

  int64_t window_ = 0;
  int64_t pin_ = -1;
  int64_t n_positions_ = 0;
  std::vector<int32_t> blocks_;  // block ids in position order, or kReleased
  std::vector<uint64_t> full_hashes_;   // chained hash of each full, committed block
};

}  // namespace llm
