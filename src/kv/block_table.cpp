// KvBlockTable: a session's list of pool blocks, copy-on-write and prefix
// registration (block_table.h).
//
// Invariants:
//   blocks_.size() * block_tokens_ >= n_positions_ (blocks past the valid
//   positions may exist: prepared but not yet committed);
//   full_hashes_.size() <= n_positions_ / block_tokens_, and full_hashes_[i]
//   is the chained hash of block i's committed tokens (registered in the pool
//   unless another block already held that key or memory ran out);
//   full_hashes_.capacity() >= blocks_.size() so Commit never reallocates it.
#include "kv/block_table.h"

#include <algorithm>
#include <new>
#include <utility>

#include "core/status.h"

namespace llm {

KvBlockTable::KvBlockTable(KvBlockPool* pool, KvType type, int64_t n_ctx, int64_t window,
                           uint32_t variant)
    : pool_(pool),
      type_(type),
      variant_(variant),
      n_ctx_(n_ctx),
      block_tokens_(KvLayout::block_tokens(type)),
      window_(std::max<int64_t>(window, 0)) {}

KvBlockTable::~KvBlockTable() {
  for (const int32_t b : blocks_) {
    if (b != kReleased) pool_->Release(b);
  }
}

int64_t KvBlockTable::blocks_held() const {
  return static_cast<int64_t>(blocks_.size()) -
         std::count(blocks_.begin(), blocks_.end(), kReleased);
}

bool KvBlockTable::NeededFor(size_t i, int64_t end) const {
  // Block i holds [i * bt, (i + 1) * bt); the window before end is
  // [end - window, end).
  const int64_t lo = std::max<int64_t>(0, end - window_);
  const int64_t first = static_cast<int64_t>(i) * block_tokens_;
  return first < end && first + block_tokens_ > lo;
}

void KvBlockTable::ReleaseOutOfWindow() {
  if (window_ <= 0) return;
  // Blocks from the one holding position n_positions_ on are being written
  // (or prepared for it): never released.
  const size_t limit =
      std::min(blocks_.size(), static_cast<size_t>(n_positions_ / block_tokens_));
  const int64_t pin = std::min(pin_, n_positions_);
  for (size_t i = 0; i < limit; ++i) {
    if (blocks_[i] == kReleased || NeededFor(i, n_positions_)) continue;
    if (pin >= 0 && NeededFor(i, pin)) continue;
    pool_->Release(blocks_[i]);  // registered: stays cached for prefix reuse
    blocks_[i] = kReleased;
  }
}

void KvBlockTable::SetPin(int64_t pin) {
  pin_ = pin < 0 ? -1 : pin;
  ReleaseOutOfWindow();
}

bool KvBlockTable::CanResumeAt(int64_t n) const {
  if (n < 0 || n > n_positions_) return false;
  if (window_ <= 0) return true;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (blocks_[i] == kReleased && NeededFor(i, n)) return false;
  }
  return true;
}

absl::Status KvBlockTable::PrepareRestore(int64_t n) {
  if (n_positions_ != 0 || !blocks_.empty()) {
    return Error(LLM_ERR_INTERNAL, "KV restore into a table that is not empty");
  }
  if (n > n_ctx_) {
    return Errorf(LLM_ERR_CONTEXT_FULL, "restoring %d positions exceeds the context of %d", n,
                  n_ctx_);
  }
  if (window_ <= 0 || n <= 0) return PrepareWrite(0, n);
  const size_t n_blocks = static_cast<size_t>((n + block_tokens_ - 1) / block_tokens_);
  try {
    blocks_.reserve(n_blocks);
    full_hashes_.reserve(n_blocks);
  } catch (const std::bad_alloc&) {
    return Error(LLM_ERR_OUT_OF_MEMORY, "out of memory growing a KV block table");
  }
  for (size_t i = 0; i < n_blocks; ++i) {
    if (!NeededFor(i, n) && static_cast<int64_t>(i) < n / block_tokens_) {
      blocks_.push_back(kReleased);
      continue;
    }
    absl::StatusOr<int32_t> b = pool_->Allocate();
    if (!b.ok()) {
      Truncate(0);  // releases what was allocated: the table is empty again
      return b.status();
    }
    blocks_.push_back(*b);
  }
  return absl::OkStatus();
}

