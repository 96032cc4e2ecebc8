// Portable K-quant / Q5 / IQ4 kernels for QuantMatMul and the Q8_K activation
// quantizer (kquant_kernels.h). Compiled without ISA flags (no FMA
// contraction): the same bits on every CPU. Each kernel follows the float
// order of ggml-cpu's ggml_vec_dot_*_generic; the integer sums are exact.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/quant_blocks.h"
#include "core/half.h"

namespace llm {
namespace qmm {
namespace {

template <typename Block>
const Block* RowBlocks(const void* W, size_t row_bytes, int64_t o) {
  return reinterpret_cast<const Block*>(static_cast<const char*>(W) + o * row_bytes);
}

// Q4_K / Q5_K: the 8 six-bit scales and mins of a block.
void ScalesMinsK4(const uint8_t* packed, int* sc, int* m) {
  for (int j = 0; j < 8; ++j) {
    uint8_t s, mm;
    GetScaleMinK4(j, packed, &s, &mm);
    sc[j] = s;
    m[j] = mm;
  }
}

// Q3_K's 16 signed scales (-32..31).
void ScalesQ3K(const uint8_t* s, int* out) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = (low | (high << 4)) - 32;
  }
}

// Signed weight values w[256] of one K-quant block (the quant, before scales
// and mins) -- the aux8 array of ggml's generic kernels.
void ValuesQ2K(const BlockQ2_K& b, int* w) {
  for (int e = 0; e < 256; ++e)
    w[e] = (b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}
void ValuesQ3K(const BlockQ3_K& b, int* w) {
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    w[e] = ((b.qs[32 * h + l] >> (2 * k)) & 3) - (((b.hmask[l] >> (4 * h + k)) & 1) ? 0 : 4);
  }
}
void ValuesQ4K(const BlockQ4_K& b, int* w) {
  for (int e = 0; e < 256; ++e) {
    const uint8_t q = b.qs[32 * (e / 64) + e % 32];
    w[e] = (e % 64) < 32 ? (q & 0xF) : (q >> 4);
  }
}
void ValuesQ5K(const BlockQ5_K& b, int* w) {
  for (int e = 0; e < 256; ++e) {
    const uint8_t q = b.qs[32 * (e / 64) + e % 32];
    const int lo = (e % 64) < 32 ? (q & 0xF) : (q >> 4);
    w[e] = lo + (((b.qh[e % 32] >> (e / 32)) & 1) << 4);
  }
}
void ValuesQ6K(const BlockQ6_K& b, int* w) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    int* a = w + 128 * h;
    for (int l = 0; l < 32; ++l) {
      a[l] = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      a[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      a[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      a[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
    }
  }
}

// ggml's generic 8-lane integer accumulation: lane l sums scale(e) * w[e] *
// q[e] over the elements e with e % 8 == l (scale per 16 or 32 elements).
void Lanes8(const int* w, const int8_t* q, const int* scale, int sub_elems, int32_t* lanes) {
  for (int l = 0; l < 8; ++l) lanes[l] = 0;
  for (int e = 0; e < 256; ++e) lanes[e % 8] += scale[e / sub_elems] * (w[e] * q[e]);
}

template <DType T>
float DotK(const void* W, size_t row_bytes, int64_t o, const Acts& a, int64_t r) {
  const int8_t* q8 = a.kq + r * a.n_in;
  const float* kd = a.kd + r * a.n_kblocks;
  const int16_t* bsum = a.kbsum + r * a.n_kblocks * 16;
  float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float sumf = 0.0f;
  int w[256];
  int32_t lanes[8];
  for (int64_t i = 0; i < a.n_kblocks; ++i) {
    const int8_t* q = q8 + 256 * i;
    const int16_t* bs = bsum + 16 * i;
    const float yd = kd[i];
    if constexpr (T == DType::kQ2_K) {
      const BlockQ2_K& b = RowBlocks<BlockQ2_K>(W, row_bytes, o)[i];
      ValuesQ2K(b, w);
      int summs = 0, isum = 0;
      for (int j = 0; j < 16; ++j) summs += bs[j] * (b.scales[j] >> 4);
      for (int j = 0; j < 16; ++j) {
        int isuml = 0;
        for (int l = 0; l < 16; ++l) isuml += q[16 * j + l] * w[16 * j + l];
        isum += (b.scales[j] & 0xF) * isuml;
      }
      const float dall = yd * F16ToF32(b.d);
      const float dmin = yd * F16ToF32(b.dmin);
      sumf += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
    } else if constexpr (T == DType::kQ3_K) {
      const BlockQ3_K& b = RowBlocks<BlockQ3_K>(W, row_bytes, o)[i];
      ValuesQ3K(b, w);
      int sc[16];
      ScalesQ3K(b.scales, sc);
      Lanes8(w, q, sc, 16, lanes);
      const float d = F16ToF32(b.d) * yd;
      for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(lanes[l]);
    } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
      using Block = std::conditional_t<T == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
      const Block& b = RowBlocks<Block>(W, row_bytes, o)[i];
      if constexpr (T == DType::kQ4_K) {
        ValuesQ4K(b, w);
      } else {
        ValuesQ5K(b, w);
      }
      int sc[8], m[8];
      ScalesMinsK4(b.scales, sc, m);
      int sumi = 0;
      for (int j = 0; j < 16; ++j) sumi += bs[j] * m[j / 2];
      Lanes8(w, q, sc, 32, lanes);
      const float d = F16ToF32(b.d) * yd;
      for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(lanes[l]);
      const float dmin = F16ToF32(b.dmin) * yd;
      sumf -= dmin * static_cast<float>(sumi);
    } else if constexpr (T == DType::kQ6_K) {
      const BlockQ6_K& b = RowBlocks<BlockQ6_K>(W, row_bytes, o)[i];
      ValuesQ6K(b, w);
      int sc[16];
      for (int j = 0; j < 16; ++j) sc[j] = b.scales[j];
      Lanes8(w, q, sc, 16, lanes);
      const float d = F16ToF32(b.d) * yd;
      for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(lanes[l]);
    } else {  // IQ4_XS
      const BlockIQ4_XS& b = RowBlocks<BlockIQ4_XS>(W, row_bytes, o)[i];
      const float d4d8 = F16ToF32(b.d) * yd;
      for (int s = 0; s < 8; ++s) {
        const int ls =
            ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b.scales_h >> (2 * s)) & 3) << 4);
        const float dl = d4d8 * static_cast<float>(ls - 32);
        const uint8_t* qs = b.qs + 16 * s;
        int sumi1 = 0, sumi2 = 0;
        for (int j = 0; j < 16; ++j) {
          sumi1 += q[32 * s + j] * kIq4NlValues[qs[j] & 0xF];
          sumi2 += q[32 * s + 16 + j] * kIq4NlValues[qs[j] >> 4];
        }
        sumf += dl * static_cast<float>(sumi1 + sumi2);
      }
    }
  }
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

