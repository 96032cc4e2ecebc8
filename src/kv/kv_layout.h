// Shape of a model's KV cache and of the blocks it is stored in.
//
// A block holds K and V of all layers for a run of consecutive positions:
//   [n_layer][2 (K, V)][block_tokens][n_head_kv * head_dim] elements
// Every block has the same size in bytes, whatever the element type: an F16
// block holds kBlockTokensF16 positions, an F32 block half as many. So one
// pool serves sessions of both KV types and its byte cap is exact.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"

namespace llm {

enum class KvType { kF16, kF32 };

// Positions per block for an F16 cache (F32: half).
inline constexpr int64_t kBlockTokensF16 = 16;

struct KvLayout {
  int64_t n_layer = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;

  int64_t row_elems() const { return n_head_kv * head_dim; }
  static size_t elem_bytes(KvType t) { return t == KvType::kF16 ? 2 : 4; }
  // K and V of all layers for one position: 2 x n_layer x n_head_kv x head_dim x element.
  size_t bytes_per_token(KvType t) const {
    return 2 * static_cast<size_t>(n_layer * row_elems()) * elem_bytes(t);
  }
  static int64_t block_tokens(KvType t) {
    return t == KvType::kF16 ? kBlockTokensF16 : kBlockTokensF16 / 2;
  }
  size_t block_bytes() const { return bytes_per_token(KvType::kF16) * kBlockTokensF16; }
  // Byte offsets, from a block's base, of one layer's K rows and V rows.
  size_t k_offset(KvType t, int64_t layer) const {
    return static_cast<size_t>(2 * layer) * static_cast<size_t>(block_tokens(t) * row_elems()) *
           elem_bytes(t);
  }
  size_t v_offset(KvType t, int64_t layer) const {
    return k_offset(t, layer) +
           static_cast<size_t>(block_tokens(t) * row_elems()) * elem_bytes(t);
  }
};

// A sequence's KV cache as every device addresses it: the ids of its blocks
// in position order, all of one element type. Position p lives in block
// blocks[p / block_tokens(type)] at row p % block_tokens(type); inside a
// block, layer l's K rows start at KvLayout::k_offset(type, l) and its V rows
// at v_offset(type, l), each row [n_head_kv][head_dim]. Ids, never
// addresses: the backend that stores the blocks (kv_storage.h) resolves them.
struct KvBlockList {
  absl::Span<const int32_t> blocks;
  KvType type = KvType::kF16;
};

}  // namespace llm
