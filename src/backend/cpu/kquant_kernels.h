// Private to backend/cpu: QuantMatMul's kernels for the K-quants (Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K), IQ4_XS (all against Q8_K activations) and Q5_0, Q5_1,
// IQ4_NL (against the 32-block Q8_0 / Q8_1 activations of
// quant_matmul_kernels.h), and the Q8_K activation quantizer.
//
// Arithmetic, per output y[r][o] (see quant_matmul.h for the guarantees):
//   * AVX2 and AVX-512 levels (AVX-512 has its own Q2_K..Q6_K kernels
//     computing the same integer lanes with wider registers): ggml-cpu's x86 AVX2
//     ggml_vec_dot_<type>_q8_K / _q8_0 / _q8_1 float sequence. Per 256-block
//     the weight x activation products are summed exactly in int32 into 8
//     lanes (lane l holds the elements e with (e % 32) / 4 == l, plus the
//     type's own correction terms: Q6_K subtracts 32 * (bsum * scale) of
//     sub-blocks 2l and 2l + 1, Q2_K adds its mins lane), each lane
//     accumulated in f32 as fma(d_w * d_x, float(lane), acc); Q4_K keeps its
//     mins in 4 more lanes, Q5_K in one fma chain; the 8 lanes are summed as
//     hsum_float_8. Integer sums being exact, only these lane contents and
//     float steps matter, so the kernels are free to compute the lanes their
//     own (faster) way. Outputs equal llama.cpp's on x86 bit for bit.
//   * Scalar level: ggml's portable *_generic order (no FMA), identical on
//     every CPU.
// Tiled order (products of kTiledMinRows or more activation rows, unless
// Acts::batch_invariant): llama.cpp 0.3.36 multiplies the K-quants and
// IQ4_XS with its tiled matmul (ggml-cpu/tiled/) whenever the activation has
// 8 rows or more, every row of the call, whatever the thread split (threads
// split output rows only; K is always walked in ascending super-blocks). Its
// float sequence per output y[r][o], the same at every libllm level:
//   acc = 0
//   per 256-block i, ascending:
//     S1 = sum over sub-blocks s of scale_s * sum(w_e * q_e)   (int32, exact;
//          w the signed weight values, Q2_K/Q4_K/Q5_K's unsigned codes)
//     S2 = sum over sub-blocks of min_s * bsum_s   (Q2_K, Q4_K, Q5_K; exact)
//     t  = float(S1) * d_w                         (rounded product)
//     t  = fma(-dmin_w, float(S2), t)              (types with mins)
//     acc = fma(t, d_x, acc)                       (d_x: the row's Q8_K scale)
// (the AVX-512 VNNI build of ggml that llama-cpp-python compiles natively;
// its compiler contracts the epilogue's multiply-add, which the disassembly
// shows as vfmadd213ps; the AVX2 build writes the same fma explicitly.)
// IQ4_NL is the one 32-block type whose llama.cpp arithmetic depends on the row count:
// one row runs ggml_vec_dot_iq4_nl_q8_0 (two accumulators, even and odd
// blocks), two or more rows llamafile's tinyBLAS (one accumulator), and
// QuantMatMul follows it unless asked for batch invariance (then always the
// one-accumulator order). Likewise batch_invariant keeps the K-quants on the
// vec_dot order above for every row count.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cpu/quant_blocks.h"
#include "backend/cpu/quant_matmul_kernels.h"
#include "core/dtype.h"

