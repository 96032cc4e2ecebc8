// f32 GEMM for prefill through oneDNN's matmul primitive (the engine never
// includes oneDNN headers; only this backend file does).
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace llm {

// c[m][n] = a[m][k] * w[n][k]^T   (all f32, row-major, dense strides)
//   a: activations [m][k]; w: weights [n][k] (nn.Linear / GGUF layout);
//   c: [m][n], must not overlap a or w.
// n_threads >= 1: OpenMP threads oneDNN uses for this call (set with
// omp_set_num_threads on the calling thread). Primitives are created once per
// (m, n, k, n_threads) and cached (thread-safe). oneDNN's blocking depends on
// m, so results are NOT batch invariant -- the deterministic mode uses
// QuantMatMul instead. oneDNN errors -> LLM_ERR_INTERNAL / OUT_OF_MEMORY.
// Thread-safe.
absl::Status MatMulF32(const float* a, const float* w, float* c, int64_t m, int64_t n, int64_t k,
                       int n_threads);

}  // namespace llm
