// The CPU backend (backend/backend.h): weights stay in the GGUF mapping,
// activations are host vectors, KV blocks live in CpuKvStorage, and the
// operations are the kernels of this folder -- linear.h's kernel choice
// (quantized dot products / oneDNN), attention.h, ops.h -- run on the
// backend's thread pool. Each operation is the code the forward pass called
// directly before the backend interface existed, in the same order, so the
// logits are bit-identical to it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/linear.h"
#include "backend/cpu/packed_weight.h"
#include "backend/cpu/weight.h"

namespace llm {

class CpuKvStorage;
class ThreadPool;

class CpuBackend : public Backend {
 public:
  // Starts n_threads - 1 worker threads (throws std::bad_alloc if it cannot).
  explicit CpuBackend(const BackendOptions& options);
  ~CpuBackend() override;

  const char* name() const override { return "cpu"; }
  DeviceKind device() const override { return DeviceKind::kCpu; }
  std::string Describe() const override;

  absl::StatusOr<WeightId> AddMatrix(const WeightSource& source) override;
  absl::StatusOr<WeightId> AddVector(const WeightSource& source) override;
  bool ReadsSource(WeightId id) const override;
  uint64_t WeightCopyBytes() const override;
  void SourcesPrefaulted() override;
  ActivationId DeclareActivation(int64_t width, ActivationRows rows) override;
  absl::StatusOr<std::unique_ptr<KvStorage>> CreateKvStorage(
      const KvLayout& layout, absl::Span<const int64_t> layers) override;

  absl::Status BeginPass(const PassDesc& pass) override;
  absl::Status EndPass() override;
  absl::Status Embed(WeightId table, ActivationId out) override;
  absl::Status RmsNorm(ActivationId in, WeightId weight, float eps, ActivationId out) override;
  absl::Status Rope(ActivationId x, int64_t n_heads, const RopeSpec& rope) override;
  absl::Status Linear(absl::Span<const WeightId> weights, ActivationId in,
                      absl::Span<const ActivationId> outs) override;
  absl::Status StoreKv(int64_t layer, ActivationId k, ActivationId v) override;
  absl::Status Attention(int64_t layer, int64_t n_head, int64_t window, ActivationId q,
                         ActivationId out, const AttentionSpec& spec) override;
  absl::Status SwiGlu(ActivationId gate, ActivationId up, ActivationId out) override;
  absl::Status GeGlu(ActivationId gate, ActivationId up, ActivationId out) override;
  absl::Status Add(ActivationId x, ActivationId y) override;
  absl::Status AddBias(ActivationId x, WeightId bias) override;
  absl::Status Scale(ActivationId x, float factor) override;
  absl::Status SoftCap(ActivationId x, float cap) override;
  absl::Status HeadRmsNorm(ActivationId x, int64_t n_heads, WeightId weight, float eps) override;
  absl::Status Logits(ActivationId x, WeightId norm, float eps, WeightId output,
                      ActivationId logits) override;
  absl::Status ReadActivation(ActivationId id, int64_t row, float* host) override;

 private:
  struct WeightRecord {
    Weight matrix;              // a matrix: points into the mapping (or `packed`)
    std::vector<float> vector;  // a vector: dequantized to f32
    // The matrix's copy, made at load, or at the first product for the token
    // embedding table (which only a model with a tied output multiplies):
    // the rows16 layout (matrix.packed points into it) where the AVX-512
    // kernels have one, else, for a file mapping, the GGUF rows as they are
    // (plain_copy; matrix.data points into it). None when LLM_CPU_REPACK=0
    // or memory was short (the kernels then read the mapping).
    rows16::PackedBuffer packed;
    bool plain_copy = false;
    bool pack_later = false;
    bool file_mapped = false;  // WeightSource::file_mapped: its pages may be dropped
    const uint8_t* source = nullptr;  // WeightSource::data (matrix.data may point at the copy)
    bool embed_rows = false;   // the embedding table: Embed reads its mapped rows
  };
  struct Activation {
    int64_t width = 0;
    ActivationRows rows = ActivationRows::kTokens;
    std::vector<float> data;  // [rows][width], grown by BeginPass
  };

  // The f32 vector of a weight added by AddVector with n elements, or
  // nullptr with *status set.
  const float* FindVector(WeightId id, int64_t n, absl::Status* status) const;
  // nullptr (with *status set) when id is not a declared activation of width
  // `width` (0: any width).
  float* Act(ActivationId id, int64_t width, absl::Status* status);
  const WeightRecord* FindWeight(WeightId id, absl::Status* status) const;
  // Gives r its copy (see WeightRecord::packed) unless LLM_CPU_REPACK=0;
  // without one when memory is short (never an error: the kernels read the
  // mapping instead).
  void Pack(WeightRecord& r);
  // fn(begin, end) over the pass's rows [0, n_rows_) of `width` elements:
  // split over the pool when there is enough work (prefill chunks, wide
  // batches), else on the caller. For element-wise ops whose rows are
  // independent, so the split never changes a result.
  void ForRows(int64_t width, const std::function<void(int64_t begin, int64_t end)>& fn);
  // Packs weight id now if it was left for its first product.
  void PackIfDeferred(WeightId id);
  int64_t ActRows(const Activation& a) const {
    return a.rows == ActivationRows::kTokens ? n_rows_ : n_logit_rows_;
  }

  int n_threads_;
  bool deterministic_;
  std::unique_ptr<ThreadPool> pool_;
  LinearContext linear_;
  // The small weight copies' memory (weight_buffer.h: huge pages shared).
  WeightArena weight_arena_;
  std::vector<WeightRecord> weights_;
  std::vector<Activation> activations_;
  // One KV group (CreateKvStorage): its blocks' layout and storage.
  struct KvGroup {
    KvLayout layout;
    CpuKvStorage* storage = nullptr;  // owned by the group's KV pool
  };
  std::vector<KvGroup> kv_groups_;
  // [n_layer]: each layer's group (-1: none yet) and slot in its blocks.
  std::vector<int32_t> layer_group_;
  std::vector<int64_t> layer_slot_;
  // The layer's group and slot (false: a layer no group holds).
  bool LayerKv(int64_t layer, int* group, int64_t* slot) const;
  static const KvBlockList& GroupList(const PassSequence& s, int group) {
    return group == 0 ? s.kv : s.kv_group1;
  }

  // The pass in progress (BeginPass .. EndPass).
  PassDesc pass_;
  int64_t n_rows_ = 0;
  int64_t n_logit_rows_ = 0;
  std::vector<int64_t> positions_;  // [n_rows] absolute positions
  std::vector<uint8_t> rope_long_;  // [n_rows] 1: row of a rope_long sequence
  // [group][sequence]: block addresses.
  std::vector<std::vector<std::vector<const uint8_t*>>> kv_bases_;
  bool rope_ready_ = false;  // rope_cos_/sin_ hold rope_spec_'s angles
  RopeSpec rope_spec_;
  std::vector<float> rope_cos_, rope_sin_;  // [n_rows][RopePairs]
  std::vector<AttentionJob> attention_jobs_;
  std::vector<float> logit_rows_;  // [logit rows][n_embd]: normed last rows
};

}  // namespace llm
