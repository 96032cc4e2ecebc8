#include "model/llama.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/dequantize.h"
#include "backend/cpu/ops.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "format/gguf.h"
#include "kv/block_table.h"

namespace llm {
namespace {

absl::StatusOr<Weight> BindMatrix(const GgufFile& gguf, const std::string& name, int64_t n_in,
                                  int64_t n_out, uint64_t& n_params) {
  const GgufTensor* t = gguf.FindTensor(name);
  if (t == nullptr) return Errorf(LLM_ERR_BAD_MODEL, "model lacks tensor '%s'", name);
  if (t->dims.size() != 2 || t->dims[0] != static_cast<uint64_t>(n_in) ||
      t->dims[1] != static_cast<uint64_t>(n_out)) {
    return Errorf(LLM_ERR_BAD_MODEL, "tensor '%s' has shape %s, expected [%d, %d]", name,
                  absl::StrJoin(t->dims, ", "), n_in, n_out);
  }
  std::optional<size_t> row_bytes = RowBytes(t->type, static_cast<size_t>(n_in));
  if (!row_bytes) {
    return Errorf(LLM_ERR_BAD_MODEL, "tensor '%s': row of %d elements does not fit its blocks", name,
                  n_in);
  }
  n_params += t->n_elements;
  return Weight{t->type, t->data, n_out, n_in, *row_bytes};
}

absl::StatusOr<std::vector<float>> LoadVector(const GgufFile& gguf, const std::string& name,
                                              int64_t n, uint64_t& n_params) {
  const GgufTensor* t = gguf.FindTensor(name);
  if (t == nullptr) return Errorf(LLM_ERR_BAD_MODEL, "model lacks tensor '%s'", name);
  if (t->n_elements != static_cast<uint64_t>(n) || t->dims.size() != 1) {
    return Errorf(LLM_ERR_BAD_MODEL, "tensor '%s' has %d elements, expected %d", name, t->n_elements,
                  n);
  }
  std::vector<float> out(static_cast<size_t>(n));
  LLM_RETURN_IF_ERROR(DequantizeRow(t->type, t->data, static_cast<size_t>(n), out.data()));
  n_params += t->n_elements;
  return out;
}

void RmsNormRows(const float* x, const std::vector<float>& weight, int64_t n_rows, int64_t n,
                 float eps, float* out) {
  for (int64_t r = 0; r < n_rows; ++r) RmsNorm(x + r * n, weight.data(), n, eps, out + r * n);
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(const GgufFile& gguf,
                                                               const LlamaHParams& hp) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->hp_ = hp;
  uint64_t& np = m->n_params_;
  if (const GgufTensor* t = gguf.FindTensor("token_embd.weight");
      t != nullptr && t->dims.size() == 2 && t->dims[1] != static_cast<uint64_t>(hp.n_vocab)) {
    return Errorf(LLM_ERR_BAD_MODEL,
                  "vocabulary size %d from the metadata does not match token_embd.weight, which "
                  "has %d rows",
                  hp.n_vocab, t->dims[1]);
  }
  LLM_ASSIGN_OR_RETURN(m->token_embd_, BindMatrix(gguf, "token_embd.weight", hp.n_embd, hp.n_vocab, np));
  LLM_ASSIGN_OR_RETURN(m->output_norm_, LoadVector(gguf, "output_norm.weight", hp.n_embd, np));
  if (gguf.FindTensor("output.weight") != nullptr) {
    LLM_ASSIGN_OR_RETURN(m->output_, BindMatrix(gguf, "output.weight", hp.n_embd, hp.n_vocab, np));
  } else {
    m->output_ = m->token_embd_;  // tied embeddings
  }
  m->layers_.resize(static_cast<size_t>(hp.n_layer));
  for (int64_t i = 0; i < hp.n_layer; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    LlamaLayer& L = m->layers_[i];
    LLM_ASSIGN_OR_RETURN(L.attn_norm, LoadVector(gguf, p + "attn_norm.weight", hp.n_embd, np));
    LLM_ASSIGN_OR_RETURN(L.ffn_norm, LoadVector(gguf, p + "ffn_norm.weight", hp.n_embd, np));
    LLM_ASSIGN_OR_RETURN(L.wq, BindMatrix(gguf, p + "attn_q.weight", hp.n_embd, hp.q_dim(), np));
    LLM_ASSIGN_OR_RETURN(L.wk, BindMatrix(gguf, p + "attn_k.weight", hp.n_embd, hp.kv_dim(), np));
    LLM_ASSIGN_OR_RETURN(L.wv, BindMatrix(gguf, p + "attn_v.weight", hp.n_embd, hp.kv_dim(), np));
    LLM_ASSIGN_OR_RETURN(L.wo, BindMatrix(gguf, p + "attn_output.weight", hp.q_dim(), hp.n_embd, np));
    LLM_ASSIGN_OR_RETURN(L.w_gate, BindMatrix(gguf, p + "ffn_gate.weight", hp.n_embd, hp.n_ff, np));
    LLM_ASSIGN_OR_RETURN(L.w_up, BindMatrix(gguf, p + "ffn_up.weight", hp.n_embd, hp.n_ff, np));
    LLM_ASSIGN_OR_RETURN(L.w_down, BindMatrix(gguf, p + "ffn_down.weight", hp.n_ff, hp.n_embd, np));
  }
  return m;
}

absl::Status LlamaModel::Attention(absl::Span<const SequenceStep> steps, int64_t layer,
                                   ThreadPool* pool, ForwardScratch& s) const {
  const int64_t q_dim = hp_.q_dim(), kv_dim = hp_.kv_dim();
  const int64_t n_pairs = RopePairs(hp_.head_dim, hp_.rope_dims);
  int64_t row = 0;  // first row of this step in the batch
  std::vector<AttentionJob>& jobs = s.attention_jobs;
  jobs.clear();
  for (const SequenceStep& step : steps) {
    const int64_t n = static_cast<int64_t>(step.tokens.size());
    for (int64_t t = 0; t < n; ++t) {
      const int64_t pos = step.pos0 + t;
      float* q = s.q.data() + (row + t) * q_dim;
      float* k = s.k.data() + (row + t) * kv_dim;
      const float* cos = s.rope_cos.data() + (row + t) * n_pairs;
      const float* sin = s.rope_sin.data() + (row + t) * n_pairs;
      RopeApply(q, hp_.n_head, hp_.head_dim, hp_.rope_dims, cos, sin, hp_.rope_neox);
      RopeApply(k, hp_.n_head_kv, hp_.head_dim, hp_.rope_dims, cos, sin, hp_.rope_neox);
      step.kv->Store(layer, pos, k, s.v.data() + (row + t) * kv_dim);
    }
    AttentionJob job;
    job.q = s.q.data() + row * q_dim;
    job.n_q = n;
    job.pos0 = step.pos0;
    job.kv = step.kv->View(layer);
    job.out = s.attn.data() + row * q_dim;
    jobs.push_back(job);
    row += n;
  }
  // One parallel loop for every session's heads: a pass of 16 one-token
  // steps would otherwise pay 16 pool round trips per layer.
  return AttentionBatch(jobs, hp_.n_head, pool, s.batch_invariant);
}

absl::Status LlamaModel::Forward(absl::Span<const SequenceStep> steps, ThreadPool* pool,
                                 int n_threads, ForwardScratch& s) const {
  int64_t n_rows = 0;
  for (const SequenceStep& step : steps) {
    // Normally done per step by the caller (so that a full KV pool fails one
    // step, not the batch); idempotent.
    LLM_RETURN_IF_ERROR(
        step.kv->PrepareWrite(step.pos0, step.pos0 + static_cast<int64_t>(step.tokens.size())));
    n_rows += static_cast<int64_t>(step.tokens.size());
  }
  if (n_rows == 0) return absl::OkStatus();
  const int64_t d = hp_.n_embd, q_dim = hp_.q_dim(), kv_dim = hp_.kv_dim(), ff = hp_.n_ff;
  auto fit = [](std::vector<float>& v, int64_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  };
  fit(s.x, n_rows * d);
  fit(s.xn, n_rows * std::max(d, q_dim));
  fit(s.q, n_rows * q_dim);
  fit(s.k, n_rows * kv_dim);
  fit(s.v, n_rows * kv_dim);
  fit(s.attn, n_rows * std::max(d, q_dim));
  fit(s.gate, n_rows * ff);
  fit(s.up, n_rows * ff);
  s.linear.pool = pool;
  s.linear.n_threads = n_threads;

  // RoPE angles of each row's position, shared by every layer:
  // rope_cos / rope_sin [n_rows][n_pairs].
  const int64_t n_pairs = RopePairs(hp_.head_dim, hp_.rope_dims);
  fit(s.rope_cos, n_rows * n_pairs);
  fit(s.rope_sin, n_rows * n_pairs);
  // Embeddings: x[r] = token_embd[token r]   x: [n_rows][d]
  int64_t row = 0;
  for (const SequenceStep& step : steps) {
    int64_t pos = step.pos0;
    for (int32_t token : step.tokens) {
      RopeAngles(pos++, hp_.head_dim, hp_.rope_dims, hp_.rope_freq_base,
                 s.rope_cos.data() + row * n_pairs, s.rope_sin.data() + row * n_pairs);
      LLM_RETURN_IF_ERROR(DequantizeRow(token_embd_.type, token_embd_.data + token * token_embd_.row_bytes,
                                        static_cast<size_t>(d), s.x.data() + row * d));
      ++row;
    }
  }

  for (int64_t l = 0; l < hp_.n_layer; ++l) {
    const LlamaLayer& L = layers_[l];
    // Attention block.
    RmsNormRows(s.x.data(), L.attn_norm, n_rows, d, hp_.rms_eps, s.xn.data());
    const Weight* qkv[] = {&L.wq, &L.wk, &L.wv};
    float* const qkv_out[] = {s.q.data(), s.k.data(), s.v.data()};
    LLM_RETURN_IF_ERROR(LinearShared(qkv, qkv_out, 3, s.xn.data(), n_rows, s.linear));
    LLM_RETURN_IF_ERROR(Attention(steps, l, pool, s));
    LLM_RETURN_IF_ERROR(Linear(L.wo, s.attn.data(), n_rows, s.xn.data(), s.linear));
    for (int64_t i = 0; i < n_rows * d; ++i) s.x[i] += s.xn[i];
    // Feed-forward block (SwiGLU).
    RmsNormRows(s.x.data(), L.ffn_norm, n_rows, d, hp_.rms_eps, s.xn.data());
    const Weight* gate_up[] = {&L.w_gate, &L.w_up};
    float* const gate_up_out[] = {s.gate.data(), s.up.data()};
    LLM_RETURN_IF_ERROR(LinearShared(gate_up, gate_up_out, 2, s.xn.data(), n_rows, s.linear));
    SwiGlu(s.gate.data(), s.up.data(), n_rows * ff, s.gate.data());
    LLM_RETURN_IF_ERROR(Linear(L.w_down, s.gate.data(), n_rows, s.xn.data(), s.linear));
    for (int64_t i = 0; i < n_rows * d; ++i) s.x[i] += s.xn[i];
  }

  // Logits only for each sequence's last token: gather those rows, norm, project.
  std::vector<const SequenceStep*> wanting;
  row = 0;
  for (const SequenceStep& step : steps) {
    row += static_cast<int64_t>(step.tokens.size());
    if (step.logits == nullptr || step.tokens.empty()) continue;
    fit(s.last, static_cast<int64_t>(wanting.size() + 1) * d);
    RmsNorm(s.x.data() + (row - 1) * d, output_norm_.data(), d, hp_.rms_eps,
            s.last.data() + static_cast<int64_t>(wanting.size()) * d);
    wanting.push_back(&step);
  }
  const int64_t n_vocab = hp_.n_vocab;
  for (size_t first = 0; first < wanting.size(); first += kGemvMaxRows) {
    // Up to kGemvMaxRows rows at a time keeps the logits on the row-invariant
    // kernel and bounds the scratch to [kGemvMaxRows][n_vocab].
    const int64_t n = std::min<int64_t>(kGemvMaxRows, static_cast<int64_t>(wanting.size() - first));
    fit(s.gate, n * n_vocab);
    LLM_RETURN_IF_ERROR(Linear(output_, s.last.data() + first * d, n, s.gate.data(), s.linear));
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(s.gate.data() + i * n_vocab, n_vocab, wanting[first + i]->logits);
    }
  }
  return absl::OkStatus();
}

}  // namespace llm
