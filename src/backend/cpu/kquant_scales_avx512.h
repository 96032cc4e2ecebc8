// Private to backend/cpu, for files compiled with the AVX-512 flags: Q4_K /
// Q5_K's 8 six-bit scales and 8 six-bit mins decoded with vector
// instructions, shared by the one-pair kernels (kquant_avx512.cpp) and the
// tiled VNNI kernel (kquant_tiled_avx512.cpp).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace llm {
namespace {  // internal linkage: each including file compiles its own copy

// The 12 scale bytes at `scales` (16 bytes are read: the 4 past them are the
// block's quants) as ggml's get_scale_min_k4 unpacks them, all 8 at once:
// bytes 0..7 of the result = sc[0..7], bytes 8..15 = m[0..7]. With the 12
// bytes as dwords a0, a1, a2:
//   scales = a0 & 0x3f.., (a2 & 0x0f..) | ((a0 >> 6) & 0x03..) << 4
//   mins   = a1 & 0x3f.., ((a2 >> 4) & 0x0f..) | ((a1 >> 6) & 0x03..) << 4
inline __m128i ScalesMinsK4(const uint8_t* scales) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales));
  const __m128i p = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)),
                                   _mm_set_epi32(4, 0, 0, 0));  // a0, a2, a1, a2 >> 4
  const __m128i lo6 =
      _mm_and_si128(p, _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
  const __m128i hi2 =
      _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 2),
                    _mm_set_epi32(0x30303030, 0, 0x30303030, 0));
  return _mm_or_si128(lo6, hi2);
}

}  // namespace
}  // namespace llm
