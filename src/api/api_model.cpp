// llm_model_*: loading, freeing, information.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "api/abi_structs.h"
#include "api/handles.h"
#include "core/status.h"

using llm::api::Fail;

namespace {

llm_model_params DefaultModelParams() { return llm::api::ZeroedStruct<llm_model_params>(); }

llm_status ToOptions(const llm_model_params* user, llm::ModelLoadOptions* options) {
  llm_model_params p;
  llm_status s = llm::api::ReadStruct(user, DefaultModelParams(), "params", &p);
  if (s != LLM_OK) return s;
  LLM_CHECK_ARG(p.n_threads >= 0 && p.n_threads <= 1024, "params: n_threads must be in [0, 1024]");
  options->vocab_only = p.vocab_only != 0;
  options->n_threads = p.n_threads;
  LLM_CHECK_ARG(p.deterministic == 0 || p.deterministic == 1, "params: deterministic must be 0 or 1");
  LLM_CHECK_ARG(p.batch_tokens >= 0 && p.batch_tokens <= (1 << 20),
                "params: batch_tokens must be in [0, 1048576]");
  options->kv_budget_bytes = p.kv_budget_bytes;
  options->deterministic = p.deterministic != 0;
  options->batch_tokens = p.batch_tokens;
  LLM_CHECK_ARG(p.device == LLM_DEVICE_AUTO || p.device == LLM_DEVICE_CPU ||
                    p.device == LLM_DEVICE_CUDA,
                "params: device must be LLM_DEVICE_AUTO, LLM_DEVICE_CPU or LLM_DEVICE_CUDA");
  LLM_CHECK_ARG(p.device_index >= 0, "params: device_index must be >= 0");
  options->device = p.device == LLM_DEVICE_CPU    ? llm::DeviceKind::kCpu
                    : p.device == LLM_DEVICE_CUDA ? llm::DeviceKind::kCuda
                                                  : llm::DeviceKind::kAuto;
  options->device_index = p.device_index;
  if (p.progress != nullptr) {
    llm_progress_fn fn = p.progress;
    void* user_data = p.progress_user;
    options->progress = [fn, user_data](float progress) { return fn(progress, user_data) == 0; };
  }
  return LLM_OK;
}

llm_status Publish(absl::StatusOr<std::shared_ptr<llm::Model>> model, llm_model** out_model) {
  if (!model.ok()) return Fail(model.status());
  *out_model = llm::api::RegisterModel(std::move(model).value());
  return LLM_OK;
}

void CopyString(const std::string& s, char* dst, size_t capacity) {
  const size_t n = std::min(s.size(), capacity - 1);
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

}  // namespace

extern "C" {

LLM_API llm_status llm_model_params_init_v(llm_model_params* params, size_t struct_size) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(params != nullptr, "params must not be NULL");
  return llm::api::InitStruct(params, struct_size, DefaultModelParams(), "params");
  LLM_API_END
}

// The unsized symbols (parenthesised: llm.h makes their names macros) were
// published before their callers passed a size, so each writes its struct as
// it was when the symbol was published: here the 0.1 llm_model_params, which
// a 0.2 binary's larger struct also holds.
LLM_API llm_status(llm_model_params_init)(llm_model_params* params) {
  return llm_model_params_init_v(params, llm::api::FirstSize<llm_model_params>());
}

LLM_API llm_status llm_model_load(const char* path, const llm_model_params* params,
                                  llm_model** out_model) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(path != nullptr, "path must not be NULL");
  LLM_CHECK_ARG(out_model != nullptr, "out_model must not be NULL");
  llm::ModelLoadOptions options;
  llm_status s = ToOptions(params, &options);
  if (s != LLM_OK) return s;
  return Publish(llm::Model::LoadFile(path, options), out_model);
  LLM_API_END
}

LLM_API llm_status llm_model_load_from_memory(const void* data, size_t size,
                                              const llm_model_params* params,
                                              llm_model** out_model) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(data != nullptr, "data must not be NULL");
  LLM_CHECK_ARG(size > 0, "size must be > 0");
  LLM_CHECK_ARG(size <= static_cast<size_t>(PTRDIFF_MAX) &&
                    reinterpret_cast<uintptr_t>(data) <= UINTPTR_MAX - size,
                "size: the buffer would extend past the end of the address space");
  LLM_CHECK_ARG(out_model != nullptr, "out_model must not be NULL");
  llm::ModelLoadOptions options;
  llm_status s = ToOptions(params, &options);
  if (s != LLM_OK) return s;
  return Publish(llm::Model::LoadMemory(static_cast<const uint8_t*>(data), size, options), out_model);
  LLM_API_END
}

