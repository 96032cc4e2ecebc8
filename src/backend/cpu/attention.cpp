#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/thread_pool.h"
#include "core/half.h"
#include "core/status.h"

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
// applied to the output instead. softcap > 0 (Gemma 2) caps each score as
// ggml does: s = softcap * tanhf(s / softcap) after the scale.
void AttendCapped(const float* qh, int64_t n_kv, int64_t g, const attn::KvRows& kv, float scale,
                  float softcap, float* scores, float* acc, float* out) {
  const int64_t hd = kv.head_dim;
  const size_t head_off = static_cast<size_t>(g * hd);
  if (kv.f16) {  // acc holds the f16-rounded query until the V pass
    for (int64_t d = 0; d < hd; ++d) acc[d] = RoundF16(qh[d]);
    qh = acc;
  }
  float mx = -INFINITY;
  for (int64_t p = 0; p < n_kv; ++p) {
    scores[p] = DotQK(qh, kv.k[p], kv.f16, head_off, hd) * scale;
    if (softcap > 0.0f) scores[p] = softcap * std::tanh(scores[p] / softcap);
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

void AttendOne(const float* qh, int64_t n_kv, int64_t g, const attn::KvRows& kv, float scale,
               float* scores, float* acc, float* out) {
  AttendCapped(qh, n_kv, g, kv, scale, 0.0f, scores, acc, out);
}

}  // namespace

namespace attn {
AttendFn ScalarAttend() { return &AttendOne; }
}  // namespace attn

namespace {

// A job checked and resolved for the tasks: its kernel and the K / V row
// pointers of positions 0 .. n_pos-1 ([K rows | V rows] in one shared array
// from row0 on). A task is one (query, head), or with attend_heads one
// (query, kv head): the heads that read it.
// With attend_rows a task is (kRowTokens queries, kv head): the rows of those
// queries' heads that read it.
struct ResolvedJob {
  const AttentionJob* job;
  attn::AttendFn attend;
  attn::AttendHeadsFn attend_heads;  // null: per head
  attn::AttendRowsFn attend_rows;    // non-null: tasks of kRowTokens queries x one kv head
  attn::KvRows rows;                 // rows of positions first_pos .. pos0 + n_q - 1
  int64_t first_pos;                 // the first position any query of the job sees
  int64_t heads_per_task;            // 1, or n_head / n_head_kv with attend_heads
  int64_t first_task;                // the job's tasks: first_task .. + n_tasks - 1
  float scale;                       // the job's, or 1 / sqrt(head_dim)
  float softcap;                     // > 0: every task runs AttendCapped
};

absl::Status CheckJob(const AttentionJob& j, int64_t n_head) {
  const KvView& kv = j.kv;
  if (j.n_q < 0 || n_head <= 0 || j.pos0 < 0 || j.window < 0 || kv.n_head_kv <= 0 ||
      kv.head_dim <= 0 || n_head % kv.n_head_kv != 0 || kv.block_tokens <= 0 ||
      kv.row_stride < static_cast<size_t>(kv.n_head_kv * kv.head_dim)) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "Attention: bad shape n_q=%d n_head=%d n_head_kv=%d head_dim=%d pos0=%d "
                  "row_stride=%d block_tokens=%d window=%d",
                  j.n_q, n_head, kv.n_head_kv, kv.head_dim, j.pos0, kv.row_stride, kv.block_tokens,
                  j.window);
  }
  if (j.n_q > 0 && (j.q == nullptr || j.out == nullptr || kv.blocks == nullptr)) {
    return Error(LLM_ERR_INVALID_ARGUMENT, "Attention: null q, out or KV block table");
  }
  return absl::OkStatus();
}

