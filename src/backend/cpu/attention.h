// Causal multi-head attention (GQA) of new tokens over a session's KV cache.
// KV is read through KvView so that a paged cache only changes the view.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace llm {

class ThreadPool;

// Contiguous KV cache of one layer: K and V for position p and kv head g start
// at element p * row_stride + g * head_dim of k / v (naturally aligned
// float / uint16_t arrays). The caller keeps them alive during Attention.
struct KvView {
  const void* k = nullptr;  // [n_pos][n_head_kv][head_dim] (f16 or f32)
  const void* v = nullptr;  // same layout as k
  bool f16 = false;         // elements are IEEE half (uint16_t); else f32
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  size_t row_stride = 0;  // elements between consecutive positions (>= n_head_kv*head_dim)
};

// q:   [n_q][n_head][head_dim] f32, queries of n_q consecutive new tokens at
//      absolute positions pos0 .. pos0+n_q-1 (RoPE already applied).
// kv:  holds positions 0 .. pos0+n_q-1 (the new tokens included).
// out: [n_q][n_head][head_dim] f32 (must not overlap q).
// Causal: query t attends to kv positions 0..pos0+t. GQA: head h reads kv head
// h / (n_head / n_head_kv). Scores are scaled by 1/sqrt(head_dim).
// Per (query, head): scores as f32 dots in a fixed order, max-subtracted
// softmax (sum in double), f32 weighted sum of V, with ggml's rounding points
// for an f16 cache (q and the probabilities rounded to f16). Independent of
// the other queries and of the thread count; independent of n_q too, except
// at the AVX-512 level, which reproduces llama.cpp bit for bit including its
// separate summation order for n_q == 1 (attention_avx512.cpp). pool may be
// null.
// Bad shapes -> LLM_ERR_INVALID_ARGUMENT; allocation failure -> OUT_OF_MEMORY.
absl::Status Attention(const float* q, int64_t n_q, int64_t n_head, int64_t pos0, const KvView& kv,
                       float* out, ThreadPool* pool);

}  // namespace llm
