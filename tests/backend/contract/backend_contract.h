// The backend contract suite (backend/backend.h): what every Backend must do,
// checked through the interface alone against the float64 oracle
// (kernels/cpu/ref + ref_dequantize.h). The tests (backend_contract_test.cpp)
// are TEST_Ps of the fixture BackendContract; a backend joins by
// instantiating it with its ContractBackend values, e.g.
//
//   INSTANTIATE_TEST_SUITE_P(BackendContractCuda, BackendContract,
//                            ::testing::ValuesIn(CudaContractBackends()),
//                            ContractBackendName);
//
// (cpu_backend_contract_test.cpp does it for the CPU at every SIMD level).
//
// Observation. Inputs enter a pass only through Embed of an F32 table (exact:
// row r of the table is the pass's input row tokens[r]). Outputs leave
// through Backend::ReadActivation after EndPass.
//
// Nothing here depends on a particular backend: no CPU types.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "core/dtype.h"
#include "core/half.h"
#include "gtest/gtest.h"
#include "tests/backend/contract/ref_dequantize.h"
#include "tests/backend/random_inputs.h"

namespace llm {
namespace contract {

using BackendFactory = std::function<absl::StatusOr<std::unique_ptr<Backend>>()>;

// One backend configuration under test (one gtest parameter).
struct ContractBackend {
  std::string name;  // the parameter's name, e.g. "cpu_avx2" ([A-Za-z0-9_])
  BackendFactory create;
  std::string skip;             // non-empty: why it cannot run on this host
  std::function<void()> enter;  // before each test (e.g. select an ISA level)
  std::function<void()> leave;  // after each test, even a failed one
};

inline std::string ContractBackendName(const ::testing::TestParamInfo<ContractBackend>& info) {
  return info.param.name;
}

inline std::string TypeName(DType t) {
  const auto traits = GetDTypeTraits(static_cast<uint32_t>(t));
  return traits ? traits->name : "type" + std::to_string(static_cast<int>(t));
}

// ---- tolerances ----------------------------------------------------------------
//
// Linear / Logits: |got - want| <= tol * sum_i |w_i x_i| for every output, want
// computed in float64 from the dequantized weight (ref_dequantize.h) and the
// exact f32 input. One table, one reason per row:
//  - F32, F16, BF16: the weight is used exactly as dequantized and
//    the activations as f32; only f32 accumulation differs from float64. Its
//    error is ~n_in^0.5 * 6e-8 of sum|w x| typically, n_in * 6e-8 worst case
//    (n_in <= 1280 here: 7.7e-5); 1e-4 bounds it with room for a device's
//    tree reduction, and is 100x below a dropped or misplaced block.
//  - Q4_0, Q4_1, Q8_0 (and the K-quants, per 256-block: Q8_K, f32 scale): a
//    backend may quantize the activations to 8 bits per 32-block (the CPU
//    does, as ggml: Q8_0/Q8_1, scale amax/127 stored as f16),
//    so each x_i may move by up to amax/254 (+ f16 rounding of the scale).
//    With inputs in +-[0.05, 1] that is <= 0.4% of |x_i|... relative to
//    sum|w x| the product error is bounded by ~1/254 / mean(|x|/amax) ~ 1e-2,
//    and averages out to ~1e-3 over random signs. Contract: 2e-2 per output
//    (the worst case), and the RMS over all outputs of a check must stay under
//    3e-3 (so a systematic bias, e.g. a lost Q4_1 min term, cannot hide under
//    the per-output bound).
struct LinearTolerance {
  double max_rel;  // per output, relative to sum |w x|
  double rms_rel;  // RMS over outputs of the same ratio
};

inline LinearTolerance LinearToleranceFor(DType t) {
  switch (t) {
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ8_0:
    case DType::kQ4_K:
    case DType::kQ6_K:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ5_K:
    case DType::kIQ4_XS:
      return {2e-2, 3e-3};
    default:
      return {1e-4, 2e-5};
  }
}

// The weight types of the suite: every type dtype.h marks supported and the
// oracle dequantizes.
inline std::vector<DType> ContractWeightTypes() {
  return {DType::kF32,  DType::kF16,  DType::kBF16,  DType::kQ4_0, DType::kQ4_1,
          DType::kQ8_0, DType::kQ4_K,  DType::kQ6_K,  DType::kQ5_0, DType::kQ5_1,
          DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K, DType::kQ5_K, DType::kIQ4_XS};
}

// Odd inner sizes for a type: odd element counts for plain types, odd block
// counts (3 and 5 blocks) for quantized ones.
inline std::vector<int64_t> OddInnerSizes(DType t) {
  const auto traits = GetDTypeTraits(static_cast<uint32_t>(t));
  const int64_t be = static_cast<int64_t>(traits->block_elems);
  if (be == 1) return {97, 161};
  return {3 * be, 5 * be};
}

// Random inputs: tests/backend/random_inputs.h (NonZero, RandomVector,
// RandomWeights).
using testing_util::NonZero;
using testing_util::RandomVector;
using testing_util::RandomWeights;

// ---- the fixture ---------------------------------------------------------------

// A weight the test made: its host bytes (kept alive by the fixture), its id
// in the backend, and its float64 values.
struct HostWeight {
  WeightId id;
  DType type = DType::kF32;
  int64_t n_out = 0, n_in = 0;
  size_t row_bytes = 0;
  const uint8_t* bytes = nullptr;
  std::vector<double> values;  // [n_out][n_in], dequantized in float64
  std::vector<double> scale;   // [n_out][n_in], ref_dequantize.h's scale
};

// One sequence of a pass as a test describes it.
struct SeqSpec {
  SeqSpec() = default;
  SeqSpec(int64_t n_rows_, int64_t pos0_, bool wants_logits_ = false,
          KvType kv_type_ = KvType::kF16, std::vector<int32_t> blocks_ = {})
      : n_rows(n_rows_),
        pos0(pos0_),
        wants_logits(wants_logits_),
        kv_type(kv_type_),
        blocks(std::move(blocks_)) {}
  int64_t n_rows = 0;
  int64_t pos0 = 0;
  bool wants_logits = false;
  KvType kv_type = KvType::kF16;
  std::vector<int32_t> blocks;  // empty: the fixture assigns fresh blocks
};

// A pass's descriptor with the storage its spans point into.
struct OwnedPass {
  std::vector<int32_t> tokens;
  std::vector<std::vector<int32_t>> blocks;
  std::vector<PassSequence> sequences;
  PassDesc desc() const { return PassDesc{tokens, sequences}; }
};

class BackendContract : public ::testing::TestWithParam<ContractBackend> {
 protected:
  void SetUp() override {
    const ContractBackend& p = GetParam();
    if (!p.skip.empty()) GTEST_SKIP() << p.name << ": " << p.skip;
    seed_ = std::random_device{}();
    if (const char* s = std::getenv("LLM_CONTRACT_SEED"))
      seed_ = static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
    rng_.seed(seed_);
    if (p.enter) p.enter();
    entered_ = true;
    auto b = p.create();
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = std::move(*b);
  }

