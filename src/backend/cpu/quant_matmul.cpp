// QuantMatMul: argument checks, per-row activation quantization (shared by all
// SIMD levels so they see identical inputs), kernel dispatch and threading.
#include "backend/cpu/quant_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kquant_kernels.h"
#include "backend/cpu/packed_weight.h"
#include "backend/cpu/quant_matmul_kernels.h"
#include "backend/cpu/thread_pool.h"
#include "core/half.h"
#include "core/status.h"

namespace llm {
namespace {

// Output rows per ParallelFor unit: whole rows only, so the split never
// changes a result; big enough to amortize the dispatch.
constexpr int64_t kRowsPerTask = 16;
// rows16 kernels (packed_weight.h) start at a group boundary.
static_assert(kRowsPerTask % rows16::kRows == 0);
// ThreadPool chunks per thread for batches (n_rows >= 2).
constexpr int kBatchChunksPerThread = 4;
// Below this many multiply-adds the pool costs more than it saves.
constexpr int64_t kMinParallelWork = 1 << 16;
// From this many activation rows on, they are quantized over the pool.
constexpr int64_t kParallelQuantizeRows = 64;

// fn(begin, end) over activation rows [0, n_rows): over the pool for a
// prefill-sized batch (each row is quantized on its own, so the bytes do
// not depend on the split), else on the caller. On the caller alone a
// SmolLM2-shape pp512 spent ~4 % of its time quantizing while the other
// thread waited.
void ForActivationRows(int64_t n_rows, ThreadPool* pool,
                       const std::function<void(int64_t, int64_t)>& fn) {
  if (pool != nullptr && pool->size() > 1 && n_rows >= kParallelQuantizeRows) {
    pool->ParallelFor(n_rows, fn);
  } else {
    fn(0, n_rows);
  }
}

qmm::Kernel PickKernel(DType t, int64_t n_rows) {
  const SimdLevel level = ActiveSimdLevel();
  qmm::Kernel k = nullptr;
  // The 8-bit-activation types run one row on the AVX2 kernel on AVX-512
  // machines too: it reproduces ggml-cpu's vec_dot_q4_x_q8_x bit for bit
  // (ggml has no AVX-512 variant of these); a different order would flip
  // activation-quantization roundings downstream and move SmolLM2's logits by
  // ~0.2 (tools/exact_forward.py). Batches take the same code compiled for
  // AVX-512 (VNNI integer sums, the same bits). At the AVX2 and AVX-512
  // levels RunShared replaces these for Q4_0 / Q8_0 (the per-block kernels)
  // and, where a rows16 copy exists, for Q4_1 / Q5_0 (the vec_dot-order
  // kernels on it).
  if (level == SimdLevel::kAvx512 && (!qmm::UsesQuantizedActs(t) || n_rows >= 2)) {
    k = qmm::Avx512Kernel(t);
  }
  if (k == nullptr && level != SimdLevel::kScalar) k = qmm::Avx2Kernel(t);
  if (k == nullptr) k = qmm::ScalarKernel(t);
  return k;
}

// Quantizes one row of n (multiple of 32) floats to 8 bits per 32-block,
// reproducing ggml-cpu's x86 quantize_row_q8_0 / quantize_row_q8_1 (the
// activation side of ggml's Q4_0/Q8_0 and Q4_1 dot products) rounding point
// for rounding point, because on sensitive models (SmolLM2-135M) only the
// same rounding points keep the logits within 0.1 of llama.cpp's:
//   amax = max|x|, d = amax / 127 (f32), id = amax != 0 ? 127 / amax : 0,
//   q = round-half-to-even(x * id)          (_mm256_round_ps, NEAREST)
//   stored d = f32(f16(d))                  (GGML_FP32_TO_FP16, RNE)
//   stored s = f32(f16(d * sum(q)))         (q8_1's s, with the f32 d)
// ds receives the stored (d, s) pair per block; the kernels use exactly these
// values. A block holding inf/NaN gets d = s = NaN so the outputs it feeds
// become NaN instead of silently finite.
}  // namespace

int64_t qmm::ScratchFloats(int64_t n_in, int64_t n_rows) {
  // The F32/F16/BF16 scalar kernel: one converted row; the rows16 vec_dot
  // kernel: its accumulators per row; the tile kernels: their chunks and rows.
  const int64_t packed = 16 + kAvx2PackedOpsFloats + kPackedScratchPerRow * n_rows;
  const int64_t amx =
      std::max({kAmxScratchFloats, kAmxKScratchFloats, kBlockOrderScratchFloats,
                kAvx2BlockOrderScratchFloats, kVnniKScratchFloats, kKRows16ScratchFloats,
                kAvx2KScratchFloats}) +
      kAmxScratchPerRow * (n_rows + kAmxTileRows - 1);
  return std::max({n_in, packed, amx});
}

void qmm::SetBias(DType t, int32_t start, Acts* acts, BiasBuffers* buffers) {
  if (t != DType::kQ5_0) {
    acts->bias = nullptr;
    return;
  }
  std::vector<int32_t>& bias = buffers->bias16;
  if (bias.empty()) {
    const int64_t n = acts->n_rows * acts->n_in / 4;
    bias.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const int8_t* q = acts->q + 4 * i;
      bias[static_cast<size_t>(i)] = start - 16 * (q[0] + q[1] + q[2] + q[3]);
    }
  }
  acts->bias = bias.data();
}

