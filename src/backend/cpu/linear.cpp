#include "backend/cpu/linear.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/dequantize.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/quant_matmul.h"
#include "core/status.h"
#include "backend/cpu/thread_pool.h"

namespace llm {

namespace {

// (The opt-in bf16 prefill keeps its GEMM for every batch beyond
// kGemvMaxRows rows.)
bool UsesQuantMatMul(const Weight& w, int64_t n_rows, const LinearContext& ctx) {
  return n_rows <= kGemvMaxRows || ctx.batch_invariant || QuantMatMulQuantizesActivations(w.type) ||
         (QuantMatMulBatchesPlainType(w.type, n_rows) && !ctx.prefill_bf16);
}

// fn(begin, end) over [0, n), split across the n_threads OpenMP threads that
// the oneDNN GEMM after it runs on: with the pool's threads instead, the two
// teams took turns spinning for the same cores (1B F16 pp512 with bf16
// prefill 274 -> 332 tokens/s).
template <typename Fn>
void ForRowsOnGemmThreads(int64_t n, int n_threads, const Fn& fn) {
  const int teams = std::max(1, n_threads);
#pragma omp parallel for num_threads(teams) schedule(static)
  for (int t = 0; t < teams; ++t) fn(n * t / teams, n * (t + 1) / teams);
}

// The opt-in bf16 GEMM (LinearContext::prefill_bf16) for an F32 / F16 / BF16
// weight: its rows rounded to bf16 into scratch (dense BF16 rows are used in
// place), the activations rounded by MatMulBF16.
absl::Status LinearBf16(const Weight& w, const float* x, int64_t n_rows, float* y,
                        LinearContext& ctx) {
  const uint16_t* w16 = reinterpret_cast<const uint16_t*>(w.data);
  const bool dense_bf16 =
      w.type == DType::kBF16 && w.row_bytes == static_cast<size_t>(w.n_in) * sizeof(uint16_t);
  if (!dense_bf16) {
    const size_t n = static_cast<size_t>(w.n_out * w.n_in);
    if (ctx.bf16_weights.size() < n) ctx.bf16_weights.resize(n);
    uint16_t* dst = ctx.bf16_weights.data();
    auto round_rows = [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const uint8_t* row = w.data + o * w.row_bytes;
        uint16_t* out = dst + o * w.n_in;
        if (w.type == DType::kF32) {
          F32ToBF16Row(reinterpret_cast<const float*>(row), w.n_in, out);
        } else if (w.type == DType::kF16) {
          F16ToBF16Row(reinterpret_cast<const uint16_t*>(row), w.n_in, out);
        } else {
          std::memcpy(out, row, static_cast<size_t>(w.n_in) * sizeof(uint16_t));
        }
      }
    };
    ForRowsOnGemmThreads(w.n_out, ctx.n_threads, round_rows);
    w16 = dst;
  }
  return MatMulBF16(x, w16, y, n_rows, w.n_out, w.n_in, ctx.n_threads);
}

}  // namespace

absl::Status LinearShared(const Weight* const* ws, float* const* ys, int n, const float* x,
                          int64_t n_rows, LinearContext& ctx) {
  constexpr int kMaxShared = 4;
  bool shared = n >= 1 && n <= kMaxShared;
  for (int i = 0; shared && i < n; ++i) {
    shared = UsesQuantMatMul(*ws[i], n_rows, ctx) && ws[i]->n_in == ws[0]->n_in;
  }
  if (!shared) {
    for (int i = 0; i < n; ++i) LLM_RETURN_IF_ERROR(Linear(*ws[i], x, n_rows, ys[i], ctx));
    return absl::OkStatus();
  }
  QuantMatMulOutput outs[kMaxShared];
  for (int i = 0; i < n; ++i) {
    outs[i].wtype = ws[i]->type;
    outs[i].W = ws[i]->data;
    outs[i].row_bytes = ws[i]->row_bytes;
    outs[i].n_out = ws[i]->n_out;
    outs[i].packed = ws[i]->packed;
    outs[i].y = ys[i];
    outs[i].y_stride = static_cast<size_t>(ws[i]->n_out);
  }
  return QuantMatMulShared(outs, n, ws[0]->n_in, x, static_cast<size_t>(ws[0]->n_in), n_rows,
                           ctx.pool, ctx.batch_invariant);
}

absl::Status Linear(const Weight& w, const float* x, int64_t n_rows, float* y, LinearContext& ctx) {
  // Weight types whose QuantMatMul kernels quantize the activations to 8 bits
  // (Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, IQ4_NL; the K-quants and IQ4_XS to Q8_K)
  // take that path for every row count, prefill included:
  // ggml (llama.cpp) quantizes the activations of those types the same way
  // for one row or many, and reproducing its rounding points is what keeps
  // libllm's logits within 0.1 of llama.cpp's on sensitive models (SmolLM2:
  // an f32 GEMM on dequantized weights alone moves the logits by ~0.2). It
  // also makes prefill batch-invariant (QuantMatMul's per-row arithmetic does
  // not depend on n_rows). Other types keep oneDNN for large row counts,
  // unless the caller needs batch invariance (linear.h).
  if (UsesQuantMatMul(w, n_rows, ctx)) {
    QuantMatMulOutput out;
    out.wtype = w.type;
    out.W = w.data;
    out.row_bytes = w.row_bytes;
    out.n_out = w.n_out;
    out.packed = w.packed;
    out.y = y;
    out.y_stride = static_cast<size_t>(w.n_out);
    return QuantMatMulShared(&out, 1, w.n_in, x, static_cast<size_t>(w.n_in), n_rows, ctx.pool,
                             ctx.batch_invariant);
  }
  if (ctx.prefill_bf16 &&
      (w.type == DType::kF32 || w.type == DType::kF16 || w.type == DType::kBF16)) {
    return LinearBf16(w, x, n_rows, y, ctx);
  }
  const float* w_f32 = reinterpret_cast<const float*>(w.data);
  // oneDNN wants dense f32 rows: other types, and f32 rows with padding
  // (row_bytes > n_in floats), go through a dense f32 copy.
  if (w.type != DType::kF32 || w.row_bytes != static_cast<size_t>(w.n_in) * sizeof(float)) {
    const size_t n = static_cast<size_t>(w.n_out * w.n_in);
    if (ctx.dequantized.size() < n) ctx.dequantized.resize(n);
    float* dst = ctx.dequantized.data();
    // Row 0 first: DequantizeRow fails only for a type it does not know, and
    // then it fails for every row, so the parallel rows need no error path.
    LLM_RETURN_IF_ERROR(DequantizeRow(w.type, w.data, static_cast<size_t>(w.n_in), dst));
    auto dequantize_rows = [&](int64_t begin, int64_t end) {
      for (int64_t o = std::max<int64_t>(begin, 1); o < end; ++o) {
        (void)DequantizeRow(w.type, w.data + o * w.row_bytes, static_cast<size_t>(w.n_in),
                            dst + o * w.n_in);
      }
    };
    ForRowsOnGemmThreads(w.n_out, ctx.n_threads, dequantize_rows);
    w_f32 = dst;
  }
  return MatMulF32(x, w_f32, y, n_rows, w.n_out, w.n_in, ctx.n_threads);
}

}  // namespace llm
