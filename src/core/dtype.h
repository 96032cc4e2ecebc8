// Tensor element types: the GGML/GGUF type ids (values fixed by the GGUF
// format) and their block geometry. Quantized types store blocks of
// block_elems elements in block_bytes bytes; plain types have block_elems = 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace llm {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct DTypeTraits {
  const char* name;      // "Q4_K"
  size_t block_elems;    // elements per block (1 for plain types)
  size_t block_bytes;    // bytes per block
  bool supported;        // libllm can dequantize / compute with it
};

// Traits of a GGUF type id; nullopt for ids libllm does not know at all.
std::optional<DTypeTraits> GetDTypeTraits(uint32_t type_id);

// Bytes of a row of n elements, or nullopt if n is not a multiple of the
// block size or the type is unknown.
std::optional<size_t> RowBytes(DType type, size_t n);

}  // namespace llm