void qmm::SetBlockBias(DType t, Acts* acts, BiasBuffers* buffers) {
  const int32_t offset = t == DType::kQ4_0 ? 8 : t == DType::kQ8_0 ? 128 : 0;
  if (offset == 0) {
    acts->block_bias = nullptr;
    return;
  }
  std::vector<int32_t>& bias = offset == 8 ? buffers->block_bias8 : buffers->block_bias128;
  if (bias.empty()) {
    const int64_t n = acts->n_rows * acts->n_blocks;
    bias.resize(static_cast<size_t>(n));
    for (int64_t r = 0; r < acts->n_rows; ++r) {
      for (int64_t b = 0; b < acts->n_blocks; ++b) {
        const int8_t* q = acts->q + r * acts->n_in + b * kActBlock;
        int32_t sum = 0;
        for (int e = 0; e < kActBlock; ++e) sum += q[e];
        bias[static_cast<size_t>(r * acts->n_blocks + b)] = -offset * sum;
      }
    }
  }
  acts->block_bias = bias.data();
}

void qmm::ArrangeTiles(Acts& acts, std::vector<int8_t>* q_tiles, std::vector<float>* d_tiles) {
  const int64_t nb = acts.n_blocks, n_tiles = (acts.n_rows + kAmxTileRows - 1) / kAmxTileRows;
  q_tiles->assign(static_cast<size_t>(n_tiles * kAmxTileRows * acts.n_in), 0);
  d_tiles->assign(static_cast<size_t>(n_tiles * kAmxTileRows * nb), 0.0f);
  for (int64_t r = 0; r < acts.n_rows; ++r) {
    const int64_t t = r / kAmxTileRows, i = r % kAmxTileRows;
    for (int64_t b = 0; b < nb; ++b) {
      const size_t at = static_cast<size_t>((t * nb + b) * kAmxTileRows + i);
      std::memcpy(q_tiles->data() + at * kActBlock, acts.q + r * acts.n_in + b * kActBlock,
                  kActBlock);
      (*d_tiles)[at] = acts.ds[2 * (r * nb + b)];
    }
  }
  acts.q_tiles = q_tiles->data();
  acts.d_tiles = d_tiles->data();
}

