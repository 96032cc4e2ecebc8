// Test access to the bytes of KV blocks: a KvBlockPool whose storage is host
// memory (the CPU backend's CpuKvStorage), and row helpers that store and
// read one (layer, position) K/V row of a table as the CPU backend lays it
// out (kv_layout.h).
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_kv_storage.h"
#include "backend/cpu/ops.h"
#include "kv/block_pool.h"
#include "kv/block_table.h"

namespace llm {

class HostKvPool : public KvBlockPool {
 public:
  HostKvPool(const KvLayout& layout, uint64_t budget_bytes)
      : KvBlockPool(layout, budget_bytes,
                    std::make_unique<CpuKvStorage>(std::max<size_t>(layout.block_bytes(), 1))) {}

  // Base of a block's bytes; nullptr for an id without storage.
  uint8_t* Data(int32_t block) const {
    std::vector<const uint8_t*> base;
    const int32_t ids[1] = {block};
    if (!static_cast<const CpuKvStorage&>(storage()).Bases(ids, base).ok()) return nullptr;
    return const_cast<uint8_t*>(base[0]);
  }
};

// The K (v = false) or V row of (layer, pos) of a table of a HostKvPool
// (row_bytes() bytes in the cache's type); pos must lie in one of its blocks.
inline uint8_t* KvRow(const KvBlockTable& t, int64_t layer, bool v, int64_t pos) {
  const auto& pool = static_cast<const HostKvPool&>(t.pool());
  const KvLayout& l = pool.layout();
  uint8_t* base = pool.Data(t.blocks()[static_cast<size_t>(pos / t.block_tokens())]);
  return base + (v ? l.v_offset(t.type(), layer) : l.k_offset(t.type(), layer)) +
         static_cast<size_t>(pos % t.block_tokens()) * t.row_bytes();
}

// Stores f32 rows [n_head_kv * head_dim] converted to the cache type, as the
// CPU backend's StoreKv does, into a prepared position.
inline void StoreKvRow(KvBlockTable& t, int64_t layer, int64_t pos, const float* k,
                       const float* v) {
  const int64_t n = t.pool().layout().row_elems();
  if (t.type() == KvType::kF16) {
    F32ToF16Row(k, n, reinterpret_cast<uint16_t*>(KvRow(t, layer, false, pos)));
    F32ToF16Row(v, n, reinterpret_cast<uint16_t*>(KvRow(t, layer, true, pos)));
  } else {
    std::memcpy(KvRow(t, layer, false, pos), k, static_cast<size_t>(n) * sizeof(float));
    std::memcpy(KvRow(t, layer, true, pos), v, static_cast<size_t>(n) * sizeof(float));
  }
}

}  // namespace llm
