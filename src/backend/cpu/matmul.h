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

// Same product with bf16 weights w[n][k] (uint16_t bf16 bits): a is rounded to
// bf16 (nearest even, as F32ToBF16) into scratch, products accumulate in f32,
// c is f32. Uses AVX512_BF16 / AMX where oneDNN finds them; a CPU without any
// bf16 path -> LLM_ERR_UNSUPPORTED. Error vs f64 of the bf16-rounded inputs
// ~1e-6 relative to sum |a w|.
absl::Status MatMulBF16(const float* a, const uint16_t* w, float* c, int64_t m, int64_t n,
                        int64_t k, int n_threads);

}  // namespace llm