// On AVX-512 and AVX2 the kernels reproduce llama.cpp's CPU attention as its
// build for that ISA computes it, bit for bit (attention_avx512.cpp,
// attention_avx2.cpp), including its different summation order for a
// one-token step (n_q == 1) -- so there, unlike the scalar level, a prompt
// prefilled in one step and the same tokens decoded one by one differ in
// the last bits, unless batch_invariant asks for the multi-token kernel at
// every n_q. Results never depend on other sequences, threads or paging.
// Without a window every query of a step sees positions from 0 on, so the
// rows of several queries share K and V rows (attend_rows); a windowed job
// keeps the per-(query, head) kernel, whose results attend_rows reproduces.
void PickAttend(int64_t n_q, int64_t hd, bool batch_invariant, int64_t window, ResolvedJob* r) {
  const SimdLevel level = ActiveSimdLevel();
  const bool one_token = n_q == 1 && !batch_invariant;
  r->attend = nullptr;
  r->attend_heads = nullptr;
  r->attend_rows = nullptr;
  if (level == SimdLevel::kAvx512 && one_token && hd % 64 == 0) {
    r->attend_heads = attn::Avx512AttendOneTokenHeads();
  } else if (level == SimdLevel::kAvx512 && hd % 16 == 0) {
    r->attend = attn::Avx512Attend();
    if (window == 0) r->attend_rows = attn::Avx512AttendRows();
  } else if (level == SimdLevel::kScalar) {
    r->attend = attn::ScalarAttend();
  } else if (one_token && hd % 32 == 0) {
    r->attend_heads = attn::Avx2AttendOneTokenHeads();
  } else {
    r->attend = one_token ? attn::Avx2AttendOneToken() : attn::Avx2Attend();
    if (!one_token && window == 0) r->attend_rows = attn::Avx2AttendRows();
  }
}

// The first position a query at pos sees: pos + 1 - window with a window.
inline int64_t FirstVisible(int64_t pos, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, pos + 1 - window) : 0;
}

// Row pointers of positions first .. n_pos-1 of kv into k_rows / v_rows
// (index p - first), by one walk over the blocks (no division per position).
// Blocks before first's are not read.
absl::Status ResolveRows(const KvView& kv, int64_t first, int64_t n_pos, const uint8_t** k_rows,
                         const uint8_t** v_rows) {
  const size_t row_bytes = kv.row_stride * (kv.f16 ? 2 : 4);
  for (int64_t b = first / kv.block_tokens, p = first; p < n_pos; ++b) {
    const uint8_t* base = kv.blocks[b];
    if (base == nullptr) {
      return Errorf(LLM_ERR_INVALID_ARGUMENT, "Attention: KV block %d (positions %d..) is null", b,
                    p);
    }
    const int64_t in_block = p - b * kv.block_tokens;
    const uint8_t* k = base + kv.k_offset + static_cast<size_t>(in_block) * row_bytes;
    const uint8_t* v = base + kv.v_offset + static_cast<size_t>(in_block) * row_bytes;
    const int64_t end = std::min(n_pos, (b + 1) * kv.block_tokens);
    for (; p < end; ++p, k += row_bytes, v += row_bytes) {
      k_rows[p - first] = k;
      v_rows[p - first] = v;
    }
  }
  return absl::OkStatus();
}

// The query of a per-head or heads task (not attend_rows) and the positions
// it sees: query t (position pos0 + t) sees first .. pos0 + t.
struct TaskQuery {
  int64_t t;
  int64_t first;  // the first visible position
  int64_t n_kv;   // positions first .. pos0 + t
};

inline TaskQuery QueryOfTask(const ResolvedJob& r, int64_t task, int64_t n_head) {
  const AttentionJob& j = *r.job;
  const int64_t t = (task - r.first_task) / (n_head / r.heads_per_task);
  const int64_t first = FirstVisible(j.pos0 + t, j.window);
  return {t, first, j.pos0 + t + 1 - first};
}

// r's rows from position `first` on.
inline attn::KvRows RowsFrom(const ResolvedJob& r, int64_t first) {
  attn::KvRows rows = r.rows;
  rows.k += first - r.first_pos;
  rows.v += first - r.first_pos;
  return rows;
}

// The run loop's prefetch of the next query's rows for one-token heads
// tasks (a query's kv heads): while a query's tasks run, the rows of the
// query after it in the chunk are prefetched (attention_kernels.h). The
// chunk's first query, whose rows nothing fetched ahead, fetches its own
// rows -- every kv head's -- during its first task, for its later ones; the
// next query's then start with its second task. A chunk runs its tasks
// from `last` down to `first`.
class NextQueryRows {
 public:
  NextQueryRows(const std::vector<ResolvedJob>& resolved, int64_t n_head, int64_t first,
                int64_t last)
      : resolved_(resolved), n_head_(n_head), first_(first), last_(last) {}

