// y = x · Wᵀ for a GGUF weight, choosing the kernel by type and row count:
//  - Q4_0 / Q4_1 / Q8_0 / Q5_0 / Q5_1 / IQ4_NL and the K-quants / IQ4_XS
//    (8-bit quantized activations, as ggml: Q8_0 / Q8_1 / Q8_K), and
//    any type for up to kGemvMaxRows rows (decode): quantized dot products on
//    the GGUF blocks (backend/cpu/quant_matmul.h). Per-row arithmetic is
//    independent of the row count, so a session's output does not depend on
//    who else is in the batch, nor on how its prompt was chunked -- except
//    where llama.cpp's own order depends on the row count (IQ4_NL: 1 vs 2+
//    rows; the K-quants and IQ4_XS: fewer than 8 vs 8+ rows, its tiled
//    matmul), which libllm follows unless LinearContext::batch_invariant.
//  - F32 / F16 / BF16, more rows (prefill chunks): the weight is converted into
//    f32 scratch (bf16 with LinearContext::prefill_bf16) and multiplied with
//    oneDNN (backend/cpu/matmul.h) -- unless
//    LinearContext::batch_invariant asks for QuantMatMul at every row count,
//    or QuantMatMul has a faster batch kernel with the one-row bits for the
//    type, row count and SIMD level (QuantMatMulBatchesPlainType: AVX2, and
//    AVX-512 up to 128 rows).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "backend/cpu/weight.h"

namespace llm {

class ThreadPool;

inline constexpr int64_t kGemvMaxRows = 16;

struct LinearContext {
  ThreadPool* pool = nullptr;  // nullable
  int n_threads = 1;
  std::vector<float> dequantized;  // scratch: [n_out][n_in] f32 for the GEMM path
  // Use QuantMatMul (fixed per-row summation order, independent of n_rows)
  // for every row count and weight type, never oneDNN: oneDNN picks its
  // blocking, and with it the order in which each output's k-sum is
  // accumulated, from the matrix shapes, n_rows included, so the same row
  // multiplied alone or among 40 others can differ in the last bits. With
  // this set, a row's output depends only on that row (a batcher mixing
  // sessions, or a prompt prefilled in chunks vs. decoded token by token,
  // gives the same bits), at the cost of oneDNN's GEMM speed on large
  // prefill chunks of F16 / BF16 / F32 / K-quant weights.
  bool batch_invariant = false;
  // Opt-in (LLM_CPU_PREFILL_BF16=1, CpuBackend): the F32 / F16 / BF16 products
  // that would go to oneDNN in f32 run in bf16 instead -- weights and
  // activations rounded to bf16 (BF16 weights as they are), f32
  // accumulation, on AMX or AVX512_BF16 -- ~3.5x the f32 GEMM's speed on an
  // AMX host, at the cost of moving the logits (docs/CPU_KERNELS.md,
  // "Opt-in bf16 prefill"). Never set without CpuHasAvx512Bf16().
  bool prefill_bf16 = false;
  std::vector<uint16_t> bf16_weights;  // scratch: [n_out][n_in] bf16 for that path
};

// x: [n_rows][w.n_in] f32, y: [n_rows][w.n_out] f32 (both densely packed).
absl::Status Linear(const Weight& w, const float* x, int64_t n_rows, float* y, LinearContext& ctx);

// Linear for several weights with the same input (Q, K and V; gate and up):
// ys[i] = x · ws[i]ᵀ, each exactly as Linear gives it. When every weight
// takes the QuantMatMul path, x is quantized once and all outputs share one
// parallel loop (QuantMatMulShared): in a 16-session decode pass that is a
// third of the pool round trips of separate calls. At most 4 weights.
absl::Status LinearShared(const Weight* const* ws, float* const* ys, int n, const float* x,
                          int64_t n_rows, LinearContext& ctx);

}  // namespace llm
