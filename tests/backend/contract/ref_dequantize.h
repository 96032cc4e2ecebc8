// float64 dequantization of GGUF rows: the weight oracle of the backend
// contract suite. Written from the GGML block formulas directly (no code
// shared with backend/cpu), evaluated in double, so a reader can check it
// against ggml-common.h at a glance. Checked against the gguf package's
// goldens (tests/data/dequant) by ref_dequantize_test.cpp.
//
// scale (optional) receives, per element, the magnitude of the terms the
// element is made of (|d*sc*q| + |dmin*m| for Q4_K, ...): a float32
// implementation that rounds each term is within a few ulps of it.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/half.h"

namespace llm {
namespace contract {

inline double RefHalf(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return static_cast<double>(F16ToF32(h));  // f16 -> f32 is exact
}

// The types the suite covers; RefDequantizeRow returns false for others.
inline bool RefDequantizeSupports(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ8_0:
    case DType::kQ4_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

// Dequantizes n elements of `type` at src into out[0..n) (double).
inline bool RefDequantizeRow(DType type, const uint8_t* src, int64_t n, double* out,
                             double* scale = nullptr) {
  auto put = [&](int64_t i, double v, double s) {
    out[i] = v;
    if (scale != nullptr) scale[i] = s;
  };
  switch (type) {
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, src + 4 * i, 4);
        put(i, f, std::fabs(f));
      }
      return true;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const double v = RefHalf(src + 2 * i);
        put(i, v, std::fabs(v));
      }
      return true;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, src + 2 * i, 2);
        const uint32_t u = static_cast<uint32_t>(b) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        put(i, f, std::fabs(f));
      }
      return true;
    case DType::kQ4_0:  // {f16 d; u8 qs[16]}: x = d * (nibble - 8)
      if (n % 32 != 0) return false;
      for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* blk = src + b * 18;
        const double d = RefHalf(blk);
        for (int j = 0; j < 16; ++j) {
          const double lo = d * ((blk[2 + j] & 0xF) - 8), hi = d * ((blk[2 + j] >> 4) - 8);
          put(b * 32 + j, lo, std::fabs(lo));
          put(b * 32 + j + 16, hi, std::fabs(hi));
        }
      }
      return true;
    case DType::kQ4_1:  // {f16 d; f16 m; u8 qs[16]}: x = d * nibble + m
      if (n % 32 != 0) return false;
      for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* blk = src + b * 20;
        const double d = RefHalf(blk), m = RefHalf(blk + 2);
        for (int j = 0; j < 16; ++j) {
          const double qlo = blk[4 + j] & 0xF, qhi = blk[4 + j] >> 4;
          put(b * 32 + j, d * qlo + m, std::fabs(d * qlo) + std::fabs(m));
          put(b * 32 + j + 16, d * qhi + m, std::fabs(d * qhi) + std::fabs(m));
        }
      }
      return true;
    case DType::kQ8_0:  // {f16 d; i8 qs[32]}: x = d * q
      if (n % 32 != 0) return false;
      for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* blk = src + b * 34;
        const double d = RefHalf(blk);
        for (int j = 0; j < 32; ++j) {
          const double v = d * static_cast<int8_t>(blk[2 + j]);
          put(b * 32 + j, v, std::fabs(v));
        }
      }
      return true;
    case DType::kQ4_K: {  // {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]}
      if (n % 256 != 0) return false;
      for (int64_t b = 0; b < n / 256; ++b) {
        const uint8_t* blk = src + b * 144;
        const double d = RefHalf(blk), dmin = RefHalf(blk + 2);
        const uint8_t* sc = blk + 4;
        const uint8_t* qs = blk + 16;
        // 6-bit scale and min of sub-block s (ggml's get_scale_min_k4).
        auto scale_min = [&](int s, int* scv, int* mv) {
          if (s < 4) {
            *scv = sc[s] & 63;
            *mv = sc[s + 4] & 63;
          } else {
            *scv = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
            *mv = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
          }
        };
        for (int c = 0; c < 4; ++c) {  // 64-element chunks: low nibbles, then high
          int s1, m1, s2, m2;
          scale_min(2 * c, &s1, &m1);
          scale_min(2 * c + 1, &s2, &m2);
          for (int l = 0; l < 32; ++l) {
            const double a = d * s1 * (qs[c * 32 + l] & 0xF), am = dmin * m1;
            const double h = d * s2 * (qs[c * 32 + l] >> 4), hm = dmin * m2;
            put(b * 256 + c * 64 + l, a - am, std::fabs(a) + std::fabs(am));
            put(b * 256 + c * 64 + 32 + l, h - hm, std::fabs(h) + std::fabs(hm));
          }
        }
      }
      return true;
    }
    case DType::kQ6_K: {  // {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}
      if (n % 256 != 0) return false;
      for (int64_t b = 0; b < n / 256; ++b) {
        const uint8_t* blk = src + b * 210;
        const double d = RefHalf(blk + 208);
        for (int half = 0; half < 2; ++half) {
          const uint8_t* ql = blk + 64 * half;
          const uint8_t* qh = blk + 128 + 32 * half;
          const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * half);
          const int64_t y = b * 256 + 128 * half;
          for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            const double v1 = d * sc[is] * q1, v2 = d * sc[is + 2] * q2;
            const double v3 = d * sc[is + 4] * q3, v4 = d * sc[is + 6] * q4;
            put(y + l, v1, std::fabs(v1));
            put(y + l + 32, v2, std::fabs(v2));
            put(y + l + 64, v3, std::fabs(v3));
            put(y + l + 96, v4, std::fabs(v4));
          }
        }
      }
      return true;
    }
    default:
      return false;
  }
}

}  // namespace contract
}  // namespace llm
