#include "model/llama.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <string>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "format/gguf.h"
#include "kv/session_kv.h"
#include "model/arch.h"

namespace llm {
namespace {

// Binds the model's tensors to the backend, counting parameters and
// remembering which tensors were used.
class Binder {
 public:
  Binder(const GgufFile& gguf, Backend& backend, uint64_t& n_params,
         std::vector<LlamaModel::BoundWeight>& bound, const std::function<bool(float)>& progress)
      : gguf_(gguf), backend_(backend), n_params_(n_params), bound_(bound), progress_(progress) {
    for (const GgufTensor& t : gguf_.tensors()) total_bytes_ += t.n_bytes;
  }

  bool Has(const std::string& name) const { return gguf_.FindTensor(name) != nullptr; }

  // Rows [row0, row0 + n_out) of matrix `name` ([n_in, total_out] in GGUF
  // order), e.g. Q of a fused attn_qkv: each row is whole blocks, so the
  // slice is rows of the mapped tensor.
  absl::StatusOr<WeightId> MatrixRows(const std::string& name, int64_t n_in, int64_t total_out,
                                      int64_t row0, int64_t n_out) {
    const GgufTensor* t = gguf_.FindTensor(name);
    if (t == nullptr) return Errorf(LLM_ERR_BAD_MODEL, "model lacks tensor '%s'", name);
    if (t->dims.size() != 2 || t->dims[0] != static_cast<uint64_t>(n_in) ||
        t->dims[1] != static_cast<uint64_t>(total_out)) {
      return Errorf(LLM_ERR_BAD_MODEL, "tensor '%s' has shape %s, expected [%d, %d]", name,
                    absl::StrJoin(t->dims, ", "), n_in, total_out);
    }
    std::optional<size_t> row_bytes = RowBytes(t->type, static_cast<size_t>(n_in));
    if (!row_bytes) {
      return Errorf(LLM_ERR_BAD_MODEL, "tensor '%s': row of %d elements does not fit its blocks",
                    name, n_in);
    }
    if (used_.insert(name).second) n_params_ += t->n_elements;
    const uint8_t* data = t->data + row0 * *row_bytes;
    return Bound(backend_.AddMatrix(WeightSource{name, t->type, data, n_out, n_in, *row_bytes,
                                                 gguf_.file_mapped()}),
                 data, static_cast<size_t>(n_out) * *row_bytes);
  }

  absl::StatusOr<WeightId> Matrix(const std::string& name, int64_t n_in, int64_t n_out) {
    return MatrixRows(name, n_in, n_out, 0, n_out);
  }

  absl::StatusOr<WeightId> Vector(const std::string& name, int64_t n) {
    const GgufTensor* t = gguf_.FindTensor(name);
    if (t == nullptr) return Errorf(LLM_ERR_BAD_MODEL, "model lacks tensor '%s'", name);
    if (t->n_elements != static_cast<uint64_t>(n) || t->dims.size() != 1) {
      return Errorf(LLM_ERR_BAD_MODEL, "tensor '%s' has %d elements, expected %d", name,
                    t->n_elements, n);
    }
    if (used_.insert(name).second) n_params_ += t->n_elements;
    return Bound(backend_.AddVector(
                     WeightSource{name, t->type, t->data, 1, n, t->n_bytes, gguf_.file_mapped()}),
                 t->data, t->n_bytes);
  }

  // The vector when the file has it, else an unset id.
  absl::StatusOr<WeightId> OptionalVector(const std::string& name, int64_t n) {
    if (!Has(name)) return WeightId{};
    return Vector(name, n);
  }

