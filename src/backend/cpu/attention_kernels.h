// Private to backend/cpu: the per-ISA inner loop of Attention (attention.cpp
// validates, resolves the paged KvView into per-position row pointers, splits
// (query, head) or (query, kv head) tasks over threads and dispatches).
#pragma once

#include <cstdint>

#include "backend/cpu/attention.h"

namespace llm {
namespace attn {

struct NextRowsPrefetch;

// The K and V rows of positions 0 .. n_kv-1 of one layer, resolved once per
// Attention call from the paged KvView (one division-free walk over the
// blocks), so the kernels address position p with one load instead of a
// block / row split per element. k[p] / v[p] = kv.k_row(p) / kv.v_row(p):
// [n_head_kv][head_dim] elements of f16 (uint16_t) or f32.
struct KvRows {
  const uint8_t* const* k = nullptr;  // [n_kv]
  const uint8_t* const* v = nullptr;  // [n_kv]
  bool f16 = false;
  int64_t head_dim = 0;
  // Non-null: the one-token kernels advance it once per K position.
  NextRowsPrefetch* next = nullptr;
};

// The K and V rows (every kv head's slice) of the query a thread attends
// after the current one, prefetched into L2 a few lines per K position of
// the current query's tasks, so that its rows arrive while this one
// computes. A batch of sessions' decode step reads each session's rows from
// memory, and a thread's own prefetches within a task overlap little:
// 16 SmolLM2-shape sessions (96 positions) took ~200 us per layer on one
// Zen 4 thread, ~80 of them computing (docs/CPU_KERNELS.md, "One-token
// attention"). Lines in order: K rows of positions 0 .. n-1, then V rows;
// BeginNextRows sets the rows, PaceNextRows the number of Step calls left
// to spread the rest over. Internal linkage, as PrefetchHeadRow below.
struct NextRowsPrefetch {
  const uint8_t* const* k = nullptr;
  const uint8_t* const* v = nullptr;
  int64_t n = 0;          // positions
  size_t row_bytes = 0;   // bytes read per row (all kv heads)
  int64_t row = 0;        // next row: 0 .. 2n-1 (K rows, then V rows)
  uintptr_t line = 0;     // next line address in the row before it
  uintptr_t row_end = 0;  // one past that row's last byte
  int64_t per_step = 0;   // lines per Step
};

static inline void BeginNextRows(NextRowsPrefetch* f, const uint8_t* const* k,
                                 const uint8_t* const* v, int64_t n, size_t row_bytes) {
  f->k = k;
  f->v = v;
  f->n = n;
  f->row_bytes = row_bytes;
  f->row = 0;
  f->line = f->row_end = 0;
  f->per_step = 0;
}

// Spread the lines not yet prefetched over `steps` more Step calls.
static inline void PaceNextRows(NextRowsPrefetch* f, int64_t steps) {
  // At most this many lines per row, however it is aligned.
  const int64_t row_lines = static_cast<int64_t>((f->row_bytes + 62) / 64 + 1);
  const int64_t left =
      (2 * f->n - f->row) * row_lines +
      static_cast<int64_t>(f->row_end > f->line ? (f->row_end - f->line + 63) / 64 : 0);
  f->per_step = steps > 0 ? (left + steps - 1) / steps : left;
}

static inline void StepNextRows(NextRowsPrefetch* f) {
  // The cursor in locals: the stores through f would otherwise follow
  // every prefetch.
  uintptr_t line = f->line, row_end = f->row_end;
  int64_t row = f->row;
  for (int64_t i = f->per_step; i > 0; --i) {
    if (line >= row_end) {
      if (row >= 2 * f->n) break;
      const uint8_t* base = row < f->n ? f->k[row] : f->v[row - f->n];
      ++row;
      line = reinterpret_cast<uintptr_t>(base) & ~uintptr_t{63};
      row_end = reinterpret_cast<uintptr_t>(base) + f->row_bytes;
    }
    __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 2);
    line += 64;
  }
  f->line = line;
  f->row_end = row_end;
  f->row = row;
}

// Positions ahead of the one being scored whose K rows a one-token kernel
// prefetches (it prefetches each position's V row with its K row: the V
// pass follows). A batch of sessions' decode step reads every session's
// rows from L3 or memory (paged blocks, a position's heads side by side),
// and the first conversion of each K row stalled: 16 SmolLM2-shape Q4_0
// sessions on Zen 4 spent ~40 % of the AVX-512 one-token kernel there.
constexpr int64_t kKvPrefetchAhead = 64;

// Prefetches (into L1) the cache lines of kv head g's slice of one K or V
// row: head_dim elements at element g * head_dim. Internal linkage: the
// ISA-flagged kernel files include this header.
static inline void PrefetchHeadRow(const KvRows& kv, const uint8_t* row, int64_t g) {
  const size_t elt = kv.f16 ? 2 : 4;
  const size_t bytes = static_cast<size_t>(kv.head_dim) * elt;
  const uint8_t* at = row + static_cast<size_t>(g * kv.head_dim) * elt;
  for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(at + b, 0, 3);
  __builtin_prefetch(at + bytes - 1, 0, 3);  // an unaligned slice's last line
}

// One (query, head): out[head_dim] = softmax(q . K^T * scale) V over kv
// positions 0 .. n_kv-1 of kv head g. scores: n_kv floats of scratch, acc:
// head_dim floats of scratch.
// The arithmetic is a fixed sequence given (n_kv, head_dim, level); it does
// not depend on where the rows live (block size, strides).
using AttendFn = void (*)(const float* qh, int64_t n_kv, int64_t g, const KvRows& kv, float scale,
                          float* scores, float* acc, float* out);

AttendFn ScalarAttend();
// AVX2 + FMA + F16C: llama.cpp's CPU attention as its AVX2 build computes
// it, bit for bit (see attention_avx2.cpp). Avx2Attend: a step of several
// query tokens (tinyBLAS orders); Avx2AttendOneToken: a step of one
// (ggml_vec_dot orders; llama.cpp uses a different kernel for one-token
// batches).
AttendFn Avx2Attend();
AttendFn Avx2AttendOneToken();
// AVX-512, head_dim % 16 == 0 only: llama.cpp's (ggml-cpu, llamafile) CPU
// attention bit for bit (see attention_avx512.cpp).
AttendFn Avx512Attend();

// Several query rows -- query tokens of one step and the heads among them
// that read kv head g -- each over its own positions 0 .. n_kv[i]-1 of kv:
// q[i] [head_dim] -> out[i] [head_dim], i < n. Each row's output is what
// the per-(query, head) AttendFn of the same level gives it; K and V rows
// are loaded and converted once for several rows. scores: 4 * max n_kv
// floats, acc: 4 * head_dim floats of scratch.
using AttendRowsFn = void (*)(const float* const* q, const int64_t* n_kv, float* const* out,
                              int64_t n, int64_t g, const KvRows& kv, float scale, float* scores,
                              float* acc);

// AVX-512, head_dim % 16 == 0: Avx512Attend's results, 4 rows at a time.
AttendRowsFn Avx512AttendRows();
// AVX2 + FMA + F16C: Avx2Attend's results (4 rows at a time for an f16
// cache and head_dim % 8 == 0, one by one otherwise).
AttendRowsFn Avx2AttendRows();

// Several heads of one query that read the same kv head g (GQA): heads
// 0 .. n-1 of q [n][head_dim] into out [n][head_dim]; scores: n * n_kv
// floats, acc: n * head_dim floats of scratch. Each head's output is the
// one the per-head kernel would give; K and V rows are read once for
// several heads.
using AttendHeadsFn = void (*)(const float* q, int64_t n, int64_t n_kv, int64_t g, const KvRows& kv,
                               float scale, float* scores, float* acc, float* out);

// AVX-512, head_dim % 64 == 0, for a step of ONE query token: ggml's
// vec_dot order (llama.cpp uses a different kernel for one-token batches).
AttendHeadsFn Avx512AttendOneTokenHeads();
// AVX2 + FMA + F16C, head_dim % 32 == 0, for a step of ONE query token:
// Avx2AttendOneToken's results (ggml's AVX2 vec_dot orders).
AttendHeadsFn Avx2AttendOneTokenHeads();

}  // namespace attn
}  // namespace llm
