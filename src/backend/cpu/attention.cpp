#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <new>
#include <vector>

#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/cpu_features.h"
#include "core/half.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace llm {
namespace {

// Element i of a K/V row as f32.
inline float KvAt(const void* base, bool f16, size_t i) {
  return f16 ? F16ToF32(static_cast<const uint16_t*>(base)[i]) : static_cast<const float*>(base)[i];
}

// f32 dot with 8 interleaved partial sums, combined pairwise, tail in order.
float DotQK(const float* q, const void* k, bool f16, size_t off, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  if (f16) {
    const uint16_t* kh = static_cast<const uint16_t*>(k) + off;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) acc[j] += q[i + j] * F16ToF32(kh[i + j]);
  } else {
    const float* kf = static_cast<const float*>(k) + off;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) acc[j] += q[i + j] * kf[i + j];
  }
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += q[i] * KvAt(k, f16, off + static_cast<size_t>(i));
  return sum;
}

// f32 -> nearest-even f16 -> f32.
inline float RoundF16(float x) { return F16ToF32(F32ToF16(x)); }

// One (query t, head h): scores [n_kv] and acc [head_dim] are scratch.
// With an f16 cache this reproduces ggml-cpu's non-flash attention rounding
// points (llama.cpp's default): kq = mul_mat(k_f16, q) converts q to f16
// first, kqv = mul_mat(v_f16, softmax) converts the normalized probabilities
// to f16 first; products accumulate in f32, the softmax sum in double, and
// the probabilities are exp(s - max) * (float)(1 / sum) (ggml_vec_scale_f32).
// With an f32 cache q and the weights stay f32 and the normalization is
// applied to the output instead.
void AttendOne(const float* qh, int64_t n_kv, int64_t g, const attn::KvRows& kv, float scale,
               float* scores, float* acc, float* out) {
  const int64_t hd = kv.head_dim;
  const size_t head_off = static_cast<size_t>(g * hd);
  if (kv.f16) {  // acc holds the f16-rounded query until the V pass
    for (int64_t d = 0; d < hd; ++d) acc[d] = RoundF16(qh[d]);
    qh = acc;
  }
  float mx = -INFINITY;
  for (int64_t p = 0; p < n_kv; ++p) {
    scores[p] = DotQK(qh, kv.k[p], kv.f16, head_off, hd) * scale;
    mx = std::max(mx, scores[p]);
  }
  double sum = 0.0;
  for (int64_t p = 0; p < n_kv; ++p) {
    scores[p] = std::exp(scores[p] - mx);
    sum += scores[p];
  }
  const float inv = static_cast<float>(1.0 / sum);
  if (kv.f16) {
    for (int64_t p = 0; p < n_kv; ++p) scores[p] = RoundF16(scores[p] * inv);
  }
  std::fill(acc, acc + hd, 0.0f);
  for (int64_t p = 0; p < n_kv; ++p) {
    const float wp = scores[p];
    if (kv.f16) {
      const uint16_t* vh = reinterpret_cast<const uint16_t*>(kv.v[p]) + head_off;
      for (int64_t d = 0; d < hd; ++d) acc[d] += wp * F16ToF32(vh[d]);
    } else {
      const float* vf = reinterpret_cast<const float*>(kv.v[p]) + head_off;
      for (int64_t d = 0; d < hd; ++d) acc[d] += wp * vf[d];
    }
  }
  if (kv.f16) {
    std::copy(acc, acc + hd, out);
  } else {
    for (int64_t d = 0; d < hd; ++d) out[d] = acc[d] * inv;
  }
}

}  // namespace

namespace attn {
AttendFn ScalarAttend() { return &AttendOne; }
}  // namespace attn