absl::Status KvBlockTable::PrepareWrite(int64_t begin, int64_t end) {
  if (begin < 0 || begin > end || begin > n_positions_) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "KV write range [%d, %d) is invalid for a cache holding %d positions", begin, end,
                  n_positions_);
  }
  if (end > n_ctx_) {
    return Errorf(LLM_ERR_CONTEXT_FULL,
                  "KV write up to position %d exceeds the session's context of %d positions", end,
                  n_ctx_);
  }
  if (begin == end) return absl::OkStatus();
  const int64_t first = begin / block_tokens_;
  const int64_t last = (end - 1) / block_tokens_;  // inclusive
  const size_t needed = static_cast<size_t>(last + 1);
  try {
    // Reserve so that the appends below and Commit's hash pushes never throw.
    if (blocks_.capacity() < needed) {
      const size_t cap = std::max(needed, 2 * blocks_.capacity());
      blocks_.reserve(cap);
    }
    if (full_hashes_.capacity() < blocks_.capacity()) full_hashes_.reserve(blocks_.capacity());
  } catch (const std::bad_alloc&) {
    return Error(LLM_ERR_OUT_OF_MEMORY, "out of memory growing a KV block table");
  }
  // Blocks from `first` on change content: their recorded hashes go (a no-op
  // for the usual append at begin == n_positions).
  if (full_hashes_.size() > static_cast<size_t>(first)) full_hashes_.resize(first);

  for (int64_t i = first; i <= last; ++i) {
    if (static_cast<size_t>(i) >= blocks_.size()) {
      LLM_ASSIGN_OR_RETURN(const int32_t b, pool_->Allocate());
      blocks_.push_back(b);  // capacity reserved above
      continue;
    }
    const int32_t old = blocks_[i];
    if (pool_->RefCount(old) == 1 && pool_->IsRegistered(old)) {
      // Ours alone but findable by other sessions: its content is about to
      // change, so it must no longer match its key. Another thread may have
      // looked it up between the checks, hence the second RefCount below:
      // once unregistered nobody new can get it, and with refcount 1 only we
      // hold it.
      pool_->Unregister(old);
    }
    // Still registered here means the first RefCount saw a co-holder that
    // has let go since: writing in place would change a block other
    // sessions can still look up (KvBlockTable.ConcurrentAdoptAndRewrite
    // caught a reader adopting it mid-rewrite), so it is copied too.
    if (pool_->RefCount(old) > 1 || pool_->IsRegistered(old)) {
      // Shared (a fork or another session's cached prefix): copy it, so the
      // other holders keep their data (and its registration). The whole
      // block is copied since the rows before `begin` are valid history.
      // The copy comes before the release, so a co-holder that sees the
      // refcount fall to 1 and writes in place does so after we have read.
      LLM_ASSIGN_OR_RETURN(const int32_t b, pool_->Allocate());
      if (absl::Status copied = pool_->storage().CopyBlock(old, b); !copied.ok()) {
        pool_->Release(b);
        return copied;
      }
      blocks_[i] = b;
      pool_->Release(old);
    }
  }
  return absl::OkStatus();
}

size_t KvBlockTable::row_bytes() const {
  return static_cast<size_t>(pool_->layout().row_elems()) * KvLayout::elem_bytes(type_);
}

absl::Status KvBlockTable::ReadBlock(size_t i, uint8_t* host) const {
  if (i >= blocks_.size() || blocks_[i] == kReleased) {
    return Errorf(LLM_ERR_INTERNAL, "KV block %d read, the table has %d", i, blocks_.size());
  }
  return pool_->storage().ReadBlock(blocks_[i], host);
}

absl::Status KvBlockTable::WriteBlock(size_t i, const uint8_t* host) {
  if (i >= blocks_.size() || blocks_[i] == kReleased || pool_->RefCount(blocks_[i]) != 1) {
    return Errorf(LLM_ERR_INTERNAL, "KV block %d written while not prepared for writing", i);
  }
  return pool_->storage().WriteBlock(blocks_[i], host);
}

void KvBlockTable::Commit(absl::Span<const int32_t> tokens) {
  // Only positions with blocks can be valid (a caller bug otherwise).
  const int64_t covered = static_cast<int64_t>(blocks_.size()) * block_tokens_;
  n_positions_ = std::min<int64_t>(static_cast<int64_t>(tokens.size()), covered);
  const size_t full = static_cast<size_t>(n_positions_ / block_tokens_);
  if (full_hashes_.size() > full) full_hashes_.resize(full);
  while (full_hashes_.size() < full) {
    const size_t i = full_hashes_.size();
    BlockKey key;
    key.prefix_hash = i == 0 ? 0 : full_hashes_[i - 1];
    key.type = type_;
    key.variant = variant_;
    try {
      key.tokens.assign(tokens.begin() + static_cast<ptrdiff_t>(i) * block_tokens_,
                        tokens.begin() + static_cast<ptrdiff_t>(i + 1) * block_tokens_);
    } catch (const std::bad_alloc&) {
      return;  // registration is best effort; a later Commit continues here
    }
    full_hashes_.push_back(key.Hash());  // capacity reserved by PrepareWrite
    // A block restored as released (PrepareRestore) has no KV to share.
    if (blocks_[i] != kReleased) pool_->Register(blocks_[i], std::move(key));
  }
  ReleaseOutOfWindow();
}