LLM_API void llm_model_free(llm_model* model) { llm::api::FreeModel(model); }

LLM_API llm_status llm_model_info_init_v(llm_model_info* info, size_t struct_size) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(info != nullptr, "info must not be NULL");
  return llm::api::InitStruct(info, struct_size, llm::api::ZeroedStruct<llm_model_info>(), "info");
  LLM_API_END
}

LLM_API llm_status(llm_model_info_init)(llm_model_info* info) {
  return llm_model_info_init_v(info, llm::api::FirstSize<llm_model_info>());
}

LLM_API llm_status llm_model_get_info(const llm_model* model, llm_model_info* info) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(model != nullptr, "model must not be NULL");
  std::shared_ptr<const llm::Model> mp = llm::api::FindModel(model);
  LLM_CHECK_ARG(mp != nullptr, "model is not a live model handle (freed, or never returned by "
                               "llm_model_load)");
  LLM_CHECK_ARG(info != nullptr, "info must not be NULL");
  const size_t size = info->struct_size;
  if (llm_status s = llm::api::CheckStructSize<llm_model_info>(size, "info"); s != LLM_OK) return s;
  const llm::Model& m = *mp;
  const llm::LlamaHParams& hp = m.hparams();
  const llm::Tokenizer& tok = m.tokenizer();
  llm_model_info out = llm::api::ZeroedStruct<llm_model_info>();
  out.vocab_only = m.vocab_only() ? 1 : 0;
  out.device = m.device() == llm::DeviceKind::kCuda ? LLM_DEVICE_CUDA : LLM_DEVICE_CPU;
  out.device_index = m.device_index();
  out.mapped_weight_bytes = m.mapped_weight_bytes();
  out.weight_copy_bytes = m.weight_copy_bytes();
  out.n_params = m.n_params();
  out.n_ctx_train = static_cast<int32_t>(hp.n_ctx_train);
  out.n_vocab = static_cast<int32_t>(hp.n_vocab);
  out.n_layer = static_cast<int32_t>(hp.n_layer);
  out.n_embd = static_cast<int32_t>(hp.n_embd);
  out.n_head = static_cast<int32_t>(hp.n_head);
  out.n_head_kv = static_cast<int32_t>(hp.n_head_kv);
  out.bos_token = tok.bos();
  out.eos_token = tok.eos();
  out.eot_token = tok.eot();
  out.pad_token = tok.pad();
  out.add_bos = tok.add_bos() ? 1 : 0;
  CopyString(hp.architecture, out.architecture, sizeof out.architecture);
  CopyString(m.name(), out.name, sizeof out.name);
  llm::api::WriteStruct(out, info, size);
  return LLM_OK;
  LLM_API_END
}

LLM_API llm_status llm_model_chat_template(const llm_model* model, char* buf, size_t capacity,
                                           size_t* len_out) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(model != nullptr, "model must not be NULL");
  std::shared_ptr<const llm::Model> mp = llm::api::FindModel(model);
  LLM_CHECK_ARG(mp != nullptr, "model is not a live model handle (freed, or never returned by "
                               "llm_model_load)");
  const std::string& tmpl = mp->chat_template();
  if (tmpl.empty()) {
    return Fail(LLM_ERR_UNSUPPORTED, "the model has no chat template (tokenizer.chat_template)");
  }
  return llm::api::CopyOut(tmpl, true, buf, capacity, len_out);
  LLM_API_END
}

LLM_API llm_status llm_token_is_eog(const llm_model* model, llm_token token, int32_t* out) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(model != nullptr, "model must not be NULL");
  std::shared_ptr<const llm::Model> mp = llm::api::FindModel(model);
  LLM_CHECK_ARG(mp != nullptr, "model is not a live model handle (freed, or never returned by "
                               "llm_model_load)");
  LLM_CHECK_ARG(out != nullptr, "out must not be NULL");
  const llm::Tokenizer& tok = mp->tokenizer();
  LLM_CHECK_ARG(token >= 0 && token < tok.n_vocab(), "token is not a token id of this model");
  *out = tok.IsEog(token) ? 1 : 0;
  return LLM_OK;
  LLM_API_END
}

}  // extern "C"

extern "C" {

LLM_API llm_status llm_kv_stats_init_v(llm_kv_stats* stats, size_t struct_size) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(stats != nullptr, "stats must not be NULL");
  return llm::api::InitStruct(stats, struct_size, llm::api::ZeroedStruct<llm_kv_stats>(), "stats");
  LLM_API_END
}

