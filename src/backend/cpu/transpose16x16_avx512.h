// Private to backend/cpu, for files compiled with the AVX-512 flags: the
// in-register transpose of a 16 x 16 f32 tile, for kernels whose
// accumulators hold one weight row across 16 activation rows (so that each
// activation row's 16 outputs become one store).
#pragma once

#include <immintrin.h>

namespace llm {
// Internal linkage: each including file has its own copy, compiled with
// that file's ISA flags (no shared inline definition across flag sets).
namespace {

// r[i][j] -> r[j][i] for a 16 x 16 f32 matrix held as 16 rows.
inline void Transpose16x16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int k = 0; k < 8; ++k) {  // lane L of t[2k]: r2k[4L], r2k+1[4L], r2k[4L+1], r2k+1[4L+1]
    t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 4; ++k) {  // lane L of u[4k + m]: element 4L + m of rows 4k .. 4k + 3
    u[4 * k] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
    u[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
    u[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
    u[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
  }
  for (int m = 0; m < 4; ++m) {  // column 4L + m = lane L of u[m], u[4 + m], u[8 + m], u[12 + m]
    const __m512 a0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88);
    const __m512 a1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xDD);
    const __m512 a2 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88);
    const __m512 a3 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xDD);
    r[m] = _mm512_shuffle_f32x4(a0, a2, 0x88);
    r[8 + m] = _mm512_shuffle_f32x4(a0, a2, 0xDD);
    r[4 + m] = _mm512_shuffle_f32x4(a1, a3, 0x88);
    r[12 + m] = _mm512_shuffle_f32x4(a1, a3, 0xDD);
  }
}

}  // namespace
}  // namespace llm
