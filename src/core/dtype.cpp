#include "core/dtype.h"

namespace llm {

std::optional<DTypeTraits> GetDTypeTraits(uint32_t type_id) {
  switch (static_cast<DType>(type_id)) {
    case DType::kF32: return DTypeTraits{"F32", 1, 4, true};
    case DType::kF16: return DTypeTraits{"F16", 1, 2, true};
    case DType::kBF16: return DTypeTraits{"BF16", 1, 2, true};
    case DType::kQ4_0: return DTypeTraits{"Q4_0", 32, 18, true};
    case DType::kQ4_1: return DTypeTraits{"Q4_1", 32, 20, true};
    case DType::kQ5_0: return DTypeTraits{"Q5_0", 32, 22, true};
    case DType::kQ5_1: return DTypeTraits{"Q5_1", 32, 24, true};
    case DType::kQ8_0: return DTypeTraits{"Q8_0", 32, 34, true};
    case DType::kQ8_1: return DTypeTraits{"Q8_1", 32, 36, false};
    case DType::kQ2_K: return DTypeTraits{"Q2_K", 256, 84, true};
    case DType::kQ3_K: return DTypeTraits{"Q3_K", 256, 110, true};
    case DType::kQ4_K: return DTypeTraits{"Q4_K", 256, 144, true};
    case DType::kQ5_K: return DTypeTraits{"Q5_K", 256, 176, true};
    case DType::kQ6_K: return DTypeTraits{"Q6_K", 256, 210, true};
    case DType::kQ8_K: return DTypeTraits{"Q8_K", 256, 292, false};
    case DType::kIQ4_NL: return DTypeTraits{"IQ4_NL", 32, 18, true};
    case DType::kIQ4_XS: return DTypeTraits{"IQ4_XS", 256, 136, true};
    case DType::kI8: return DTypeTraits{"I8", 1, 1, false};
    case DType::kI16: return DTypeTraits{"I16", 1, 2, false};
    case DType::kI32: return DTypeTraits{"I32", 1, 4, false};
    case DType::kI64: return DTypeTraits{"I64", 1, 8, false};
    case DType::kF64: return DTypeTraits{"F64", 1, 8, false};
  }
  return std::nullopt;
}

std::optional<size_t> RowBytes(DType type, size_t n) {
  auto traits = GetDTypeTraits(static_cast<uint32_t>(type));
  if (!traits || n % traits->block_elems != 0) return std::nullopt;
  return n / traits->block_elems * traits->block_bytes;
}

}  // namespace llm
