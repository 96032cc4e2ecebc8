// Causal multi-head attention (GQA) of new tokens over a session's KV cache.
// KV is read through KvView so that a paged cache only changes the view.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace llm {

class ThreadPool;

// One layer of a paged KV cache (kv/block_table.h): position p lives in block
// p / block_tokens, row p % block_tokens. K and V for position p and kv head g
// start at element (p % block_tokens) * row_stride + g * head_dim of the
// arrays at blocks[p / block_tokens] + k_offset and + v_offset (naturally
// aligned float / uint16_t arrays). A contiguous cache is one block with
// block_tokens >= every position. The caller keeps everything alive during
// Attention.
struct KvView {
  const uint8_t* const* blocks = nullptr;  // [n_blocks] block base pointers
  int64_t block_tokens = 0;                // positions per block (> 0)
  size_t k_offset = 0;  // bytes from a block's base to this layer's K rows
  size_t v_offset = 0;  // ... and to its V rows; each [block_tokens][n_head_kv][head_dim]
  bool f16 = false;     // elements are IEEE half (uint16_t); else f32
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  size_t row_stride = 0;  // elements between consecutive positions (>= n_head_kv*head_dim)

  // Start of the K / V row of position pos (all kv heads).
  const void* k_row(int64_t pos) const { return row(pos, k_offset); }
  const void* v_row(int64_t pos) const { return row(pos, v_offset); }

 private:
  const void* row(int64_t pos, size_t offset) const {
    const size_t elem = f16 ? 2 : 4;
    return blocks[pos / block_tokens] + offset +
           static_cast<size_t>(pos % block_tokens) * row_stride * elem;
  }
};

// q:   [n_q][n_head][head_dim] f32, queries of n_q consecutive new tokens at
//      absolute positions pos0 .. pos0+n_q-1 (RoPE already applied).
// kv:  holds positions 0 .. pos0+n_q-1 (the new tokens included).
// out: [n_q][n_head][head_dim] f32 (must not overlap q).
// Causal: query t attends to kv positions 0..pos0+t; with window > 0
// (sliding-window attention) only to the last `window` of them,
// (pos0+t - window, pos0+t] (llama.cpp's mask: key p0 is hidden from the
// query at p1 when p1 - p0 >= window), and blocks holding only positions
// before pos0 + 1 - window are never read (they may be null: released by a
// windowed block table). GQA: head h reads kv head
// h / (n_head / n_head_kv). Scores are scaled by 1/sqrt(head_dim).
// Per (query, head): scores as f32 dots in a fixed order, max-subtracted
// softmax (sum in double), f32 weighted sum of V, with ggml's rounding points
// for an f16 cache (q and the probabilities rounded to f16). Independent of
// the other queries, of the thread count and of the paging (block size,
// offsets: only addressing changes). Independent of n_q too, except at the
// AVX-512 level, which by default reproduces llama.cpp bit for bit including
// its separate summation order for n_q == 1 (attention_avx512.cpp).
// batch_invariant: use the same per-query kernel whatever n_q is (at AVX-512
// the multi-token one also for n_q == 1), so that prefilling N tokens in one
// call and decoding them one call each give bit-identical outputs -- what a
// batcher needs for a session's output not to depend on how its tokens were
// grouped into steps. It changes nothing at the other levels. pool may be
// null.
// Bad shapes, a null q / out / kv.blocks / block in use -> LLM_ERR_INVALID_ARGUMENT;
// allocation failure -> OUT_OF_MEMORY.
absl::Status Attention(const float* q, int64_t n_q, int64_t n_head, int64_t pos0, const KvView& kv,
                       float* out, ThreadPool* pool, bool batch_invariant = false,
                       int64_t window = 0);

// One sequence's part of a batched attention call: Attention's q, n_q, pos0,
// kv, out and window.
struct AttentionJob {
  const float* q = nullptr;
  int64_t n_q = 0;
  int64_t pos0 = 0;
  KvView kv;
  float* out = nullptr;
  int64_t window = 0;  // 0: full causal attention; > 0: keys (p - window, p]
  float scale = 0.0f;  // score scale; 0: 1 / sqrt(head_dim)
  float softcap = 0.0f;  // > 0: s = softcap * tanh(s / softcap) (Gemma 2; scalar kernel)
};

// Attention for several sequences (a batcher's pass) with one parallel loop
// over all their tasks, instead of one per sequence: each
// output is the one Attention(job...) would give, bit for bit. Every job is
// checked before any runs.
absl::Status AttentionBatch(absl::Span<const AttentionJob> jobs, int64_t n_head, ThreadPool* pool,
                            bool batch_invariant = false);

}  // namespace llm