// Not in kquant_amx.cpp beside its kernel: a std::vector member
// instantiated in a file compiled with AVX-512 / AMX flags is a weak symbol
// the linker may pick for the whole library, and it then runs AVX-512
// instructions on every CPU (it did: SIGILL in Session::Init on AVX2-only
// hosts). tests/isa_checks/isa_objects_test.sh checks that no ISA-flagged object
// defines such a symbol.
void qmm::ArrangeKTiles(Acts& acts, bool biased, std::vector<int8_t>* kq_tiles,
                        std::vector<float>* kd_tiles, std::vector<int32_t>* kbsum_tiles) {
  const int64_t n_tiles = (acts.n_rows + kAmxTileRows - 1) / kAmxTileRows, nkb = acts.n_kblocks;
  const int64_t n_chunks = acts.n_in / 64;
  constexpr int64_t kKTileBytes = kAmxTileRows * 64;  // a VNNI B tile: 16 rows x 64 bytes
  kq_tiles->assign(static_cast<size_t>(n_tiles * kAmxTileRows * acts.n_in), 0);
  kd_tiles->assign(static_cast<size_t>(n_tiles * nkb * kAmxTileRows), 0.0f);
  kbsum_tiles->assign(static_cast<size_t>(n_tiles * nkb * 4 * kAmxTileRows), 0);
  for (int64_t r = 0; r < acts.n_rows; ++r) {
    const int64_t t = r / kAmxTileRows, n = r % kAmxTileRows;
    const int8_t* q = acts.kq + r * acts.n_in;
    // B tile (t, chunk c): row k holds elements 64c + 4k .. + 3 of the 16
    // activation rows, 4 bytes each (the AMX kernel: 64c + AmxKGroupStart(k)).
    for (int64_t c = 0; c < n_chunks; ++c) {
      int8_t* tile = kq_tiles->data() + (t * n_chunks + c) * kKTileBytes;
      for (int k = 0; k < 16; ++k) {
        const int start = biased ? 4 * k : AmxKGroupStart(k);
        std::memcpy(tile + k * 64 + 4 * n, q + 64 * c + start, 4);
      }
      if (biased) {  // q + 128 as u8 = q with its sign bit flipped
        for (int k = 0; k < 16; ++k) {
          for (int e = 0; e < 4; ++e) tile[k * 64 + 4 * n + e] ^= static_cast<int8_t>(0x80);
        }
      }
    }
    for (int64_t kb = 0; kb < nkb; ++kb) {
      (*kd_tiles)[static_cast<size_t>((t * nkb + kb) * kAmxTileRows + n)] = acts.kd[r * nkb + kb];
      // Sums of the 32-element sub-blocks 2k and 2k + 1 as an int16 pair.
      const int16_t* bs = acts.kbsum + (r * nkb + kb) * 16;
      for (int k = 0; k < 4; ++k) {
        const int32_t s0 = bs[4 * k] + bs[4 * k + 1], s1 = bs[4 * k + 2] + bs[4 * k + 3];
        (*kbsum_tiles)[static_cast<size_t>(((t * nkb + kb) * 4 + k) * kAmxTileRows + n)] =
            static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(s0)) |
                                 (static_cast<uint32_t>(static_cast<uint16_t>(s1)) << 16));
      }
    }
  }
  acts.kq_tiles = kq_tiles->data();
  acts.kd_tiles = kd_tiles->data();
  acts.kbsum_tiles = kbsum_tiles->data();
}

