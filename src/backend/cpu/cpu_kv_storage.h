// KV block storage in host memory (kv/kv_storage.h): slabs of blocks,
// page-aligned, never moved, so a block's address is stable for the
// storage's lifetime. The CPU kernels address KV through Bases().
//
// Slabs are anonymous mappings advised for transparent huge pages (as the
// weights' copies, weight_buffer.h). A block holds every layer's rows of 16
// positions (kv/kv_layout.h), so one layer's attention over a session
// touches a few rows in each of its blocks; on 4 KiB pages a batch of
// sessions' step missed the TLB on nearly every block it read (16
// SmolLM2-shape sessions, ~35 MB of KV: ~290 pages per layer). Memory:
// pages become resident as blocks are first written, in 2 MiB steps where
// the host grants huge pages (the unused rest of a slab's last huge page,
// < 2 MiB per slab, is the extra).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/types/span.h"
#include "backend/cpu/weight_buffer.h"
#include "kv/kv_storage.h"

namespace llm {

class CpuKvStorage : public KvStorage {
 public:
  explicit CpuKvStorage(size_t block_bytes);

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
  std::vector<WeightBuffer> slabs_;
  std::vector<uint8_t*> bases_;  // [blocks with storage]
};

}  // namespace llm
