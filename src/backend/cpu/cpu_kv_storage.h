// KV block storage in host memory (kv/kv_storage.h): slabs of blocks,
// 64-byte aligned, never moved, so a block's address is stable for the
// storage's lifetime. The CPU kernels address KV through Bases().
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/types/span.h"
#include "kv/kv_storage.h"

namespace llm {

class CpuKvStorage : public KvStorage {
 public:
  explicit CpuKvStorage(size_t block_bytes);
  ~CpuKvStorage() override;

  bool AddBlocks(int32_t first, int64_t n) noexcept override;
  absl::Status CopyBlock(int32_t src, int32_t dst) override;
  absl::Status ReadBlock(int32_t block, uint8_t* host) const override;
  absl::Status WriteBlock(int32_t block, const uint8_t* host) override;

  // out[i] = base address of blocks[i] (every id must have storage, else
  // LLM_ERR_INTERNAL), nullptr for -1 (a block a windowed table released;
  // the kernels never read it). Reuses out's capacity.
  absl::Status Bases(absl::Span<const int32_t> blocks, std::vector<const uint8_t*>& out) const;

 private:
  uint8_t* Base(int32_t block) const;  // nullptr for an id without storage; mu_ held

  size_t block_bytes_;
  // Guards slabs_ and bases_: the pool grows the storage from any session's
  // thread while the scheduler thread reads addresses.
  mutable std::mutex mu_;
  std::vector<uint8_t*> slabs_;  // owned, aligned allocations
  std::vector<uint8_t*> bases_;  // [blocks with storage]
};

}  // namespace llm