int64_t KvBlockTable::AdoptCachedPrefix(absl::Span<const int32_t> history, int64_t max_positions) {
  // Block-aligned, with every committed block's hash known (the chain's
  // prefix for the next key).
  if (n_positions_ % block_tokens_ != 0 ||
      full_hashes_.size() != static_cast<size_t>(n_positions_ / block_tokens_)) {
    return n_positions_;
  }
  const int64_t limit = std::min({max_positions, static_cast<int64_t>(history.size()), n_ctx_});
  bool trimmed = false;
  while (n_positions_ + block_tokens_ <= limit) {
    BlockKey key;
    key.prefix_hash = full_hashes_.empty() ? 0 : full_hashes_.back();
    key.type = type_;
    key.variant = variant_;
    try {
      key.tokens.assign(history.begin() + n_positions_,
                        history.begin() + n_positions_ + block_tokens_);
    } catch (const std::bad_alloc&) {
      break;
    }
    const uint64_t hash = key.Hash();
    const std::optional<int32_t> hit = pool_->Lookup(key);
    if (!hit) break;
    const size_t index = static_cast<size_t>(n_positions_ / block_tokens_);
    if (!trimmed) {
      // Blocks past the valid positions (prepared, never committed) hold
      // nothing of value: drop them, so adopted blocks append in order.
      for (size_t i = index; i < blocks_.size(); ++i) {
        if (blocks_[i] != kReleased) pool_->Release(blocks_[i]);
      }
      blocks_.resize(index);
      trimmed = true;
    }
    try {
      if (blocks_.capacity() <= index) {
        const size_t cap = std::max(index + 1, 2 * blocks_.capacity());
        blocks_.reserve(cap);
      }
      if (full_hashes_.capacity() < blocks_.capacity()) full_hashes_.reserve(blocks_.capacity());
    } catch (const std::bad_alloc&) {
      pool_->Release(*hit);
      break;
    }
    blocks_.push_back(*hit);
    full_hashes_.push_back(hash);
    n_positions_ += block_tokens_;
  }
  // A windowed table keeps only the adopted blocks a next query (or the
  // pin) can read; the others go back to the pool's cache at once.
  ReleaseOutOfWindow();
  return n_positions_;
}

void KvBlockTable::Truncate(int64_t n) {
  n = std::clamp<int64_t>(n, 0, n_positions_);
  const size_t keep = static_cast<size_t>((n + block_tokens_ - 1) / block_tokens_);
  for (size_t i = keep; i < blocks_.size(); ++i) {
    if (blocks_[i] != kReleased) pool_->Release(blocks_[i]);
  }
  if (blocks_.size() > keep) blocks_.resize(keep);
  // A partly kept block loses its hash here; its pool registration stays
  // until PrepareWrite writes into it (its rows are still those of the key).
  const size_t full = static_cast<size_t>(n / block_tokens_);
  if (full_hashes_.size() > full) full_hashes_.resize(full);
  n_positions_ = n;
}

std::unique_ptr<KvBlockTable> KvBlockTable::Fork() const {
  // Copies first (they may throw bad_alloc), retains last, so a failure
  // leaves no reference behind.
  auto child = std::make_unique<KvBlockTable>(pool_, type_, n_ctx_, window_, variant_);
  std::vector<int32_t> blocks = blocks_;
  std::vector<uint64_t> hashes;
  // Capacity for a hash per block, as Commit expects.
  hashes.reserve(std::max(blocks.size(), full_hashes_.size()));
  hashes.assign(full_hashes_.begin(), full_hashes_.end());
  for (const int32_t b : blocks) {
    if (b != kReleased) pool_->Retain(b);
  }
  child->blocks_ = std::move(blocks);
  child->full_hashes_ = std::move(hashes);
  child->n_positions_ = n_positions_;
  return child;
}

}  // namespace llm