void qmm::QuantizeRowQ8Scalar(const float* x, int64_t n, int8_t* q, float* ds) {
  for (int64_t b = 0; b < n / qmm::kActBlock; ++b) {
    const float* xb = x + b * qmm::kActBlock;
    float amax = 0.0f;
    bool finite = true;
    for (int j = 0; j < qmm::kActBlock; ++j) {
      if (!std::isfinite(xb[j])) finite = false;
      amax = std::max(amax, std::fabs(xb[j]));
    }
    int8_t* qb = q + b * qmm::kActBlock;
    if (!finite) {
      std::fill(qb, qb + qmm::kActBlock, int8_t{0});
      ds[2 * b] = ds[2 * b + 1] = std::nanf("");
      continue;
    }
    const float db = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < qmm::kActBlock; ++j) {
      // std::nearbyint rounds half to even in the default rounding mode (as
      // _mm256_round_ps(_MM_ROUND_NEAREST)). |xb[j] * id| <= 127 up to one
      // rounding; the clamp keeps the value in int8.
      int32_t i = static_cast<int32_t>(std::nearbyint(xb[j] * id));
      i = std::min(127, std::max(-127, i));
      qb[j] = static_cast<int8_t>(i);
      sum += i;
    }
    ds[2 * b] = F16ToF32(F32ToF16(db));
    ds[2 * b + 1] = F16ToF32(F32ToF16(db * static_cast<float>(sum)));
  }
}

