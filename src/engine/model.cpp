#include "engine/model.h"

#include <algorithm>

#include "core/log.h"
#include "core/status.h"
#include "engine/executor.h"
#include "engine/model_fingerprint.h"
#include "model/vocab_only_hparams.h"

#include <unistd.h>

namespace llm {
namespace {

// Progress of a load: binding the weights (where a backend repacks them)
// reports [0, kBoundProgress], prefaulting (kBoundProgress, 1].
constexpr float kBoundProgress = 0.5f;

// Touches every page of the weight bytes that passes read from the file
// (Backend::ReadsSource) once, so that the first token does not pay for page
// faults, reporting progress as it goes. A weight the backend copied is
// skipped: its mapped pages stay out of memory, and resident memory after
// the load is about the file's size, not the file plus the copies. Returns
// false if the progress callback asked to cancel. *prefaulted: the bytes
// touched.
bool PrefaultWeights(const LlamaModel& llama, const Backend& backend,
                     const std::function<bool(float)>& progress, uint64_t* prefaulted) {
  uint64_t total = 0;
  for (const LlamaModel::BoundWeight& w : llama.bound_weights()) {
    if (backend.ReadsSource(w.id)) total += w.n_bytes;
  }
  *prefaulted = total;
  uint64_t done = 0;
  volatile uint8_t sink = 0;
  for (const LlamaModel::BoundWeight& w : llama.bound_weights()) {
    if (!backend.ReadsSource(w.id)) continue;
    for (uint64_t off = 0; off < w.n_bytes; off += 4096) sink = sink + w.data[off];
    done += w.n_bytes;
    if (progress && total > 0 &&
        !progress(kBoundProgress + (1.0f - kBoundProgress) * static_cast<float>(done) / total)) {
      return false;
    }
  }
  (void)sink;
  return true;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Model>> Model::LoadFile(const std::string& path,
                                                       const ModelLoadOptions& options) {
  if (options.progress && !options.progress(0.0f)) {
    return Error(LLM_ERR_CANCELLED, "model load cancelled by the progress callback");
  }
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
  return Build(std::move(gguf), options);
}

absl::StatusOr<std::shared_ptr<Model>> Model::LoadMemory(const uint8_t* data, size_t size,
                                                         const ModelLoadOptions& options) {
  if (options.progress && !options.progress(0.0f)) {
    return Error(LLM_ERR_CANCELLED, "model load cancelled by the progress callback");
  }
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Parse(data, size));
  return Build(std::move(gguf), options);
}

absl::StatusOr<std::shared_ptr<Model>> Model::Build(std::unique_ptr<GgufFile> gguf,
                                                    const ModelLoadOptions& options) {
  std::shared_ptr<Model> model(new Model());
  if (options.vocab_only) {  // no compute: the architecture's keys are not judged
    LLM_ASSIGN_OR_RETURN(model->hparams_, ReadVocabOnlyHParams(*gguf));
  } else {
    LLM_ASSIGN_OR_RETURN(model->hparams_, ReadLlamaHParams(*gguf));
  }
  if (!options.vocab_only && options.kv_budget_bytes > 0 &&
      options.kv_budget_bytes < model->kv_layout().block_bytes()) {
    // A pool must hold at least one block; raising the cap silently would
    // hide the caller's mistake (0 asks for the default).
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "kv_budget_bytes = %d is below one KV block of this model: the minimum is %d "
                  "bytes (0 = the default budget)",
                  options.kv_budget_bytes, model->kv_layout().block_bytes());
  }
  model->default_threads_ = options.n_threads > 0 ? options.n_threads : HostPhysicalCores();
  // Checked for vocab_only loads too (no weights to place, same answer).
  LLM_RETURN_IF_ERROR(CheckDevice(options.device, options.device_index));
  if (!options.vocab_only) {
    BackendOptions backend_options;
    backend_options.n_threads = model->default_threads_;
    backend_options.deterministic = options.deterministic;
    if (options.backend_factory) {
      LLM_ASSIGN_OR_RETURN(model->backend_, options.backend_factory(backend_options));
    } else {
      LLM_ASSIGN_OR_RETURN(model->backend_,
                           CreateBackend(options.device, options.device_index, backend_options));
    }
    model->device_ = model->backend_->device();
    model->device_index_ = options.device_index;
    // Weights first: binding them checks every tensor's shape against the
    // hyper-parameters (token_embd is [n_embd, n_vocab]) without allocating
    // more than the norm vectors, so a file whose metadata claims a huge
    // vocabulary it has no weights for is refused before the tokenizer
    // builds its tables from that metadata (docs/FUZZING.md, finding 3).
    std::function<bool(float)> bind_progress;
    if (options.progress) {
      bind_progress = [&options](float f) { return options.progress(kBoundProgress * f); };
    }
    LLM_ASSIGN_OR_RETURN(
        model->llama_, LlamaModel::Create(*gguf, model->hparams_, *model->backend_, bind_progress));
  }
  LLM_ASSIGN_OR_RETURN(model->tokenizer_, Tokenizer::FromGguf(*gguf));
  if (options.vocab_only) model->hparams_.n_vocab = model->tokenizer_->n_vocab();
  if (model->tokenizer_->n_vocab() != model->hparams_.n_vocab) {
    return Errorf(LLM_ERR_BAD_MODEL, "tokenizer has %d tokens but the model's vocabulary is %d",
                  model->tokenizer_->n_vocab(), model->hparams_.n_vocab);
  }
  LLM_ASSIGN_OR_RETURN(std::optional<std::string_view> tmpl, gguf->GetString("tokenizer.chat_template"));
  if (tmpl) model->chat_template_ = std::string(*tmpl);
  LLM_ASSIGN_OR_RETURN(std::optional<std::string_view> name, gguf->GetString("general.name"));
  if (name) model->name_ = std::string(*name);
  if (options.progress && !options.progress(kBoundProgress)) {
    return Error(LLM_ERR_CANCELLED, "model load cancelled by the progress callback");
  }
  if (!options.vocab_only) {
    if (!PrefaultWeights(*model->llama_, *model->backend_, options.progress,
                         &model->prefaulted_bytes_)) {
      return Error(LLM_ERR_CANCELLED, "model load cancelled by the progress callback");
    }
    model->weight_copy_bytes_ = model->backend_->WeightCopyBytes();
  }
  if (options.progress && !options.progress(1.0f)) {
    return Error(LLM_ERR_CANCELLED, "model load cancelled by the progress callback");
  }
  model->fingerprint_ = ModelFingerprint(*gguf);
  model->gguf_ = std::move(gguf);
  const LlamaHParams& hp = model->hparams_;
  model->deterministic_ = options.deterministic;
  if (!options.vocab_only) {
    if (options.batch_tokens < 0) {
      return Errorf(LLM_ERR_INVALID_ARGUMENT, "batch_tokens = %d is negative", options.batch_tokens);
    }
    const KvLayout layout = model->kv_layout();
    const uint64_t budget =
        options.kv_budget_bytes > 0 ? options.kv_budget_bytes : DefaultKvBudget(layout);
    SchedulerOptions sched;
    sched.token_budget = options.batch_tokens > 0 ? options.batch_tokens : kDefaultBatchTokens;
    sched.max_chunk = sched.token_budget;
    try {
      // One pool per KV group, the byte budget split by layer count: a
      // group's blocks hold its layers only, so each pool holds as many
      // positions as the one pool of all layers would (with two groups the
      // global layers keep exactly what they had). budget >= the all-layer
      // block, so every share holds at least one of its group's blocks.
      model->kv_groups_ = KvGroups::ForWindows(hp.layer_window);
      if (!options.split_kv_groups && model->kv_groups_.size() > 1) {
        model->kv_groups_ = KvGroups::ForWindows(std::vector<int64_t>(hp.layer_window.size(), 0));
      }
      const KvGroups& groups = model->kv_groups_;
      for (size_t g = 0; g < groups.size(); ++g) {
        const KvLayout group_layout = groups.Layout(layout, g);
        // floor(budget * n_g / n_layer), without overflow.
        const uint64_t n = static_cast<uint64_t>(layout.n_layer);
        const uint64_t n_g = static_cast<uint64_t>(group_layout.n_layer);
        const uint64_t share =
            groups.size() == 1 ? budget : budget / n * n_g + budget % n * n_g / n;
        LLM_ASSIGN_OR_RETURN(std::unique_ptr<KvStorage> storage,
                             model->backend_->CreateKvStorage(group_layout,
                                                              groups.groups[g].layers));
        model->kv_pools_.push_back(
            std::make_unique<KvBlockPool>(group_layout, share, std::move(storage)));
        model->kv_pool_ptrs_.push_back(model->kv_pools_.back().get());
      }
      model->executor_ = std::make_unique<ModelExecutor>(*model->llama_, *model->backend_);
      model->scheduler_ = std::make_unique<Scheduler>(model->executor_.get(), sched);
    } catch (const std::bad_alloc&) {
      return Error(LLM_ERR_OUT_OF_MEMORY,
                   "out of memory: cannot create the model's batcher or KV pool");
    }
  }
  // Last, after everything that reads the file (the fingerprint reads the
  // edges of every tensor): no later read maps a dropped page back in.
  if (!options.vocab_only) model->backend_->SourcesPrefaulted();
  if (LogEnabled(LLM_LOG_INFO)) {
    Logf(LLM_LOG_INFO,
         "loaded '%s' (%s, GGUF v%d): %d layers, n_embd %d, %d heads (%d kv), vocab %d, "
         "trained context %d, %d parameters%s%s; weights: %d bytes read from the model "
         "buffer, %d bytes of backend copies",
         model->name_, hp.architecture, model->gguf_->version(), hp.n_layer, hp.n_embd, hp.n_head,
         hp.n_head_kv, hp.n_vocab, hp.n_ctx_train, model->n_params(),
         options.vocab_only ? " (vocab only)" : "",
         model->backend_ ? "; " + model->backend_->Describe() : std::string(),
         model->prefaulted_bytes_, model->weight_copy_bytes_);
  }
  return model;
}

uint64_t DefaultKvBudget(const KvLayout& layout) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const uint64_t quarter_ram = pages > 0 && page > 0
                                   ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4
                                   : uint64_t{1} << 30;
  const uint64_t sessions_cap = 64ull * 4096ull * layout.bytes_per_token(KvType::kF16);
  return std::max<uint64_t>(std::min(quarter_ram, sessions_cap), layout.block_bytes());
}

KvLayout Model::kv_layout() const {
  return KvLayout{hparams_.n_layer, hparams_.n_head_kv, hparams_.head_dim};
}

uint64_t Model::n_params() const {
  uint64_t n = 0;  // every tensor counts, so vocab_only models report it too
  for (const GgufTensor& t : gguf_->tensors()) n += t.n_elements;
  return n;
}

}  // namespace llm
