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
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ5_K:
    case DType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

// ggml's kvalues_iq4nl: the 16 levels of IQ4_NL / IQ4_XS.
inline constexpr int kRefIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

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
    case DType::kQ5_0:    // {f16 d; u8 qh[4]; u8 qs[16]}: x = d * (q5 - 16)
    case DType::kQ5_1: {  // {f16 d; f16 m; u8 qh[4]; u8 qs[16]}: x = d * q5 + m
      if (n % 32 != 0) return false;
      const bool has_min = type == DType::kQ5_1;
      const int bytes = has_min ? 24 : 22;
      for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* blk = src + b * bytes;
        const double d = RefHalf(blk), m = has_min ? RefHalf(blk + 2) : 0.0;
        const uint8_t* qh = blk + (has_min ? 4 : 2);
        const uint8_t* qs = qh + 4;
        for (int j = 0; j < 32; ++j) {  // element j: nibble j % 16 (low, then high), bit j of qh
          const int nib = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
          const int q = nib | (((qh[j / 8] >> (j % 8)) & 1) << 4);
          const double v = has_min ? d * q + m : d * (q - 16);
          put(b * 32 + j, v, has_min ? std::fabs(d * q) + std::fabs(m) : std::fabs(v));
        }
      }
      return true;
    }
    case DType::kIQ4_NL:  // {f16 d; u8 qs[16]}: x = d * kvalues[nibble]
      if (n % 32 != 0) return false;
      for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* blk = src + b * 18;
        const double d = RefHalf(blk);
        for (int j = 0; j < 32; ++j) {
          const int nib = j < 16 ? (blk[2 + j] & 0xF) : (blk[2 + j - 16] >> 4);
          const double v = d * kRefIq4Values[nib];
          put(b * 32 + j, v, std::fabs(v));
        }
      }
      return true;
    case DType::kQ2_K: {  // {u8 scales[16]; u8 qs[64]; f16 d; f16 dmin}
      if (n % 256 != 0) return false;
      for (int64_t b = 0; b < n / 256; ++b) {
        const uint8_t* blk = src + b * 84;
        const double d = RefHalf(blk + 80), dmin = RefHalf(blk + 82);
        for (int e = 0; e < 256; ++e) {  // 2 bits at 2 * ((e % 128) / 32) of qs[32 (e / 128) + e % 32]
          const int q = (blk[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
          const uint8_t sc = blk[e / 16];
          const double a = d * (sc & 0xF) * q, am = dmin * (sc >> 4);
          put(b * 256 + e, a - am, std::fabs(a) + std::fabs(am));
        }
      }
      return true;
    }
    case DType::kQ3_K: {  // {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}
      if (n % 256 != 0) return false;
      for (int64_t b = 0; b < n / 256; ++b) {
        const uint8_t* blk = src + b * 110;
        const uint8_t* hm = blk;
        const uint8_t* qs = blk + 32;
        const uint8_t* sc = blk + 96;
        const double d = RefHalf(blk + 108);
        for (int e = 0; e < 256; ++e) {
          const int h = e / 128, k = (e % 128) / 32, l = e % 32, s16 = e / 16;
          const int q = ((qs[32 * h + l] >> (2 * k)) & 3) - (((hm[l] >> (4 * h + k)) & 1) ? 0 : 4);
          // 6-bit scale: low 4 bits from a nibble of bytes 0..7, top 2 from bytes 8..11.
          const int low = s16 < 8 ? (sc[s16] & 0xF) : (sc[s16 - 8] >> 4);
          const int high = (sc[8 + s16 % 4] >> (2 * (s16 / 4))) & 3;
          const double v = d * ((low | (high << 4)) - 32) * q;
          put(b * 256 + e, v, std::fabs(v));
        }
      }
      return true;
    }
    case DType::kQ5_K: {  // {f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}
      if (n % 256 != 0) return false;
      for (int64_t b = 0; b < n / 256; ++b) {
        const uint8_t* blk = src + b * 176;
        const double d = RefHalf(blk), dmin = RefHalf(blk + 2);
        const uint8_t* sc = blk + 4;
        const uint8_t* qh = blk + 16;
        const uint8_t* qs = blk + 48;
        for (int e = 0; e < 256; ++e) {
          const int s = e / 32;  // sub-block: scale and min as Q4_K's
          int scv, mv;
          if (s < 4) {
            scv = sc[s] & 63;
            mv = sc[s + 4] & 63;
          } else {
            scv = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
            mv = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
          }
          const uint8_t byte = qs[32 * (e / 64) + e % 32];
          const int q = ((e % 64) < 32 ? (byte & 0xF) : (byte >> 4)) + (((qh[e % 32] >> s) & 1) << 4);
          const double a = d * scv * q, am = dmin * mv;
          put(b * 256 + e, a - am, std::fabs(a) + std::fabs(am));
        }
      }
      return true;
    }
    case DType::kIQ4_XS: {  // {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}
      if (n % 256 != 0) return false;
      for (int64_t b = 0; b < n / 256; ++b) {
        const uint8_t* blk = src + b * 136;
        const double d = RefHalf(blk);
        const int scales_h = blk[2] | (blk[3] << 8);
        for (int e = 0; e < 256; ++e) {
          const int s = e / 32, j = e % 32;
          const int ls = ((blk[4 + s / 2] >> (4 * (s % 2))) & 0xF) | (((scales_h >> (2 * s)) & 3) << 4);
          const uint8_t byte = blk[8 + 16 * s + j % 16];
          const double v = d * (ls - 32) * kRefIq4Values[j < 16 ? (byte & 0xF) : (byte >> 4)];
          put(b * 256 + e, v, std::fabs(v));
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
