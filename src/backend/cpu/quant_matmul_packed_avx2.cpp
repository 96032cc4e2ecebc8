// AVX2 QuantMatMul kernel on weights repacked at load (packed_weight.h,
// "rows16": 16 weight rows interleaved per 32-bit lane), for one activation
// row (decode) and for batches, in ggml's vec_dot order: Q4_1 and Q5_0, whose
// outputs must equal llama.cpp's bit for bit -- the AVX-512 rows16 kernel's
// arithmetic (quant_matmul_packed_avx512.cpp) with 8 lanes:
//   per weight row o and activation row a, 8 f32 lane accumulators L_g
//   (g = 0..7: elements 4g .. 4g + 3 of every 32-block), each
//     L_g = fma(f32(dw[b]) * f32(da[b]), f32(sum of the 4 products), L_g)
//   over the blocks b in order, then hsum_float_8's adds ((L0 + L4) + (L2 +
//   L6)) + ((L1 + L5) + (L3 + L7)), and for Q4_1 the separate min-term chain
//   fma(mw[b], sa[b], .) added last.
// Lane l of a register belongs to weight row o + 8h + l (half h of the
// group): one vpmaddubsw + vpmaddwd gives lane g's integer sum for 8 rows
// against the activation's 4 bytes broadcast. Q5_0's weights enter unsigned
// (the value 0..31) and its sums start at -16 * (sum of the 4 activations)
// (Acts::bias). Before, this level ran the GGUF rows one weight row at a
// time (Q4_1: quant_matmul_simd.inc, Q5_0: kquant_avx2.cpp's Kernel32):
// per 4 products a vpmaddubsw, a vpmaddwd, a conversion and an fma here serve
// 8 weight rows, and one decode row streams the copy with prefetches.
// Batches (kOpsMinRows+ activation rows) unpack each chunk of a group's
// words once into scratch (the 8 u8 operands per block and half) instead of
// per activation row.
// No std:: templates or shared inline helpers here (ISA-flagged code: a weak
// symbol from this file could be linked in for every CPU).
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/packed_weight.h"
#include "backend/cpu/quant_matmul_kernels.h"

namespace llm {
namespace {

constexpr int kGroupRows = rows16::kRows;
constexpr int kHalfRows = 8;
constexpr int kLaneGroups = 8;  // 4-element lanes g of a 32-block
constexpr int64_t kChunkBlocks = qmm::kAvx2PackedChunkBlocks;
constexpr int kSaved = kLaneGroups + 1;  // accumulator vectors per row and half between chunks
constexpr int64_t kOpsMinRows = 2;
// Decode prefetch distance, as the AVX-512 rows16 kernel's (times
// DecodePrefetchScale(), cpu_features.h).
constexpr int64_t kPrefetchBytes = 4096;

template <DType T>
constexpr int kWordsOf = T == DType::kQ5_0 ? 5 : 4;
template <DType T>
constexpr int kScalesOf = T == DType::kQ4_1 ? 2 : 1;

// Lane group k (elements 4k .. 4k + 3) of block j's half h of a group's
// quants qs ([blocks][words][16] u32) for its 8 rows, as u8: Q4_1 the nibble,
// Q5_0 the value 0..31 (word 0 holds the fifth bits, byte j of a lane
// element 4k' + j's at bit k' and element 16 + 4k' + j's at bit 4 + k';
// packed_weight.h).
template <DType T>
inline __m256i HalfOperand(const uint8_t* qs, int64_t j, int h, int k) {
  constexpr int kWords = kWordsOf<T>;
  const uint8_t* p = qs + j * kWords * 64 + 32 * h;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  if constexpr (T == DType::kQ5_0) {
    const int kk = k & 3;
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * (kk + 1)));
    const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    if (k < 4) {
      return _mm256_or_si256(
          _mm256_and_si256(v, low4),
          _mm256_and_si256(_mm256_sll_epi32(hb, _mm_cvtsi32_si128(4 - kk)), bit4));
    }
    return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(v, 4), low4),
                           _mm256_and_si256(_mm256_srl_epi32(hb, _mm_cvtsi32_si128(kk)), bit4));
  } else {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * (k & 3)));
    return k < 4 ? _mm256_and_si256(v, low4) : _mm256_and_si256(_mm256_srli_epi32(v, 4), low4);
  }
}

