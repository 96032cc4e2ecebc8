// Private to backend/cpu: the per-ISA kernels behind QuantMatMul
// (quant_matmul.cpp validates, quantizes activations, dispatches, threads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace llm {
namespace qmm {

// Block of activation quantization: 32 elements (the Q4_0/Q4_1/Q8_0 block).
constexpr int64_t kActBlock = 32;

// Activations as the kernels see them. Always: x (f32) rows. For the 8-bit
// types additionally the per-row quantized copy (same for every SIMD level):
//   q    [n_rows][n_in]           int8, q = round-half-even(x * (127 / max|x|))
//   ds   [n_rows][n_blocks][2]    f32 pairs (d, s) per 32-block, as ggml
//        stores them: d = f16(max|x| / 127) (the scale), s = f16(d' * sum(q))
//        with d' the unrounded f32 scale (for Q4_1's min term); kernels use
//        these values as they are. Interleaved so one load gives both,
//        matching Q4_1's (d, m) pair.
struct Acts {
  const float* x = nullptr;
  size_t x_stride = 0;
  int64_t n_rows = 0;
  int64_t n_in = 0;
  const int8_t* q = nullptr;
  const float* ds = nullptr;
  int64_t n_blocks = 0;
  // The rows16 vec_dot kernel's integer-sum starts for Q5_0 (null for the
  // other kernels, see SetBias):
  //   bias [n_rows][n_in / 4]  i32: start - 16 * (q[4i] + ... + q[4i + 3]),
  //        so that the kernel can take the unsigned 5-bit values and still
  //        get sum(w * q) per 4 elements exactly (start: 0 for the AVX2
  //        kernel, kFloatSumStart for the AVX-512 one).
  const int32_t* bias = nullptr;
  // The per-block-order VNNI kernel's integer-sum starts for Q4_0 and Q8_0
  // (Avx512BlockOrderKernel; null otherwise, see SetBlockBias):
  //   block_bias [n_rows][n_blocks] i32: -offset * (sum of the block's 32 q),
  //        offset = 8 (Q4_0: the nibble) or 128 (Q8_0: w + 128)
  const int32_t* block_bias = nullptr;
  // The AMX kernel's activations by tile of 16 rows (ArrangeTiles), zero
  // past n_rows, so that a tile's block is contiguous:
  //   q_tiles [n_tiles][n_blocks][16][32] int8: row 16t + i, block b
  //   d_tiles [n_tiles][n_blocks][16] f32: that row's and block's d
  const int8_t* q_tiles = nullptr;
  const float* d_tiles = nullptr;
  // The K-quant AMX and tiled VNNI kernels' Q8_K activations by tile
  // (ArrangeKTiles), zero past n_rows:
  //   kq_tiles    [n_tiles][n_in / 64][16 k][16 rows][4] int8: VNNI B tiles,
  //               row k of tile (t, c) = elements 64c + 4k .. + 3 of rows 16t ..
  //               (for the VNNI kernel biased: the bytes q + 128 as u8; for
  //               AMX elements 64c + AmxKGroupStart(k) .. + 3)
  //   kd_tiles    [n_tiles][n_kblocks][16] f32: kd
  //   kbsum_tiles [n_tiles][n_kblocks][4][16] int32: the sums of the
  //               32-element sub-blocks 2k, 2k + 1 as an int16 pair
  const int8_t* kq_tiles = nullptr;
  const float* kd_tiles = nullptr;
  const int32_t* kbsum_tiles = nullptr;
  // Q8_K activations, for the K-quants and IQ4_XS (kquant_kernels.h), per
  // row and 256-block, exactly as ggml's quantize_row_q8_K (null when no
  // output of the call uses them):
  //   kq    [n_rows][n_in]            int8 in [-127, 127]
  //   kd    [n_rows][n_kblocks]       f32 scale (1 / iscale, not rounded to f16)
  //   kbsum [n_rows][n_kblocks][16]   int16 sums of each 16 kq
  const int8_t* kq = nullptr;
  const float* kd = nullptr;
  const int16_t* kbsum = nullptr;
  int64_t n_kblocks = 0;
  // The caller wants each row's arithmetic independent of n_rows even where
  // llama.cpp's is not (IQ4_NL, kquant_kernels.h).
  bool batch_invariant = false;
};

// Owns the arrays behind Acts::bias and Acts::block_bias, one per offset in
// use.
struct BiasBuffers {
  std::vector<int32_t> bias16;
  std::vector<int32_t> block_bias8, block_bias128;
};

// An int32 sum that starts at kFloatSumStart (the bits of the float
// 1.5 * 2^23) ends, for |sum| < 2^22, as the bits of the float
// 12582912 + sum exactly, so one subtraction of kFloatSumOffset gives
// float(sum), exactly as vcvtdq2ps would. The AVX-512 rows16 kernel does
// that: on Intel cores vcvtdq2ps zmm shares port 0 with vpdpbusd, while a
// float subtraction may run on port 0 or 5.
inline constexpr int32_t kFloatSumStart = 0x4B400000;
inline constexpr float kFloatSumOffset = 12582912.0f;

// Points acts->bias at weight type t's bias (Q5_0; built into buffers on
// first use with the given start; null for the other types). acts' q must be
// set, and buffers used with these activations and one start only.
void SetBias(DType t, int32_t start, Acts* acts, BiasBuffers* buffers);
// The same for acts->block_bias (Q4_0 and Q8_0; null for the other types).
void SetBlockBias(DType t, Acts* acts, BiasBuffers* buffers);

// The rows16 vec_dot-order kernels' scratch (quant_matmul_packed_avx512.cpp,
// quant_matmul_packed_avx2.cpp): 16 floats of alignment and 9 vectors of 16
// f32 per activation row (its accumulators between chunks of blocks); both
// kernels' batches first hold a chunk's unpacked operands
// (kAvx2PackedOpsFloats: 8 vectors of words and up to 2 of f32 scales per
// block).
constexpr int64_t kPackedScratchPerRow = 9 * 16;
constexpr int64_t kAvx2PackedChunkBlocks = 32;
constexpr int64_t kAvx2PackedOpsFloats = kAvx2PackedChunkBlocks * (8 + 2) * 16;

// The per-block order (quant_matmul.h): every Q4_0 and Q8_0 product at the
// AVX-512 level, on the VNNI kernel (quant_matmul_blocks_avx512.cpp,
// Avx512BlockOrderKernel) or, from kAmxMinRows rows where AmxActive(), the
// AMX kernel: the same bits on both. The VNNI kernel's scratch:
// kBlockOrderScratchFloats plus kAmxScratchPerRow per activation row.
constexpr int64_t kBlockOrderChunkBlocks = 32;
constexpr int64_t kBlockOrderScratchFloats = 16 + kBlockOrderChunkBlocks * (128 + 8);
// The AVX2 kernel's (quant_matmul_blocks_avx2.cpp): its chunk also holds
// the batch tiles' unpacked operands (two 512-byte sets and 16 scales per
// block), so it is shorter.
constexpr int64_t kAvx2BlockOrderChunkBlocks = 16;
constexpr int64_t kAvx2BlockOrderScratchFloats =
    16 + kAvx2BlockOrderChunkBlocks * (128 + 8 + 256 + 16);
// The plain-type batch kernel's weight block (Avx2PlainBatchKernel): a
// quarter of a 512 KiB L2 (Zen 3's; Intel's are larger), so the block and
// three activation rows stay there while the rows pass.
constexpr int64_t kPlainBlockBytes = 128 * 1024;
// The largest plain-type batch the AVX-512 level runs on its batch kernel
// (Avx512PlainBatchKernel) rather than oneDNN's f32 GEMM, which first
// converts the whole matrix: 1B F16 on Zen 4, 2 threads, alternating
// builds, tokens/s oneDNN -> batch kernel: pp16 50 -> 74 and pp64 61 -> 93
// (medians of 3 rounds), pp32 40-46 -> 78-92 and pp128 74-81 -> 78-100 (2
// rounds). At 256 rows (a full prefill chunk) Zen 4
// gained 5 % more but Intel's AVX-512 cores, with two full-width FMA units
// for oneDNN's kernel, were not measured, so oneDNN keeps those.
constexpr int64_t kAvx512PlainBatchMaxRows = 128;
// The AMX batch kernel (quant_matmul_amx.cpp): Q4_0 and Q8_0 products of
// kAmxMinRows or more activation rows on AMX machines (AmxActive). It sums
// each 32-block exactly in int32 and then per block in f32 (the per-block
// order above). It reads the activations from Acts::q_tiles / d_tiles
// (ArrangeTiles). Scratch: kAmxScratchFloats (the chunk's tiles) plus
// kAmxScratchPerRow per padded activation row.
constexpr int64_t kAmxMinRows = 8;
constexpr int64_t kAmxTileRows = 16;
constexpr int64_t kAmxChunkBlocks = 32;
constexpr int64_t kAmxScratchFloats = 16 + kAmxChunkBlocks * (128 + 128 + 8) + 4 * 256 + 256;
constexpr int64_t kAmxScratchPerRow = 16;
// The K-quant AMX kernel (kquant_amx.cpp): Q4_K, Q5_K and Q6_K in the tiled
// order (kquant_kernels.h) bit for bit, in the same products (8+ rows, not
// batch_invariant); it reads Acts::kq_tiles / kd_tiles / kbsum_tiles. Its
// scratch: kAmxKScratchFloats plus kAmxScratchPerRow per padded row.
constexpr int64_t kAmxKChunkBlocks = 2;
// The order of a 64-element chunk in the K-quant AMX kernel's tile rows, the
// weights' (A) and the activations' (B) alike: the 4 bytes of group k
// (k = 0..15) are elements AmxKGroupStart(k) .. + 3. It is vpacksswb's
// interleave of elements 0..31 and 32..63 by 128-bit lane, which lets the
// kernel pack its int16 weights to bytes without a lane fix-up; the sum over
// the chunk does not depend on the order.
constexpr int AmxKGroupStart(int k) {
  return 8 * (k / 4) + (k % 4 < 2 ? 4 * (k % 4) : 32 + 4 * (k % 4 - 2));
}
constexpr int64_t kAmxKScratchFloats =
    16 + kAmxKChunkBlocks * 2 * 4 * 256 + 2 * 2 * 256 + kAmxKChunkBlocks * 16 * 6;

// The K-quant tiled-order VNNI kernel (kquant_tiled_avx512.cpp): Q4_K, Q5_K
// and Q6_K in products of 8+ rows at the AVX-512 level without AMX (the AMX
// kernel's bits); it reads Acts::kq_tiles (biased) / kd_tiles / kbsum_tiles.
// Its scratch: kVnniKScratchFloats plus kAmxScratchPerRow per padded row.
constexpr int64_t kVnniKChunkBlocks = 2;
constexpr int64_t kVnniKScratchFloats = 16 + kVnniKChunkBlocks * 16 * (64 + 16 + 3 + 4 + 53);
// The Q4_K and Q6_K kernels on their rows16 copy (kquant_rows16_avx512.cpp):
// KRows16Avx512Kernel in the vec_dot order (any rows; reads Acts::kq / kd /
// kbsum), KRows16TiledAvx512Kernel in the tiled order (8+ rows; reads
// Acts::kq / kd / kbsum and, for Q4_K, kbsum_tiles). The tiled one walks a
// group's blocks in chunks of kKRows16ChunkBlocks; its scratch:
// kKRows16ScratchFloats plus kAmxScratchPerRow per padded row.
constexpr int64_t kKRows16ChunkBlocks = 2;
// From this many rows on, Q6_K's copy runs KQuantTiledAvx512PackedKernel
// instead: its 16-element sub-blocks cost the lanes layout a vpmulld per 4
// vpdpbusd, and at large batches the other layout, which unpacks a chunk
// once for every 16 activation rows, is faster (512 rows: 154 against ~128
// GMAC/s on one Zen 4 core).
constexpr int64_t kQ6KRows16MaxLanesRows = 256;
constexpr int64_t kKRows16ScratchFloats = 16 + kKRows16ChunkBlocks * 16 * (16 + 4 + 2 + 64);

// The K-quant tiled-order AVX2 kernel (kquant_tiled_avx2.cpp): Q4_K, Q5_K and
// Q6_K in products of 8+ rows at the AVX2 level (the AMX kernel's bits); it
// reads Acts::kq / kd / kbsum as quantized. Its scratch: kAvx2KScratchFloats
// plus kAmxScratchPerRow per padded row.
constexpr int64_t kAvx2KChunkBlocks = 2;
constexpr int64_t kAvx2KScratchFloats = 16 + kAvx2KChunkBlocks * 16 * (64 + 16 + 8 + 2 + 64);

// Copies acts' q and ds (d only) into q_tiles / d_tiles (zero-padded to
// whole tiles) and points acts at them.
void ArrangeTiles(Acts& acts, std::vector<int8_t>* q_tiles, std::vector<float>* d_tiles);

// The same for the Q8_K activations (Acts::kq_tiles ...); biased: q + 128
// in element order (the VNNI kernel's u8 operand), else q in AmxKGroupStart
// order (AMX's).
void ArrangeKTiles(Acts& acts, bool biased, std::vector<int8_t>* kq_tiles,
                   std::vector<float>* kd_tiles, std::vector<int32_t>* kbsum_tiles);

// Floats of scratch one kernel call may use (for n_in inputs and n_rows
// activation rows): the most any kernel needs.
int64_t ScratchFloats(int64_t n_in, int64_t n_rows);

// Computes y[r][o] for o in [o_begin, o_end) and every row r of acts.
// scratch: ScratchFloats(n_in, n_rows) floats the kernel may use (one per
// calling thread).
using Kernel = void (*)(const void* W, size_t row_bytes, int64_t o_begin, int64_t o_end,
                        const Acts& acts, float* y, size_t y_stride, float* scratch);

// Whether the type's kernels want the 32-block quantized activations q / ds
// (Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, IQ4_NL).
bool UsesQuantizedActs(DType t);
// Whether the type's kernels want the Q8_K activations kq / kd / kbsum (the
// K-quants and IQ4_XS).
bool UsesQ8KActs(DType t);

// Kernel tables: nullptr where a level has no specialised kernel (the
// dispatcher then falls back to the next lower level).
Kernel ScalarKernel(DType t);
Kernel Avx2Kernel(DType t);
Kernel Avx512Kernel(DType t);
// The vec_dot-order kernel on the rows16 copy of a weight (packed_weight.h;
// W is the copy, o_begin a multiple of 16): Q4_1, Q5_0, else nullptr. Same
// outputs as Avx512Kernel / Avx2Kernel on the GGUF rows, bit for bit.
Kernel Avx512PackedKernel(DType t);
// The same on AVX2 (quant_matmul_packed_avx2.cpp): the same outputs.
Kernel Avx2PackedKernel(DType t);
// The AMX batch kernel for t (Q4_0, Q8_0, else nullptr) on W's rows16 copy
// (packed) or on its GGUF rows; call only when AmxActive().
Kernel AmxKernel(DType t, bool packed);
// The per-block-order VNNI kernel for t (Q4_0, Q8_0, else nullptr) on W's
// rows16 copy (packed) or on its GGUF rows; call only at the AVX-512 level.
// The AMX kernel's outputs bit for bit.
Kernel Avx512BlockOrderKernel(DType t, bool packed);
// The per-block-order AVX2 kernel for t (Q4_0, Q8_0, else nullptr) on W's
// rows16 copy (packed) or on its GGUF rows (quant_matmul_blocks_avx2.cpp):
// every Q4_0 / Q8_0 product at the AVX2 level, the VNNI kernel's bits. Q4_0
// reads Acts::block_bias, Q8_0 does not. Scratch as the VNNI kernel's.
Kernel Avx2BlockOrderKernel(DType t, bool packed);
// The plain-type batch kernel at the AVX2 level (F32, F16, BF16, else
// nullptr; quant_matmul_simd.inc's PlainBatchKernel): tiles of 4 weight rows
// x 3 activation rows over weight blocks of kPlainBlockBytes, each output in
// the one-row kernel's order (Avx2Kernel's), so batches of these types are
// row invariant without oneDNN's GEMM. For 2+ activation rows.
Kernel Avx2PlainBatchKernel(DType t);
// The AVX-512 level's (quant_matmul_avx512.cpp, PlainBatchKernel16): the
// same tiles with 16 lanes, in PlainKernel16's order; batches of 2 ..
// kAvx512PlainBatchMaxRows rows and batch-invariant ones.
Kernel Avx512PlainBatchKernel(DType t);
// The K-quant AMX kernel for t (Q4_K, Q5_K, Q6_K, else nullptr) on GGUF
// rows; call only when AmxActive().
Kernel KQuantAmxKernel(DType t);
// The K-quant tiled-order VNNI kernel for t (Q4_K, Q5_K, Q6_K, else nullptr)
// on GGUF rows; call only at the AVX-512 level. The AMX kernel's bits.
Kernel KQuantTiledAvx512Kernel(DType t);
// The same kernel for t (Q6_K, else nullptr) on a rows16 copy: each chunk's
// GGUF blocks rebuilt first (rows16::UnpackGroup).
Kernel KQuantTiledAvx512PackedKernel(DType t);
// The K-quant kernels on a rows16 copy (above) for t (Q4_K, Q6_K, else
// nullptr); call only at the AVX-512 level.
Kernel KRows16Avx512Kernel(DType t);
Kernel KRows16TiledAvx512Kernel(DType t);
// The K-quant tiled-order AVX2 kernel for t (Q4_K, Q5_K, Q6_K, else nullptr)
// on GGUF rows; call only at the AVX2 level or above. The AMX kernel's bits.
Kernel KQuantTiledAvx2Kernel(DType t);

// Quantizes one row of n (a multiple of 32) activations into q [n] and the
// (d, s) pairs ds [2 * n / 32], exactly as ggml-cpu does (see
// quant_matmul.cpp). The AVX2 and AVX-512 versions (quant_matmul_avx2.cpp,
// quant_matmul_avx512.cpp; call each only at its level or above) produce the
// same bytes and floats.
void QuantizeRowQ8Scalar(const float* x, int64_t n, int8_t* q, float* ds);
void QuantizeRowQ8Avx2(const float* x, int64_t n, int8_t* q, float* ds);
void QuantizeRowQ8Avx512(const float* x, int64_t n, int8_t* q, float* ds);

// Scalar helpers shared by the levels (defined in quant_matmul_scalar.cpp).
// Dequantizes one weight row of n elements of type t into out (f32).
void DequantizeRowForDot(DType t, const void* row, int64_t n, float* out);

}  // namespace qmm
}  // namespace llm
