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
    : n_layer_(n_layer), n_ctx_(n_ctx), n_head_kv_(n_head_kv), head_dim_(head_dim), type_(type),
      k_(static_cast<size_t>(n_layer)), v_(static_cast<size_t>(n_layer)) {}

size_t KvCache::bytes_per_token() const {
  const size_t elem = type_ == KvType::kF16 ? 2 : 4;
  return 2 * static_cast<size_t>(n_layer_ * n_head_kv_ * head_dim_) * elem;
}

absl::Status KvCache::Reserve(int64_t n_positions) {
  if (n_positions <= reserved_) return absl::OkStatus();
  if (n_positions > n_ctx_) {
    return Errorf(LLM_ERR_CONTEXT_FULL, "KV cache needs %d positions but n_ctx is %d", n_positions,
                  n_ctx_);
  }
  const int64_t target = std::min(n_ctx_, (n_positions + kGrowStep - 1) / kGrowStep * kGrowStep);
  const size_t row_bytes = bytes_per_token() / 2 / static_cast<size_t>(n_layer_);
  try {
    for (int64_t l = 0; l < n_layer_; ++l) {
      k_[l].resize(static_cast<size_t>(target) * row_bytes);
      v_[l].resize(static_cast<size_t>(target) * row_bytes);
    }
  } catch (const std::bad_alloc&) {
    return Errorf(LLM_ERR_OUT_OF_MEMORY, "cannot allocate the KV cache for %d positions", target);
  }
  reserved_ = target;
  return absl::OkStatus();
}

void KvCache::Store(int64_t layer, int64_t pos, const float* k_row, const float* v_row) {
  const int64_t dim = n_head_kv_ * head_dim_;
  if (type_ == KvType::kF32) {
    std::memcpy(k_[layer].data() + pos * dim * 4, k_row, dim * 4);
    std::memcpy(v_[layer].data() + pos * dim * 4, v_row, dim * 4);
    return;
  }
  auto* k = reinterpret_cast<uint16_t*>(k_[layer].data()) + pos * dim;
  auto* v = reinterpret_cast<uint16_t*>(v_[layer].data()) + pos * dim;
  for (int64_t i = 0; i < dim; ++i) {
    k[i] = F32ToF16(k_row[i]);
    v[i] = F32ToF16(v_row[i]);
  }
}

KvView KvCache::View(int64_t layer) const {
  KvView view;
  view.k = k_[layer].data();
  view.v = v_[layer].data();
  view.f16 = type_ == KvType::kF16;
  view.n_head_kv = n_head_kv_;
  view.head_dim = head_dim_;
  view.row_stride = static_cast<size_t>(n_head_kv_ * head_dim_);
  return view;
}

}  // namespace llm