struct Chunk {
  const uint8_t* qs = nullptr;   // the group's quants [nb][words][16] u32
  const uint8_t* sc = nullptr;   // the group's scales [nb][scales][16] f16
  const uint8_t* ops = nullptr;  // batches: [len][8][16] u8x4 of blocks b0 .. b1 - 1
  int64_t b0 = 0, b1 = 0;
  bool first = true, last = true;
  int n = 16;                // live weight rows of the group
  float* acc_buf = nullptr;  // [row][half][kSaved][8] f32
};

// One activation row against half h of the group over the chunk's blocks.
template <DType T, bool kOps>
void HalfRow(const Chunk& c, const qmm::Acts& a, int64_t row, int h, int64_t o, float* y,
             size_t y_stride) {
  const int64_t nb = a.n_blocks;
  float* saved = c.acc_buf + (row * 2 + h) * kSaved * 8;
  __m256 acc[kLaneGroups];
  __m256 accm = c.first ? _mm256_setzero_ps() : _mm256_load_ps(saved + kLaneGroups * 8);
  for (int k = 0; k < kLaneGroups; ++k) {
    acc[k] = c.first ? _mm256_setzero_ps() : _mm256_load_ps(saved + k * 8);
  }
  const __m256i ones16 = _mm256_set1_epi16(1);
  const int64_t prefetch_bytes = kOps ? 0 : kPrefetchBytes * DecodePrefetchScale();
  for (int64_t b = c.b0; b < c.b1; ++b) {
    if (!kOps && h == 0 && a.n_rows == 1) {
      // One activation row reads each weight byte once, from memory: half 0
      // touches every line of the block, half 1 finds the chunk in cache.
      // c.qs is the group's start; a prefetch never faults.
      rows16::PrefetchBlockShare(c.qs, b, rows16::BlockShareBytes(T), prefetch_bytes);
    }
    const uint8_t* sc = c.sc + b * kScalesOf<T> * 32 + 16 * h;
    const float* ds = a.ds + 2 * (row * nb + b);
    const __m256 scale =
        _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc))),
                      _mm256_set1_ps(ds[0]));
    if constexpr (T == DType::kQ4_1) {
      const __m256 wm = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + 32)));
      accm = _mm256_fmadd_ps(wm, _mm256_set1_ps(ds[1]), accm);
    }
    const int8_t* xq = a.q + row * a.n_in + b * qmm::kActBlock;
    const int32_t* bias = T == DType::kQ4_1 ? nullptr : a.bias + row * (a.n_in / 4) + b * 8;
#pragma GCC unroll 8
    for (int k = 0; k < kLaneGroups; ++k) {
      const __m256i w = kOps ? _mm256_load_si256(reinterpret_cast<const __m256i*>(
                                   c.ops + ((b - c.b0) * kLaneGroups + k) * 64 + 32 * h))
                             : HalfOperand<T>(c.qs, b, h, k);
      int32_t x4;
      __builtin_memcpy(&x4, xq + 4 * k, 4);
      __m256i isum = _mm256_madd_epi16(_mm256_maddubs_epi16(w, _mm256_set1_epi32(x4)), ones16);
      if constexpr (T == DType::kQ5_0) isum = _mm256_add_epi32(isum, _mm256_set1_epi32(bias[k]));
      acc[k] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(isum), acc[k]);
    }
  }
  if (!c.last) {
    for (int k = 0; k < kLaneGroups; ++k) _mm256_store_ps(saved + k * 8, acc[k]);
    _mm256_store_ps(saved + kLaneGroups * 8, accm);
    return;
  }
  const __m256 s0 = _mm256_add_ps(acc[0], acc[4]), s1 = _mm256_add_ps(acc[1], acc[5]);
  const __m256 s2 = _mm256_add_ps(acc[2], acc[6]), s3 = _mm256_add_ps(acc[3], acc[7]);
  __m256 total = _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3));
  if constexpr (T == DType::kQ4_1) total = _mm256_add_ps(total, accm);
  const int live = c.n - kHalfRows * h;
  float* out = y + row * y_stride + o + kHalfRows * h;
  if (live >= kHalfRows) {
    _mm256_storeu_ps(out, total);
  } else {
    _mm256_maskstore_ps(
        out, _mm256_cmpgt_epi32(_mm256_set1_epi32(live), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
        total);
  }
}