namespace {

// Output rows of one product, by task (kRowsPerTask rows each).
struct OutputTasks {
  const QuantMatMulOutput* out;
  qmm::Kernel kernel;
  const void* W;       // out->W, or its rows16 copy for a packed kernel
  qmm::Acts acts;      // the shared activations, with this type's bias
  int64_t first_task;  // tasks first_task .. first_task + n_tasks - 1
};

absl::Status RunShared(const QuantMatMulOutput* outputs, int n_outputs, int64_t n_in,
                       const float* x, size_t x_stride, int64_t n_rows, ThreadPool* pool,
                       bool batch_invariant) {
  qmm::Acts acts;
  acts.x = x;
  acts.x_stride = x_stride;
  acts.n_rows = n_rows;
  acts.n_in = n_in;
  acts.batch_invariant = batch_invariant;
  bool any_quantized = false, any_q8k = false;
  for (int i = 0; i < n_outputs; ++i) {
    any_quantized |= qmm::UsesQuantizedActs(outputs[i].wtype);
    any_q8k |= qmm::UsesQ8KActs(outputs[i].wtype);
  }
  // The batch kernels of the AVX-512 level (quant_matmul_kernels.h):
  //   * Q4_0 / Q8_0 run in the per-block order for every row count, on the
  //     VNNI kernel or, from kAmxMinRows rows on a CPU with AMX, the AMX
  //     kernel: the same bits, so these products are batch invariant as they
  //     are;
  //   * the K-quants with a tile kernel (Q4_K, Q5_K, Q6_K) run llama.cpp's
  //     tiled order from kTiledMinRows rows on, unless batch invariant, on
  //     the AMX kernel or the VNNI tile kernel (the same bits), from
  //     activations arranged in tiles.
  // The AVX2 level runs both with kernels of its own and the same bits:
  // quant_matmul_blocks_avx2.cpp (Q4_0 / Q8_0, every row count) and
  // kquant_tiled_avx2.cpp (Q4_K / Q5_K / Q6_K, tiled order from
  // kTiledMinRows rows unless batch invariant); it also runs F32 / F16 /
  // BF16 batches on a tile kernel in the one-row kernel's order
  // (Avx2PlainBatchKernel); the AVX-512 level has its own
  // (Avx512PlainBatchKernel) for batches up to kAvx512PlainBatchMaxRows
  // rows and leaves larger ones to oneDNN.
  static_assert(qmm::kAmxMinRows >= qmm::kTiledMinRows);
  const SimdLevel level = ActiveSimdLevel();
  const bool avx512 = level == SimdLevel::kAvx512;
  const bool amx = n_rows >= qmm::kAmxMinRows && AmxActive();
  const bool tiled_k = n_rows >= qmm::kTiledMinRows && !batch_invariant;
  // The kernel for out from the above, or nullptr (PickKernel's then).
  auto batch_kernel_of = [&](const QuantMatMulOutput& out) -> qmm::Kernel {
    if (level == SimdLevel::kAvx2) {
      if (QuantMatMulBatchesPlainType(out.wtype, n_rows)) {
        return n_rows >= 2 ? qmm::Avx2PlainBatchKernel(out.wtype) : nullptr;
      }
      if (!qmm::UsesQ8KActs(out.wtype)) {
        return qmm::Avx2BlockOrderKernel(out.wtype, out.packed != nullptr);
      }
      return tiled_k ? qmm::KQuantTiledAvx2Kernel(out.wtype) : nullptr;
    }
    if (!avx512) return nullptr;
    if (out.wtype == DType::kF32 || out.wtype == DType::kF16 || out.wtype == DType::kBF16) {
      // The batches that reach QuantMatMul (QuantMatMulBatchesPlainType;
      // batch-invariant products of any size).
      return n_rows >= 2 ? qmm::Avx512PlainBatchKernel(out.wtype) : nullptr;
    }
    if (qmm::UsesQ8KActs(out.wtype)) {
      if (!tiled_k) return nullptr;
      if (amx) return qmm::KQuantAmxKernel(out.wtype);
      if (out.packed == nullptr) return qmm::KQuantTiledAvx512Kernel(out.wtype);
      return out.wtype == DType::kQ6_K && n_rows >= qmm::kQ6KRows16MaxLanesRows
                 ? qmm::KQuantTiledAvx512PackedKernel(out.wtype)
                 : qmm::KRows16TiledAvx512Kernel(out.wtype);
    }
    return amx ? qmm::AmxKernel(out.wtype, out.packed != nullptr)
               : qmm::Avx512BlockOrderKernel(out.wtype, out.packed != nullptr);
  };
  // (The AVX2 kernels read the activations as quantized.)
  bool q_tiles_needed = false, k_tiles_needed = false;
  for (int i = 0; i < n_outputs && avx512; ++i) {
    if (batch_kernel_of(outputs[i]) == nullptr ||
        !QuantMatMulQuantizesActivations(outputs[i].wtype)) {
      continue;  // (the plain types' kernel reads Acts::x)
    }
    (qmm::UsesQ8KActs(outputs[i].wtype) ? k_tiles_needed : q_tiles_needed) = true;
  }
  // Activation scratch the quantizers overwrite in full: allocated without
  // std::vector's zero fill (in a 16-session SmolLM2-shape decode step that
  // memset was ~3 % of the calling thread's time, with the other thread
  // waiting).
  std::unique_ptr<int8_t[]> q;
  std::unique_ptr<float[]> ds;
  std::vector<int8_t> q_tiles;
  std::vector<float> d_tiles;
  qmm::BiasBuffers biases;
  if (any_quantized) {
    const int64_t nb = n_in / qmm::kActBlock;
    q.reset(new int8_t[static_cast<size_t>(n_rows * n_in)]);
    ds.reset(new float[static_cast<size_t>(2 * n_rows * nb)]);
    // The AVX2 and AVX-512 quantizers give the scalar one's bytes and scales
    // bit for bit (tests/backend/quant_matmul_test.cpp); it matters for
    // batches: the scalar loop was ~10 % of a 16-session decode pass on
    // AVX-512, 4.5 % of a 1B Q4_0 prefill on AVX2.
    const auto quantize = level == SimdLevel::kAvx512 ? &qmm::QuantizeRowQ8Avx512
                          : level == SimdLevel::kAvx2 ? &qmm::QuantizeRowQ8Avx2
                                                      : &qmm::QuantizeRowQ8Scalar;
    ForActivationRows(n_rows, pool, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        quantize(x + r * x_stride, n_in, q.get() + r * n_in, ds.get() + 2 * r * nb);
      }
    });
    acts.q = q.get();
    acts.ds = ds.get();
    acts.n_blocks = nb;
    if (amx && q_tiles_needed) qmm::ArrangeTiles(acts, &q_tiles, &d_tiles);
  }
  // Q8_K (K-quants, IQ4_XS): ggml-cpu's reference quantize_row_q8_K_ref on
  // x86; the AVX2 and AVX-512 versions give its bytes, scales and sums bit
  // for bit (tests/backend/kquant_test.cpp).
  std::unique_ptr<int8_t[]> kq;
  std::unique_ptr<float[]> kd;
  std::unique_ptr<int16_t[]> kbsum;
  std::vector<int8_t> kq_tiles;
  std::vector<float> kd_tiles;
  std::vector<int32_t> kbsum_tiles;
  if (any_q8k) {
    const int64_t nkb = n_in / 256;
    kq.reset(new int8_t[static_cast<size_t>(n_rows * n_in)]);
    kd.reset(new float[static_cast<size_t>(n_rows * nkb)]);
    kbsum.reset(new int16_t[static_cast<size_t>(n_rows * nkb * 16)]);
    const auto quantize_k = level == SimdLevel::kAvx512 ? &qmm::QuantizeRowQ8KAvx512
                            : level == SimdLevel::kAvx2 ? &qmm::QuantizeRowQ8KAvx2
                                                        : &qmm::QuantizeRowQ8K;
    ForActivationRows(n_rows, pool, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        quantize_k(x + r * x_stride, n_in, kq.get() + r * n_in, kd.get() + r * nkb,
                   kbsum.get() + r * nkb * 16);
      }
    });
    acts.kq = kq.get();
    acts.kd = kd.get();
    acts.kbsum = kbsum.get();
    acts.n_kblocks = nkb;
    if (k_tiles_needed) qmm::ArrangeKTiles(acts, !amx, &kq_tiles, &kd_tiles, &kbsum_tiles);
  }

  std::vector<OutputTasks> tasks;
  int64_t n_tasks = 0;
  double work = 0.0;
  for (int i = 0; i < n_outputs; ++i) {
    OutputTasks t;
    t.out = &outputs[i];
    t.kernel = PickKernel(outputs[i].wtype, n_rows);
    t.W = outputs[i].W;
    // A rows16 copy runs one row and batches alike on AVX2 and AVX-512 (the
    // same outputs as the kernels above, without their per-call
    // rearrangement).
    // (The K-quants' copies exist on AVX-512 hosts only: QuantMatMulReadsRows16.)
    qmm::Kernel packed = nullptr;
    if (outputs[i].packed != nullptr && qmm::UsesQ8KActs(outputs[i].wtype)) {
      packed = avx512 ? qmm::KRows16Avx512Kernel(outputs[i].wtype) : nullptr;
    } else if (outputs[i].packed != nullptr && level != SimdLevel::kScalar) {
      packed = avx512 ? qmm::Avx512PackedKernel(outputs[i].wtype)
                      : qmm::Avx2PackedKernel(outputs[i].wtype);
    }
    if (packed != nullptr) {
      t.kernel = packed;
      t.W = outputs[i].packed;
    }
    const qmm::Kernel batch_kernel = batch_kernel_of(outputs[i]);
    if (batch_kernel != nullptr) {
      // The other K-quant batch kernels (and on the AVX2 and AMX levels
      // those of the types with a copy) read GGUF rows.
      const bool reads_rows16 = !qmm::UsesQ8KActs(outputs[i].wtype) ||
                                batch_kernel == qmm::KRows16TiledAvx512Kernel(outputs[i].wtype) ||
                                batch_kernel == qmm::KQuantTiledAvx512PackedKernel(outputs[i].wtype);
      t.kernel = batch_kernel;
      t.W = outputs[i].packed != nullptr && reads_rows16 ? outputs[i].packed : outputs[i].W;
    }
    if (t.kernel == nullptr) {
      return Errorf(LLM_ERR_UNSUPPORTED, "QuantMatMul: no kernel for weight type %d",
                    static_cast<int>(outputs[i].wtype));
    }
    t.acts = acts;
    if (batch_kernel != nullptr && !amx && qmm::UsesQuantizedActs(outputs[i].wtype) &&
        (avx512 || outputs[i].wtype == DType::kQ4_0)) {
      // The VNNI per-block kernel; at AVX2 Q4_0's (Q8_0 multiplies signed
      // weights there).
      qmm::SetBlockBias(outputs[i].wtype, &t.acts, &biases);
    } else if (packed != nullptr && batch_kernel == nullptr) {
      // The rows16 vec_dot kernel.
      qmm::SetBias(outputs[i].wtype, avx512 ? qmm::kFloatSumStart : 0, &t.acts, &biases);
    }
    t.first_task = n_tasks;
    tasks.push_back(t);
    n_tasks += (outputs[i].n_out + kRowsPerTask - 1) / kRowsPerTask;
    work += static_cast<double>(outputs[i].n_out) * static_cast<double>(n_in) *
            static_cast<double>(n_rows);
  }
  // Tasks [begin, end) of all outputs in order; each kernel call covers one
  // output's whole rows, so no result depends on the split.
  auto run_tasks = [&](int64_t begin, int64_t end) {
    // Not zeroed (new float[], not a std::vector): the kernels write before
    // they read, and a batch call has several chunks per thread. (Not a
    // thread_local buffer either: glibc aborts when it cannot allocate the
    // registration of a thread_local's destructor -- found by OomSweep.)
    const std::unique_ptr<float[]> scratch(
        new float[static_cast<size_t>(qmm::ScratchFloats(n_in, n_rows))]);
    for (const OutputTasks& t : tasks) {
      const int64_t t_end = t.first_task + (t.out->n_out + kRowsPerTask - 1) / kRowsPerTask;
      const int64_t b = std::max(begin, t.first_task), e = std::min(end, t_end);
      if (b >= e) continue;
      const int64_t o_begin = (b - t.first_task) * kRowsPerTask;
      const int64_t o_end = std::min(t.out->n_out, (e - t.first_task) * kRowsPerTask);
      t.kernel(t.W, t.out->row_bytes, o_begin, o_end, t.acts, t.out->y, t.out->y_stride,
               scratch.get());
    }
  };
  if (pool != nullptr && pool->size() > 1 && work >= static_cast<double>(kMinParallelWork)) {
    // A batch's tasks are long enough to be handed out 4 per thread (which
    // evens out a thread that the machine delays); one row's are not.
    pool->ParallelFor(n_tasks, run_tasks, n_rows >= 2 ? kBatchChunksPerThread : 1);
  } else {
    run_tasks(0, n_tasks);
  }
  return absl::OkStatus();
}

