// Private to backend/cpu, for files compiled with the AVX-512 flags only: one
// block of a rows16 group (packed_weight.h) as the 8 vpdpbusd operands of its
// 32 elements, shared by the kernels on that layout.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "core/dtype.h"

namespace llm {
namespace rows16 {

// 32-bit quant words per block and lane (rows16::Words), at compile time.
template <DType T>
constexpr int kWordsOf = T == DType::kQ8_0   ? 8
                         : T == DType::kQ5_0 ? 5
                                             : 4;

// The 8 vectors of block b of a group's quants qs ([nb][words][16] u32):
// w[g] lane l = elements 4g .. 4g + 3 of the group's row l as u8 (Q4_0 / Q4_1:
// the nibble; Q5_0: the value 0..31; Q8_0: w + 128), the u8 operand of
// vpdpbusd against those 4 activations.
template <DType T>
inline void LoadWords(const uint8_t* qs, int64_t b, __m512i w[8]) {
  if constexpr (T == DType::kQ8_0) {
    const uint8_t* p = qs + b * 8 * 64;
    for (int k = 0; k < 8; ++k) w[k] = _mm512_loadu_si512(p + 64 * k);
  } else if constexpr (T == DType::kQ5_0) {
    // Word 0: the fifth bits, byte j of lane l holding element 4k + j's at
    // bit k and element 16 + 4k + j's at bit 4 + k; each goes to bit 4 of
    // its element's byte (the values 0..31; the bias subtracts 16).
    const uint8_t* p = qs + b * 5 * 64;
    const __m512i h = _mm512_loadu_si512(p);
    const __m512i low4 = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i v = _mm512_loadu_si512(p + 64 * (k + 1));
      const __m512i h_low = _mm512_and_si512(_mm512_slli_epi32(h, 4 - k), bit4);
      const __m512i h_high = _mm512_and_si512(_mm512_srli_epi32(h, k), bit4);
      // (v & 0x0F) | h_low, and ((v >> 4) & 0x0F) | h_high: ternary logic
      // A & B | C with A = v (or v >> 4), B = 0x0F, C = the fifth bits.
      w[k] = _mm512_ternarylogic_epi32(v, low4, h_low, 0xEA);
      w[4 + k] = _mm512_ternarylogic_epi32(_mm512_srli_epi32(v, 4), low4, h_high, 0xEA);
    }
  } else {
    // Word k's low nibbles are elements 4k .. 4k + 3, its high nibbles
    // 16 + 4k .. 16 + 4k + 3.
    const uint8_t* p = qs + b * 4 * 64;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int k = 0; k < 4; ++k) {
      const __m512i v = _mm512_loadu_si512(p + 64 * k);
      w[k] = _mm512_and_si512(v, low4);
      w[4 + k] = _mm512_and_si512(_mm512_srli_epi32(v, 4), low4);
    }
  }
}

}  // namespace rows16
}  // namespace llm
