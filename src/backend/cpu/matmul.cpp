#include "backend/cpu/matmul.h"

#include <omp.h>

#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <tuple>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "backend/cpu/ops.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace llm {
namespace {

// m, n, k, n_threads, bf16 inputs
using ShapeKey = std::tuple<int64_t, int64_t, int64_t, int, bool>;
constexpr size_t kMaxCachedPrimitives = 1024;

// A cached primitive and the scratchpad it needs. The primitive is built with
// a user-managed scratchpad: oneDNN's default (library) scratchpad is one
// global buffer shared by all primitives (unless oneDNN was built with
// DNNL_ENABLE_CONCURRENT_EXEC), so two threads executing at once would
// corrupt each other's results. Each call allocates its own.
struct Entry {
  dnnl::matmul prim;
  dnnl::memory::desc scratch_md;
};

// One CPU engine for the process (oneDNN engines are thread-safe) and the
// primitive cache. Primitives are immutable and may execute concurrently on
// different streams; the map is guarded by the mutex. std::map, not an absl
// Swiss table: Debian's Abseil corrupts a flat_hash_map whose allocation
// throws (SECURITY.md), while a node map's insert leaves it unchanged.
struct DnnlState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::mutex mu;
  std::map<ShapeKey, std::shared_ptr<const Entry>> cache;
};

DnnlState& State() {
  static DnnlState* state = new DnnlState();  // never destroyed: safe at exit
  return *state;
}

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

std::shared_ptr<const Entry> GetPrimitive(DnnlState& st, int64_t m, int64_t n, int64_t k,
                                          int n_threads, bool bf16) {
  const ShapeKey key{m, n, k, n_threads, bf16};
  {
    std::lock_guard<std::mutex> lock(st.mu);
    auto it = st.cache.find(key);
    if (it != st.cache.end()) return it->second;
  }
  const dt in = bf16 ? dt::bf16 : dt::f32;
  const dnnl::memory::desc a_md({m, k}, in, tag::ab);
  const dnnl::memory::desc w_md({k, n}, in, tag::ba);  // w[n][k] seen as a k x n matrix
  const dnnl::memory::desc c_md({m, n}, dt::f32, tag::ab);
  const dnnl::matmul::desc desc(a_md, w_md, c_md);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::primitive_desc pd(desc, attr, st.engine);
  auto prim = std::make_shared<const Entry>(Entry{dnnl::matmul(pd), pd.scratchpad_desc()});
  std::lock_guard<std::mutex> lock(st.mu);
  // Prefill chunk sizes vary (every m is a new shape): bound the cache. Callers
  // hold shared_ptrs, so dropping entries never frees a primitive in use.
  if (st.cache.size() >= kMaxCachedPrimitives) st.cache.clear();
  auto [it, inserted] = st.cache.emplace(key, prim);
  return it->second;
}

absl::Status CheckArgs(const char* name, const void* a, const void* w, const float* c, int64_t m,
                       int64_t n, int64_t k, int n_threads) {
  if (m < 0 || n < 0 || k <= 0 || n_threads < 1) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "%s: bad shape m=%d n=%d k=%d threads=%d", name, m, n,
                  k, n_threads);
  }
  if (m > 0 && n > 0 && (a == nullptr || w == nullptr || c == nullptr)) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "%s: null pointer", name);
  }
  return absl::OkStatus();
}

// a, w: f32 or bf16 (uint16_t) per `bf16`.
absl::Status Run(const char* name, const void* a, const void* w, float* c, int64_t m, int64_t n,
                 int64_t k, int n_threads, bool bf16) {
  try {
    DnnlState& st = State();
    // oneDNN (OpenMP runtime) reads the calling thread's OpenMP thread count
    // when it creates and executes primitives.
    omp_set_num_threads(n_threads);
    std::shared_ptr<const Entry> entry = GetPrimitive(st, m, n, k, n_threads, bf16);
    const dt in = bf16 ? dt::bf16 : dt::f32;
    dnnl::memory a_mem({{m, k}, in, tag::ab}, st.engine, const_cast<void*>(a));
    dnnl::memory w_mem({{k, n}, in, tag::ba}, st.engine, const_cast<void*>(w));
    dnnl::memory c_mem({{m, n}, dt::f32, tag::ab}, st.engine, c);
    dnnl::memory scratch(entry->scratch_md, st.engine);  // this call's own scratchpad
    dnnl::stream stream(st.engine);  // per call: streams are not shared between threads
    entry->prim.execute(stream, {{DNNL_ARG_SRC, a_mem},
                                 {DNNL_ARG_WEIGHTS, w_mem},
                                 {DNNL_ARG_DST, c_mem},
                                 {DNNL_ARG_SCRATCHPAD, scratch}});
    stream.wait();
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_out_of_memory)
      return Errorf(LLM_ERR_OUT_OF_MEMORY, "%s: %s", name, e.what());
    if (e.status == dnnl_unimplemented) {
      return Errorf(LLM_ERR_UNSUPPORTED, "%s: not supported on this CPU: %s", name, e.what());
    }
    return Errorf(LLM_ERR_INTERNAL, "%s: oneDNN error %d: %s", name, static_cast<int>(e.status),
                  e.what());
  } catch (const std::bad_alloc&) {
    return Errorf(LLM_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
  } catch (const std::exception& e) {
    return Errorf(LLM_ERR_INTERNAL, "%s: %s", name, e.what());
  } catch (...) {
    return Errorf(LLM_ERR_INTERNAL, "%s: unknown exception", name);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MatMulF32(const float* a, const float* w, float* c, int64_t m, int64_t n, int64_t k,
                       int n_threads) {
  LLM_RETURN_IF_ERROR(CheckArgs("MatMulF32", a, w, c, m, n, k, n_threads));
  if (m == 0 || n == 0) return absl::OkStatus();
  return Run("MatMulF32", a, w, c, m, n, k, n_threads, /*bf16=*/false);
}

absl::Status MatMulBF16(const float* a, const uint16_t* w, float* c, int64_t m, int64_t n,
                        int64_t k, int n_threads) {
  LLM_RETURN_IF_ERROR(CheckArgs("MatMulBF16", a, w, c, m, n, k, n_threads));
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k > (int64_t{1} << 40) / m) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "MatMulBF16: shape too large (%d x %d)", m, k);
  }
  std::vector<uint16_t> a16;
  try {
    a16.resize(static_cast<size_t>(m * k));
  } catch (const std::bad_alloc&) {
    return Error(LLM_ERR_OUT_OF_MEMORY, "MatMulBF16: out of memory");
  }
  F32ToBF16Row(a, m * k, a16.data());
  return Run("MatMulBF16", a16.data(), w, c, m, n, k, n_threads, /*bf16=*/true);
}

}  // namespace llm