// QuantMatMul's checks of one product.
absl::Status CheckOutput(const QuantMatMulOutput& o, int64_t n_in, const float* x, size_t x_stride,
                         int64_t n_rows) {
  if (o.n_out < 0 || n_in <= 0 || n_rows < 0) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "QuantMatMul: bad shape n_out=%d n_in=%d n_rows=%d",
                  o.n_out, n_in, n_rows);
  }
  if (o.n_out == 0 || n_rows == 0) return absl::OkStatus();
  if (o.W == nullptr || x == nullptr || o.y == nullptr) {
    return Error(LLM_ERR_INVALID_ARGUMENT, "QuantMatMul: null pointer");
  }
  if (qmm::ScalarKernel(o.wtype) == nullptr) {
    return Errorf(LLM_ERR_UNSUPPORTED, "QuantMatMul: weight type %d not supported",
                  static_cast<int>(o.wtype));
  }
  const std::optional<size_t> need = RowBytes(o.wtype, static_cast<size_t>(n_in));
  if (!need) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "QuantMatMul: n_in=%d is not a multiple of the block size of type %d", n_in,
                  static_cast<int>(o.wtype));
  }
  if (o.row_bytes < *need) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "QuantMatMul: row_bytes %d < %d needed for n_in=%d",
                  o.row_bytes, *need, n_in);
  }
  // Rows are read through their element / block types: W and row_bytes must
  // keep every row at the type's natural alignment (always true for GGUF).
  const size_t align = o.wtype == DType::kF32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(o.W) % align != 0 || o.row_bytes % align != 0) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "QuantMatMul: weights must be %d-byte aligned (W=%p, row_bytes=%d)", align, o.W,
                  o.row_bytes);
  }
  if ((n_rows > 1 &&
       (x_stride < static_cast<size_t>(n_in) || o.y_stride < static_cast<size_t>(o.n_out)))) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "QuantMatMul: x_stride %d / y_stride %d too small",
                  x_stride, o.y_stride);
  }
  // Scratch sizes are n_rows * n_in: refuse shapes whose product overflows.
  constexpr int64_t kMaxElems = int64_t{1} << 40;
  if (n_in > kMaxElems / n_rows || o.n_out > kMaxElems / n_in) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "QuantMatMul: shape too large (%d x %d x %d)", n_rows,
                  o.n_out, n_in);
  }
  return absl::OkStatus();
}

}  // namespace