  // The prefetch for heads task `task` of job ji (query q) to advance, or
  // null.
  attn::NextRowsPrefetch* ForTask(size_t ji, int64_t task, const TaskQuery& q) {
    const ResolvedJob& r = resolved_[ji];
    const int64_t tasks_per_query = n_head_ / r.heads_per_task;
    // This query's tasks after this one in the chunk (lower kv heads).
    const int64_t later = std::min((task - r.first_task) % tasks_per_query, task - first_);
    const bool new_query = &r != query_job_ || q.t != query_t_;
    query_job_ = &r;
    query_t_ = q.t;
    if (new_query && task == last_ && later > 0) {
      prefetching_ = Begin(ji, task);  // this query's own rows, within this task
      own_rows_ = true;
      attn::PaceNextRows(&rows_, q.n_kv);
    } else if (new_query || own_rows_) {
      prefetching_ = Begin(ji, r.first_task + q.t * tasks_per_query - 1);
      own_rows_ = false;
    }
    if (!prefetching_) return nullptr;
    // Spread over this task and the query's later ones: n_kv K positions
    // each.
    if (!own_rows_) attn::PaceNextRows(&rows_, (later + 1) * q.n_kv);
    return &rows_;
  }

 private:
  // Sets rows_ to the rows of the query whose first task (the highest
  // numbered) is `task`, if that task is in the chunk and runs the
  // one-token heads kernel. ji: the job of a task above it.
  bool Begin(size_t ji, int64_t task) {
    if (task < first_) return false;
    while (task < resolved_[ji].first_task) --ji;
    const ResolvedJob& r = resolved_[ji];
    if (r.attend_heads == nullptr || r.softcap > 0.0f) return false;
    const KvView& kv = r.job->kv;
    const TaskQuery q = QueryOfTask(r, task, n_head_);
    const attn::KvRows rows = RowsFrom(r, q.first);
    attn::BeginNextRows(&rows_, rows.k, rows.v, q.n_kv,
                        static_cast<size_t>(kv.n_head_kv * kv.head_dim) * (kv.f16 ? 2 : 4));
    return true;
  }

  const std::vector<ResolvedJob>& resolved_;
  const int64_t n_head_, first_, last_;
  attn::NextRowsPrefetch rows_;
  bool prefetching_ = false;                // rows_ holds rows to fetch
  bool own_rows_ = false;                   // rows_ holds the current query's own rows
  const ResolvedJob* query_job_ = nullptr;  // the current query
  int64_t query_t_ = -1;
};

// For a step of one query per job: n_parts + 1 task indices 0 = c_0 <= c_1
// <= ... <= c_n_parts = n_tasks that cut the tasks into contiguous ranges of
// about equal cost (a task's cost: its heads times (its positions + 16, a
// task's fixed work)).
std::vector<int64_t> BalancedDecodeCuts(const std::vector<ResolvedJob>& resolved, int64_t n_head,
                                        int64_t n_tasks, int n_parts) {
  // cost[i]: the total cost of tasks 0 .. i-1 (tasks are in job order).
  std::vector<double> cost(static_cast<size_t>(n_tasks) + 1, 0.0);
  for (const ResolvedJob& r : resolved) {
    const int64_t n_kv = QueryOfTask(r, r.first_task, n_head).n_kv;
    const int64_t end = &r == &resolved.back() ? n_tasks : (&r + 1)->first_task;
    for (int64_t t = r.first_task; t < end; ++t) {
      cost[static_cast<size_t>(t) + 1] =
          cost[static_cast<size_t>(t)] + static_cast<double>(r.heads_per_task * (n_kv + 16));
    }
  }
  std::vector<int64_t> cuts(static_cast<size_t>(n_parts) + 1, n_tasks);
  cuts[0] = 0;
  for (int p = 1; p < n_parts; ++p) {
    const double target = cost.back() * p / n_parts;
    cuts[static_cast<size_t>(p)] = std::max(
        cuts[static_cast<size_t>(p) - 1],
        static_cast<int64_t>(std::lower_bound(cost.begin(), cost.end(), target) - cost.begin()));
  }
  return cuts;
}

// Queries per attend_rows task: with SmolLM2's 3 heads per kv head, 12 rows
// (three groups of 4 for the kernel); tasks stay small enough to balance.
constexpr int64_t kRowTokens = 4;

