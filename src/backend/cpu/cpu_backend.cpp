#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/cpu_kv_storage.h"
#include "backend/cpu/dequantize.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/thread_pool.h"
#include "core/status.h"

namespace llm {
namespace {

// Runs fn, turning an exception into a status (nothing may escape the
// scheduler thread).
template <typename Fn>
absl::Status Guarded(const char* what, Fn&& fn) {
  try {
    return fn();
  } catch (...) {
    return StatusFromCurrentException(what);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const BackendOptions& options) {
  try {
    return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(options));
  } catch (...) {
    return StatusFromCurrentException("creating the CPU backend (its worker threads)");
  }
}

int HostPhysicalCores() { return PhysicalCoreCount(); }

CpuBackend::CpuBackend(const BackendOptions& options)
    : n_threads_(std::max(options.n_threads, 1)),
      deterministic_(options.deterministic),
      pool_(std::make_unique<ThreadPool>(n_threads_)) {
  linear_.pool = pool_.get();
  linear_.n_threads = n_threads_;
  linear_.batch_invariant = deterministic_;
  // Opt-in only, read per backend (per model): it moves the logits of F32 /
  // F16 / BF16 models (linear.h). A deterministic model keeps QuantMatMul.
  const char* bf16 = std::getenv("LLM_CPU_PREFILL_BF16");
  linear_.prefill_bf16 = bf16 != nullptr && std::strcmp(bf16, "1") == 0 && !deterministic_ &&
                         ActiveSimdLevel() == SimdLevel::kAvx512 && CpuHasAvx512Bf16();
}

CpuBackend::~CpuBackend() = default;

std::string CpuBackend::Describe() const {
  // Plain std::string operations: an allocation failure here must unwind
  // (absl's formatting, a prebuilt library, cannot be unwound through).
  return std::string("CPU kernels: ") + SimdLevelName(ActiveSimdLevel()) + ", " +
         std::to_string(n_threads_) + " threads" +
         (linear_.prefill_bf16 ? ", bf16 prefill (LLM_CPU_PREFILL_BF16)" : "");
}

// ---- weights and memory ---------------------------------------------------

absl::StatusOr<WeightId> CpuBackend::AddMatrix(const WeightSource& source) {
  // Refused here, at load, rather than at the first pass: a type the kernels
  // cannot read (dequantizing row 0 says so) or rows shorter than the type
  // needs.
  const std::optional<size_t> dense = RowBytes(source.type, static_cast<size_t>(source.n_in));
  if (source.data == nullptr || source.n_out <= 0 || source.n_in <= 0 || !dense ||
      source.row_bytes < *dense) {
    return Errorf(LLM_ERR_UNSUPPORTED, "tensor '%s': not a weight matrix the CPU backend can bind",
                  source.name);
  }
  LLM_RETURN_IF_ERROR(Guarded("binding a weight", [&]() -> absl::Status {
    std::vector<float> row0(static_cast<size_t>(source.n_in));
    const absl::Status st =
        DequantizeRow(source.type, source.data, static_cast<size_t>(source.n_in), row0.data());
    if (st.ok()) return st;
    return Errorf(LLM_ERR_UNSUPPORTED, "tensor '%s': the CPU backend cannot multiply it (%s)",
                  source.name, st.message());
  }));
  WeightRecord r;
  r.matrix = Weight{source.type, source.data, source.n_out, source.n_in, source.row_bytes};
  r.file_mapped = source.file_mapped;
  r.source = source.data;
  // The embedding table is mostly read a row per token (Embed, from the
  // mapping); a copy pays off only if the output is tied to it.
  if (source.name == "token_embd.weight") {
    r.pack_later = true;
    r.embed_rows = true;
  } else {
    Pack(r);
  }
  LLM_RETURN_IF_ERROR(Guarded("binding a weight", [&] {
    weights_.push_back(std::move(r));
    return absl::OkStatus();
  }));
  return WeightId{static_cast<int32_t>(weights_.size() - 1), source.n_out, source.n_in};
}

absl::StatusOr<WeightId> CpuBackend::AddVector(const WeightSource& source) {
  WeightRecord r;
  absl::Status st = Guarded("loading a norm weight", [&] {
    r.vector.resize(static_cast<size_t>(source.n_in));
    return DequantizeRow(source.type, source.data, static_cast<size_t>(source.n_in),
                         r.vector.data());
  });
  if (!st.ok()) return st;
  st = Guarded("loading a norm weight", [&] {
    weights_.push_back(std::move(r));
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return WeightId{static_cast<int32_t>(weights_.size() - 1), 1, source.n_in};
}

ActivationId CpuBackend::DeclareActivation(int64_t width, ActivationRows rows) {
  Activation a;
  a.width = width;
  a.rows = rows;
  activations_.push_back(std::move(a));
  return ActivationId{static_cast<int32_t>(activations_.size() - 1), width};
}

absl::StatusOr<std::unique_ptr<KvStorage>> CpuBackend::CreateKvStorage(
    const KvLayout& layout, absl::Span<const int64_t> layers) {
  if (kv_groups_.size() >= static_cast<size_t>(kMaxKvGroups)) {
    return Errorf(LLM_ERR_INTERNAL, "the CPU backend supports %d KV groups", kMaxKvGroups);
  }
  if (static_cast<int64_t>(layers.size()) != layout.n_layer || layers.empty()) {
    return Errorf(LLM_ERR_INTERNAL, "a KV group of %d layers names %d layers", layout.n_layer,
                  layers.size());
  }
  if (!kv_groups_.empty() && (layout.n_head_kv != kv_groups_[0].layout.n_head_kv ||
                              layout.head_dim != kv_groups_[0].layout.head_dim)) {
    return Error(LLM_ERR_INTERNAL, "KV groups with different row shapes");
  }
  for (const int64_t l : layers) {
    if (l < 0 || l > (int64_t{1} << 20) ||
        (static_cast<size_t>(l) < layer_group_.size() && layer_group_[l] >= 0)) {
      return Errorf(LLM_ERR_INTERNAL, "layer %d cannot join a KV group", l);
    }
  }
  try {
    auto storage = std::make_unique<CpuKvStorage>(std::max<size_t>(layout.block_bytes(), 1));
    const int group = static_cast<int>(kv_groups_.size());
    for (size_t s = 0; s < layers.size(); ++s) {
      const size_t l = static_cast<size_t>(layers[s]);
      if (layer_group_.size() <= l) {
        layer_group_.resize(l + 1, -1);
        layer_slot_.resize(l + 1, -1);
      }
      layer_group_[l] = group;
      layer_slot_[l] = static_cast<int64_t>(s);
    }
    kv_groups_.push_back(KvGroup{layout, storage.get()});
    return std::unique_ptr<KvStorage>(std::move(storage));
  } catch (...) {
    return StatusFromCurrentException("creating the KV storage");
  }
}

bool CpuBackend::LayerKv(int64_t layer, int* group, int64_t* slot) const {
  if (layer < 0 || static_cast<size_t>(layer) >= layer_group_.size() || layer_group_[layer] < 0) {
    return false;
  }
  *group = layer_group_[layer];
  *slot = layer_slot_[layer];
  return true;
}

float* CpuBackend::Act(ActivationId id, int64_t width, absl::Status* status) {
  if (id.index < 0 || static_cast<size_t>(id.index) >= activations_.size() ||
      (width != 0 && activations_[id.index].width != width)) {
    *status =
        Errorf(LLM_ERR_INTERNAL, "activation %d (width %d) is not a declared buffer of width %d",
               id.index, id.width, width);
    return nullptr;
  }
  return activations_[id.index].data.data();
}

void CpuBackend::Pack(WeightRecord& r) {
  // Read per matrix (a few hundred getenv calls per load), so that a
  // process can load one model with and one without repacking.
  const char* v = std::getenv("LLM_CPU_REPACK");
  const bool enabled = v == nullptr || std::strcmp(v, "0") != 0;
  r.pack_later = false;
  const Weight& m = r.matrix;
  if (!enabled) return;
  const bool rows16_layout = QuantMatMulReadsRows16(m.type) && m.n_in % 32 == 0;
  // Every other matrix of a file mapping gets a plain copy of its rows
  // (weight_buffer.h: decode reads it faster than the mapping). From a
  // caller's buffer, which is never released, such a copy would only add
  // memory.
  if (!rows16_layout && !r.file_mapped) return;
  const size_t bytes = static_cast<size_t>(m.n_out) * m.row_bytes;
  try {
    if (rows16_layout) {
      r.packed = rows16::MakePacked(m.type, m.data, m.row_bytes, m.n_out, m.n_in, pool_.get(),
                                    &weight_arena_);
      r.matrix.packed = r.packed.data.get();
    } else {
      r.packed = CopyToWeightBuffer(m.data, bytes, pool_.get(), &weight_arena_);
      r.plain_copy = true;
    }
  } catch (...) {
    // Out of memory (or no thread to pack on): keep reading the mapping.
    r.packed = rows16::PackedBuffer();
    r.matrix.packed = nullptr;
    return;
  }
  // The copy replaces the mapped rows in memory: only the copy stays
  // resident (the rows fault back in if anything ever reads them). A
  // caller's buffer is only read, never released.
  if (r.file_mapped) rows16::ReleaseMappedPages(r.matrix.data, bytes);
  if (r.plain_copy) r.matrix.data = r.packed.data.get();
}

bool CpuBackend::ReadsSource(WeightId id) const {
  if (id.index < 0 || static_cast<size_t>(id.index) >= weights_.size()) return true;
  const WeightRecord& r = weights_[id.index];
  // A norm vector is an f32 copy; a matrix with a copy is read only
  // through it. Embed reads the embedding table's rows from the mapping,
  // unless that copy is a plain one (a tied output), which it then reads.
  if (!r.vector.empty()) return false;
  return r.packed.data == nullptr || (r.embed_rows && !r.plain_copy);
}

uint64_t CpuBackend::WeightCopyBytes() const {
  uint64_t n = 0;
  for (const WeightRecord& r : weights_) n += r.packed.bytes + r.vector.size() * sizeof(float);
  return n;
}

void CpuBackend::SourcesPrefaulted() {
  for (size_t i = 0; i < weights_.size(); ++i) {
    const WeightRecord& r = weights_[i];
    if (!r.file_mapped || r.packed.data == nullptr ||
        ReadsSource(WeightId{static_cast<int32_t>(i)})) {
      continue;
    }
    rows16::ReleaseMappedPages(r.source, static_cast<size_t>(r.matrix.n_out) * r.matrix.row_bytes);
  }
}

void CpuBackend::PackIfDeferred(WeightId id) {
  if (id.index >= 0 && static_cast<size_t>(id.index) < weights_.size() &&
      weights_[id.index].pack_later) {
    Pack(weights_[id.index]);
  }
}

const CpuBackend::WeightRecord* CpuBackend::FindWeight(WeightId id, absl::Status* status) const {
  if (id.index < 0 || static_cast<size_t>(id.index) >= weights_.size()) {
    *status = Errorf(LLM_ERR_INTERNAL, "weight %d was not added to the backend", id.index);
    return nullptr;
  }
  return &weights_[id.index];
}

const float* CpuBackend::FindVector(WeightId id, int64_t n, absl::Status* status) const {
  const WeightRecord* w = FindWeight(id, status);
  if (w == nullptr) return nullptr;
  if (static_cast<int64_t>(w->vector.size()) != n || n <= 0) {
    *status = Errorf(LLM_ERR_INTERNAL, "weight %d is not a vector of %d elements", id.index, n);
    return nullptr;
  }
  return w->vector.data();
}

// ---- a pass -----------------------------------------------------------------

absl::Status CpuBackend::BeginPass(const PassDesc& pass) {
  return Guarded("preparing a forward pass", [&]() -> absl::Status {
    int64_t rows = 0, logit_rows = 0;
    for (const PassSequence& s : pass.sequences) {
      if (s.row0 != rows || s.n_rows < 0 || s.pos0 < 0) {
        return Error(LLM_ERR_INTERNAL, "pass sequences do not tile the pass's rows in order");
      }
      rows += s.n_rows;
      if (s.wants_logits && s.n_rows > 0) ++logit_rows;
    }
    if (rows != static_cast<int64_t>(pass.tokens.size())) {
      return Errorf(LLM_ERR_INTERNAL, "pass has %d tokens but its sequences cover %d rows",
                    pass.tokens.size(), rows);
    }
    pass_ = pass;
    n_rows_ = rows;
    n_logit_rows_ = logit_rows;
    // Every buffer of the pass is sized here, before its first operation.
    for (Activation& a : activations_) {
      const size_t need = static_cast<size_t>(ActRows(a) * a.width);
      if (a.data.size() < need) a.data.resize(need);
    }
    positions_.resize(static_cast<size_t>(rows));
    rope_long_.resize(static_cast<size_t>(rows));
    kv_bases_.resize(kv_groups_.size());
    for (auto& bases : kv_bases_) bases.resize(pass.sequences.size());
    for (size_t i = 0; i < pass.sequences.size(); ++i) {
      const PassSequence& s = pass.sequences[i];
      for (int64_t t = 0; t < s.n_rows; ++t) {
        positions_[s.row0 + t] = s.pos0 + t;
        rope_long_[s.row0 + t] = s.rope_long ? 1 : 0;
      }
      if (s.n_rows == 0) continue;
      if (kv_groups_.empty()) return Error(LLM_ERR_INTERNAL, "a pass ran before KV storage");
      for (size_t g = 0; g < kv_groups_.size(); ++g) {
        const KvBlockList& list = GroupList(s, static_cast<int>(g));
        const int64_t block_tokens = KvLayout::block_tokens(list.type);
        if (static_cast<int64_t>(list.blocks.size()) * block_tokens < s.pos0 + s.n_rows) {
          return Errorf(LLM_ERR_INTERNAL,
                        "sequence %d: %d KV blocks of group %d cannot hold %d positions", i,
                        list.blocks.size(), g, s.pos0 + s.n_rows);
        }
        LLM_RETURN_IF_ERROR(kv_groups_[g].storage->Bases(list.blocks, kv_bases_[g][i]));
      }
    }
    rope_ready_ = false;
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::EndPass() {
  // CPU operations complete when they return: nothing to wait for.
  return absl::OkStatus();
}

absl::Status CpuBackend::Embed(WeightId table, ActivationId out) {
  absl::Status st;
  const WeightRecord* w = FindWeight(table, &st);
  float* x = w != nullptr ? Act(out, w->matrix.n_in, &st) : nullptr;
  if (x == nullptr) return st;
  const Weight& m = w->matrix;
  for (int64_t r = 0; r < n_rows_; ++r) {
    // x[r] = token_embd[token r]   x: [n_rows][n_embd]
    LLM_RETURN_IF_ERROR(DequantizeRow(m.type, m.data + pass_.tokens[r] * m.row_bytes,
                                      static_cast<size_t>(m.n_in), x + r * m.n_in));
  }
  return absl::OkStatus();
}

void CpuBackend::ForRows(int64_t width, const std::function<void(int64_t begin, int64_t end)>& fn) {
  // Below this many rows (decode steps) or elements a pool round trip costs
  // more than the op: on 2 threads the element-wise ops were ~5 % of a 1B
  // prefill, run by the caller while the workers waited; a 16-session
  // SmolLM2 step (16 x 576) ran 3-5 % faster with them on the caller.
  constexpr int64_t kMinParallelRows = 8;
  constexpr int64_t kMinParallelElements = int64_t{1} << 15;
  if (n_rows_ >= kMinParallelRows && n_rows_ * width >= kMinParallelElements && pool_ != nullptr &&
      pool_->size() > 1) {
    pool_->ParallelFor(n_rows_, fn);
  } else {
    fn(0, n_rows_);
  }
}

absl::Status CpuBackend::RmsNorm(ActivationId in, WeightId weight, float eps, ActivationId out) {
  absl::Status st;
  const WeightRecord* w = FindWeight(weight, &st);
  if (w == nullptr) return st;
  const int64_t n = static_cast<int64_t>(w->vector.size());  // 0 for a matrix: refused below
  const float* x = n > 0 ? Act(in, n, &st) : nullptr;
  float* y = x != nullptr ? Act(out, n, &st) : nullptr;
  if (y == nullptr) return st.ok() ? Error(LLM_ERR_INTERNAL, "RmsNorm weight is not a vector") : st;
  ForRows(n, [&](int64_t begin, int64_t end) {
    llm::RmsNormRows(x + begin * n, w->vector.data(), end - begin, n, eps, y + begin * n);
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::Rope(ActivationId x_id, int64_t n_heads, const RopeSpec& rope) {
  absl::Status st;
  float* x = Act(x_id, n_heads * rope.head_dim, &st);
  if (x == nullptr) return st;
  const int64_t n_pairs = RopePairs(rope.head_dim, rope.rope_dims);
  // [n_pairs] frequency factors, or none: of the rows of ordinary sequences
  // and of rope_long ones (Phi-3's LongRoPE short / long factors).
  const float* factors = nullptr;
  const float* factors_long = nullptr;
  if (rope.freq_factors.index >= 0) {
    factors = FindVector(rope.freq_factors, n_pairs, &st);
    if (factors == nullptr) return st;
  }
  if (rope.freq_factors_long.index >= 0) {
    factors_long = FindVector(rope.freq_factors_long, n_pairs, &st);
    if (factors_long == nullptr) return st;
  }
  const bool same_spec =
      rope.head_dim == rope_spec_.head_dim && rope.rope_dims == rope_spec_.rope_dims &&
      rope.freq_base == rope_spec_.freq_base && rope.freq_scale == rope_spec_.freq_scale &&
      rope.attn_factor == rope_spec_.attn_factor &&
      rope.freq_factors.index == rope_spec_.freq_factors.index &&
      rope.freq_factors_long.index == rope_spec_.freq_factors_long.index;
  if (!rope_ready_ || !same_spec) {
    // The angles of each row's position, shared by every layer's Q and K
    // (per spec: Gemma 3's local and global layers differ):
    // rope_cos_ / rope_sin_ [n_rows][n_pairs].
    LLM_RETURN_IF_ERROR(Guarded("RoPE angles", [&] {
      rope_cos_.resize(static_cast<size_t>(n_rows_ * n_pairs));
      rope_sin_.resize(static_cast<size_t>(n_rows_ * n_pairs));
      return absl::OkStatus();
    }));
    const bool unscaled = rope.freq_scale == 1.0f && rope.attn_factor == 1.0f;
    for (int64_t r = 0; r < n_rows_; ++r) {
      float* c = rope_cos_.data() + r * n_pairs;
      float* sn = rope_sin_.data() + r * n_pairs;
      const float* f = rope_long_[r] ? factors_long : factors;
      if (unscaled && f == nullptr) {
        RopeAngles(positions_[r], rope.head_dim, rope.rope_dims, rope.freq_base, c, sn);
      } else {
        RopeAnglesScaled(positions_[r], rope.head_dim, rope.rope_dims, rope.freq_base,
                         rope.freq_scale, f, rope.attn_factor, c, sn);
      }
    }
    rope_spec_ = rope;
    rope_ready_ = true;
  }
  const int64_t width = n_heads * rope.head_dim;
  ForRows(width, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      RopeApply(x + r * width, n_heads, rope.head_dim, rope.rope_dims,
                rope_cos_.data() + r * n_pairs, rope_sin_.data() + r * n_pairs, rope.neox);
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::Linear(absl::Span<const WeightId> weights, ActivationId in,
                                absl::Span<const ActivationId> outs) {
  constexpr size_t kMaxShared = 4;
  if (weights.empty() || weights.size() > kMaxShared || weights.size() != outs.size()) {
    return Errorf(LLM_ERR_INTERNAL, "Linear of %d weights into %d outputs", weights.size(),
                  outs.size());
  }
  absl::Status st;
  const Weight* ws[kMaxShared];
  float* ys[kMaxShared];
  const float* x = nullptr;
  for (size_t i = 0; i < weights.size(); ++i) {
    PackIfDeferred(weights[i]);
    const WeightRecord* w = FindWeight(weights[i], &st);
    if (w == nullptr) return st;
    ws[i] = &w->matrix;
    ys[i] = Act(outs[i], w->matrix.n_out, &st);
    if (i == 0) x = Act(in, w->matrix.n_in, &st);
    if (ys[i] == nullptr || x == nullptr || w->matrix.n_in != ws[0]->n_in) {
      return st.ok() ? Error(LLM_ERR_INTERNAL, "Linear weights with different inputs") : st;
    }
  }
  return Guarded("a linear product", [&] {
    if (weights.size() == 1) return llm::Linear(*ws[0], x, n_rows_, ys[0], linear_);
    return LinearShared(ws, ys, static_cast<int>(weights.size()), x, n_rows_, linear_);
  });
}

absl::Status CpuBackend::StoreKv(int64_t layer, ActivationId k_id, ActivationId v_id) {
  int group = 0;
  int64_t slot = 0;
  if (!LayerKv(layer, &group, &slot)) {
    return Errorf(LLM_ERR_INTERNAL, "KV store into layer %d, which no KV group holds", layer);
  }
  const KvLayout& layout = kv_groups_[group].layout;
  const int64_t n = layout.row_elems();
  absl::Status st;
  const float* k = Act(k_id, n, &st);
  const float* v = k != nullptr ? Act(v_id, n, &st) : nullptr;
  if (v == nullptr) return st;
  for (size_t i = 0; i < pass_.sequences.size(); ++i) {
    const PassSequence& s = pass_.sequences[i];
    const KvType type = GroupList(s, group).type;
    const int64_t block_tokens = KvLayout::block_tokens(type);
    const size_t row_bytes = static_cast<size_t>(n) * KvLayout::elem_bytes(type);
    const size_t k_off = layout.k_offset(type, slot);
    const size_t v_off = layout.v_offset(type, slot);
    for (int64_t t = 0; t < s.n_rows; ++t) {
      const int64_t pos = s.pos0 + t;
      // The block table made these blocks ours alone (copy-on-write), so
      // their storage is writable.
      auto* base = const_cast<uint8_t*>(kv_bases_[group][i][pos / block_tokens]);
      uint8_t* k_dst = base + k_off + static_cast<size_t>(pos % block_tokens) * row_bytes;
      uint8_t* v_dst = base + v_off + static_cast<size_t>(pos % block_tokens) * row_bytes;
      const float* k_row = k + (s.row0 + t) * n;
      const float* v_row = v + (s.row0 + t) * n;
      if (type == KvType::kF16) {
        // [n_head_kv * head_dim] f32 -> f16, round to nearest even.
        F32ToF16Row(k_row, n, reinterpret_cast<uint16_t*>(k_dst));
        F32ToF16Row(v_row, n, reinterpret_cast<uint16_t*>(v_dst));
      } else {
        std::memcpy(k_dst, k_row, static_cast<size_t>(n) * sizeof(float));
        std::memcpy(v_dst, v_row, static_cast<size_t>(n) * sizeof(float));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::Attention(int64_t layer, int64_t n_head, int64_t window, ActivationId q_id,
                                   ActivationId out_id, const AttentionSpec& spec) {
  if (!(spec.scale >= 0.0f) || !(spec.softcap >= 0.0f)) {
    return Errorf(LLM_ERR_INTERNAL, "attention scale %g / soft-cap %g", spec.scale, spec.softcap);
  }
  int group = 0;
  int64_t slot = 0;
  if (!LayerKv(layer, &group, &slot)) {
    return Errorf(LLM_ERR_INTERNAL, "attention over layer %d, which no KV group holds", layer);
  }
  const KvLayout& layout = kv_groups_[group].layout;
  const int64_t width = n_head * layout.head_dim;
  absl::Status st;
  const float* q = Act(q_id, width, &st);
  float* out = q != nullptr ? Act(out_id, width, &st) : nullptr;
  if (out == nullptr) return st;
  return Guarded("attention", [&] {
    attention_jobs_.clear();
    for (size_t i = 0; i < pass_.sequences.size(); ++i) {
      const PassSequence& s = pass_.sequences[i];
      if (s.n_rows == 0) continue;
      AttentionJob job;
      job.q = q + s.row0 * width;
      job.n_q = s.n_rows;
      job.pos0 = s.pos0;
      const KvType type = GroupList(s, group).type;
      job.kv.blocks = kv_bases_[group][i].data();
      job.kv.block_tokens = KvLayout::block_tokens(type);
      job.kv.k_offset = layout.k_offset(type, slot);
      job.kv.v_offset = layout.v_offset(type, slot);
      job.kv.f16 = type == KvType::kF16;
      job.kv.n_head_kv = layout.n_head_kv;
      job.kv.head_dim = layout.head_dim;
      job.kv.row_stride = static_cast<size_t>(layout.row_elems());
      job.out = out + s.row0 * width;
      job.window = window;
      job.scale = spec.scale;
      job.softcap = spec.softcap;
      attention_jobs_.push_back(job);
    }
    // One parallel loop for every sequence's heads: a pass of 16 one-token
    // steps would otherwise pay 16 pool round trips per layer.
    return AttentionBatch(attention_jobs_, n_head, pool_.get(), deterministic_);
  });
}

absl::Status CpuBackend::SwiGlu(ActivationId gate_id, ActivationId up_id, ActivationId out_id) {
  absl::Status st;
  const float* gate = Act(gate_id, gate_id.width, &st);
  const float* up = gate != nullptr ? Act(up_id, gate_id.width, &st) : nullptr;
  float* out = up != nullptr ? Act(out_id, gate_id.width, &st) : nullptr;
  if (out == nullptr) return st;
  // Row by row, as ggml (its vector body and scalar tail are per row).
  const int64_t w = gate_id.width;
  ForRows(w, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) llm::SwiGlu(gate + r * w, up + r * w, w, out + r * w);
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::GeGlu(ActivationId gate_id, ActivationId up_id, ActivationId out_id) {
  absl::Status st;
  const float* gate = Act(gate_id, gate_id.width, &st);
  const float* up = gate != nullptr ? Act(up_id, gate_id.width, &st) : nullptr;
  float* out = up != nullptr ? Act(out_id, gate_id.width, &st) : nullptr;
  if (out == nullptr) return st;
  const int64_t w = gate_id.width;
  ForRows(w, [&](int64_t begin, int64_t end) {
    llm::GeGlu(gate + begin * w, up + begin * w, (end - begin) * w, out + begin * w);
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::AddBias(ActivationId x_id, WeightId bias_id) {
  absl::Status st;
  const float* bias = FindVector(bias_id, bias_id.n_in, &st);
  float* x = bias != nullptr ? Act(x_id, bias_id.n_in, &st) : nullptr;
  if (x == nullptr) return st;
  const int64_t n = bias_id.n_in;
  for (int64_t r = 0; r < n_rows_; ++r) {
    for (int64_t i = 0; i < n; ++i) x[r * n + i] += bias[i];
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::Scale(ActivationId x_id, float factor) {
  absl::Status st;
  float* x = Act(x_id, x_id.width, &st);
  if (x == nullptr) return st;
  const int64_t n = ActRows(activations_[x_id.index]) * x_id.width;
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
  return absl::OkStatus();
}

absl::Status CpuBackend::SoftCap(ActivationId x_id, float cap) {
  absl::Status st;
  float* x = Act(x_id, x_id.width, &st);
  if (x == nullptr) return st;
  if (!(cap > 0.0f)) return Errorf(LLM_ERR_INTERNAL, "soft-cap %g is not positive", cap);
  // As ggml: scale by 1 / cap, tanhf, scale by cap (three f32 roundings).
  const float inv = 1.0f / cap;
  const int64_t n = ActRows(activations_[x_id.index]) * x_id.width;
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] * inv) * cap;
  return absl::OkStatus();
}

absl::Status CpuBackend::HeadRmsNorm(ActivationId x_id, int64_t n_heads, WeightId weight_id,
                                     float eps) {
  absl::Status st;
  const int64_t hd = weight_id.n_in;
  const float* w = FindVector(weight_id, hd, &st);
  float* x = w != nullptr && n_heads > 0 ? Act(x_id, n_heads * hd, &st) : nullptr;
  if (x == nullptr) return st.ok() ? Error(LLM_ERR_INTERNAL, "HeadRmsNorm of no heads") : st;
  llm::RmsNormRows(x, w, n_rows_ * n_heads, hd, eps, x);
  return absl::OkStatus();
}

absl::Status CpuBackend::Add(ActivationId x_id, ActivationId y_id) {
  absl::Status st;
  float* x = Act(x_id, x_id.width, &st);
  const float* y = x != nullptr ? Act(y_id, x_id.width, &st) : nullptr;
  if (y == nullptr) return st;
  for (int64_t i = 0; i < n_rows_ * x_id.width; ++i) x[i] += y[i];
  return absl::OkStatus();
}

absl::Status CpuBackend::Logits(ActivationId x_id, WeightId norm_id, float eps, WeightId output_id,
                                ActivationId logits_id) {
  absl::Status st;
  PackIfDeferred(output_id);
  const WeightRecord* norm = FindWeight(norm_id, &st);
  const WeightRecord* output = norm != nullptr ? FindWeight(output_id, &st) : nullptr;
  if (output == nullptr) return st;
  const int64_t d = output->matrix.n_in, n_vocab = output->matrix.n_out;
  const float* x = Act(x_id, d, &st);
  float* logits = x != nullptr ? Act(logits_id, n_vocab, &st) : nullptr;
  if (logits == nullptr) return st;
  if (static_cast<int64_t>(norm->vector.size()) != d) {
    return Error(LLM_ERR_INTERNAL, "output norm and output weight disagree on n_embd");
  }
  return Guarded("the logits", [&] {
    // Norm the last row of each sequence that wants logits:
    // logit_rows_ [logit rows][d].
    logit_rows_.resize(static_cast<size_t>(n_logit_rows_ * d));
    int64_t n = 0;
    for (const PassSequence& s : pass_.sequences) {
      if (!s.wants_logits || s.n_rows == 0) continue;
      llm::RmsNorm(x + (s.row0 + s.n_rows - 1) * d, norm->vector.data(), d, eps,
                   logit_rows_.data() + n * d);
      ++n;
    }
    // Up to kGemvMaxRows rows at a time keeps f32 / f16 / bf16 logits on the
    // row-invariant kernel. Quantized output matrices take every row in one
    // product, as llama.cpp's output matrix does: a K-quant's order depends
    // on the product's row count (8+ rows: the tiled order,
    // backend/cpu/kquant_kernels.h), so a chunk of fewer rows would differ.
    const int64_t chunk = QuantMatMulQuantizesActivations(output->matrix.type)
                              ? std::max<int64_t>(n, 1)
                              : kGemvMaxRows;
    for (int64_t first = 0; first < n; first += chunk) {
      const int64_t rows = std::min<int64_t>(chunk, n - first);
      LLM_RETURN_IF_ERROR(llm::Linear(output->matrix, logit_rows_.data() + first * d, rows,
                                      logits + first * n_vocab, linear_));
    }
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::ReadActivation(ActivationId id, int64_t row, float* host) {
  absl::Status st;
  const float* data = Act(id, id.width, &st);
  if (data == nullptr) return st;
  const int64_t rows = ActRows(activations_[id.index]);
  if (row < 0 || row >= rows || host == nullptr) {
    return Errorf(LLM_ERR_INTERNAL, "row %d of an activation with %d rows in this pass read", row,
                  rows);
  }
  std::memcpy(host, data + row * id.width, static_cast<size_t>(id.width) * sizeof(float));
  return absl::OkStatus();
}

}  // namespace llm