bool QuantMatMulReadsRows16(DType t) {
  // The K-quants' rows16 kernels are AVX-512 VNNI ones; with AMX their
  // batches run on tiles from GGUF rows (kquant_amx.cpp), so there they keep
  // a plain copy.
  if (qmm::UsesQ8KActs(t)) {
    return rows16::Supports(t) && ActiveSimdLevel() == SimdLevel::kAvx512 && !AmxActive();
  }
  return ActiveSimdLevel() != SimdLevel::kScalar && rows16::Supports(t);
}

bool QuantMatMulBatchesPlainType(DType t, int64_t n_rows) {
  if (t != DType::kF32 && t != DType::kF16 && t != DType::kBF16) return false;
  const SimdLevel level = ActiveSimdLevel();
  return level == SimdLevel::kAvx2 ||
         (level == SimdLevel::kAvx512 && n_rows <= qmm::kAvx512PlainBatchMaxRows);
}

bool QuantMatMulQuantizesActivations(DType t) {
  return qmm::UsesQuantizedActs(t) || qmm::UsesQ8KActs(t);
}

absl::Status QuantMatMul(DType wtype, const void* W, size_t row_bytes, int64_t n_out, int64_t n_in,
                         const float* x, size_t x_stride, int64_t n_rows, float* y, size_t y_stride,
                         ThreadPool* pool, bool batch_invariant) {
  QuantMatMulOutput out;
  out.wtype = wtype;
  out.W = W;
  out.row_bytes = row_bytes;
  out.n_out = n_out;
  out.y = y;
  out.y_stride = y_stride;
  return QuantMatMulShared(&out, 1, n_in, x, x_stride, n_rows, pool, batch_invariant);
}