// W: the rows16 copy (packed_weight.h) of an n_out x n_in matrix; o_begin is
// a multiple of 16 (QuantMatMul's tasks are whole groups). row_bytes (the
// GGUF rows', which may be padded) is not used: the copy is dense.
// scratch: qmm::ScratchFloats floats.
template <DType T>
void PackedKernel(const void* W, size_t /*row_bytes*/, int64_t o_begin, int64_t o_end,
                  const qmm::Acts& a, float* y, size_t y_stride, float* scratch) {
  const int64_t nb = a.n_blocks;
  constexpr int kWords = kWordsOf<T>;
  const size_t qs_bytes = static_cast<size_t>(nb) * kGroupRows * 4 * kWords;
  const size_t group_bytes = rows16::GroupBytes(T, nb);
  // scratch, 64-byte aligned: the chunk's operands (batches), then the
  // accumulators of every activation row between chunks.
  uint8_t* base =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  uint8_t* ops = base;
  static_assert(qmm::kAvx2PackedOpsFloats * 4 >= kChunkBlocks * kLaneGroups * 64,
                "kAvx2PackedOpsFloats too small");
  static_assert(qmm::kPackedScratchPerRow >= 2 * kSaved * 8, "kPackedScratchPerRow too small");
  Chunk c;
  c.ops = ops;
  c.acc_buf = reinterpret_cast<float*>(ops) + qmm::kAvx2PackedOpsFloats;
  const bool batch = a.n_rows >= kOpsMinRows;
  const int64_t chunk_blocks = batch ? kChunkBlocks : nb;
  for (int64_t o = o_begin; o < o_end; o += kGroupRows) {
    c.qs = static_cast<const uint8_t*>(W) + (o / kGroupRows) * group_bytes;
    c.sc = c.qs + qs_bytes;
    c.n = o_end - o < kGroupRows ? static_cast<int>(o_end - o) : kGroupRows;
    for (int64_t b0 = 0; b0 < nb; b0 += chunk_blocks) {
      c.b0 = b0;
      c.b1 = nb - b0 < chunk_blocks ? nb : b0 + chunk_blocks;
      c.first = b0 == 0;
      c.last = c.b1 == nb;
      if (batch) {
        for (int64_t b = c.b0; b < c.b1; ++b) {
          for (int h = 0; h < 2; ++h) {
            for (int k = 0; k < kLaneGroups; ++k) {
              _mm256_store_si256(
                  reinterpret_cast<__m256i*>(ops + ((b - c.b0) * kLaneGroups + k) * 64 + 32 * h),
                  HalfOperand<T>(c.qs, b, h, k));
            }
          }
        }
      }
      for (int64_t r = 0; r < a.n_rows; ++r) {
        for (int h = 0; h < 2 && kHalfRows * h < c.n; ++h) {
          if (batch) {
            HalfRow<T, true>(c, a, r, h, o, y, y_stride);
          } else {
            HalfRow<T, false>(c, a, r, h, o, y, y_stride);
          }
        }
      }
    }
  }
}

}  // namespace

namespace qmm {
Kernel Avx2PackedKernel(DType t) {
  switch (t) {
    case DType::kQ4_1:
      return &PackedKernel<DType::kQ4_1>;
    case DType::kQ5_0:
      return &PackedKernel<DType::kQ5_0>;
    default:
      return nullptr;
  }
}
}  // namespace qmm
}  // namespace llm