LLM_API llm_status(llm_kv_stats_init)(llm_kv_stats* stats) {
  return llm_kv_stats_init_v(stats, llm::api::FirstSize<llm_kv_stats>());
}

LLM_API llm_status llm_model_kv_stats(const llm_model* model, llm_kv_stats* stats) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(stats != nullptr, "stats must not be NULL");
  const size_t size = stats->struct_size;
  if (llm_status s = llm::api::CheckStructSize<llm_kv_stats>(size, "stats"); s != LLM_OK) return s;
  std::shared_ptr<const llm::Model> m = llm::api::FindModel(model);
  LLM_CHECK_ARG(m != nullptr, "model is not a live model handle");
  if (m->vocab_only()) return Fail(LLM_ERR_UNSUPPORTED, "a vocab_only model has no KV pool");
  const llm::KvPoolStats p = m->kv_pool().Stats();
  const llm::KvLayout layout = m->kv_layout();
  llm_kv_stats out = llm::api::ZeroedStruct<llm_kv_stats>();
  out.block_tokens = static_cast<uint32_t>(llm::KvLayout::block_tokens(llm::KvType::kF16));
  out.budget_bytes = p.budget_bytes;
  out.block_bytes = p.block_bytes;
  out.block_overhead_bytes = p.block_overhead_bytes;
  out.blocks_total = p.blocks_total;
  out.blocks_allocated = p.blocks_allocated;
  out.blocks_used = p.blocks_used;
  out.blocks_shared = p.blocks_shared;
  out.blocks_cached = p.blocks_cached;
  out.prefix_hits = p.prefix_hits;
  out.bytes_per_token_f16 = layout.bytes_per_token(llm::KvType::kF16);
  out.bytes_per_token_f32 = layout.bytes_per_token(llm::KvType::kF32);
  out.n_pools = static_cast<uint32_t>(m->kv_pools().size());
  if (m->kv_pools().size() > 1) {
    const llm::KvPoolStats q = m->kv_pool(1).Stats();
    out.local_window = static_cast<uint32_t>(m->kv_groups().groups[1].window);
    out.local_budget_bytes = q.budget_bytes;
    out.local_block_bytes = q.block_bytes;
    out.local_blocks_total = q.blocks_total;
    out.local_blocks_allocated = q.blocks_allocated;
    out.local_blocks_used = q.blocks_used;
    out.local_blocks_shared = q.blocks_shared;
    out.local_blocks_cached = q.blocks_cached;
    out.local_prefix_hits = q.prefix_hits;
  }
  llm::api::WriteStruct(out, stats, size);
  return LLM_OK;
  LLM_API_END
}

LLM_API llm_status llm_batch_stats_init_v(llm_batch_stats* stats, size_t struct_size) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(stats != nullptr, "stats must not be NULL");
  return llm::api::InitStruct(stats, struct_size, llm::api::ZeroedStruct<llm_batch_stats>(),
                              "stats");
  LLM_API_END
}

LLM_API llm_status(llm_batch_stats_init)(llm_batch_stats* stats) {
  return llm_batch_stats_init_v(stats, llm::api::FirstSize<llm_batch_stats>());
}

LLM_API llm_status llm_model_batch_stats(const llm_model* model, llm_batch_stats* stats) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(stats != nullptr, "stats must not be NULL");
  const size_t size = stats->struct_size;
  if (llm_status s = llm::api::CheckStructSize<llm_batch_stats>(size, "stats"); s != LLM_OK) {
    return s;
  }
  std::shared_ptr<const llm::Model> m = llm::api::FindModel(model);
  LLM_CHECK_ARG(m != nullptr, "model is not a live model handle");
  if (m->vocab_only()) return Fail(LLM_ERR_UNSUPPORTED, "a vocab_only model has no batcher");
  const llm::SchedulerStats s = m->scheduler().stats();
  llm_batch_stats out = llm::api::ZeroedStruct<llm_batch_stats>();
  out.iterations = s.iterations;
  out.decode_iterations = s.decode_iterations;
  out.decode_rows = s.decode_rows;
  out.prefill_chunks = s.prefill_chunks;
  out.tokens = s.tokens;
  out.max_sessions_in_pass = s.max_chunks_in_pass;
  out.steps_completed = s.steps_completed;
  out.steps_failed = s.steps_failed;
  llm::api::WriteStruct(out, stats, size);
  return LLM_OK;
  LLM_API_END
}

}  // extern "C"
