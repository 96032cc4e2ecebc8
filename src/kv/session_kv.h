// A session's KV cache over a model's KV groups (kv_groups.h): one
// KvBlockTable per group, each over its group's pool with its group's
// window, driven together so that every table always holds the same
// positions. With one group it is that table, nothing more (the engine then
// behaves exactly as with a bare table).
//
// Each method does to every table what KvBlockTable's method of the same
// name does to one (block_table.h), with the joint rules below. One thread
// at a time, as a table.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kv/block_pool.h"
#include "kv/block_table.h"
#include "kv/kv_groups.h"

namespace llm {

class SessionKv {
 public:
  // pools[g]: group g's pool (groups.size() of them). groups and the pools
  // must outlive the object. variant: every table's BlockKey::variant
  // (block_table.h).
  SessionKv(const KvGroups* groups, absl::Span<KvBlockPool* const> pools, KvType type,
            int64_t n_ctx, uint32_t variant = 0);
  SessionKv(const SessionKv&) = delete;
  SessionKv& operator=(const SessionKv&) = delete;

  const KvGroups& groups() const { return *groups_; }
  size_t n_groups() const { return tables_.size(); }
  const KvBlockTable& table(size_t g) const { return *tables_[g]; }
  KvBlockTable& table(size_t g) { return *tables_[g]; }

  KvType type() const { return tables_[0]->type(); }
  int64_t n_ctx() const { return tables_[0]->n_ctx(); }
  int64_t block_tokens() const { return tables_[0]->block_tokens(); }
  int64_t n_positions() const { return tables_[0]->n_positions(); }
  // The largest window of the tables (0: none windowed).
  int64_t window() const;
  // Blocks held over all tables.
  int64_t blocks_held() const;

  void SetPin(int64_t pin);
  // Every table can continue from n.
  bool CanResumeAt(int64_t n) const;
  // All tables; on failure the tables' valid positions are unchanged (blocks
  // already obtained stay for a retry, as with one table).
  absl::Status PrepareWrite(int64_t begin, int64_t end);
  void Commit(absl::Span<const int32_t> tokens);
  // Adopts the cached prefix that EVERY group's pool holds: each table adopts
  // up to what the ones before it adopted, then the tables that adopted more
  // are truncated to the common length. (Should a windowed table be unable to
  // truncate there -- its window having released what that length needs --
  // every table goes back to where it started: adopting nothing is always
  // correct.) Returns the new n_positions().
  int64_t AdoptCachedPrefix(absl::Span<const int32_t> history, int64_t max_positions);
  void Truncate(int64_t n);
  // All tables; on failure every table is empty again.
  absl::Status PrepareRestore(int64_t n);
  // Every table forked (may throw std::bad_alloc; nothing is then retained).
  std::unique_ptr<SessionKv> Fork() const;

 private:
  explicit SessionKv(const KvGroups* groups) : groups_(groups) {}
  const KvGroups* groups_;
  std::vector<std::unique_ptr<KvBlockTable>> tables_;  // [n_groups]
};

}  // namespace llm