namespace llm {
namespace qmm {

// Whether a K-quant / IQ4_XS product runs llama.cpp's tiled order (above):
// 8 or more activation rows, unless the caller asked for batch invariance.
constexpr int64_t kTiledMinRows = 8;
inline bool KQuantTiled(const Acts& a) { return a.n_rows >= kTiledMinRows && !a.batch_invariant; }

// Quantizes one row of n (a multiple of 256) activations to Q8_K exactly as
// ggml's quantize_row_q8_K_ref: per 256-block, max = the element of largest
// |x| (first one on ties), iscale = -127 / max, q = min(127,
// round-half-even(iscale * x)), d = 1 / iscale, bsum[g] = sum of q[16g ..
// 16g + 15]. An all-zero block gets d = 0, q = 0; a block holding inf / NaN
// gets d = NaN (its outputs become NaN). q [n], d [n / 256], bsum [n / 16].
void QuantizeRowQ8K(const float* x, int64_t n, int8_t* q, float* d, int16_t* bsum);
// The same bytes, scales and sums, vectorized (q8k_quantize_avx2.cpp,
// q8k_quantize_avx512.cpp; call only at that SimdLevel or above).
void QuantizeRowQ8KAvx2(const float* x, int64_t n, int8_t* q, float* d, int16_t* bsum);
void QuantizeRowQ8KAvx512(const float* x, int64_t n, int8_t* q, float* d, int16_t* bsum);

// The tile kernels' weight side (kquant_amx.cpp, kquant_tiled_avx512.cpp):
// for each of the 16 weight rows o .. o + 15 of a group (GGUF rows, row r at
// W + r * row_bytes; rows past o_end repeat the last, computed but never
// stored), unpack(block, r, j) for the chunk's blocks kb0 + j, j < len; then
// the row's next chunk of chunk_blocks blocks (after its last, the next
// group's first chunk of the same row) is prefetched into L2 while the
// chunk's tiles run: the unpacking otherwise waits on each block's first
// line (a 16-row batch multiplies every weight once, straight from memory).
// Past the matrix's end the prefetch points beyond it: it never faults.
template <DType T, typename Unpack>
inline void UnpackGroupChunk(const void* W, size_t row_bytes, int64_t o, int64_t o_end, int64_t kb0,
                             int64_t len, int64_t chunk_blocks, int64_t nkb, Unpack&& unpack) {
  using Block = typename KBlockOf<T>::type;
  constexpr int kGroupRows = 16;
  for (int r = 0; r < kGroupRows; ++r) {
    const Block* blocks = reinterpret_cast<const Block*>(
        static_cast<const uint8_t*>(W) + std::min<int64_t>(o + r, o_end - 1) * row_bytes);
    for (int64_t j = 0; j < len; ++j) unpack(blocks[kb0 + j], r, j);
    const uint8_t* next = kb0 + chunk_blocks < nkb
                              ? reinterpret_cast<const uint8_t*>(blocks + kb0 + chunk_blocks)
                              : static_cast<const uint8_t*>(W) + (o + kGroupRows + r) * row_bytes;
    for (size_t off = 0; off < static_cast<size_t>(chunk_blocks) * sizeof(Block); off += 64) {
      __builtin_prefetch(next + off, 0, 2);  // prefetcht1 on x86
    }
  }
}

// Weight blocks ahead that the one-row (decode) kernels prefetch (times
// DecodePrefetchScale(), cpu_features.h): decode streams every weight from
// memory once, a few rows (streams) at a time, and the hardware prefetcher
// alone left much of the bandwidth unused. Near a row's end the prefetch moves
// on to the next rows, so that no row starts cold. Into L2 (prefetcht1):
// prefetcht0 made the prefetches compete with the demand loads for L1's fill
// buffers. Measured on the 1B shape, 2 threads, weights in anonymous memory
// (weight_buffer.h), AVX-512 kernel: Q4_K 4 blocks ahead beat 8 and 16 (+2-4
// %), Q6_K 8 beat 4 and 16; 8 Q4_K rows per step instead of 4 gained nothing.
// On AMD Zen 4 4x further (1B Q4_K_M decode, 2 threads, 4 alternating
// rounds: median 31 -> 46 tokens/s at 4x, 44 at 2x, 45 at 8x, 38 at 16x; 1B
// Q6_K 28 -> 34).
template <DType T>
constexpr int64_t kDecodePrefetchBlocks = T == DType::kQ6_K ? 8 : 4;

// Kernels for the types above (nullptr for any other type).
Kernel KQuantScalarKernel(DType t);
Kernel KQuantAvx2Kernel(DType t);
// AVX-512 BW + VNNI kernels for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
// (kquant_avx512.cpp): the AVX2 kernels' outputs bit for bit; nullptr for
// the other types (they run the AVX2 kernels at that level).
Kernel KQuantAvx512Kernel(DType t);

}  // namespace qmm
}  // namespace llm
