// Portable kernels for QuantMatMul. Compiled without ISA flags, so there is no
// FMA contraction and the results are the same on every CPU.
#include <cstring>

#include "backend/cpu/quant_blocks.h"
#include "backend/cpu/quant_matmul_kernels.h"
#include "core/half.h"

namespace llm {
namespace qmm {
namespace {

// f32 dot product in a fixed order: 8 interleaved partial sums, combined
// pairwise, then the tail (n % 8) added in order.
float DotF32(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void DequantQ4_K(const BlockQ4_K& b, float* out) {
  const float d = F16ToF32(b.d), dmin = F16ToF32(b.dmin);
  for (int c = 0; c < 4; ++c) {
    uint8_t sc0, m0, sc1, m1;
    GetScaleMinK4(2 * c, b.scales, &sc0, &m0);
    GetScaleMinK4(2 * c + 1, b.scales, &sc1, &m1);
    const float d0 = d * sc0, dm0 = dmin * m0, d1 = d * sc1, dm1 = dmin * m1;
    for (int l = 0; l < 32; ++l) {
      out[c * 64 + l] = d0 * static_cast<float>(b.qs[c * 32 + l] & 0xF) - dm0;
      out[c * 64 + 32 + l] = d1 * static_cast<float>(b.qs[c * 32 + l] >> 4) - dm1;
    }
  }
}

void DequantQ6_K(const BlockQ6_K& b, float* out) {
  const float d = F16ToF32(b.d);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    const int8_t* sc = b.scales + 8 * h;
    float* y = out + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * sc[is] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
  }
}

// F32/F16/BF16/Q4_K/Q6_K: dequantize each weight row once, then f32 dots with
// every activation row.
void GenericKernel(DType t, const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end,
                   const Acts& a, float* y, size_t y_stride, float* scratch) {
  for (int64_t o = o_begin; o < o_end; ++o) {
    const char* row = static_cast<const char*>(W) + o * row_bytes;
    const float* w = reinterpret_cast<const float*>(row);
    if (t != DType::kF32) {
      DequantizeRowForDot(t, row, a.n_in, scratch);
      w = scratch;
    }
    for (int64_t r = 0; r < a.n_rows; ++r) {
      y[r * y_stride + o] = DotF32(w, a.x + r * a.x_stride, a.n_in);
    }
  }
}

template <DType T>
void GenericKernelT(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end, const Acts& a,
                    float* y, size_t y_stride, float* scratch) {
  GenericKernel(T, W, row_bytes, o_begin, o_end, a, y, y_stride, scratch);
}

// 8-bit-activation kernels: integer dot per 32-block, then one f32
// multiply-add per block into a single accumulator, blocks in order.
void KernelQ8_0(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end, const Acts& a,
                float* y, size_t y_stride, float* /*scratch*/) {
  for (int64_t o = o_begin; o < o_end; ++o) {
    const auto* blocks =
        reinterpret_cast<const BlockQ8_0*>(static_cast<const char*>(W) + o * row_bytes);
    for (int64_t r = 0; r < a.n_rows; ++r) {
      const int8_t* q = a.q + r * a.n_in;
      const float* d = a.d + r * a.n_blocks;
      float acc = 0.0f;
      for (int64_t b = 0; b < a.n_blocks; ++b) {
        int32_t isum = 0;
        for (int j = 0; j < 32; ++j) isum += blocks[b].qs[j] * q[b * 32 + j];
        acc += (F16ToF32(blocks[b].d) * d[b]) * static_cast<float>(isum);
      }
      y[r * y_stride + o] = acc;
    }
  }
}

void KernelQ4_0(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end, const Acts& a,
                float* y, size_t y_stride, float* /*scratch*/) {
  for (int64_t o = o_begin; o < o_end; ++o) {
    const auto* blocks =
        reinterpret_cast<const BlockQ4_0*>(static_cast<const char*>(W) + o * row_bytes);
    for (int64_t r = 0; r < a.n_rows; ++r) {
      const int8_t* q = a.q + r * a.n_in;
      const float* d = a.d + r * a.n_blocks;
      float acc = 0.0f;
      for (int64_t b = 0; b < a.n_blocks; ++b) {
        int32_t isum = 0;
        for (int j = 0; j < 16; ++j) {
          isum += ((blocks[b].qs[j] & 0xF) - 8) * q[b * 32 + j];
          isum += ((blocks[b].qs[j] >> 4) - 8) * q[b * 32 + 16 + j];
        }
        acc += (F16ToF32(blocks[b].d) * d[b]) * static_cast<float>(isum);
      }
      y[r * y_stride + o] = acc;
    }
  }
}

void KernelQ4_1(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end, const Acts& a,
                float* y, size_t y_stride, float* /*scratch*/) {
  for (int64_t o = o_begin; o < o_end; ++o) {
    const auto* blocks =
        reinterpret_cast<const BlockQ4_1*>(static_cast<const char*>(W) + o * row_bytes);
    for (int64_t r = 0; r < a.n_rows; ++r) {
      const int8_t* q = a.q + r * a.n_in;
      const float* d = a.d + r * a.n_blocks;
      const float* s = a.s + r * a.n_blocks;
      float acc = 0.0f;
      for (int64_t b = 0; b < a.n_blocks; ++b) {
        int32_t isum = 0;
        for (int j = 0; j < 16; ++j) {
          isum += (blocks[b].qs[j] & 0xF) * q[b * 32 + j];
          isum += (blocks[b].qs[j] >> 4) * q[b * 32 + 16 + j];
        }
        // sum_j (dw*qw_j + m) * dx*qx_j = dw*dx*isum + m * (dx*sum(qx)).
        acc += (F16ToF32(blocks[b].d) * d[b]) * static_cast<float>(isum);
        acc += F16ToF32(blocks[b].m) * s[b];
      }
      y[r * y_stride + o] = acc;
    }
  }
}

}  // namespace

void DequantizeRowForDot(DType t, const void* row, int64_t n, float* out) {
  switch (t) {
    case DType::kF32:
      std::memcpy(out, row, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16: {
      const auto* h = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) out[i] = F16ToF32(h[i]);
      return;
    }
    case DType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) out[i] = BF16ToF32(h[i]);
      return;
    }
    case DType::kQ8_0: {
      const auto* b = static_cast<const BlockQ8_0*>(row);
      for (int64_t i = 0; i < n; ++i) out[i] = F16ToF32(b[i / 32].d) * b[i / 32].qs[i % 32];
      return;
    }
    case DType::kQ4_0: {
      const auto* b = static_cast<const BlockQ4_0*>(row);
      for (int64_t i = 0; i < n; ++i) {
        const uint8_t byte = b[i / 32].qs[i % 16];
        const int nib = (i % 32) < 16 ? (byte & 0xF) : (byte >> 4);
        out[i] = F16ToF32(b[i / 32].d) * static_cast<float>(nib - 8);
      }
      return;
    }
    case DType::kQ4_1: {
      const auto* b = static_cast<const BlockQ4_1*>(row);
      for (int64_t i = 0; i < n; ++i) {
        const uint8_t byte = b[i / 32].qs[i % 16];
        const int nib = (i % 32) < 16 ? (byte & 0xF) : (byte >> 4);
        out[i] = F16ToF32(b[i / 32].d) * static_cast<float>(nib) + F16ToF32(b[i / 32].m);
      }
      return;
    }
    case DType::kQ4_K: {
      const auto* b = static_cast<const BlockQ4_K*>(row);
      for (int64_t k = 0; k < n / 256; ++k) DequantQ4_K(b[k], out + 256 * k);
      return;
    }
    case DType::kQ6_K: {
      const auto* b = static_cast<const BlockQ6_K*>(row);
      for (int64_t k = 0; k < n / 256; ++k) DequantQ6_K(b[k], out + 256 * k);
      return;
    }
    default:
      // Unreachable: QuantMatMul rejects other types before dispatching.
      for (int64_t i = 0; i < n; ++i) out[i] = 0.0f;
      return;
  }
}

bool UsesQuantizedActs(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ4_1;
}

Kernel ScalarKernel(DType t) {
  switch (t) {
    case DType::kF32: return &GenericKernelT<DType::kF32>;
    case DType::kF16: return &GenericKernelT<DType::kF16>;
    case DType::kBF16: return &GenericKernelT<DType::kBF16>;
    case DType::kQ4_K: return &GenericKernelT<DType::kQ4_K>;
    case DType::kQ6_K: return &GenericKernelT<DType::kQ6_K>;
    case DType::kQ8_0: return &KernelQ8_0;
    case DType::kQ4_0: return &KernelQ4_0;
    case DType::kQ4_1: return &KernelQ4_1;
    default: return nullptr;
  }
}

}  // namespace qmm
}  // namespace llm
