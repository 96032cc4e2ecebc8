// A 2-D weight matrix as stored in the GGUF: n_out rows of n_in elements in
// `type`, row o at data + o * row_bytes. Points into the mapping or into the
// CPU backend's plain copy of those rows (weight_buffer.h); never owns.
// packed: optionally the same matrix in the rows16 layout of the AVX-512
// kernels (backend/cpu/packed_weight.h), owned by the CPU backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace llm {

struct Weight {
  DType type = DType::kF32;
  const uint8_t* data = nullptr;
  int64_t n_out = 0;   // rows (output features)
  int64_t n_in = 0;    // elements per row (input features)
  size_t row_bytes = 0;
  const uint8_t* packed = nullptr;
};

}  // namespace llm
