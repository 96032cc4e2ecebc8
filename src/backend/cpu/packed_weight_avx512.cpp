// The rows16 packing loop with AVX-512 gathers (packed_weight.h): one
// gather reads quant word k of a block for all 16 rows of a group, which is
// exactly one 64-byte vector of the copy, so the group is written front to
// back in whole vectors. Compiled with the AVX-512 flags (CMakeLists.txt);
// called only when that level is active.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/cpu/packed_weight.h"
#include "backend/cpu/transpose16x16_avx512.h"

// GCC 12 flags the intrinsics' own _mm512_undefined pass-through operands.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace llm {
namespace rows16 {

bool PackGroupAvx512(DType t, const uint8_t* const rows[kRows], int64_t n_blocks, size_t block_bytes,
                     size_t qs_offset, int words, size_t sc_offset, int scales, uint8_t flip,
                     uint8_t* qs, uint8_t* sc) {
  // Row offsets from rows[0] as gather indices: rows ascend (the last may
  // repeat), and must fit an int32 (15 rows of < 143 MB each).
  alignas(64) int32_t offsets[kRows];
  for (int l = 0; l < kRows; ++l) {
    const ptrdiff_t d = rows[l] - rows[0];
    if (d < 0 || d > INT32_MAX) return false;
    offsets[l] = static_cast<int32_t>(d);
  }
  const __m512i idx = _mm512_load_si512(offsets);
  const __m512i xor_mask = _mm512_set1_epi8(static_cast<char>(flip));
  const uint8_t* blk = rows[0];
  for (int64_t b = 0; b < n_blocks; ++b, blk += block_bytes) {
    for (int k = 0; k < words; ++k) {
      const __m512i v = _mm512_i32gather_epi32(idx, blk + qs_offset + 4 * k, 1);
      _mm512_storeu_si512(qs + 64 * WordSlot(t, k), _mm512_xor_si512(v, xor_mask));
    }
    qs += 64 * words;
    // f16 d (and m): the low halves of the dwords at sc_offset + 2s (4
    // bytes read, inside the block, which is at least 18 bytes), or, for a
    // scale at the block's end (Q6_K's d), the high halves of the dwords 2
    // bytes before it.
    for (int s = 0; s < scales; ++s) {
      const size_t at = sc_offset + 2 * s;
      const bool at_end = at + 4 > block_bytes;
      __m512i v = _mm512_i32gather_epi32(idx, blk + (at_end ? at - 2 : at), 1);
      if (at_end) v = _mm512_srli_epi32(v, 16);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(sc), _mm512_cvtepi32_epi16(v));
      sc += 32;
    }
  }
  return true;
}

void UnpackGroupAvx512(DType t, const uint8_t* group_qs, const uint8_t* group_sc, int64_t b0, int64_t len,
                       size_t block_bytes, size_t qs_offset, int words, size_t sc_offset,
                       int scales, uint8_t* dst) {
  // Per block, the words as [k][16 lanes]: 16 of them (one per k) are a
  // 16 x 16 dword matrix whose transpose holds 16 words of each lane, one
  // store per lane; the last words fewer than 16 (zeros beside them, only
  // theirs stored).
  for (int64_t b = b0; b < b0 + len; ++b) {
    const uint8_t* qs = group_qs + static_cast<size_t>(b) * words * 64;
    uint8_t* first = dst + static_cast<size_t>(b - b0) * block_bytes;
    for (int k0 = 0; k0 < words; k0 += 16) {
      const int n = words - k0 < 16 ? words - k0 : 16;
      __m512 v[kRows];
      for (int k = 0; k < 16; ++k) {
        v[k] = k < n ? _mm512_loadu_ps(reinterpret_cast<const float*>(qs + WordSlot(t, k0 + k) * 64))
                     : _mm512_setzero_ps();
      }
      Transpose16x16(v);  // v[l]: words k0 .. k0 + 15 of lane l
      const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
      for (int l = 0; l < kRows; ++l) {
        uint8_t* blk = first + static_cast<size_t>(l) * len * block_bytes;
        _mm512_mask_storeu_ps(reinterpret_cast<float*>(blk + qs_offset + 4 * k0), mask, v[l]);
      }
    }
    for (int s = 0; s < scales; ++s) {
      const uint16_t* halves =
          reinterpret_cast<const uint16_t*>(group_sc + (static_cast<size_t>(b) * scales + s) * 32);
      for (int l = 0; l < kRows; ++l) {
        uint8_t* blk = first + static_cast<size_t>(l) * len * block_bytes;
        std::memcpy(blk + sc_offset + 2 * s, halves + l, 2);
      }
    }
  }
}

}  // namespace rows16
}  // namespace llm
