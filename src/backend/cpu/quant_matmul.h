// Quantized matrix x activation products (decode rows, and prefill rows for
// the 8-bit-activation types; see backend/cpu/linear.h) against one GGUF weight
// matrix, with run-time SIMD dispatch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"

namespace llm {

class ThreadPool;

// y[r][o] = sum_i W[o][i] * x[r][i]
//   W: n_out rows of n_in elements of GGUF type `wtype`, row-major; row o
//      starts at (const char*)W + o * row_bytes (row_bytes >= RowBytes(wtype, n_in)).
//      W and row_bytes must be multiples of 4 for F32 and of 2 otherwise (as
//      in every GGUF file), else LLM_ERR_INVALID_ARGUMENT.
//   x: [n_rows][n_in] f32, row stride x_stride floats (>= n_in).
//   y: [n_rows][n_out] f32, row stride y_stride floats (>= n_out); must not
//      overlap x or W.
// Supported wtype: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS (others -> LLM_ERR_UNSUPPORTED). n_rows may be
// anything >= 0 (1..16 is the decode case).
//
// Arithmetic (what accuracy to expect):
//   * Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL: activations are quantized per row
//     to 8 bits per block of 32 exactly as ggml-cpu's quantize_row_q8_0 / q8_1
//     (f16 scale, rounding half to even), and on AVX2 / AVX-512 machines the
//     block products are summed in ggml's x86 order, so outputs equal
//     llama.cpp's bit for bit.
//   * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS: activations are quantized per row
//     to Q8_K (8 bits per block of 256, f32 scale, int16 sums of each 16) as
//     ggml's quantize_row_q8_K, and each block's integer products are summed
//     exactly, then in f32 in ggml-cpu's x86 AVX2 order (kquant_kernels.h):
//     bit for bit llama.cpp's on AVX2 / AVX-512 machines.
//   The integer block dot products are exact, so the error of all these is
//   that of the activation rounding: relative to sum_i |w_i x_i| it stays
//   well under 2e-2.
//   * F32, F16, BF16: exact f32 activations, f32 accumulation (error ~1e-6
//     relative to sum_i |w_i x_i|, tested at 1e-5).
//   * Q4_0 and Q8_0 products at the AVX2 and AVX-512 levels take the
//     per-block order, for every row count: each 32-block's integer
//     sum is exact as above, then accumulated once per block, acc =
//     fma(f32(d_w) * d_x, float(sum), acc) -- the order of llama.cpp's
//     repacked and AMX kernels rather than ggml's vec_dot (8 partial sums
//     per block, what the scalar level runs), so these outputs differ from
//     that level's by f32 rounding only; the two SIMD levels agree bit for
//     bit. The AMX tile kernel (8+ rows, AmxActive, cpu_features.h), the
//     VNNI kernel and the AVX2 kernel give the same bits. Q4_1 stays on the
//     vec_dot order: SmolLM2-135M-Instruct (Q4_1) moved by 0.19 mean |logit|
//     with the per-block one (the teacher-forced limit is 0.1). The K-quant
//     batch kernels for Q4_K, Q5_K and Q6_K at both levels (AMX, VNNI
//     tiles, AVX2 tiles) keep the tiled order below bit for bit.
// Determinism: each y[r][o] is computed by a fixed sequence of operations
// that depends only on n_in, the SIMD level and the data -- never
// on the thread count or how rows are split, and never on n_rows except
// where llama.cpp's own order does (batch_invariant = true removes these):
// IQ4_NL with n_rows == 1 sums its blocks as ggml's one-row vec_dot does
// (two accumulators), other row counts as llama.cpp's batch GEMM (one
// accumulator); the K-quants take llama.cpp's tiled order in products of 8+
// rows (kquant_kernels.h). The scalar
// level gives the same bits on every CPU (ggml's
// portable *_generic order); SIMD levels differ from it by rounding.
// pool may be null (runs on the caller); work is split over whole output rows.
// Thread-safe (no shared state besides the pool).
// Whether QuantMatMul quantizes the activations for weights of type t (all
// but F32, F16, BF16): callers that must match ggml's rounding use
// QuantMatMul for every row count with these types.
bool QuantMatMulQuantizesActivations(DType t);

// Whether QuantMatMul runs a batch of n_rows rows against F32 / F16 / BF16
// weights (type t) on a batch kernel of the active SIMD level that keeps the
// one-row kernel's bits, needs no f32 copy of the matrix and is batch
// invariant; Linear then takes QuantMatMul instead of oneDNN's f32 GEMM on
// weights converted per call. At the AVX2 level for every row count (1B
// F16 pp512 on Zen 3, 2 threads: 1.33x oneDNN, 3 alternating rounds); at
// the AVX-512 level up to kAvx512PlainBatchMaxRows rows
// (quant_matmul_kernels.h), where the conversion dominates oneDNN's call.
bool QuantMatMulBatchesPlainType(DType t, int64_t n_rows);

// Whether QuantMatMul's kernels at the active SIMD level read a rows16 copy
// of a weight of type t (QuantMatMulOutput::packed, packed_weight.h): Q4_0,
// Q4_1, Q5_0, Q8_0 at the AVX2 and AVX-512 levels, Q4_K at the AVX-512 level
// without AMX. A copy of another type, or at the scalar level, would only be
// ignored.
bool QuantMatMulReadsRows16(DType t);

absl::Status QuantMatMul(DType wtype, const void* W, size_t row_bytes, int64_t n_out, int64_t n_in,
                         const float* x, size_t x_stride, int64_t n_rows, float* y, size_t y_stride,
                         ThreadPool* pool, bool batch_invariant = false);

// One product of QuantMatMulShared: QuantMatMul's weight and output arguments.
struct QuantMatMulOutput {
  DType wtype = DType::kF32;
  const void* W = nullptr;
  size_t row_bytes = 0;
  int64_t n_out = 0;
  float* y = nullptr;
  size_t y_stride = 0;
  // Optional: W's rows16 copy (backend/cpu/packed_weight.h), used instead of
  // W on AVX-512 machines; same outputs bit for bit.
  const void* packed = nullptr;
};

// Several products of the same activations x (a layer's Q, K and V, or gate
// and up): each output as QuantMatMul would give it, bit for bit, but x is
// quantized once and all outputs' rows share one parallel loop. Every output
// is checked before any is computed.
absl::Status QuantMatMulShared(const QuantMatMulOutput* outputs, int n_outputs, int64_t n_in,
                               const float* x, size_t x_stride, int64_t n_rows, ThreadPool* pool,
                               bool batch_invariant = false);

}  // namespace llm