// llama.cpp's tiled order (kquant_kernels.h): per block the whole integer
// sums S1 (scales x dots) and S2 (mins x bsums), then three rounded steps.
// std::fma is exact here too (a libm call without FMA hardware).
template <DType T>
float DotKTiled(const void* W, size_t row_bytes, int64_t o, const Acts& a, int64_t r) {
  const int8_t* q8 = a.kq + r * a.n_in;
  const float* kd = a.kd + r * a.n_kblocks;
  const int16_t* bsum = a.kbsum + r * a.n_kblocks * 16;
  float acc = 0.0f;
  int w[256];
  // Sum of w[e] * q[e] over n elements from e0.
  auto dot = [&w](const int8_t* q, int e0, int n) {
    int32_t s = 0;
    for (int e = e0; e < e0 + n; ++e) s += w[e] * q[e];
    return s;
  };
  for (int64_t i = 0; i < a.n_kblocks; ++i) {
    const int8_t* q = q8 + 256 * i;
    const int16_t* bs = bsum + 16 * i;
    int32_t s1 = 0, s2 = 0;
    float dw = 0.0f, dmin = 0.0f;
    if constexpr (T == DType::kQ2_K) {
      const BlockQ2_K& b = RowBlocks<BlockQ2_K>(W, row_bytes, o)[i];
      ValuesQ2K(b, w);
      for (int j = 0; j < 16; ++j) {
        s1 += (b.scales[j] & 0xF) * dot(q, 16 * j, 16);
        s2 += (b.scales[j] >> 4) * bs[j];
      }
      dw = F16ToF32(b.d);
      dmin = F16ToF32(b.dmin);
    } else if constexpr (T == DType::kQ3_K) {
      const BlockQ3_K& b = RowBlocks<BlockQ3_K>(W, row_bytes, o)[i];
      ValuesQ3K(b, w);
      int sc[16];
      ScalesQ3K(b.scales, sc);
      for (int j = 0; j < 16; ++j) s1 += sc[j] * dot(q, 16 * j, 16);
      dw = F16ToF32(b.d);
    } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
      using Block = std::conditional_t<T == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
      const Block& b = RowBlocks<Block>(W, row_bytes, o)[i];
      if constexpr (T == DType::kQ4_K) {
        ValuesQ4K(b, w);
      } else {
        ValuesQ5K(b, w);
      }
      int sc[8], m[8];
      ScalesMinsK4(b.scales, sc, m);
      for (int j = 0; j < 8; ++j) s1 += sc[j] * dot(q, 32 * j, 32);
      for (int j = 0; j < 16; ++j) s2 += m[j / 2] * bs[j];
      dw = F16ToF32(b.d);
      dmin = F16ToF32(b.dmin);
    } else if constexpr (T == DType::kQ6_K) {
      const BlockQ6_K& b = RowBlocks<BlockQ6_K>(W, row_bytes, o)[i];
      ValuesQ6K(b, w);
      for (int j = 0; j < 16; ++j) s1 += b.scales[j] * dot(q, 16 * j, 16);
      dw = F16ToF32(b.d);
    } else {  // IQ4_XS
      const BlockIQ4_XS& b = RowBlocks<BlockIQ4_XS>(W, row_bytes, o)[i];
      for (int s = 0; s < 8; ++s) {
        for (int j = 0; j < 16; ++j) {
          w[32 * s + j] = kIq4NlValues[b.qs[16 * s + j] & 0xF];
          w[32 * s + 16 + j] = kIq4NlValues[b.qs[16 * s + j] >> 4];
        }
        const int ls =
            ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b.scales_h >> (2 * s)) & 3) << 4);
        s1 += (ls - 32) * dot(q, 32 * s, 32);
      }
      dw = F16ToF32(b.d);
    }
    float t = static_cast<float>(s1) * dw;
    if constexpr (T == DType::kQ2_K || T == DType::kQ4_K || T == DType::kQ5_K) {
      t = std::fma(-dmin, static_cast<float>(s2), t);
    }
    acc = std::fma(t, kd[i], acc);
  }
  return acc;
}