absl::Status Attention(const float* q, int64_t n_q, int64_t n_head, int64_t pos0, const KvView& kv,
                       float* out, ThreadPool* pool, bool batch_invariant) {
  if (n_q < 0 || n_head <= 0 || pos0 < 0 || kv.n_head_kv <= 0 || kv.head_dim <= 0 ||
      n_head % kv.n_head_kv != 0 || kv.block_tokens <= 0 ||
      kv.row_stride < static_cast<size_t>(kv.n_head_kv * kv.head_dim)) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "Attention: bad shape n_q=%d n_head=%d n_head_kv=%d head_dim=%d pos0=%d "
                  "row_stride=%d block_tokens=%d",
                  n_q, n_head, kv.n_head_kv, kv.head_dim, pos0, kv.row_stride, kv.block_tokens);
  }
  if (n_q == 0) return absl::OkStatus();
  if (q == nullptr || out == nullptr || kv.blocks == nullptr) {
    return Error(LLM_ERR_INVALID_ARGUMENT, "Attention: null q, out or KV block table");
  }
  const int64_t hd = kv.head_dim;
  const int64_t group = n_head / kv.n_head_kv;
  const int64_t n_pos = pos0 + n_q;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const int64_t n_tasks = n_q * n_head;
  const SimdLevel level = ActiveSimdLevel();
  // On AVX-512 the kernels reproduce llama.cpp's CPU attention bit for bit
  // (attention_avx512.cpp), including its different summation order for a
  // one-token step (n_q == 1) -- so there, unlike the other levels, a prompt
  // prefilled in one step and the same tokens decoded one by one differ in
  // the last bits, unless batch_invariant asks for the multi-token kernel at
  // every n_q. Results never depend on other sequences, threads or paging.
  attn::AttendFn attend = level == SimdLevel::kScalar ? attn::ScalarAttend() : attn::Avx2Attend();
  if (level == SimdLevel::kAvx512 && n_q == 1 && hd % 64 == 0 && !batch_invariant) {
    attend = attn::Avx512AttendOneToken();
  } else if (level == SimdLevel::kAvx512 && hd % 16 == 0) {
    attend = attn::Avx512Attend();
  }
  try {
    // Row pointers of positions 0 .. n_pos-1, [K rows | V rows], resolved by
    // one walk over the blocks (no division per position) and shared by
    // every (query, head) task.
    std::vector<const uint8_t*> rows(static_cast<size_t>(2 * n_pos));
    const size_t row_bytes = kv.row_stride * (kv.f16 ? 2 : 4);
    for (int64_t b = 0, p = 0; p < n_pos; ++b) {
      const uint8_t* base = kv.blocks[b];
      if (base == nullptr) {
        return Errorf(LLM_ERR_INVALID_ARGUMENT, "Attention: KV block %d (positions %d..) is null",
                      b, p);
      }
      const uint8_t* k = base + kv.k_offset;
      const uint8_t* v = base + kv.v_offset;
      const int64_t end = std::min(n_pos, p + kv.block_tokens);
      for (; p < end; ++p, k += row_bytes, v += row_bytes) {
        rows[static_cast<size_t>(p)] = k;
        rows[static_cast<size_t>(n_pos + p)] = v;
      }
    }
    attn::KvRows kv_rows;
    kv_rows.k = rows.data();
    kv_rows.v = rows.data() + n_pos;
    kv_rows.f16 = kv.f16;
    kv_rows.head_dim = hd;
    auto run = [&](int64_t begin, int64_t end) {
      std::vector<float> scores(static_cast<size_t>(n_pos));
      std::vector<float> acc(static_cast<size_t>(hd));
      for (int64_t task = begin; task < end; ++task) {
        const int64_t t = task / n_head, h = task % n_head;
        const float* qh = q + (t * n_head + h) * hd;
        attend(qh, pos0 + t + 1, h / group, kv_rows, scale, scores.data(), acc.data(),
               out + (t * n_head + h) * hd);
      }
    };
    if (pool != nullptr && pool->size() > 1 && n_tasks > 1) {
      pool->ParallelFor(n_tasks, run);
    } else {
      run(0, n_tasks);
    }
  } catch (const std::bad_alloc&) {
    return Error(LLM_ERR_OUT_OF_MEMORY, "Attention: out of memory");
  } catch (const std::exception& e) {
    return Errorf(LLM_ERR_INTERNAL, "Attention: %s", e.what());
  } catch (...) {
    return Error(LLM_ERR_INTERNAL, "Attention: unknown exception");
  }
  return absl::OkStatus();
}

}  // namespace llm