  // Records a weight the backend took and reports progress (binding is
  // where a backend repacks: the slow part of a load).
  absl::StatusOr<WeightId> Bound(absl::StatusOr<WeightId> id, const uint8_t* data, size_t n_bytes) {
    if (!id.ok()) return id;
    try {
      bound_.push_back(LlamaModel::BoundWeight{*id, data, n_bytes});
    } catch (const std::bad_alloc&) {
      return Error(LLM_ERR_OUT_OF_MEMORY, "out of memory binding the model's weights");
    }
    bound_bytes_ += n_bytes;
    if (progress_ && total_bytes_ > 0 &&
        !progress_(static_cast<float>(std::min(bound_bytes_, total_bytes_)) /
                   static_cast<float>(total_bytes_))) {
      return Error(LLM_ERR_CANCELLED, "model load cancelled by the progress callback");
    }
    return id;
  }

  // A tensor of the file that no operation reads: the pass would ignore
  // part of the model, so it is refused.
  absl::Status CheckAllUsed(const std::string& arch) const {
    for (const GgufTensor& t : gguf_.tensors()) {
      if (used_.count(t.name) == 0) {
        return Errorf(LLM_ERR_UNSUPPORTED,
                      "tensor '%s' is not supported for architecture '%s' (its forward pass "
                      "would ignore it)",
                      t.name, arch);
      }
    }
    return absl::OkStatus();
  }

