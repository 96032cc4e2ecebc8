// Private to backend/cpu, for files compiled with the AVX-512 flags: the
// unsigned codes of a Q4_K / Q5_K / Q6_K block as bytes in element order, 32
// at a time (quant_blocks.h has the formats), for the tile kernels that
// unpack blocks once per group (kquant_amx.cpp, kquant_tiled_avx512.cpp).
#pragma once

#include <immintrin.h>

#include "backend/cpu/quant_blocks.h"

namespace llm {
namespace {  // internal linkage: each including file compiles its own copy

// Q4_K / Q5_K chunk c (elements 64c .. 64c + 63): lo = the low nibbles of
// qs[32c ..] (sub-block 2c), hi = their high nibbles (2c + 1); Q5_K adds 16
// where bit 2c / 2c + 1 of qh[l] is set (values 0..15, Q5_K 0..31).
template <typename Block, bool kFifthBit>
inline void ChunkCodesK45(const Block& b, int c, __m256i* lo, __m256i* hi) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
  *lo = _mm256_and_si256(q, low4);
  *hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
  if constexpr (kFifthBit) {
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
    const __m256i one = _mm256_set1_epi8(1);
    *lo = _mm256_or_si256(
        *lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
    *hi = _mm256_or_si256(
        *hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
  }
}

// Q6_K half hf: codes[q] = elements 128hf + 32q .. + 31 (values 0..63; the
// weight is code - 32), from ql[64hf + l], ql[64hf + 32 + l] (low, high
// nibbles) and qh[32hf + l] bit pairs 0-1, 2-3, 4-5, 6-7.
inline void HalfCodesQ6K(const BlockQ6_K& b, int hf, __m256i codes[4]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), three = _mm256_set1_epi8(3);
  const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * hf));
  const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * hf + 32));
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * hf));
  auto high = [&](int shift) {  // bits shift, shift + 1 of qh, moved to bits 4-5
    return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), three), 4);
  };
  codes[0] = _mm256_or_si256(_mm256_and_si256(qa, low4), high(0));
  codes[1] = _mm256_or_si256(_mm256_and_si256(qb, low4), high(2));
  codes[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), low4), high(4));
  codes[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), low4), high(6));
}

}  // namespace
}  // namespace llm
