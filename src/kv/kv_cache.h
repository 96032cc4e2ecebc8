// A session's KV cache, contiguous per layer (0.1; the paged block pool of
// DESIGN.md §2 replaces the storage later, keeping this interface's role).
//
// Layout per layer: one buffer [K rows][V rows], each [cap][n_head_kv *
// head_dim] in F16 or F32 (cap = the layer's reserved positions), so that
// View can describe it as a one-block paged KvView (block base = buffer,
// k_offset 0, v_offset = cap rows). Storage is reserved lazily in growing
// steps, so memory follows use rather than n_ctx.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "backend/cpu/attention.h"

namespace llm {

enum class KvType { kF16, kF32 };

class KvCache {
 public:
  KvCache(int64_t n_layer, int64_t n_ctx, int64_t n_head_kv, int64_t head_dim, KvType type);

  int64_t n_ctx() const { return n_ctx_; }
  KvType type() const { return type_; }
  size_t bytes_per_token() const;  // K and V of all layers

  // Make room for positions [0, n_positions); LLM_ERR_OUT_OF_MEMORY on failure.
  absl::Status Reserve(int64_t n_positions);

  // Store one position's K and V rows ([n_head_kv * head_dim] f32 each).
  void Store(int64_t layer, int64_t pos, const float* k_row, const float* v_row);

  // Attention's read view of a layer (positions [0, reserved)).
  KvView View(int64_t layer) const;

 private:
  int64_t n_layer_, n_ctx_, n_head_kv_, head_dim_;
  KvType type_;
  size_t row_bytes() const;  // one position's K (or V) row of one layer

  int64_t reserved_ = 0;                  // positions with storage in every layer
  std::vector<std::vector<uint8_t>> kv_;  // per layer: [cap_[l]][row] K, then as many V
  std::vector<int64_t> cap_;              // per layer: positions in kv_[l]
  std::vector<const uint8_t*> base_;      // per layer: kv_[l].data(), KvView's one block
};

}  // namespace llm