// Q5_0 / Q5_1 / IQ4_NL against the 32-block activations (q, ds).
template <DType T>
float Dot32(const void* W, size_t row_bytes, int64_t o, const Acts& a, int64_t r) {
  const int8_t* q8 = a.q + r * a.n_in;
  const float* ds = a.ds + 2 * r * a.n_blocks;
  float sumf = 0.0f;
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const int8_t* q = q8 + 32 * b;
    int sumi = 0;
    if constexpr (T == DType::kIQ4_NL) {
      const BlockIQ4_NL& blk = RowBlocks<BlockIQ4_NL>(W, row_bytes, o)[b];
      for (int j = 0; j < 16; ++j) {
        sumi += q[j] * kIq4NlValues[blk.qs[j] & 0xF];
        sumi += q[j + 16] * kIq4NlValues[blk.qs[j] >> 4];
      }
      const float d = ds[2 * b] * F16ToF32(blk.d);
      sumf += d * static_cast<float>(sumi);
    } else {
      using Block = std::conditional_t<T == DType::kQ5_0, BlockQ5_0, BlockQ5_1>;
      const Block& blk = RowBlocks<Block>(W, row_bytes, o)[b];
      uint32_t qh;
      std::memcpy(&qh, blk.qh, 4);
      const int offset = T == DType::kQ5_0 ? 16 : 0;
      for (int j = 0; j < 16; ++j) {
        const int lo = ((blk.qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1) << 4)) - offset;
        const int hi = ((blk.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4)) - offset;
        sumi += lo * q[j];
        sumi += hi * q[j + 16];
      }
      const float dd = F16ToF32(blk.d) * ds[2 * b];
      if constexpr (T == DType::kQ5_0) {
        sumf += dd * static_cast<float>(sumi);
      } else {
        sumf += dd * static_cast<float>(sumi) + F16ToF32(blk.m) * ds[2 * b + 1];
      }
    }
  }
  return sumf;
}