  void TearDown() override {
    kv_.reset();  // the storage first: a device backend may own its memory
    backend_.reset();
    if (entered_ && GetParam().leave) GetParam().leave();
    if (HasFailure()) {
      std::cout << "[ CONTRACT ] " << GetParam().name << " failed with seed " << seed_
                << " (rerun with LLM_CONTRACT_SEED=" << seed_ << ")\n";
    }
  }

  Backend& b() { return *backend_; }
  std::mt19937& rng() { return rng_; }

  // A fresh backend (drops weights, activations and KV of the old one).
  void ResetBackend() {
    kv_.reset();
    backend_.reset();
    kv_blocks_ = 0;
    next_block_ = 0;
    auto nb = GetParam().create();
    ASSERT_TRUE(nb.ok()) << nb.status();
    backend_ = std::move(*nb);
  }

  const uint8_t* Keep(std::vector<uint8_t> bytes) {
    memory_.push_back(std::move(bytes));
    return memory_.back().data();
  }

  // A random matrix of `type` bound with AddMatrix (row padding optional).
  HostWeight AddRandomMatrix(DType type, int64_t n_out, int64_t n_in, size_t pad = 0) {
    HostWeight w;
    w.type = type;
    w.n_out = n_out;
    w.n_in = n_in;
    w.row_bytes = *RowBytes(type, static_cast<size_t>(n_in)) + pad;
    w.bytes = Keep(RandomWeights(rng_, type, n_out, n_in, w.row_bytes));
    Dequantize(&w);
    Bind(&w, /*vector=*/false);
    return w;
  }

  // An F32 matrix with the given values (an input table for Embed).
  HostWeight AddF32Matrix(const std::vector<float>& v, int64_t n_out, int64_t n_in) {
    HostWeight w;
    w.type = DType::kF32;
    w.n_out = n_out;
    w.n_in = n_in;
    w.row_bytes = static_cast<size_t>(n_in) * 4;
    std::vector<uint8_t> bytes(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    w.bytes = Keep(std::move(bytes));
    Dequantize(&w);
    Bind(&w, false);
    return w;
  }

  // A random vector (norm weight) of `type` bound with AddVector.
  HostWeight AddRandomVector(DType type, int64_t n) {
    HostWeight w;
    w.type = type;
    w.n_out = 1;
    w.n_in = n;
    w.row_bytes = *RowBytes(type, static_cast<size_t>(n));
    w.bytes = Keep(RandomWeights(rng_, type, 1, n, w.row_bytes));
    Dequantize(&w);
    Bind(&w, true);
    return w;
  }

  // The KV storage of the backend (created on first use with `layout`).
  KvStorage* Kv(const KvLayout& layout = KvLayout{1, 1, 4}) {
    if (!kv_) {
      std::vector<int64_t> layers(static_cast<size_t>(layout.n_layer));
      for (size_t l = 0; l < layers.size(); ++l) layers[l] = static_cast<int64_t>(l);
      auto s = b().CreateKvStorage(layout, layers);
      EXPECT_TRUE(s.ok()) << s.status();
      if (!s.ok()) return nullptr;
      kv_ = std::move(*s);
      layout_ = layout;
    }
    return kv_.get();
  }
  const KvLayout& layout() const { return layout_; }

  // Makes sure blocks [0, n) have storage.
  void EnsureBlocks(int64_t n) {
    if (n <= kv_blocks_) return;
    ASSERT_NE(Kv(), nullptr);
    ASSERT_TRUE(kv_->AddBlocks(static_cast<int32_t>(kv_blocks_), n - kv_blocks_));
    kv_blocks_ = n;
  }

  // n fresh block ids (never used before in this backend).
  std::vector<int32_t> FreshBlocks(int64_t n) {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < n; ++i) ids.push_back(next_block_++);
    EnsureBlocks(next_block_);
    return ids;
  }