 private:
  const GgufFile& gguf_;
  Backend& backend_;
  uint64_t& n_params_;
  std::vector<LlamaModel::BoundWeight>& bound_;
  const std::function<bool(float)>& progress_;
  uint64_t total_bytes_ = 0;  // every tensor of the file
  uint64_t bound_bytes_ = 0;  // sources bound so far (a tied table counts once)
  // std::unordered_set, not absl's: an allocation failure inside absl's
  // rehash corrupts the set (found by the OOM sweep), the standard's
  // insert leaves it as it was.
  std::unordered_set<std::string> used_;
};

bool IsSet(const WeightId& w) { return w.index >= 0; }

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(
    const GgufFile& gguf, const LlamaHParams& hp, Backend& backend,
    const std::function<bool(float)>& progress) {
  if (hp.arch == nullptr) return Error(LLM_ERR_INTERNAL, "hyper-parameters without architecture");
  const ArchSpec& arch = *hp.arch;
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->hp_ = hp;
  Binder b(gguf, backend, m->n_params_, m->bound_, progress);
  if (const GgufTensor* t = gguf.FindTensor("token_embd.weight");
      t != nullptr && t->dims.size() == 2 && t->dims[1] != static_cast<uint64_t>(hp.n_vocab)) {
    return Errorf(LLM_ERR_BAD_MODEL,
                  "vocabulary size %d from the metadata does not match token_embd.weight, which "
                  "has %d rows",
                  hp.n_vocab, t->dims[1]);
  }
  LLM_ASSIGN_OR_RETURN(m->token_embd_, b.Matrix("token_embd.weight", hp.n_embd, hp.n_vocab));
  LLM_ASSIGN_OR_RETURN(m->output_norm_, b.Vector("output_norm.weight", hp.n_embd));
  if (b.Has("output.weight")) {
    LLM_ASSIGN_OR_RETURN(m->output_, b.Matrix("output.weight", hp.n_embd, hp.n_vocab));
  } else {
    m->output_ = m->token_embd_;  // tied embeddings
  }
  // RoPE frequency factors, one per rotated pair, shared by every layer:
  // Llama 3's rope_freqs; Phi-3's LongRoPE short and long factors (the long
  // ones rotate the sessions whose context exceeds the original one,
  // UsesLongRope; docs/ARCHITECTURE.md).
  const int64_t n_pairs = hp.rope_dims / 2;
  if (arch.longrope) {
    LLM_ASSIGN_OR_RETURN(m->rope_factors_, b.OptionalVector("rope_factors_short.weight", n_pairs));
    LLM_ASSIGN_OR_RETURN(m->rope_factors_long_,
                         b.OptionalVector("rope_factors_long.weight", n_pairs));
  } else {
    LLM_ASSIGN_OR_RETURN(m->rope_factors_, b.OptionalVector("rope_freqs.weight", n_pairs));
  }

  m->layers_.resize(static_cast<size_t>(hp.n_layer));
  for (int64_t i = 0; i < hp.n_layer; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    LlamaLayer& L = m->layers_[i];
    LLM_ASSIGN_OR_RETURN(L.attn_norm, b.Vector(p + "attn_norm.weight", hp.n_embd));
    LLM_ASSIGN_OR_RETURN(L.ffn_norm, b.Vector(p + "ffn_norm.weight", hp.n_embd));
    if (arch.post_norms) {
      LLM_ASSIGN_OR_RETURN(L.attn_post_norm, b.Vector(p + "post_attention_norm.weight", hp.n_embd));
      LLM_ASSIGN_OR_RETURN(L.ffn_post_norm, b.Vector(p + "post_ffw_norm.weight", hp.n_embd));
    }
    // Q, K, V: separate, or one fused attn_qkv ([q | k | v] rows).
    if (b.Has(p + "attn_qkv.weight")) {
      const std::string qkv = p + "attn_qkv.weight";
      const int64_t total = hp.q_dim() + 2 * hp.kv_dim();
      LLM_ASSIGN_OR_RETURN(L.wq, b.MatrixRows(qkv, hp.n_embd, total, 0, hp.q_dim()));
      LLM_ASSIGN_OR_RETURN(L.wk, b.MatrixRows(qkv, hp.n_embd, total, hp.q_dim(), hp.kv_dim()));
      LLM_ASSIGN_OR_RETURN(
          L.wv, b.MatrixRows(qkv, hp.n_embd, total, hp.q_dim() + hp.kv_dim(), hp.kv_dim()));
    } else {
      LLM_ASSIGN_OR_RETURN(L.wq, b.Matrix(p + "attn_q.weight", hp.n_embd, hp.q_dim()));
      LLM_ASSIGN_OR_RETURN(L.wk, b.Matrix(p + "attn_k.weight", hp.n_embd, hp.kv_dim()));
      LLM_ASSIGN_OR_RETURN(L.wv, b.Matrix(p + "attn_v.weight", hp.n_embd, hp.kv_dim()));
    }
    if (arch.qkv_bias) {
      LLM_ASSIGN_OR_RETURN(L.bq, b.Vector(p + "attn_q.bias", hp.q_dim()));
      LLM_ASSIGN_OR_RETURN(L.bk, b.Vector(p + "attn_k.bias", hp.kv_dim()));
      LLM_ASSIGN_OR_RETURN(L.bv, b.Vector(p + "attn_v.bias", hp.kv_dim()));
    } else {  // llama.cpp reads them for every family when present
      LLM_ASSIGN_OR_RETURN(L.bq, b.OptionalVector(p + "attn_q.bias", hp.q_dim()));
      LLM_ASSIGN_OR_RETURN(L.bk, b.OptionalVector(p + "attn_k.bias", hp.kv_dim()));
      LLM_ASSIGN_OR_RETURN(L.bv, b.OptionalVector(p + "attn_v.bias", hp.kv_dim()));
    }
    if (arch.qk_norm) {
      LLM_ASSIGN_OR_RETURN(L.q_norm, b.Vector(p + "attn_q_norm.weight", hp.head_dim));
      LLM_ASSIGN_OR_RETURN(L.k_norm, b.Vector(p + "attn_k_norm.weight", hp.head_dim));
    }
    LLM_ASSIGN_OR_RETURN(L.wo, b.Matrix(p + "attn_output.weight", hp.q_dim(), hp.n_embd));
    if (arch.fused_gate_up) {  // ffn_up = [gate | up] rows (Phi-3)
      const std::string up = p + "ffn_up.weight";
      LLM_ASSIGN_OR_RETURN(L.w_gate, b.MatrixRows(up, hp.n_embd, 2 * hp.n_ff, 0, hp.n_ff));
      LLM_ASSIGN_OR_RETURN(L.w_up, b.MatrixRows(up, hp.n_embd, 2 * hp.n_ff, hp.n_ff, hp.n_ff));
    } else {
      LLM_ASSIGN_OR_RETURN(L.w_gate, b.Matrix(p + "ffn_gate.weight", hp.n_embd, hp.n_ff));
      LLM_ASSIGN_OR_RETURN(L.w_up, b.Matrix(p + "ffn_up.weight", hp.n_embd, hp.n_ff));
    }
    LLM_ASSIGN_OR_RETURN(L.w_down, b.Matrix(p + "ffn_down.weight", hp.n_ff, hp.n_embd));
  }
  LLM_RETURN_IF_ERROR(b.CheckAllUsed(hp.architecture));

  LlamaActivations& a = m->act_;
  a.x = backend.DeclareActivation(hp.n_embd, ActivationRows::kTokens);
  a.xn = backend.DeclareActivation(hp.n_embd, ActivationRows::kTokens);
  a.q = backend.DeclareActivation(hp.q_dim(), ActivationRows::kTokens);
  a.k = backend.DeclareActivation(hp.kv_dim(), ActivationRows::kTokens);
  a.v = backend.DeclareActivation(hp.kv_dim(), ActivationRows::kTokens);
  a.attn = backend.DeclareActivation(hp.q_dim(), ActivationRows::kTokens);
  a.gate = backend.DeclareActivation(hp.n_ff, ActivationRows::kTokens);
  a.up = backend.DeclareActivation(hp.n_ff, ActivationRows::kTokens);
  a.logits = backend.DeclareActivation(hp.n_vocab, ActivationRows::kLogitRows);
  return m;
}

bool LlamaModel::UsesLongRope(int64_t n_ctx) const {
  // llama.cpp (llama_model::get_rope_factors): rope_long when the context of
  // one sequence exceeds n_ctx_orig_yarn (rope.scaling.original_context_length,
  // else the trained context). A file without rope_factors_long then
  // rotates unscaled, as llama.cpp's null factors do.
  return hp_.arch->longrope && n_ctx > hp_.n_ctx_orig;
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
    seq.kv = step.kv->table(0).block_list();
    if (step.kv->n_groups() > 1) seq.kv_group1 = step.kv->table(1).block_list();
    seq.wants_logits = step.logits != nullptr;
    seq.rope_long = step.rope_long;
    if (seq.wants_logits && seq.n_rows > 0) ++n_logit_rows;
    s.sequences.push_back(seq);
    s.tokens.insert(s.tokens.end(), step.tokens.begin(), step.tokens.end());
  }
  if (s.tokens.empty()) return absl::OkStatus();
  const ArchSpec& arch = *hp_.arch;
  const LlamaActivations& a = act_;
  RopeSpec rope;
  rope.head_dim = hp_.head_dim;
  rope.rope_dims = hp_.rope_dims;
  rope.freq_base = hp_.rope_freq_base;
  rope.neox = hp_.rope_neox;
  rope.freq_scale = hp_.rope_freq_scale;
  rope.attn_factor = hp_.rope_attn_factor;
  rope.freq_factors = rope_factors_;
  rope.freq_factors_long = rope_factors_long_;
  RopeSpec rope_local = rope;  // sliding-window layers (Gemma)
  rope_local.freq_base = hp_.rope_freq_base_swa;
  rope_local.freq_scale = hp_.rope_freq_scale_swa;
  AttentionSpec attention;
  attention.scale = hp_.attn_scale;
  attention.softcap = hp_.attn_softcap;
  const float eps = hp_.rms_eps;

