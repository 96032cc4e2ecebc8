#include "backend/cpu/dequantize.h"

#include <cstdint>
#include <cstring>

#include "backend/cpu/quant_blocks.h"
#include "core/half.h"
#include "core/status.h"

namespace llm {

namespace {

// Blocks are copied out with memcpy: GGUF tensor data is only 32-byte aligned
// as a whole and blocks of 18/20/34/210 bytes are not naturally aligned.
template <typename Block>
Block LoadBlock(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof b);
  return b;
}

void DequantQ4_0(const uint8_t* src, size_t nb, float* y) {
  for (size_t i = 0; i < nb; ++i, y += kQK4_0) {
    const BlockQ4_0 b = LoadBlock<BlockQ4_0>(src + i * sizeof(BlockQ4_0));
    const float d = F16ToF32(b.d);
    for (size_t j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = d * static_cast<float>((b.qs[j] & 0x0F) - 8);
      y[j + kQK4_0 / 2] = d * static_cast<float>((b.qs[j] >> 4) - 8);
    }
  }
}

void DequantQ4_1(const uint8_t* src, size_t nb, float* y) {
  for (size_t i = 0; i < nb; ++i, y += kQK4_1) {
    const BlockQ4_1 b = LoadBlock<BlockQ4_1>(src + i * sizeof(BlockQ4_1));
    const float d = F16ToF32(b.d);
    const float m = F16ToF32(b.m);
    for (size_t j = 0; j < kQK4_1 / 2; ++j) {
      const float p0 = d * static_cast<float>(b.qs[j] & 0x0F);
      const float p1 = d * static_cast<float>(b.qs[j] >> 4);
      y[j] = p0 + m;
      y[j + kQK4_1 / 2] = p1 + m;
    }
  }
}

void DequantQ8_0(const uint8_t* src, size_t nb, float* y) {
  for (size_t i = 0; i < nb; ++i, y += kQK8_0) {
    const BlockQ8_0 b = LoadBlock<BlockQ8_0>(src + i * sizeof(BlockQ8_0));
    const float d = F16ToF32(b.d);
    for (size_t j = 0; j < kQK8_0; ++j) y[j] = d * static_cast<float>(b.qs[j]);
  }
}

void DequantQ4_K(const uint8_t* src, size_t nb, float* y) {
  for (size_t i = 0; i < nb; ++i) {
    const BlockQ4_K b = LoadBlock<BlockQ4_K>(src + i * sizeof(BlockQ4_K));
    const float d = F16ToF32(b.d);
    const float dmin = F16ToF32(b.dmin);
    const uint8_t* q = b.qs;
    // 4 chunks of 64 elements: low nibbles use sub-block 2c, high nibbles 2c+1.
    for (int c = 0; c < 4; ++c, q += 32) {
      uint8_t sc, m;
      GetScaleMinK4(2 * c, b.scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      GetScaleMinK4(2 * c + 1, b.scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc);
      const float m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        const float p = d1 * static_cast<float>(q[l] & 0x0F);
        *y++ = p - m1;
      }
      for (int l = 0; l < 32; ++l) {
        const float p = d2 * static_cast<float>(q[l] >> 4);
        *y++ = p - m2;
      }
    }
  }
}

void DequantQ6_K(const uint8_t* src, size_t nb, float* y) {
  for (size_t i = 0; i < nb; ++i) {
    const BlockQ6_K b = LoadBlock<BlockQ6_K>(src + i * sizeof(BlockQ6_K));
    const float d = F16ToF32(b.d);
    const uint8_t* ql = b.ql;
    const uint8_t* qh = b.qh;
    const int8_t* sc = b.scales;
    // Two halves of 128 elements (see BlockQ6_K for the bit layout).
    for (int h = 0; h < 2; ++h, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = (d * static_cast<float>(sc[is + 0])) * static_cast<float>(q1);
        y[l + 32] = (d * static_cast<float>(sc[is + 2])) * static_cast<float>(q2);
        y[l + 64] = (d * static_cast<float>(sc[is + 4])) * static_cast<float>(q3);
        y[l + 96] = (d * static_cast<float>(sc[is + 6])) * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace

absl::Status DequantizeRow(DType type, const void* src, size_t n_elements, float* dst) {
  const auto traits = GetDTypeTraits(static_cast<uint32_t>(type));
  if (!traits) return Errorf(LLM_ERR_UNSUPPORTED, "DequantizeRow: unknown type id %d", static_cast<uint32_t>(type));
  if (n_elements % traits->block_elems != 0) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "DequantizeRow: %d elements is not a multiple of the %s block size %d",
                  n_elements, traits->name, traits->block_elems);
  }
  if (n_elements == 0) return absl::OkStatus();
  if (src == nullptr || dst == nullptr) return Error(LLM_ERR_INVALID_ARGUMENT, "DequantizeRow: null pointer");
  const uint8_t* s = static_cast<const uint8_t*>(src);
  const size_t nb = n_elements / traits->block_elems;
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, s, n_elements * sizeof(float));
      return absl::OkStatus();
    case DType::kF16:
      for (size_t j = 0; j < n_elements; ++j) {
        uint16_t h;
        std::memcpy(&h, s + 2 * j, 2);
        dst[j] = F16ToF32(h);
      }
      return absl::OkStatus();
    case DType::kBF16:
      for (size_t j = 0; j < n_elements; ++j) {
        uint16_t h;
        std::memcpy(&h, s + 2 * j, 2);
        dst[j] = BF16ToF32(h);
      }
      return absl::OkStatus();
    case DType::kQ4_0: DequantQ4_0(s, nb, dst); return absl::OkStatus();
    case DType::kQ4_1: DequantQ4_1(s, nb, dst); return absl::OkStatus();
    case DType::kQ8_0: DequantQ8_0(s, nb, dst); return absl::OkStatus();
    case DType::kQ4_K: DequantQ4_K(s, nb, dst); return absl::OkStatus();
    case DType::kQ6_K: DequantQ6_K(s, nb, dst); return absl::OkStatus();
    default:
      return Errorf(LLM_ERR_UNSUPPORTED, "DequantizeRow: type %s is not supported", traits->name);
  }
}

}  // namespace llm