absl::Status RunJobs(absl::Span<const AttentionJob> jobs, int64_t n_head, ThreadPool* pool,
                     bool batch_invariant) {
  std::vector<ResolvedJob> resolved;
  resolved.reserve(jobs.size());
  int64_t n_rows = 0, n_tasks = 0, max_pos = 0, max_hd = 0, max_heads = 1, max_rows = 0;
  for (const AttentionJob& j : jobs) {
    LLM_RETURN_IF_ERROR(CheckJob(j, n_head));
    if (j.n_q == 0) continue;
    n_rows += 2 * (j.pos0 + j.n_q - FirstVisible(j.pos0, j.window));
  }
  // [K rows | V rows] of every job, one after the other.
  std::vector<const uint8_t*> rows(static_cast<size_t>(n_rows));
  int64_t row = 0;
  for (const AttentionJob& j : jobs) {
    if (j.n_q == 0) continue;
    const int64_t first = FirstVisible(j.pos0, j.window);
    const int64_t n_pos = j.pos0 + j.n_q - first;  // rows resolved
    ResolvedJob r;
    r.job = &j;
    r.first_pos = first;
    PickAttend(j.n_q, j.kv.head_dim, batch_invariant, j.window, &r);
    r.heads_per_task = r.attend_heads != nullptr ? n_head / j.kv.n_head_kv : 1;
    r.rows.k = rows.data() + row;
    r.rows.v = rows.data() + row + n_pos;
    r.rows.f16 = j.kv.f16;
    r.rows.head_dim = j.kv.head_dim;
    LLM_RETURN_IF_ERROR(
        ResolveRows(j.kv, first, first + n_pos, rows.data() + row, rows.data() + row + n_pos));
    r.first_task = n_tasks;
    // llama.cpp's 1.0f / sqrtf(head_dim), in f32: the double-precision form
    // rounds 1 ulp away for head sizes 96 (Phi-3) and 112.
    r.scale = j.scale > 0.0f ? j.scale : 1.0f / std::sqrt(static_cast<float>(j.kv.head_dim));
    r.softcap = j.softcap;
    if (r.softcap > 0.0f) {  // only the scalar kernel caps its scores
      r.attend = nullptr;
      r.attend_heads = nullptr;
      r.attend_rows = nullptr;
      r.heads_per_task = 1;
    }
    resolved.push_back(r);
    row += 2 * n_pos;
    if (r.attend_rows != nullptr) {
      n_tasks += (j.n_q + kRowTokens - 1) / kRowTokens * j.kv.n_head_kv;
      max_heads = std::max<int64_t>(max_heads, 4);  // the rows kernel's scratch
      max_rows = std::max(max_rows, kRowTokens * (n_head / j.kv.n_head_kv));
    } else {
      n_tasks += j.n_q * n_head / r.heads_per_task;
    }
    max_heads = std::max(max_heads, r.heads_per_task);
    max_pos = std::max(max_pos, n_pos);
    max_hd = std::max(max_hd, j.kv.head_dim);
  }
  if (n_tasks == 0) return absl::OkStatus();
  // Tasks are (job, query t, head h or kv head) in job order; a chunk walks
  // its range with a cursor into resolved.
  auto run = [&](int64_t begin, int64_t end) {
    std::vector<float> scores(static_cast<size_t>(max_heads * max_pos));
    std::vector<float> acc(static_cast<size_t>(max_heads * max_hd));
    // An attend_rows task's rows: query, visible positions, output.
    std::vector<const float*> row_q(static_cast<size_t>(max_rows));
    std::vector<int64_t> row_n_kv(static_cast<size_t>(max_rows));
    std::vector<float*> row_out(static_cast<size_t>(max_rows));
    // The pool hands chunks out in order, and a prompt's later queries cost
    // more (they see more positions): chunk [begin, end) runs tasks
    // n_tasks - end .. n_tasks - begin - 1 from the last down, so the last
    // chunks handed out are the cheap ones and the threads finish together
    // (longest first).
    const int64_t last = n_tasks - 1 - begin, first = n_tasks - end;
    size_t ji = static_cast<size_t>(
        std::upper_bound(resolved.begin(), resolved.end(), last,
                         [](int64_t task, const ResolvedJob& r) { return task < r.first_task; }) -
        resolved.begin() - 1);
    NextQueryRows next_rows(resolved, n_head, first, last);
    for (int64_t task = last; task >= first; --task) {
      while (task < resolved[ji].first_task) --ji;
      const ResolvedJob& r = resolved[ji];
      const AttentionJob& j = *r.job;
      const int64_t hd = j.kv.head_dim, group = n_head / j.kv.n_head_kv;
      if (r.attend_rows != nullptr) {
        // Queries t0 .. t1-1 and heads g * group .. + group - 1, query-major;
        // no window, so query t sees positions 0 .. pos0 + t.
        const int64_t local = task - r.first_task;
        const int64_t g = local % j.kv.n_head_kv;
        const int64_t t0 = local / j.kv.n_head_kv * kRowTokens;
        const int64_t t1 = std::min(j.n_q, t0 + kRowTokens);
        int64_t n = 0;
        for (int64_t t = t0; t < t1; ++t) {
          for (int64_t h = g * group; h < (g + 1) * group; ++h, ++n) {
            const size_t at = static_cast<size_t>((t * n_head + h) * hd);
            row_q[n] = j.q + at;
            row_n_kv[n] = j.pos0 + t + 1;
            row_out[n] = j.out + at;
          }
        }
        r.attend_rows(row_q.data(), row_n_kv.data(), row_out.data(), n, g, r.rows, r.scale,
                      scores.data(), acc.data());
        continue;
      }
      const TaskQuery q = QueryOfTask(r, task, n_head);
      const int64_t h = (task - r.first_task) % (n_head / r.heads_per_task) * r.heads_per_task;
      const size_t at = static_cast<size_t>((q.t * n_head + h) * hd);  // first head's
      // The kernels get the rows from the first visible position on and
      // their count.
      attn::KvRows rows = RowsFrom(r, q.first);
      if (r.softcap > 0.0f) {
        AttendCapped(j.q + at, q.n_kv, h / group, rows, r.scale, r.softcap, scores.data(),
                     acc.data(), j.out + at);
      } else if (r.attend_heads != nullptr) {
        rows.next = next_rows.ForTask(ji, task, q);
        r.attend_heads(j.q + at, r.heads_per_task, q.n_kv, h / group, rows, r.scale, scores.data(),
                       acc.data(), j.out + at);
      } else {
        r.attend(j.q + at, q.n_kv, h / group, rows, r.scale, scores.data(), acc.data(), j.out + at);
      }
    }
  };
  if (pool != nullptr && pool->size() > 1 && n_tasks > 1) {
    // The queries of one prompt chunk differ in length (query t sees t + 1
    // more positions than query 0: two halves of a 512-token prefill cost
    // 1:3; SmolLM2's pp512 spent 12 % of its time with a thread waiting),
    // so prompts' tasks are handed out in several chunks per thread, which
    // even out. A decode step's tasks have costs known in advance (one
    // query per sequence, of its context's length): one range per thread,
    // cut where the costs balance, so that each thread prefetches the next
    // query's rows through its whole range (a chunk's first query is the
    // one that waits for its rows).
    bool prompt = false;
    for (const ResolvedJob& r : resolved) prompt |= r.job->n_q > 1;
    if (prompt) {
      pool->ParallelFor(n_tasks, run, 8);
    } else {
      const std::vector<int64_t> cuts = BalancedDecodeCuts(resolved, n_head, n_tasks, pool->size());
      pool->ParallelFor(static_cast<int64_t>(cuts.size()) - 1, [&](int64_t begin, int64_t end) {
        // Range i holds tasks cuts[i] .. cuts[i + 1] - 1; run takes them as
        // [n_tasks - end, n_tasks - begin).
        for (int64_t i = begin; i < end; ++i) {
          // An empty range (fewer tasks than threads) has nothing to run.
          if (cuts[i] < cuts[i + 1]) run(n_tasks - cuts[i + 1], n_tasks - cuts[i]);
        }
      });
    }
  } else {
    run(0, n_tasks);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AttentionBatch(absl::Span<const AttentionJob> jobs, int64_t n_head, ThreadPool* pool,
                            bool batch_invariant) {
  try {
    return RunJobs(jobs, n_head, pool, batch_invariant);
  } catch (...) {
    return StatusFromCurrentException("Attention");
  }
}

absl::Status Attention(const float* q, int64_t n_q, int64_t n_head, int64_t pos0, const KvView& kv,
                       float* out, ThreadPool* pool, bool batch_invariant, int64_t window) {
  AttentionJob job;
  job.window = window;
  job.q = q;
  job.n_q = n_q;
  job.pos0 = pos0;
  job.kv = kv;
  job.out = out;
  return AttentionBatch(absl::MakeConstSpan(&job, 1), n_head, pool, batch_invariant);
}

}  // namespace llm
