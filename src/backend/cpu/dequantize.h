// Scalar dequantization of GGML-typed rows to float32, bit-identical to
// gguf.quants.dequantize (the gguf Python package) and ggml's
// dequantize_row_*: every product is formed in float32 in the same order
// (e.g. Q4_K: (d * sc) * q - (dmin * m)), with no fused multiply-add.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "core/dtype.h"

namespace llm {

// Dequantizes n_elements elements of `type` starting at src (raw GGUF bytes,
// any alignment) into dst[0..n_elements). Supported: F32, F16, BF16, Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS. Errors: LLM_ERR_INVALID_ARGUMENT if n_elements is
// not a multiple of the block size or a pointer is null (n_elements > 0);
// LLM_ERR_UNSUPPORTED for other types.
absl::Status DequantizeRow(DType type, const void* src, size_t n_elements, float* dst);

}  // namespace llm
