#include "model/llama.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "format/gguf.h"
#include "kv/block_table.h"

namespace llm {
namespace {

absl::StatusOr<WeightId> BindMatrix(const GgufFile& gguf, const std::string& name, int64_t n_in,
                                    int64_t n_out, uint64_t& n_params, Backend& backend) {
  const GgufTensor* t = gguf.FindTensor(name);
  if (t == nullptr) return Errorf(LLM_ERR_BAD_MODEL, "model lacks tensor '%s'", name);
  if (t->dims.size() != 2 || t->dims[0] != static_cast<uint64_t>(n_in) ||
      t->dims[1] != static_cast<uint64_t>(n_out)) {
    return Errorf(LLM_ERR_BAD_MODEL, "tensor '%s' has shape %s, expected [%d, %d]", name,
                  absl::StrJoin(t->dims, ", "), n_in, n_out);
  }
  std::optional<size_t> row_bytes = RowBytes(t->type, static_cast<size_t>(n_in));
  if (!row_bytes) {
    return Errorf(LLM_ERR_BAD_MODEL, "tensor '%s': row of %d elements does not fit its blocks",
                  name, n_in);
  }
  n_params += t->n_elements;
  return backend.AddMatrix(WeightSource{name, t->type, t->data, n_out, n_in, *row_bytes});
}

absl::StatusOr<WeightId> BindVector(const GgufFile& gguf, const std::string& name, int64_t n,
                                    uint64_t& n_params, Backend& backend) {
  const GgufTensor* t = gguf.FindTensor(name);
  if (t == nullptr) return Errorf(LLM_ERR_BAD_MODEL, "model lacks tensor '%s'", name);
  if (t->n_elements != static_cast<uint64_t>(n) || t->dims.size() != 1) {
    return Errorf(LLM_ERR_BAD_MODEL, "tensor '%s' has %d elements, expected %d", name,
                  t->n_elements, n);
  }
  n_params += t->n_elements;
  return backend.AddVector(WeightSource{name, t->type, t->data, 1, n, t->n_bytes});
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(const GgufFile& gguf,
                                                               const LlamaHParams& hp,
                                                               Backend& backend) {
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
  Backend& b = backend;
  LLM_ASSIGN_OR_RETURN(m->token_embd_,
                       BindMatrix(gguf, "token_embd.weight", hp.n_embd, hp.n_vocab, np, b));
  LLM_ASSIGN_OR_RETURN(m->output_norm_, BindVector(gguf, "output_norm.weight", hp.n_embd, np, b));
  if (gguf.FindTensor("output.weight") != nullptr) {
    LLM_ASSIGN_OR_RETURN(m->output_,
                         BindMatrix(gguf, "output.weight", hp.n_embd, hp.n_vocab, np, b));
  } else {
    m->output_ = m->token_embd_;  // tied embeddings
  }
  m->layers_.resize(static_cast<size_t>(hp.n_layer));
  for (int64_t i = 0; i < hp.n_layer; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    LlamaLayer& L = m->layers_[i];
    LLM_ASSIGN_OR_RETURN(L.attn_norm, BindVector(gguf, p + "attn_norm.weight", hp.n_embd, np, b));
    LLM_ASSIGN_OR_RETURN(L.ffn_norm, BindVector(gguf, p + "ffn_norm.weight", hp.n_embd, np, b));
    LLM_ASSIGN_OR_RETURN(L.wq, BindMatrix(gguf, p + "attn_q.weight", hp.n_embd, hp.q_dim(), np, b));
    LLM_ASSIGN_OR_RETURN(L.wk,
                         BindMatrix(gguf, p + "attn_k.weight", hp.n_embd, hp.kv_dim(), np, b));
    LLM_ASSIGN_OR_RETURN(L.wv,
                         BindMatrix(gguf, p + "attn_v.weight", hp.n_embd, hp.kv_dim(), np, b));
    LLM_ASSIGN_OR_RETURN(L.wo,
                         BindMatrix(gguf, p + "attn_output.weight", hp.q_dim(), hp.n_embd, np, b));
    LLM_ASSIGN_OR_RETURN(L.w_gate,
                         BindMatrix(gguf, p + "ffn_gate.weight", hp.n_embd, hp.n_ff, np, b));
    LLM_ASSIGN_OR_RETURN(L.w_up, BindMatrix(gguf, p + "ffn_up.weight", hp.n_embd, hp.n_ff, np, b));
    LLM_ASSIGN_OR_RETURN(L.w_down,
                         BindMatrix(gguf, p + "ffn_down.weight", hp.n_ff, hp.n_embd, np, b));
  }
  LlamaActivations& a = m->act_;
  a.x = b.DeclareActivation(hp.n_embd, ActivationRows::kTokens);
  a.xn = b.DeclareActivation(hp.n_embd, ActivationRows::kTokens);
  a.q = b.DeclareActivation(hp.q_dim(), ActivationRows::kTokens);
  a.k = b.DeclareActivation(hp.kv_dim(), ActivationRows::kTokens);
  a.v = b.DeclareActivation(hp.kv_dim(), ActivationRows::kTokens);
  a.attn = b.DeclareActivation(hp.q_dim(), ActivationRows::kTokens);
  a.gate = b.DeclareActivation(hp.n_ff, ActivationRows::kTokens);
  a.up = b.DeclareActivation(hp.n_ff, ActivationRows::kTokens);
  a.logits = b.DeclareActivation(hp.n_vocab, ActivationRows::kLogitRows);
  return m;
}

absl::Status LlamaModel::Forward(absl::Span<const SequenceStep> steps, Backend& b,
                                 ForwardScratch& s) const {
  for (const SequenceStep& step : steps) {
    // Normally done per step by the caller (so that a full KV pool fails one
    // step, not the batch); idempotent.
    LLM_RETURN_IF_ERROR(
        step.kv->PrepareWrite(step.pos0, step.pos0 + static_cast<int64_t>(step.tokens.size())));
  }
  // The pass: each step's rows in order, with its block table.
  s.sequences.clear();
  s.tokens.clear();
  int64_t n_logit_rows = 0;
  for (const SequenceStep& step : steps) {
    PassSequence seq;
    seq.row0 = static_cast<int64_t>(s.tokens.size());
    seq.n_rows = static_cast<int64_t>(step.tokens.size());
    seq.pos0 = step.pos0;
    seq.kv = step.kv->block_list();
    seq.wants_logits = step.logits != nullptr;
    if (seq.wants_logits && seq.n_rows > 0) ++n_logit_rows;
    s.sequences.push_back(seq);
    s.tokens.insert(s.tokens.end(), step.tokens.begin(), step.tokens.end());
  }
  if (s.tokens.empty()) return absl::OkStatus();
  const LlamaActivations& a = act_;
  const RopeSpec rope{hp_.head_dim, hp_.rope_dims, hp_.rope_freq_base, hp_.rope_neox};
  const float eps = hp_.rms_eps;

  LLM_RETURN_IF_ERROR(b.BeginPass(PassDesc{s.tokens, s.sequences}));
  LLM_RETURN_IF_ERROR(b.Embed(token_embd_, a.x));
  for (int64_t l = 0; l < hp_.n_layer; ++l) {
    const LlamaLayer& L = layers_[l];
    // Attention block.
    LLM_RETURN_IF_ERROR(b.RmsNorm(a.x, L.attn_norm, eps, a.xn));
    LLM_RETURN_IF_ERROR(b.Linear({L.wq, L.wk, L.wv}, a.xn, {a.q, a.k, a.v}));
    LLM_RETURN_IF_ERROR(b.Rope(a.q, hp_.n_head, rope));
    LLM_RETURN_IF_ERROR(b.Rope(a.k, hp_.n_head_kv, rope));
    LLM_RETURN_IF_ERROR(b.StoreKv(l, a.k, a.v));
    LLM_RETURN_IF_ERROR(b.Attention(l, hp_.n_head, hp_.layer_window[l], a.q, a.attn));
    LLM_RETURN_IF_ERROR(b.Linear({L.wo}, a.attn, {a.xn}));
    LLM_RETURN_IF_ERROR(b.Add(a.x, a.xn));
    // Feed-forward block (SwiGLU).
    LLM_RETURN_IF_ERROR(b.RmsNorm(a.x, L.ffn_norm, eps, a.xn));
    LLM_RETURN_IF_ERROR(b.Linear({L.w_gate, L.w_up}, a.xn, {a.gate, a.up}));
    LLM_RETURN_IF_ERROR(b.SwiGlu(a.gate, a.up, a.gate));
    LLM_RETURN_IF_ERROR(b.Linear({L.w_down}, a.gate, {a.xn}));
    LLM_RETURN_IF_ERROR(b.Add(a.x, a.xn));
  }
  // Logits only for each sampling sequence's last token (none for a pass of
  // prefill chunks that are not their step's last: no launch at all then).
  if (n_logit_rows > 0) LLM_RETURN_IF_ERROR(b.Logits(a.x, output_norm_, eps, output_, a.logits));
  LLM_RETURN_IF_ERROR(b.EndPass());
  int64_t i = 0;  // logit rows come in step order
  for (const SequenceStep& step : steps) {
    if (step.logits == nullptr || step.tokens.empty()) continue;
    LLM_RETURN_IF_ERROR(b.ReadActivation(a.logits, i++, step.logits));
  }
  return absl::OkStatus();
}

}  // namespace llm
