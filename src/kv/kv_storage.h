// Where a KV block pool's bytes live. The pool (block_pool.h) decides which
// block ids exist and who holds them; the storage, provided by the model's
// backend (backend/backend.h), holds each block's block_bytes() of K/V in
// whatever memory the device uses. Engine code never addresses KV memory: it
// copies blocks (fork's copy-on-write) and moves them to and from host bytes
// (session save/load) through this interface.
//
// Thread-safety: AddBlocks is called under the pool's mutex; the other
// methods on the scheduler thread or a session's thread, on blocks that
// caller holds (no two threads touch one block's bytes at once).
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace llm {

class KvStorage {
 public:
  virtual ~KvStorage() = default;

  // Obtains storage for blocks [first, first + n) (first is the number of
  // blocks that have storage so far). All or nothing; false when memory is
  // exhausted. Never throws.
  virtual bool AddBlocks(int32_t first, int64_t n) noexcept = 0;

  // dst's bytes = src's bytes (both have storage).
  virtual absl::Status CopyBlock(int32_t src, int32_t dst) = 0;

  // host[0 .. block_bytes) = the block's bytes, in the layout of kv_layout.h.
  virtual absl::Status ReadBlock(int32_t block, uint8_t* host) const = 0;
  // The block's bytes = host[0 .. block_bytes).
  virtual absl::Status WriteBlock(int32_t block, const uint8_t* host) = 0;
};

}  // namespace llm
