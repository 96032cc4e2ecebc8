// The rows16 packing loop with AVX-512 gathers (packed_weight.h): one
// gather reads quant word k of a block for all 16 rows of a group, which is
// exactly one 64-byte vector of the copy, so the group is written front to
// back in whole vectors. Compiled with the AVX-512 flags (CMakeLists.txt);
// called only when that level is active.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "backend/cpu/packed_weight.h"

// GCC 12 flags the intrinsics' own _mm512_undefined pass-through operands.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace llm {
namespace rows16 {

bool PackGroupAvx512(const uint8_t* const rows[kRows], int64_t n_blocks, size_t block_bytes,
                     size_t qs_offset, int words, int scales, uint8_t flip, uint8_t* qs,
                     uint8_t* sc) {
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
      _mm512_storeu_si512(qs, _mm512_xor_si512(v, xor_mask));
      qs += 64;
    }
    // f16 d (and m): the low halves of the dwords at 2s (4 bytes read,
    // inside the block, which is at least 18 bytes).
    for (int s = 0; s < scales; ++s) {
      const __m512i v = _mm512_i32gather_epi32(idx, blk + 2 * s, 1);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(sc), _mm512_cvtepi32_epi16(v));
      sc += 32;
    }
  }
  return true;
}

}  // namespace rows16
}  // namespace llm
