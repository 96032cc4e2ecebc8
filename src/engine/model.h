// The loaded model as the engine sees it: the GGUF mapping, hyper-parameters,
// tokenizer, chat template text and the forward pass. Immutable after load and
// shared (std::shared_ptr) by the API handle and every session, so either may
// be freed first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "engine/scheduler.h"
#include "format/gguf.h"
#include "kv/block_pool.h"
#include "kv/kv_groups.h"
#include "model/llama.h"
#include "tokenizer/tokenizer.h"

namespace llm {

struct ModelLoadOptions {
  bool vocab_only = false;
  int n_threads = 0;  // 0: physical cores
  // Progress in [0, 1]; returning false cancels the load (LLM_ERR_CANCELLED).
  std::function<bool(float)> progress;
  uint64_t kv_budget_bytes = 0;  // 0: DefaultKvBudget()
  bool deterministic = false;    // batch-invariant kernels (docs/BATCHING.md)
  int64_t batch_tokens = 0;      // token budget of one batched pass; 0: kDefaultBatchTokens
  DeviceKind device = DeviceKind::kAuto;
  int device_index = 0;
  // Tests: false keeps a model mixing attention windows in one KV group of
  // full attention (no split, nothing released: what 0.3 did before the
  // split), so a test can compare the split against it.
  bool split_kv_groups = true;
  // Tests: makes the backend instead of CreateBackend(device, ...), e.g. a
  // double that records the operations of each pass.
  std::function<absl::StatusOr<std::unique_ptr<Backend>>(const BackendOptions&)> backend_factory;
};

inline constexpr int64_t kDefaultBatchTokens = 256;

// The KV pool cap used when the caller gives none: a quarter of physical
// memory, but no more than 64 sessions of 4096 tokens need with an F16
// cache (memory is only taken as sessions use it; the cap bounds the worst
// case so that a host's other allocations keep room).
uint64_t DefaultKvBudget(const KvLayout& layout);

class Model {
 public:
  static absl::StatusOr<std::shared_ptr<Model>> LoadFile(const std::string& path,
                                                         const ModelLoadOptions& options);
  // data must stay valid until the model and its sessions are gone.
  static absl::StatusOr<std::shared_ptr<Model>> LoadMemory(const uint8_t* data, size_t size,
                                                           const ModelLoadOptions& options);

  bool vocab_only() const { return llama_ == nullptr; }
  const LlamaHParams& hparams() const { return hparams_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const LlamaModel& llama() const { return *llama_; }  // !vocab_only() only
  const GgufFile& gguf() const { return *gguf_; }
  const std::string& chat_template() const { return chat_template_; }  // "" if none
  const std::string& name() const { return name_; }
  int default_threads() const { return default_threads_; }
  uint64_t n_params() const;

  bool deterministic() const { return deterministic_; }
  // The device the model runs on (kCpu or kCuda; vocab_only: kCpu).
  DeviceKind device() const { return device_; }
  int device_index() const { return device_index_; }
  // Stable identity of the weights (engine/model_fingerprint.h), checked by
  // session load.
  uint64_t fingerprint() const { return fingerprint_; }
  // The load's memory report (0 for a vocab_only model): bytes of the model
  // buffer (the file mapping) that passes read and the load prefaulted, and
  // bytes the backend holds as copies of weights (Backend::WeightCopyBytes),
  // which replace their mapped bytes in memory.
  uint64_t mapped_weight_bytes() const { return prefaulted_bytes_; }
  uint64_t weight_copy_bytes() const { return weight_copy_bytes_; }
  // The KV shape of all layers (a session file's layout, the default budget).
  KvLayout kv_layout() const;
  // How the layers' KV splits into groups, each with its window and pool
  // (kv/kv_groups.h, docs/SLIDING_WINDOW.md): one group when every layer has
  // the same window (Mistral-style, or none), two for Gemma's mix of local
  // and global layers. !vocab_only() only.
  const KvGroups& kv_groups() const { return kv_groups_; }

  // The shared machinery sessions use (!vocab_only() only). Thread-safe
  // objects: a const Model hands them out mutable, as it is shared.
  // kv_pool(): group 0's pool (the only one of a one-group model).
  KvBlockPool& kv_pool(size_t group = 0) const { return *kv_pools_[group]; }
  // Every group's pool, in group order.
  absl::Span<KvBlockPool* const> kv_pools() const { return kv_pool_ptrs_; }
  Scheduler& scheduler() const { return *scheduler_; }

 private:
  Model() = default;
  static absl::StatusOr<std::shared_ptr<Model>> Build(std::unique_ptr<GgufFile> gguf,
                                                      const ModelLoadOptions& options);

  std::unique_ptr<GgufFile> gguf_;
  // Before everything that uses it, so it is destroyed after them.
  std::unique_ptr<Backend> backend_;
  LlamaHParams hparams_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<LlamaModel> llama_;
  std::string chat_template_;
  std::string name_;
  int default_threads_ = 1;
  bool deterministic_ = false;
  DeviceKind device_ = DeviceKind::kCpu;
  int device_index_ = 0;
  uint64_t fingerprint_ = 0;
  uint64_t prefaulted_bytes_ = 0;
  uint64_t weight_copy_bytes_ = 0;
  // Declared last: destroyed first (the scheduler's thread is joined before
  // the executor and KV pool it uses go away).
  KvGroups kv_groups_;
  std::vector<std::unique_ptr<KvBlockPool>> kv_pools_;  // [kv_groups_.size()]
  std::vector<KvBlockPool*> kv_pool_ptrs_;
  std::unique_ptr<StepExecutor> executor_;
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace llm
