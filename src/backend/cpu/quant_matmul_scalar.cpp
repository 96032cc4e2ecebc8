// Portable kernels for QuantMatMul. Compiled without ISA flags, so there is no
// FMA contraction and the results are the same on every CPU.
#include <cstring>

#include "backend/cpu/dequantize.h"
#include "backend/cpu/kquant_kernels.h"
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

// F32/F16/BF16: convert each weight row once, then f32 dots with
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
      const float* ds = a.ds + 2 * r * a.n_blocks;
      float acc = 0.0f;
      for (int64_t b = 0; b < a.n_blocks; ++b) {
        int32_t isum = 0;
        for (int j = 0; j < 32; ++j) isum += blocks[b].qs[j] * q[b * 32 + j];
        acc += (F16ToF32(blocks[b].d) * ds[2 * b]) * static_cast<float>(isum);
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
      const float* ds = a.ds + 2 * r * a.n_blocks;
      float acc = 0.0f;
      for (int64_t b = 0; b < a.n_blocks; ++b) {
        int32_t isum = 0;
        for (int j = 0; j < 16; ++j) {
          isum += ((blocks[b].qs[j] & 0xF) - 8) * q[b * 32 + j];
          isum += ((blocks[b].qs[j] >> 4) - 8) * q[b * 32 + 16 + j];
        }
        acc += (F16ToF32(blocks[b].d) * ds[2 * b]) * static_cast<float>(isum);
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
      const float* ds = a.ds + 2 * r * a.n_blocks;
      float acc = 0.0f;
      for (int64_t b = 0; b < a.n_blocks; ++b) {
        int32_t isum = 0;
        for (int j = 0; j < 16; ++j) {
          isum += (blocks[b].qs[j] & 0xF) * q[b * 32 + j];
          isum += (blocks[b].qs[j] >> 4) * q[b * 32 + 16 + j];
        }
        // sum_j (dw*qw_j + m) * dx*qx_j = dw*dx*isum + m * (dx*sum(qx)).
        acc += (F16ToF32(blocks[b].d) * ds[2 * b]) * static_cast<float>(isum);
        acc += F16ToF32(blocks[b].m) * ds[2 * b + 1];
      }
      y[r * y_stride + o] = acc;
    }
  }
}

}  // namespace

void DequantizeRowForDot(DType t, const void* row, int64_t n, float* out) {
  // The one dequantizer of the engine (bit-exact with gguf.quants). QuantMatMul
  // validated the type and n already, so this cannot fail; zeros if it did.
  if (!DequantizeRow(t, row, static_cast<size_t>(n), out).ok()) {
    std::memset(out, 0, static_cast<size_t>(n) * sizeof(float));
  }
}

bool UsesQuantizedActs(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ4_1 || t == DType::kQ5_0 ||
         t == DType::kQ5_1 || t == DType::kIQ4_NL;
}

Kernel ScalarKernel(DType t) {
  switch (t) {
    case DType::kF32:
      return &GenericKernelT<DType::kF32>;
    case DType::kF16:
      return &GenericKernelT<DType::kF16>;
    case DType::kBF16:
      return &GenericKernelT<DType::kBF16>;
    case DType::kQ8_0:
      return &KernelQ8_0;
    case DType::kQ4_0:
      return &KernelQ4_0;
    case DType::kQ4_1:
      return &KernelQ4_1;
    default:
      return KQuantScalarKernel(t);
  }
}

}  // namespace qmm
}  // namespace llm
