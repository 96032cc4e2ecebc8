// GGML quantized block layouts, byte-exact with ggml-common.h / the gguf
// Python package (gguf/quants.py). One struct per block; a row of n elements
// of a quantized type is n / kBlockElems consecutive blocks with no padding.
// Scales are stored as IEEE half (uint16_t bits; convert with core/half.h).
//
// Shared by dequantization (backend/cpu/dequantize.*) and the quantized
// GEMV/GEMM kernels, so the layout lives in exactly one place.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace llm {

constexpr size_t kQK4_0 = 32;  // elements per Q4_0 block
constexpr size_t kQK4_1 = 32;
constexpr size_t kQK8_0 = 32;
constexpr size_t kQK8_1 = 32;
constexpr size_t kQK_K = 256;         // elements per K-quant super-block
constexpr size_t kKScaleSize = 12;    // packed 6-bit scales/mins of Q4_K/Q5_K

// Q4_0: x[i] = d * ((nibble) - 8). Element j < 16 is the low nibble of
// qs[j], element j + 16 the high nibble of qs[j].
struct BlockQ4_0 {
  uint16_t d;                // f16 scale
  uint8_t qs[kQK4_0 / 2];    // 4-bit quants
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must be 18 bytes");

// Q4_1: x[i] = d * nibble + m, same nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;                // f16 scale
  uint16_t m;                // f16 min
  uint8_t qs[kQK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 block must be 20 bytes");

// Q8_0: x[i] = d * qs[i].
struct BlockQ8_0 {
  uint16_t d;                // f16 scale
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes");

// Q8_1: x[i] = d * qs[i]; s = d * sum(qs) (used for activations against Q4_1).
struct BlockQ8_1 {
  uint16_t d;                // f16 scale
  uint16_t s;                // f16 d * sum(qs)
  int8_t qs[kQK8_1];
};
static_assert(sizeof(BlockQ8_1) == 36, "Q8_1 block must be 36 bytes");

// Q5_0: x[i] = d * (q - 16) with the 5-bit q = nibble | (bit i of qh) << 4;
// element j < 16 is the low nibble of qs[j], element j + 16 the high nibble.
struct BlockQ5_0 {
  uint16_t d;                // f16 scale
  uint8_t qh[4];             // 32 high bits, bit i for element i (little-endian u32)
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 block must be 22 bytes");

// Q5_1: x[i] = d * q + m, q as in Q5_0 (unsigned 0..31).
struct BlockQ5_1 {
  uint16_t d;                // f16 scale
  uint16_t m;                // f16 min
  uint8_t qh[4];
  uint8_t qs[kQK4_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24, "Q5_1 block must be 24 bytes");

// IQ4_NL: x[i] = d * kIq4NlValues[nibble], nibble order as Q4_0.
struct BlockIQ4_NL {
  uint16_t d;                // f16 scale
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18, "IQ4_NL block must be 18 bytes");

// The 16 non-linear levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// Q4_K: 256 elements in 8 sub-blocks of 32. Sub-block s has a 6-bit scale
// sc[s] and 6-bit min m[s] packed in `scales` (see GetScaleMinK4).
// For the 64-element chunk c (0..3): elements c*64 + l (l < 32) are the low
// nibbles of qs[c*32 + l] with sub-block 2c; elements c*64 + 32 + l are the high
// nibbles with sub-block 2c+1. x = d*sc*q - dmin*m.
struct BlockQ4_K {
  uint16_t d;                    // f16 super-block scale for the scales
  uint16_t dmin;                 // f16 super-block scale for the mins
  uint8_t scales[kKScaleSize];   // 8 scales + 8 mins, 6 bits each
  uint8_t qs[kQK_K / 2];         // 4-bit quants
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block must be 144 bytes");

// Q2_K: 256 elements in 16 sub-blocks of 16. scales[s]: low nibble = 4-bit
// scale, high nibble = 4-bit min of sub-block s. For half h (128 elements)
// and shift step k (0..3): elements 128h + 32k + l (l < 32) are bits 2k..2k+1
// of qs[32h + l]. x = (d * sc) * q - (dmin * m).
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;                // f16 super-block scale for the scales
  uint16_t dmin;             // f16 super-block scale for the mins
};
static_assert(sizeof(BlockQ2_K) == 84, "Q2_K block must be 84 bytes");

// Q3_K: 256 elements in 16 sub-blocks of 16 with signed 6-bit scales (stored
// + 32, packed in `scales`: low 4 bits in the nibbles of bytes 0-7 -- byte j
// low nibble for sub-block j, high nibble for j + 8 -- and the top 2 bits at
// bits 2(s/4) of byte 8 + s%4). Quants as Q2_K's 2 bits, minus 4 where the
// element's hmask bit is clear: element 128h + 32k + l uses bit (4h + k) of
// hmask[l]. x = (d * (sc - 32)) * q.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110, "Q3_K block must be 110 bytes");

// Q6_K: 256 elements in 16 sub-blocks of 16, each with an int8 scale.
// For half h (0..1, 128 elements each) and l < 32, with ql = ql + 64h,
// qh = qh + 32h, sc = scales + 8h, y = out + 128h:
//   q1 = (ql[l]      & 0xF) | ((qh[l] >> 0 & 3) << 4) - 32  -> y[l]      scale sc[l/16]
//   q2 = (ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4) - 32  -> y[l + 32] scale sc[l/16 + 2]
//   q3 = (ql[l]      >> 4)  | ((qh[l] >> 4 & 3) << 4) - 32  -> y[l + 64] scale sc[l/16 + 4]
//   q4 = (ql[l + 32] >> 4)  | ((qh[l] >> 6 & 3) << 4) - 32  -> y[l + 96] scale sc[l/16 + 6]
// x = d * sc * q.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];     // low 4 bits
  uint8_t qh[kQK_K / 4];     // high 2 bits
  int8_t scales[kQK_K / 16]; // 8-bit sub-block scales
  uint16_t d;                // f16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block must be 210 bytes");

// Q5_K: Q4_K plus a fifth bit: element 64c + l (low nibble of qs[32c + l])
// adds 16 if bit 2c of qh[l] is set, element 64c + 32 + l (high nibble) if bit
// 2c + 1 is. x = (d * sc) * q - (dmin * m).
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block must be 176 bytes");

// IQ4_XS: 256 elements in 8 sub-blocks of 32 (each laid out as one IQ4_NL
// block's nibbles in qs[16 s .. 16 s + 15]) with 6-bit signed scales (stored
// + 32): low 4 bits = nibble s % 2 of scales_l[s / 2], top 2 bits = bits
// 2s..2s+1 of scales_h. x = (d * (ls - 32)) * kIq4NlValues[nibble].
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136, "IQ4_XS block must be 136 bytes");

// Q8_K: activation format for K-quant dot products. d is a float (not f16);
// bsums[g] = sum of qs[16g .. 16g+15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "Q8_K block must be 292 bytes");

// Unpack the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block
// (ggml's get_scale_min_k4). Bytes 0-3: low 6 bits of scales 0-3; bytes 4-7:
// low 6 bits of mins 0-3; bytes 8-11: low nibble = low 4 bits of scale 4-7,
// high nibble = low 4 bits of min 4-7; their top 2 bits sit in the top 2 bits
// of bytes 0-3 (scales) and 4-7 (mins).
inline void GetScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The GGUF block of a type with Q8_K activations (the K-quants, IQ4_XS), for
// kernels templated on the type.
template <DType T>
struct KBlockOf;
template <>
struct KBlockOf<DType::kQ2_K> {
  using type = BlockQ2_K;
};
template <>
struct KBlockOf<DType::kQ3_K> {
  using type = BlockQ3_K;
};
template <>
struct KBlockOf<DType::kQ4_K> {
  using type = BlockQ4_K;
};
template <>
struct KBlockOf<DType::kQ5_K> {
  using type = BlockQ5_K;
};
template <>
struct KBlockOf<DType::kQ6_K> {
  using type = BlockQ6_K;
};
template <>
struct KBlockOf<DType::kIQ4_XS> {
  using type = BlockIQ4_XS;
};

}  // namespace llm
