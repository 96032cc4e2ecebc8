#include "backend/cpu/matmul.h"

#include <omp.h>

#include <memory>
#include <mutex>
#include <new>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "core/status.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace llm {
namespace {

using ShapeKey = std::tuple<int64_t, int64_t, int64_t, int>;  // m, n, k, n_threads
constexpr size_t kMaxCachedPrimitives = 1024;

// One CPU engine for the process (oneDNN engines are thread-safe) and the
// primitive cache. Primitives are immutable and may execute concurrently on
// different streams; the map is guarded by the mutex.
struct DnnlState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::mutex mu;
  absl::flat_hash_map<ShapeKey, std::shared_ptr<dnnl::matmul>> cache;
};

DnnlState& State() {
  static DnnlState* state = new DnnlState();  // never destroyed: safe at exit
  return *state;
}

std::shared_ptr<dnnl::matmul> GetPrimitive(DnnlState& st, int64_t m, int64_t n, int64_t k,
                                           int n_threads) {
  const ShapeKey key{m, n, k, n_threads};
  {
    std::lock_guard<std::mutex> lock(st.mu);
    auto it = st.cache.find(key);
    if (it != st.cache.end()) return it->second;
  }
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const dnnl::memory::desc a_md({m, k}, dt::f32, tag::ab);
  const dnnl::memory::desc w_md({k, n}, dt::f32, tag::ba);  // w[n][k] seen as a k x n matrix
  const dnnl::memory::desc c_md({m, n}, dt::f32, tag::ab);
  const dnnl::matmul::desc desc(a_md, w_md, c_md);
  const dnnl::matmul::primitive_desc pd(desc, st.engine);
  auto prim = std::make_shared<dnnl::matmul>(pd);
  std::lock_guard<std::mutex> lock(st.mu);
  // Prefill chunk sizes vary (every m is a new shape): bound the cache. Callers
  // hold shared_ptrs, so dropping entries never frees a primitive in use.
  if (st.cache.size() >= kMaxCachedPrimitives) st.cache.clear();
  auto [it, inserted] = st.cache.emplace(key, prim);
  return it->second;
}

}  // namespace

absl::Status MatMulF32(const float* a, const float* w, float* c, int64_t m, int64_t n, int64_t k,
                       int n_threads) {
  if (m < 0 || n < 0 || k <= 0 || n_threads < 1) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "MatMulF32: bad shape m=%d n=%d k=%d threads=%d", m, n,
                  k, n_threads);
  }
  if (m == 0 || n == 0) return absl::OkStatus();
  if (a == nullptr || w == nullptr || c == nullptr) {
    return Error(LLM_ERR_INVALID_ARGUMENT, "MatMulF32: null pointer");
  }
  try {
    DnnlState& st = State();
    // oneDNN (OpenMP runtime) reads the calling thread's OpenMP thread count
    // when it creates and executes primitives.
    omp_set_num_threads(n_threads);
    std::shared_ptr<dnnl::matmul> prim = GetPrimitive(st, m, n, k, n_threads);
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dnnl::memory a_mem({{m, k}, dt::f32, tag::ab}, st.engine, const_cast<float*>(a));
    dnnl::memory w_mem({{k, n}, dt::f32, tag::ba}, st.engine, const_cast<float*>(w));
    dnnl::memory c_mem({{m, n}, dt::f32, tag::ab}, st.engine, c);
    dnnl::stream stream(st.engine);  // per call: streams are not shared between threads
    prim->execute(stream,
                  {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DST, c_mem}});
    stream.wait();
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_out_of_memory)
      return Errorf(LLM_ERR_OUT_OF_MEMORY, "MatMulF32: %s", e.what());
    return Errorf(LLM_ERR_INTERNAL, "MatMulF32: oneDNN error %d: %s", static_cast<int>(e.status),
                  e.what());
  } catch (const std::bad_alloc&) {
    return Error(LLM_ERR_OUT_OF_MEMORY, "MatMulF32: out of memory");
  } catch (const std::exception& e) {
    return Errorf(LLM_ERR_INTERNAL, "MatMulF32: %s", e.what());
  } catch (...) {
    return Error(LLM_ERR_INTERNAL, "MatMulF32: unknown exception");
  }
  return absl::OkStatus();
}

}  // namespace llm