  LLM_RETURN_IF_ERROR(b.BeginPass(PassDesc{s.tokens, s.sequences}));
  LLM_RETURN_IF_ERROR(b.Embed(token_embd_, a.x));
  if (arch.embed_scale) {
    LLM_RETURN_IF_ERROR(b.Scale(a.x, std::sqrt(static_cast<float>(hp_.n_embd))));
  }
  for (int64_t l = 0; l < hp_.n_layer; ++l) {
    const LlamaLayer& L = layers_[l];
    const RopeSpec& r = hp_.IsSwaLayer(l) ? rope_local : rope;
    // Attention block.
    LLM_RETURN_IF_ERROR(b.RmsNorm(a.x, L.attn_norm, eps, a.xn));
    LLM_RETURN_IF_ERROR(b.Linear({L.wq, L.wk, L.wv}, a.xn, {a.q, a.k, a.v}));
    if (IsSet(L.bq)) LLM_RETURN_IF_ERROR(b.AddBias(a.q, L.bq));
    if (IsSet(L.bk)) LLM_RETURN_IF_ERROR(b.AddBias(a.k, L.bk));
    if (IsSet(L.bv)) LLM_RETURN_IF_ERROR(b.AddBias(a.v, L.bv));
    if (IsSet(L.q_norm)) LLM_RETURN_IF_ERROR(b.HeadRmsNorm(a.q, hp_.n_head, L.q_norm, eps));
    if (IsSet(L.k_norm)) LLM_RETURN_IF_ERROR(b.HeadRmsNorm(a.k, hp_.n_head_kv, L.k_norm, eps));
    LLM_RETURN_IF_ERROR(b.Rope(a.q, hp_.n_head, r));
    LLM_RETURN_IF_ERROR(b.Rope(a.k, hp_.n_head_kv, r));
    LLM_RETURN_IF_ERROR(b.StoreKv(l, a.k, a.v));
    LLM_RETURN_IF_ERROR(b.Attention(l, hp_.n_head, hp_.layer_window[l], a.q, a.attn, attention));
    LLM_RETURN_IF_ERROR(b.Linear({L.wo}, a.attn, {a.xn}));
    if (IsSet(L.attn_post_norm)) LLM_RETURN_IF_ERROR(b.RmsNorm(a.xn, L.attn_post_norm, eps, a.xn));
    LLM_RETURN_IF_ERROR(b.Add(a.x, a.xn));
    // Feed-forward block (gated: SwiGLU or GeGLU).
    LLM_RETURN_IF_ERROR(b.RmsNorm(a.x, L.ffn_norm, eps, a.xn));
    LLM_RETURN_IF_ERROR(b.Linear({L.w_gate, L.w_up}, a.xn, {a.gate, a.up}));
    if (arch.ffn == FfnActivation::kGeGlu) {
      LLM_RETURN_IF_ERROR(b.GeGlu(a.gate, a.up, a.gate));
    } else {
      LLM_RETURN_IF_ERROR(b.SwiGlu(a.gate, a.up, a.gate));
    }
    LLM_RETURN_IF_ERROR(b.Linear({L.w_down}, a.gate, {a.xn}));
    if (IsSet(L.ffn_post_norm)) LLM_RETURN_IF_ERROR(b.RmsNorm(a.xn, L.ffn_post_norm, eps, a.xn));
    LLM_RETURN_IF_ERROR(b.Add(a.x, a.xn));
  }
  // Logits only for each sampling sequence's last token (none for a pass of
  // prefill chunks that are not their step's last: no launch at all then).
  if (n_logit_rows > 0) {
    LLM_RETURN_IF_ERROR(b.Logits(a.x, output_norm_, eps, output_, a.logits));
    if (hp_.final_softcap > 0.0f) LLM_RETURN_IF_ERROR(b.SoftCap(a.logits, hp_.final_softcap));
  }
  LLM_RETURN_IF_ERROR(b.EndPass());
  int64_t i = 0;  // logit rows come in step order
  for (const SequenceStep& step : steps) {
    if (step.logits == nullptr || step.tokens.empty()) continue;
    LLM_RETURN_IF_ERROR(b.ReadActivation(a.logits, i++, step.logits));
  }
  return absl::OkStatus();
}

}  // namespace llm
