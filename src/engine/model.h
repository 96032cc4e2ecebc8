// The loaded model as the engine sees it: the GGUF mapping, hyper-parameters,
// tokenizer, chat template text and the forward pass. Immutable after load and
// shared (std::shared_ptr) by the API handle and every session, so either may
// be freed first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "format/gguf.h"
#include "model/llama.h"
#include "tokenizer/tokenizer.h"

namespace llm {

struct ModelLoadOptions {
  bool vocab_only = false;
  int n_threads = 0;  // 0: physical cores
  // Progress in [0, 1]; returning false cancels the load (LLM_ERR_CANCELLED).
  std::function<bool(float)> progress;
};

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

  // 0.1 runs one forward pass at a time per model: sessions on different
  // threads take turns here. (The batcher replaces this lock by merging steps.)
  std::mutex& forward_mutex() const { return forward_mutex_; }

 private:
  Model() = default;
  static absl::StatusOr<std::shared_ptr<Model>> Build(std::unique_ptr<GgufFile> gguf,
                                                      const ModelLoadOptions& options);

  std::unique_ptr<GgufFile> gguf_;
  LlamaHParams hparams_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<LlamaModel> llama_;
  std::string chat_template_;
  std::string name_;
  int default_threads_ = 1;
  mutable std::mutex forward_mutex_;
};

}  // namespace llm
