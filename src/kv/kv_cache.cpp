#include "kv/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "core/half.h"
#include "core/status.h"

namespace llm {
namespace {
constexpr int64_t kGrowStep = 256;  // positions added per reservation step
}

KvCache::KvCache(int64_t n_layer, int64_t n_ctx, int64_t n_head_kv, int64_t head_dim, KvType type)
    : n_layer_(n_layer),
      n_ctx_(n_ctx),
      n_head_kv_(n_head_kv),
      head_dim_(head_dim),
      type_(type),
      kv_(static_cast<size_t>(n_layer)),
      cap_(static_cast<size_t>(n_layer), 0),
      base_(static_cast<size_t>(n_layer), nullptr) {}

size_t KvCache::bytes_per_token() const { return 2 * static_cast<size_t>(n_layer_) * row_bytes(); }

size_t KvCache::row_bytes() const {
  const size_t elem = type_ == KvType::kF16 ? 2 : 4;
  return static_cast<size_t>(n_head_kv_ * head_dim_) * elem;
}

absl::Status KvCache::Reserve(int64_t n_positions) {
  if (n_positions <= reserved_) return absl::OkStatus();
  if (n_positions > n_ctx_) {
    return Errorf(LLM_ERR_CONTEXT_FULL, "KV cache needs %d positions but n_ctx is %d", n_positions,
                  n_ctx_);
  }
  const int64_t target = std::min(n_ctx_, (n_positions + kGrowStep - 1) / kGrowStep * kGrowStep);
  const size_t rb = row_bytes();
  // Layer by layer: a layer that grew keeps its new capacity even if a later
  // one fails (cap_ is per layer), so a failure leaves every layer usable.
  try {
    for (int64_t l = 0; l < n_layer_; ++l) {
      if (cap_[l] >= target) continue;
      // V moves (it starts after cap rows of K): copy both halves over.
      std::vector<uint8_t> grown(2 * static_cast<size_t>(target) * rb);
      const size_t old_half = static_cast<size_t>(cap_[l]) * rb;
      if (old_half > 0) {
        std::memcpy(grown.data(), kv_[l].data(), old_half);
        std::memcpy(grown.data() + static_cast<size_t>(target) * rb, kv_[l].data() + old_half,
                    old_half);
      }
      kv_[l].swap(grown);
      cap_[l] = target;
      base_[l] = kv_[l].data();
    }
  } catch (const std::bad_alloc&) {
    return Errorf(LLM_ERR_OUT_OF_MEMORY, "cannot allocate the KV cache for %d positions", target);
  }
  reserved_ = target;
  return absl::OkStatus();
}

void KvCache::Store(int64_t layer, int64_t pos, const float* k_row, const float* v_row) {
  const int64_t dim = n_head_kv_ * head_dim_;
  const size_t rb = row_bytes();
  uint8_t* k = kv_[layer].data() + static_cast<size_t>(pos) * rb;
  uint8_t* v = kv_[layer].data() + static_cast<size_t>(cap_[layer] + pos) * rb;
  if (type_ == KvType::kF32) {
    std::memcpy(k, k_row, rb);
    std::memcpy(v, v_row, rb);
    return;
  }
  auto* kh = reinterpret_cast<uint16_t*>(k);
  auto* vh = reinterpret_cast<uint16_t*>(v);
  for (int64_t i = 0; i < dim; ++i) {
    kh[i] = F32ToF16(k_row[i]);
    vh[i] = F32ToF16(v_row[i]);
  }
}

KvView KvCache::View(int64_t layer) const {
  KvView view;
  view.blocks = &base_[layer];
  // One block holding every reserved position (at least 1: block_tokens must
  // be > 0 even before the first Reserve).
  view.block_tokens = std::max<int64_t>(cap_[layer], 1);
  view.k_offset = 0;
  view.v_offset = static_cast<size_t>(cap_[layer]) * row_bytes();
  view.f16 = type_ == KvType::kF16;
  view.n_head_kv = n_head_kv_;
  view.head_dim = head_dim_;
  view.row_stride = static_cast<size_t>(n_head_kv_ * head_dim_);
  return view;
}

}  // namespace llm
