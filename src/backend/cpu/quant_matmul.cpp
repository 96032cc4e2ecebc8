// QuantMatMul: argument checks, per-row activation quantization (shared by all
// SIMD levels so they see identical inputs), kernel dispatch and threading.
#include "backend/cpu/quant_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <new>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/quant_matmul_kernels.h"
#include "core/half.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace llm {
namespace {

// Output rows per ParallelFor unit: whole rows only, so the split never
// changes a result; big enough to amortize the dispatch.
constexpr int64_t kRowsPerTask = 16;
// Below this many multiply-adds the pool costs more than it saves.
constexpr int64_t kMinParallelWork = 1 << 16;

qmm::Kernel PickKernel(DType t, int64_t n_rows) {
  const SimdLevel level = ActiveSimdLevel();
  qmm::Kernel k = nullptr;
  // The 8-bit-activation types run one row on the AVX2 kernel on AVX-512
  // machines too: it reproduces ggml-cpu's vec_dot_q4_x_q8_x bit for bit
  // (ggml has no AVX-512 variant of these); a different order would flip
  // activation-quantization roundings downstream and move SmolLM2's logits by
  // ~0.2 (tools/exact_forward.py). Batches take the AVX-512 pair kernel,
  // which computes each row with exactly that sequence, two rows per
  // register (quant_matmul_avx512.cpp).
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

void qmm::PackPairs(DType t, Acts* acts, PairBuffers* buffers) {
  const int64_t n_rows = acts->n_rows, nb = acts->n_blocks, n_pairs = (n_rows + 1) / 2;
  const int32_t offset = t == DType::kQ4_0 ? 8 : t == DType::kQ8_0 ? 128 : 0;
  buffers->q.assign(static_cast<size_t>(nb * n_pairs * 64), 0);
  buffers->d.assign(static_cast<size_t>(nb * n_pairs * 16), 0.0f);
  buffers->bias.assign(offset != 0 ? static_cast<size_t>(nb * n_pairs * 16) : 0, 0);
  buffers->s.resize(static_cast<size_t>(nb * n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t half = r % 2;  // row 2p + half of pair p
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t pair = b * n_pairs + r / 2;
      const int8_t* q = acts->q + r * acts->n_in + b * kActBlock;
      std::copy(q, q + kActBlock, buffers->q.begin() + pair * 64 + half * 32);
      const float d = acts->ds[2 * (r * nb + b)];
      std::fill_n(buffers->d.begin() + pair * 16 + half * 8, 8, d);
      if (offset != 0) {
        for (int lane = 0; lane < 8; ++lane) {
          const int32_t sum = q[4 * lane] + q[4 * lane + 1] + q[4 * lane + 2] + q[4 * lane + 3];
          buffers->bias[pair * 16 + half * 8 + lane] = -offset * sum;
        }
      }
      buffers->s[b * n_rows + r] = acts->ds[2 * (r * nb + b) + 1];
    }
  }
  acts->n_pairs = n_pairs;
  acts->pair_q = buffers->q.data();
  acts->pair_d = buffers->d.data();
  acts->pair_bias = offset != 0 ? buffers->bias.data() : nullptr;
  acts->pair_s = buffers->s.data();
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

absl::Status Run(DType wtype, const void* W, size_t row_bytes, int64_t n_out, int64_t n_in,
                 const float* x, size_t x_stride, int64_t n_rows, float* y, size_t y_stride,
                 ThreadPool* pool) {
  const qmm::Kernel kernel = PickKernel(wtype, n_rows);
  if (kernel == nullptr) {
    return Errorf(LLM_ERR_UNSUPPORTED, "QuantMatMul: no kernel for weight type %d",
                  static_cast<int>(wtype));
  }
  qmm::Acts acts;
  acts.x = x;
  acts.x_stride = x_stride;
  acts.n_rows = n_rows;
  acts.n_in = n_in;
  std::vector<int8_t> q;
  std::vector<float> ds;
  qmm::PairBuffers pairs;
  if (qmm::UsesQuantizedActs(wtype)) {
    const int64_t nb = n_in / qmm::kActBlock;
    q.resize(static_cast<size_t>(n_rows * n_in));
    ds.resize(static_cast<size_t>(2 * n_rows * nb));
    // The AVX-512 quantizer gives the scalar one's bytes and scales bit for
    // bit (tests/backend/quant_matmul_test.cpp); it matters for batches: the
    // scalar loop was ~10 % of a 16-session decode pass.
    const auto quantize = ActiveSimdLevel() == SimdLevel::kAvx512 ? &qmm::QuantizeRowQ8Avx512
                                                                   : &qmm::QuantizeRowQ8Scalar;
    for (int64_t r = 0; r < n_rows; ++r) {
      quantize(x + r * x_stride, n_in, q.data() + r * n_in, ds.data() + 2 * r * nb);
    }
    acts.q = q.data();
    acts.ds = ds.data();
    acts.n_blocks = nb;
    if (n_rows >= 2 && ActiveSimdLevel() == SimdLevel::kAvx512) {
      qmm::PackPairs(wtype, &acts, &pairs);
    }
  }

  auto run_rows = [&](int64_t o_begin, int64_t o_end) {
    std::vector<float> scratch(static_cast<size_t>(n_in));
    kernel(W, row_bytes, o_begin, o_end, acts, y, y_stride, scratch.data());
  };
  const double work =
      static_cast<double>(n_out) * static_cast<double>(n_in) * static_cast<double>(n_rows);
  if (pool != nullptr && pool->size() > 1 && work >= static_cast<double>(kMinParallelWork)) {
    const int64_t n_tasks = (n_out + kRowsPerTask - 1) / kRowsPerTask;
    pool->ParallelFor(n_tasks, [&](int64_t t_begin, int64_t t_end) {
      run_rows(t_begin * kRowsPerTask, std::min(n_out, t_end * kRowsPerTask));
    });
  } else {
    run_rows(0, n_out);
  }
  return absl::OkStatus();
}

}  // namespace

bool QuantMatMulQuantizesActivations(DType t) { return qmm::UsesQuantizedActs(t); }

absl::Status QuantMatMul(DType wtype, const void* W, size_t row_bytes, int64_t n_out, int64_t n_in,
                         const float* x, size_t x_stride, int64_t n_rows, float* y, size_t y_stride,
                         ThreadPool* pool) {
  if (n_out < 0 || n_in <= 0 || n_rows < 0) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "QuantMatMul: bad shape n_out=%d n_in=%d n_rows=%d",
                  n_out, n_in, n_rows);
  }
  if (n_out == 0 || n_rows == 0) return absl::OkStatus();
  if (W == nullptr || x == nullptr || y == nullptr) {
    return Error(LLM_ERR_INVALID_ARGUMENT, "QuantMatMul: null pointer");
  }
  if (qmm::ScalarKernel(wtype) == nullptr) {
    return Errorf(LLM_ERR_UNSUPPORTED, "QuantMatMul: weight type %d not supported",
                  static_cast<int>(wtype));
  }
  const std::optional<size_t> need = RowBytes(wtype, static_cast<size_t>(n_in));
  if (!need) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "QuantMatMul: n_in=%d is not a multiple of the block size of type %d", n_in,
                  static_cast<int>(wtype));
  }
  if (row_bytes < *need) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "QuantMatMul: row_bytes %d < %d needed for n_in=%d",
                  row_bytes, *need, n_in);
  }
  // Rows are read through their element / block types: W and row_bytes must
  // keep every row at the type's natural alignment (always true for GGUF).
  const size_t align = wtype == DType::kF32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(W) % align != 0 || row_bytes % align != 0) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "QuantMatMul: weights must be %d-byte aligned (W=%p, row_bytes=%d)", align, W,
                  row_bytes);
  }
  if ((n_rows > 1 &&
       (x_stride < static_cast<size_t>(n_in) || y_stride < static_cast<size_t>(n_out)))) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "QuantMatMul: x_stride %d / y_stride %d too small",
                  x_stride, y_stride);
  }
  // Scratch sizes are n_rows * n_in: refuse shapes whose product overflows.
  constexpr int64_t kMaxElems = int64_t{1} << 40;
  if (n_in > kMaxElems / n_rows || n_out > kMaxElems / n_in) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "QuantMatMul: shape too large (%d x %d x %d)", n_rows,
                  n_out, n_in);
  }
  try {
    return Run(wtype, W, row_bytes, n_out, n_in, x, x_stride, n_rows, y, y_stride, pool);
  } catch (const std::bad_alloc&) {
    return Error(LLM_ERR_OUT_OF_MEMORY, "QuantMatMul: out of memory");
  } catch (const std::exception& e) {
    return Errorf(LLM_ERR_INTERNAL, "QuantMatMul: %s", e.what());
  } catch (...) {
    return Error(LLM_ERR_INTERNAL, "QuantMatMul: unknown exception");
  }
}

}  // namespace llm
