#include "backend/cpu/cpu_kv_storage.h"

#include <cstring>
#include <new>

#include "core/status.h"

namespace llm {
CpuKvStorage::CpuKvStorage(size_t block_bytes) : block_bytes_(block_bytes) {}

bool CpuKvStorage::AddBlocks(int32_t first, int64_t n) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (n <= 0 || first != static_cast<int64_t>(bases_.size())) return false;
  try {
    slabs_.reserve(slabs_.size() + 1);
    bases_.reserve(bases_.size() + static_cast<size_t>(n));
    // Page-aligned (2 MiB-aligned from 2 MiB up), so every block is 64-byte
    // aligned: block_bytes is a multiple of 64 for the head sizes models use.
    slabs_.push_back(AllocateWeightBuffer(static_cast<size_t>(n) * block_bytes_));
  } catch (const std::bad_alloc&) {
    return false;
  }
  uint8_t* slab = slabs_.back().data.get();
  for (int64_t i = 0; i < n; ++i) bases_.push_back(slab + static_cast<size_t>(i) * block_bytes_);
  return true;
}

uint8_t* CpuKvStorage::Base(int32_t block) const {
  return block >= 0 && static_cast<size_t>(block) < bases_.size() ? bases_[block] : nullptr;
}

absl::Status CpuKvStorage::CopyBlock(int32_t src, int32_t dst) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint8_t* from = Base(src);
  uint8_t* to = Base(dst);
  if (from == nullptr || to == nullptr) {
    return Errorf(LLM_ERR_INTERNAL, "KV block copy %d -> %d: a block has no storage", src, dst);
  }
  std::memcpy(to, from, block_bytes_);
  return absl::OkStatus();
}

absl::Status CpuKvStorage::ReadBlock(int32_t block, uint8_t* host) const {
  std::lock_guard<std::mutex> lock(mu_);
  const uint8_t* from = Base(block);
  if (from == nullptr) return Errorf(LLM_ERR_INTERNAL, "KV block %d has no storage", block);
  std::memcpy(host, from, block_bytes_);
  return absl::OkStatus();
}

absl::Status CpuKvStorage::WriteBlock(int32_t block, const uint8_t* host) {
  std::lock_guard<std::mutex> lock(mu_);
  uint8_t* to = Base(block);
  if (to == nullptr) return Errorf(LLM_ERR_INTERNAL, "KV block %d has no storage", block);
  std::memcpy(to, host, block_bytes_);
  return absl::OkStatus();
}

absl::Status CpuKvStorage::Bases(absl::Span<const int32_t> blocks,
                                 std::vector<const uint8_t*>& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  out.resize(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i] == -1) {  // released: out of every window of the pass
      out[i] = nullptr;
      continue;
    }
    out[i] = Base(blocks[i]);
    if (out[i] == nullptr) return Errorf(LLM_ERR_INTERNAL, "KV block %d has no storage", blocks[i]);
  }
  return absl::OkStatus();
}

}  // namespace llm