template <DType T>
void ScalarKernelT(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end, const Acts& a,
                   float* y, size_t y_stride, float* /*scratch*/) {
  for (int64_t o = o_begin; o < o_end; ++o) {
    for (int64_t r = 0; r < a.n_rows; ++r) {
      if constexpr (T == DType::kQ5_0 || T == DType::kQ5_1 || T == DType::kIQ4_NL) {
        y[r * y_stride + o] = Dot32<T>(W, row_bytes, o, a, r);
      } else if (KQuantTiled(a)) {
        y[r * y_stride + o] = DotKTiled<T>(W, row_bytes, o, a, r);
      } else {
        y[r * y_stride + o] = DotK<T>(W, row_bytes, o, a, r);
      }
    }
  }
}

// ggml's nearest_int: round half to even through the f32 mantissa (valid for
// |v| <= 2^22, which |iscale * x| <= 127 keeps).
int NearestInt(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

}  // namespace

void QuantizeRowQ8K(const float* x, int64_t n, int8_t* q, float* d, int16_t* bsum) {
  for (int64_t b = 0; b < n / 256; ++b, x += 256, q += 256, bsum += 16) {
    float amax = 0.0f, max = 0.0f;
    bool finite = true;
    for (int j = 0; j < 256; ++j) {
      if (!std::isfinite(x[j])) finite = false;
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (!finite || amax == 0.0f) {
      std::memset(q, 0, 256);
      std::memset(bsum, 0, 16 * sizeof(int16_t));
      d[b] = finite ? 0.0f : std::nanf("");
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < 256; ++j) {
      const float p = iscale * x[j];
      q[j] = static_cast<int8_t>(std::min(127, NearestInt(p)));
    }
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += q[16 * g + j];
      bsum[g] = static_cast<int16_t>(s);
    }
    d[b] = 1.0f / iscale;
  }
}

bool UsesQ8KActs(DType t) {
  switch (t) {
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

Kernel KQuantScalarKernel(DType t) {
  switch (t) {
    case DType::kQ2_K:
      return &ScalarKernelT<DType::kQ2_K>;
    case DType::kQ3_K:
      return &ScalarKernelT<DType::kQ3_K>;
    case DType::kQ4_K:
      return &ScalarKernelT<DType::kQ4_K>;
    case DType::kQ5_K:
      return &ScalarKernelT<DType::kQ5_K>;
    case DType::kQ6_K:
      return &ScalarKernelT<DType::kQ6_K>;
    case DType::kIQ4_XS:
      return &ScalarKernelT<DType::kIQ4_XS>;
    case DType::kQ5_0:
      return &ScalarKernelT<DType::kQ5_0>;
    case DType::kQ5_1:
      return &ScalarKernelT<DType::kQ5_1>;
    case DType::kIQ4_NL:
      return &ScalarKernelT<DType::kIQ4_NL>;
    default:
      return nullptr;
  }
}

}  // namespace qmm
}  // namespace llm
