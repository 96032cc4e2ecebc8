#include "backend/cpu/dequantize.h"

#include <cstdint>
#include <cstring>

#include "backend/cpu/ops.h"
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

void DequantQ5_0(const uint8_t* src, size_t nb, float* y) {
  for (size_t i = 0; i < nb; ++i, y += kQK4_0) {
    const BlockQ5_0 b = LoadBlock<BlockQ5_0>(src + i * sizeof(BlockQ5_0));
    const float d = F16ToF32(b.d);
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    for (size_t j = 0; j < kQK4_0 / 2; ++j) {
      const int lo = (b.qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (b.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      y[j] = d * static_cast<float>(lo - 16);
      y[j + kQK4_0 / 2] = d * static_cast<float>(hi - 16);
    }
  }
}

void DequantQ5_1(const uint8_t* src, size_t nb, float* y) {
  for (size_t i = 0; i < nb; ++i, y += kQK4_1) {
    const BlockQ5_1 b = LoadBlock<BlockQ5_1>(src + i * sizeof(BlockQ5_1));
    const float d = F16ToF32(b.d);
    const float m = F16ToF32(b.m);
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    for (size_t j = 0; j < kQK4_1 / 2; ++j) {
      const int lo = (b.qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (b.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      const float p0 = d * static_cast<float>(lo);
      const float p1 = d * static_cast<float>(hi);
      y[j] = p0 + m;
      y[j + kQK4_1 / 2] = p1 + m;
    }
  }
}

void DequantIQ4_NL(const uint8_t* src, size_t nb, float* y) {
  for (size_t i = 0; i < nb; ++i, y += kQK4_0) {
    const BlockIQ4_NL b = LoadBlock<BlockIQ4_NL>(src + i * sizeof(BlockIQ4_NL));
    const float d = F16ToF32(b.d);
    for (size_t j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = d * static_cast<float>(kIq4NlValues[b.qs[j] & 0x0F]);
      y[j + kQK4_0 / 2] = d * static_cast<float>(kIq4NlValues[b.qs[j] >> 4]);
    }
  }
}

void DequantQ2_K(const uint8_t* src, size_t nb, float* y) {
  for (size_t i = 0; i < nb; ++i) {
    const BlockQ2_K b = LoadBlock<BlockQ2_K>(src + i * sizeof(BlockQ2_K));
    const float d = F16ToF32(b.d);
    const float dmin = F16ToF32(b.dmin);
    // Element 128h + 32k + l: bits 2k..2k+1 of qs[32h + l], sub-block e / 16.
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int q = (b.qs[32 * h + l] >> (2 * k)) & 3;
      const uint8_t sc = b.scales[e / 16];
      const float dl = d * static_cast<float>(sc & 0xF);
      const float ml = dmin * static_cast<float>(sc >> 4);
      const float p = dl * static_cast<float>(q);
      *y++ = p - ml;
    }
  }
}

// Q3_K's 16 signed sub-block scales (-32..31), see BlockQ3_K.
void UnpackQ3KScales(const uint8_t* s, int* out) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = (low | (high << 4)) - 32;
  }
}

void DequantQ3_K(const uint8_t* src, size_t nb, float* y) {
  for (size_t i = 0; i < nb; ++i) {
    const BlockQ3_K b = LoadBlock<BlockQ3_K>(src + i * sizeof(BlockQ3_K));
    const float d = F16ToF32(b.d);
    int scales[16];
    UnpackQ3KScales(b.scales, scales);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int low = (b.qs[32 * h + l] >> (2 * k)) & 3;
      const int q = low - (((b.hmask[l] >> (4 * h + k)) & 1) ? 0 : 4);
      const float dl = d * static_cast<float>(scales[e / 16]);
      *y++ = dl * static_cast<float>(q);
    }
  }
}

void DequantQ5_K(const uint8_t* src, size_t nb, float* y) {
  for (size_t i = 0; i < nb; ++i) {
    const BlockQ5_K b = LoadBlock<BlockQ5_K>(src + i * sizeof(BlockQ5_K));
    const float d = F16ToF32(b.d);
    const float dmin = F16ToF32(b.dmin);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = b.qs + 32 * c;
      for (int half = 0; half < 2; ++half) {
        uint8_t sc, m;
        GetScaleMinK4(2 * c + half, b.scales, &sc, &m);
        const float d1 = d * static_cast<float>(sc);
        const float m1 = dmin * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) {
          const int lo = half == 0 ? (q[l] & 0x0F) : (q[l] >> 4);
          const int v = lo + (((b.qh[l] >> (2 * c + half)) & 1) << 4);
          const float p = d1 * static_cast<float>(v);
          *y++ = p - m1;
        }
      }
    }
  }
}

void DequantIQ4_XS(const uint8_t* src, size_t nb, float* y) {
  for (size_t i = 0; i < nb; ++i) {
    const BlockIQ4_XS b = LoadBlock<BlockIQ4_XS>(src + i * sizeof(BlockIQ4_XS));
    const float d = F16ToF32(b.d);
    for (int s = 0; s < 8; ++s, y += 32) {
      const int ls = ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b.scales_h >> (2 * s)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* q = b.qs + 16 * s;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIq4NlValues[q[j] & 0x0F]);
        y[j + 16] = dl * static_cast<float>(kIq4NlValues[q[j] >> 4]);
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
      // Vectorized when the halves are aligned (tensor data always is;
      // prefill converts whole F16 matrices per pass, linear.cpp).
      if (reinterpret_cast<uintptr_t>(s) % alignof(uint16_t) == 0) {
        F16ToF32Row(reinterpret_cast<const uint16_t*>(s), static_cast<int64_t>(n_elements), dst);
        return absl::OkStatus();
      }
      for (size_t j = 0; j < n_elements; ++j) {
        uint16_t h;
        std::memcpy(&h, s + 2 * j, 2);
        dst[j] = F16ToF32(h);
      }
      return absl::OkStatus();
    case DType::kBF16:
      if (reinterpret_cast<uintptr_t>(s) % alignof(uint16_t) == 0) {
        BF16ToF32Row(reinterpret_cast<const uint16_t*>(s), static_cast<int64_t>(n_elements), dst);
        return absl::OkStatus();
      }
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
    case DType::kQ5_0: DequantQ5_0(s, nb, dst); return absl::OkStatus();
    case DType::kQ5_1: DequantQ5_1(s, nb, dst); return absl::OkStatus();
    case DType::kIQ4_NL: DequantIQ4_NL(s, nb, dst); return absl::OkStatus();
    case DType::kQ2_K: DequantQ2_K(s, nb, dst); return absl::OkStatus();
    case DType::kQ3_K: DequantQ3_K(s, nb, dst); return absl::OkStatus();
    case DType::kQ5_K: DequantQ5_K(s, nb, dst); return absl::OkStatus();
    case DType::kIQ4_XS: DequantIQ4_XS(s, nb, dst); return absl::OkStatus();
    default:
      return Errorf(LLM_ERR_UNSUPPORTED, "DequantizeRow: type %s is not supported", traits->name);
  }
}

}  // namespace llm