  // A pass over specs (rows tiled in order). tokens: empty -> 0, 1, 2, ...
  // (row r reads row r of an Embed table).
  OwnedPass MakePass(const std::vector<SeqSpec>& specs, std::vector<int32_t> tokens = {}) {
    OwnedPass p;
    int64_t rows = 0;
    for (const SeqSpec& s : specs) rows += s.n_rows;
    if (tokens.empty()) {
      for (int64_t r = 0; r < rows; ++r) tokens.push_back(static_cast<int32_t>(r));
    }
    p.tokens = std::move(tokens);
    p.blocks.reserve(specs.size());
    for (const SeqSpec& s : specs) {
      if (!s.blocks.empty()) {
        p.blocks.push_back(s.blocks);
      } else {
        const int64_t bt = KvLayout::block_tokens(s.kv_type);
        p.blocks.push_back(FreshBlocks((s.pos0 + s.n_rows + bt - 1) / bt));
      }
    }
    int64_t row0 = 0;
    for (size_t i = 0; i < specs.size(); ++i) {
      PassSequence q;
      q.row0 = row0;
      q.n_rows = specs[i].n_rows;
      q.pos0 = specs[i].pos0;
      q.kv = KvBlockList{p.blocks[i], specs[i].kv_type};
      q.wants_logits = specs[i].wants_logits;
      p.sequences.push_back(q);
      row0 += specs[i].n_rows;
    }
    return p;
  }

  // After EndPass: rows [0, n_rows) of an activation.
  std::vector<float> ReadRows(ActivationId id, int64_t n_rows) {
    std::vector<float> out(static_cast<size_t>(n_rows * id.width), NAN);
    for (int64_t r = 0; r < n_rows; ++r) {
      const absl::Status st = b().ReadActivation(id, r, out.data() + r * id.width);
      EXPECT_TRUE(st.ok()) << "reading row " << r << " of activation " << id.index << ": " << st;
      if (!st.ok()) break;
    }
    return out;
  }

  // Injects rows [n_rows][width] into a fresh activation during a pass whose
  // tokens are 0 .. n_rows-1: binds an F32 table before BeginPass (returns it);
  // call Embed(table, act) inside the pass.
  struct Input {
    HostWeight table;
    ActivationId act;
    std::vector<float> rows;
  };
  Input DeclareInput(int64_t n_rows, int64_t width, float lo = 0.05f, float hi = 1.0f) {
    Input in;
    in.rows = RandomVector(rng_, static_cast<size_t>(n_rows * width), lo, hi);
    in.table = AddF32Matrix(in.rows, n_rows, width);
    in.act = b().DeclareActivation(width, ActivationRows::kTokens);
    return in;
  }

  uint32_t seed() const { return seed_; }

 private:
  void Dequantize(HostWeight* w) {
    w->values.resize(static_cast<size_t>(w->n_out * w->n_in));
    w->scale.resize(w->values.size());
    for (int64_t o = 0; o < w->n_out; ++o) {
      ASSERT_TRUE(RefDequantizeRow(w->type, w->bytes + o * w->row_bytes, w->n_in,
                                   w->values.data() + o * w->n_in, w->scale.data() + o * w->n_in));
    }
  }
  void Bind(HostWeight* w, bool vector) {
    WeightSource src;
    src.name = "contract." + TypeName(w->type);
    src.type = w->type;
    src.data = w->bytes;
    src.n_out = w->n_out;
    src.n_in = w->n_in;
    src.row_bytes = w->row_bytes;
    auto id = vector ? b().AddVector(src) : b().AddMatrix(src);
    ASSERT_TRUE(id.ok()) << id.status();
    w->id = *id;
  }

  // Declared first: host weight bytes outlive the backend (WeightSource).
  std::deque<std::vector<uint8_t>> memory_;
  uint32_t seed_ = 0;
  std::mt19937 rng_;
  bool entered_ = false;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<KvStorage> kv_;  // destroyed before backend_
  KvLayout layout_;
  int64_t kv_blocks_ = 0;
  int32_t next_block_ = 0;
};

}  // namespace contract
}  // namespace llm