absl::Status QuantMatMulShared(const QuantMatMulOutput* outputs, int n_outputs, int64_t n_in,
                               const float* x, size_t x_stride, int64_t n_rows, ThreadPool* pool,
                               bool batch_invariant) {
  if (n_outputs < 0 || (n_outputs > 0 && outputs == nullptr)) {
    return Error(LLM_ERR_INVALID_ARGUMENT, "QuantMatMul: bad output list");
  }
  bool any_work = false;
  for (int i = 0; i < n_outputs; ++i) {
    LLM_RETURN_IF_ERROR(CheckOutput(outputs[i], n_in, x, x_stride, n_rows));
    any_work = any_work || (outputs[i].n_out > 0 && n_rows > 0);
  }
  if (!any_work) return absl::OkStatus();
  try {
    // Outputs with no rows are skipped (their checks above stop early).
    std::vector<QuantMatMulOutput> live;
    for (int i = 0; i < n_outputs; ++i) {
      if (outputs[i].n_out > 0) live.push_back(outputs[i]);
    }
    return RunShared(live.data(), static_cast<int>(live.size()), n_in, x, x_stride, n_rows, pool,
                     batch_invariant);
  } catch (...) {
    return StatusFromCurrentException("QuantMatMul");
  }
}

}  // namespace llm
