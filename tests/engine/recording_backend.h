// A test double of the backend interface (backend/backend.h) for engine and
// scheduler tests: RecordingBackend.
//
// It delegates every call to a real backend (the CPU backend by default), so
// a model loaded on it computes real logits, and on the way
//   - records each call into a BackendLog shared with the test: one
//     PassRecord per pass (its tokens, its sequences as PassDesc gave them,
//     its operations in order, the logit rows read after EndPass) and one
//     KvOpRecord per KV storage call (AddBlocks, CopyBlock, ReadBlock,
//     WriteBlock);
//   - checks the protocol of the interface and refuses misuse with
//     LLM_ERR_INTERNAL (recording a violation, without calling the real
//     backend): an operation outside BeginPass .. EndPass or on another
//     thread than BeginPass's, a BeginPass inside a pass, ReadLogits before
//     EndPass or of a row past the pass's logit rows, an activation that was
//     never declared (or of another width or row kind), a weight that was
//     never added, a pass whose sequences do not tile its tokens or whose KV
//     blocks do not cover its positions or have no storage, two sequences
//     of one pass writing one block, a KV layer out of range, a pass whose
//     sequences want logits that ends without Logits, and a KV storage call
//     that touches a block the running pass writes (or, for a write, reads);
//   - can hold passes at BeginPass (HoldPasses / WaitForHeldPass /
//     ReleasePasses), so a test can queue work behind a running pass and get
//     deterministic batches from the scheduler.
//
// Not host-addressable: the interface hands out no pointer to an activation
// or a KV block, and the double adds none. The KvStorage the double returns
// from CreateKvStorage is a RecordingKvStorage that owns the real backend's
// storage and exposes only KvStorage's methods, so the engine (the KV pool,
// block tables, session save/load) reaches KV bytes only through the
// recorded CopyBlock / ReadBlock / WriteBlock; the real backend keeps its
// own handle on the inner storage, which is the "device memory" the
// kernels address. A test checks that the model's pool holds the wrapper
// (BackendLog::storage()).
//
// Thread-safety: the log is guarded by one mutex; pass operations come from
// the scheduler thread, KV storage calls also from sessions' threads.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backend/backend.h"
#include "core/status.h"
#include "kv/kv_layout.h"
#include "kv/kv_storage.h"

namespace llm::testing {

// One operation of a pass, as the engine issued it.
struct OpRecord {
  std::string name;              // "Embed", "RmsNorm", ..., "Logits", "EndPass", "ReadLogits"
  int64_t layer = -1;            // StoreKv, Attention
  std::vector<int32_t> acts;     // activation indices, in argument order
  std::vector<int32_t> weights;  // weight indices, in argument order
  int64_t logit_row = -1;        // ReadLogits
  int64_t window = 0;            // Attention: the layer's window (0 = full)
};

// One sequence of a pass, as PassDesc gave it.
struct SequenceRecord {
  int64_t row0 = 0;
  int64_t n_rows = 0;
  int64_t pos0 = 0;
  bool wants_logits = false;
  KvType kv_type = KvType::kF16;
  std::vector<int32_t> blocks;  // the KV block list, in position order
  // The second KV group's list (PassSequence::kv_group1), empty with one group.
  std::vector<int32_t> blocks_group1;
  int64_t n_blocks() const { return static_cast<int64_t>(blocks.size()); }
  // The list a layer of KV group g reads.
  const std::vector<int32_t>& group_blocks(int g) const {
    return g == 0 ? blocks : blocks_group1;
  }
};

struct PassRecord {
  int64_t index = 0;
  std::thread::id thread;
  std::vector<int32_t> tokens;
  std::vector<SequenceRecord> sequences;
  std::vector<OpRecord> ops;  // Embed .. EndPass, then the ReadLogits calls
  int64_t logit_rows = 0;     // sequences that want logits (and have rows)
  bool ended = false;         // EndPass returned OK

  int64_t rows() const { return static_cast<int64_t>(tokens.size()); }
  int64_t Count(const std::string& op) const {
    return std::count_if(ops.begin(), ops.end(), [&](const OpRecord& o) { return o.name == op; });
  }
  int64_t logits_read() const { return Count("ReadLogits"); }
  int64_t wanting_logits() const {
    return std::count_if(sequences.begin(), sequences.end(),
                         [](const SequenceRecord& s) { return s.wants_logits; });
  }
};

struct KvOpRecord {
  std::string name;    // "AddBlocks", "CopyBlock", "ReadBlock", "WriteBlock"
  int32_t block = -1;  // AddBlocks: first; CopyBlock: src; else the block
  int32_t dst = -1;    // CopyBlock: dst
  int64_t n = 0;       // AddBlocks: count
  bool during_pass = false;
  std::thread::id thread;
};

class BackendLog {
 public:
  // ---- what the tests read (snapshots) ----
  std::vector<PassRecord> Passes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return passes_;
  }
  // Passes from index `first` on.
  std::vector<PassRecord> PassesSince(size_t first) const {
    std::lock_guard<std::mutex> lock(mu_);
    return first >= passes_.size()
               ? std::vector<PassRecord>()
               : std::vector<PassRecord>(passes_.begin() + first, passes_.end());
  }
  size_t NumPasses() const {
    std::lock_guard<std::mutex> lock(mu_);
    return passes_.size();
  }
  std::vector<KvOpRecord> KvOps() const {
    std::lock_guard<std::mutex> lock(mu_);
    return kv_ops_;
  }
  std::vector<KvOpRecord> KvOpsSince(size_t first, const std::string& name = "") const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<KvOpRecord> out;
    for (size_t i = first; i < kv_ops_.size(); ++i) {
      if (name.empty() || kv_ops_[i].name == name) out.push_back(kv_ops_[i]);
    }
    return out;
  }
  size_t NumKvOps() const {
    std::lock_guard<std::mutex> lock(mu_);
    return kv_ops_.size();
  }
  std::vector<std::string> Violations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return violations_;
  }
  // The storage the double handed out (nullptr before CreateKvStorage).
  const KvStorage* storage() const {
    std::lock_guard<std::mutex> lock(mu_);
    return storage_;
  }
  int64_t n_layer() const {  // of every KV group
    std::lock_guard<std::mutex> lock(mu_);
    return kv_layers_;
  }

  // ---- holding passes ----
  // From now on BeginPass waits (before it records the pass) until
  // ReleasePasses.
  void HoldPasses() {
    std::lock_guard<std::mutex> lock(gate_mu_);
    hold_ = true;
  }
  void ReleasePasses() {
    std::lock_guard<std::mutex> lock(gate_mu_);
    hold_ = false;
    gate_cv_.notify_all();
  }
  // True once a pass waits at the gate (false after the timeout).
  bool WaitForHeldPass(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(gate_mu_);
    return gate_cv_.wait_for(lock, timeout, [&] { return waiting_ > 0; });
  }

 private:
  friend class RecordingBackend;
  friend class RecordingKvStorage;

  void Gate() {
    std::unique_lock<std::mutex> lock(gate_mu_);
    if (!hold_) return;
    ++waiting_;
    gate_cv_.notify_all();
    gate_cv_.wait(lock, [&] { return !hold_; });
    --waiting_;
  }

  // mu_ held.
  absl::Status Violation(std::string what) {
    violations_.push_back(what);
    return Error(LLM_ERR_INTERNAL, "backend protocol violation: " + what);
  }
  // Blocks the running pass writes (mu_ held).
  bool PassWrites(int32_t block) const { return in_pass_ && pass_writes_.count(block) > 0; }
  bool PassUses(int32_t block) const { return in_pass_ && pass_blocks_.count(block) > 0; }

  mutable std::mutex mu_;
  std::vector<PassRecord> passes_;
  std::vector<KvOpRecord> kv_ops_;
  std::vector<std::string> violations_;
  // The pass in progress.
  bool in_pass_ = false;
  bool logits_readable_ = false;   // between EndPass and the next BeginPass
  std::set<int32_t> pass_blocks_;  // every block of the running pass's sequences
  std::set<int32_t> pass_writes_;  // the blocks its rows are written into
  // Storage.
  const KvStorage* storage_ = nullptr;
  KvLayout layout_;              // the first KV group's
  int64_t kv_layers_ = 0;        // layers of every KV group
  int kv_groups_ = 0;            // CreateKvStorage calls
  std::vector<int> layer_group_;  // [layer]: its KV group
  int64_t storage_blocks_ = 0;  // blocks with storage

  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  bool hold_ = false;
  int waiting_ = 0;
};

// The KV storage the engine gets: forwards to the real backend's storage,
// recording and checking each call.
class RecordingKvStorage : public KvStorage {
 public:
  RecordingKvStorage(std::unique_ptr<KvStorage> inner, std::shared_ptr<BackendLog> log)
      : inner_(std::move(inner)), log_(std::move(log)) {}

  bool AddBlocks(int32_t first, int64_t n) noexcept override {
    const bool ok = inner_->AddBlocks(first, n);
    std::lock_guard<std::mutex> lock(log_->mu_);
    try {
      Record("AddBlocks", first, -1, n);
    } catch (...) {  // the log could not grow: the storage did
    }
    if (ok) log_->storage_blocks_ = std::max<int64_t>(log_->storage_blocks_, first + n);
    return ok;
  }

  absl::Status CopyBlock(int32_t src, int32_t dst) override {
    {
      std::lock_guard<std::mutex> lock(log_->mu_);
      Record("CopyBlock", src, dst, 0);
      LLM_RETURN_IF_ERROR(CheckBlock("CopyBlock source", src));
      LLM_RETURN_IF_ERROR(CheckBlock("CopyBlock destination", dst));
      if (log_->PassWrites(src)) {
        return log_->Violation("CopyBlock from block " + std::to_string(src) +
                               ", which the running pass writes");
      }
      if (log_->PassUses(dst)) {
        return log_->Violation("CopyBlock into block " + std::to_string(dst) +
                               ", which the running pass uses");
      }
    }
    return inner_->CopyBlock(src, dst);
  }

  absl::Status ReadBlock(int32_t block, uint8_t* host) const override {
    {
      std::lock_guard<std::mutex> lock(log_->mu_);
      Record("ReadBlock", block, -1, 0);
      LLM_RETURN_IF_ERROR(CheckBlock("ReadBlock", block));
      if (log_->PassWrites(block)) {
        return log_->Violation("ReadBlock of block " + std::to_string(block) +
                               ", which the running pass writes");
      }
    }
    return inner_->ReadBlock(block, host);
  }

  absl::Status WriteBlock(int32_t block, const uint8_t* host) override {
    {
      std::lock_guard<std::mutex> lock(log_->mu_);
      Record("WriteBlock", block, -1, 0);
      LLM_RETURN_IF_ERROR(CheckBlock("WriteBlock", block));
      if (log_->PassUses(block)) {
        return log_->Violation("WriteBlock into block " + std::to_string(block) +
                               ", which the running pass uses");
      }
    }
    return inner_->WriteBlock(block, host);
  }

 private:
  // log_->mu_ held.
  void Record(const char* name, int32_t block, int32_t dst, int64_t n) const {
    KvOpRecord r;
    r.name = name;
    r.block = block;
    r.dst = dst;
    r.n = n;
    r.during_pass = log_->in_pass_;
    r.thread = std::this_thread::get_id();
    log_->kv_ops_.push_back(std::move(r));
  }
  absl::Status CheckBlock(const char* what, int32_t block) const {
    if (block < 0 || block >= log_->storage_blocks_) {
      return log_->Violation(std::string(what) + ": block " + std::to_string(block) +
                             " has no storage (" + std::to_string(log_->storage_blocks_) +
                             " blocks)");
    }
    return absl::OkStatus();
  }

  std::unique_ptr<KvStorage> inner_;
  std::shared_ptr<BackendLog> log_;
};

class RecordingBackend : public Backend {
 public:
  RecordingBackend(std::unique_ptr<Backend> inner, std::shared_ptr<BackendLog> log)
      : inner_(std::move(inner)), log_(std::move(log)) {}

  // A ModelLoadOptions::backend_factory making a RecordingBackend over the
  // CPU backend, recording into log.
  static std::function<absl::StatusOr<std::unique_ptr<Backend>>(const BackendOptions&)> Factory(
      std::shared_ptr<BackendLog> log) {
    return [log](const BackendOptions& options) -> absl::StatusOr<std::unique_ptr<Backend>> {
      LLM_ASSIGN_OR_RETURN(std::unique_ptr<Backend> cpu, CreateCpuBackend(options));
      return std::unique_ptr<Backend>(std::make_unique<RecordingBackend>(std::move(cpu), log));
    };
  }

  const char* name() const override { return inner_->name(); }
  DeviceKind device() const override { return inner_->device(); }
  std::string Describe() const override { return "recording: " + inner_->Describe(); }

  // ---- weights and memory ----
  absl::StatusOr<WeightId> AddMatrix(const WeightSource& source) override {
    return AddWeight(inner_->AddMatrix(source));
  }
  absl::StatusOr<WeightId> AddVector(const WeightSource& source) override {
    return AddWeight(inner_->AddVector(source));
  }
  ActivationId DeclareActivation(int64_t width, ActivationRows rows) override {
    const ActivationId id = inner_->DeclareActivation(width, rows);
    if (id.index >= 0) {
      if (static_cast<size_t>(id.index) >= activations_.size()) {
        activations_.resize(static_cast<size_t>(id.index) + 1);
      }
      activations_[id.index] = Declared{true, width, rows};
    }
    return id;
  }
  // Records and checks only the first KV group (PassSequence::kv): the
  // storage of a second group (a model mixing attention windows, Gemma) is
  // the real backend's, handed out unwrapped -- its block ids are another
  // pool's, which the checks below, keyed by id, would confuse with the
  // first group's.
  absl::StatusOr<std::unique_ptr<KvStorage>> CreateKvStorage(
      const KvLayout& layout, absl::Span<const int64_t> layers) override {
    LLM_ASSIGN_OR_RETURN(std::unique_ptr<KvStorage> inner,
                         inner_->CreateKvStorage(layout, layers));
    std::lock_guard<std::mutex> lock(log_->mu_);
    log_->kv_layers_ += static_cast<int64_t>(layers.size());
    for (const int64_t l : layers) {
      if (log_->layer_group_.size() <= static_cast<size_t>(l)) {
        log_->layer_group_.resize(static_cast<size_t>(l) + 1, 0);
      }
      log_->layer_group_[static_cast<size_t>(l)] = log_->kv_groups_;
    }
    ++log_->kv_groups_;
    if (log_->storage_ != nullptr) return inner;
    auto wrapped = std::make_unique<RecordingKvStorage>(std::move(inner), log_);
    log_->storage_ = wrapped.get();
    log_->layout_ = layout;
    return std::unique_ptr<KvStorage>(std::move(wrapped));
  }

  // ---- a pass ----
  absl::Status BeginPass(const PassDesc& pass) override {
    log_->Gate();
    {
      std::lock_guard<std::mutex> lock(log_->mu_);
      if (log_->in_pass_) return log_->Violation("BeginPass inside a pass");
      PassRecord r;
      r.index = static_cast<int64_t>(log_->passes_.size());
      r.thread = std::this_thread::get_id();
      r.tokens.assign(pass.tokens.begin(), pass.tokens.end());
      for (const PassSequence& s : pass.sequences) {
        SequenceRecord q;
        q.row0 = s.row0;
        q.n_rows = s.n_rows;
        q.pos0 = s.pos0;
        q.wants_logits = s.wants_logits;
        q.kv_type = s.kv.type;
        q.blocks.assign(s.kv.blocks.begin(), s.kv.blocks.end());
        q.blocks_group1.assign(s.kv_group1.blocks.begin(), s.kv_group1.blocks.end());
        if (s.wants_logits && s.n_rows > 0) ++r.logit_rows;
        r.sequences.push_back(std::move(q));
      }
      r.ops.push_back(OpRecord{"BeginPass", -1, {}, {}, -1});
      log_->passes_.push_back(r);
      log_->logits_readable_ = false;
      LLM_RETURN_IF_ERROR(CheckPassDesc(r));
      log_->in_pass_ = true;
      pass_thread_ = r.thread;
    }
    absl::Status st = inner_->BeginPass(pass);
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(log_->mu_);
      log_->in_pass_ = false;
    }
    return st;
  }

  absl::Status EndPass() override {
    {
      std::lock_guard<std::mutex> lock(log_->mu_);
      LLM_RETURN_IF_ERROR(RecordOp(OpRecord{"EndPass", -1, {}, {}, -1}));
      PassRecord& p = log_->passes_.back();
      if (p.logit_rows > 0 && p.Count("Logits") == 0) {
        log_->in_pass_ = false;
        return log_->Violation("pass " + std::to_string(p.index) + " wants " +
                               std::to_string(p.logit_rows) + " logit rows but ran no Logits");
      }
    }
    absl::Status st = inner_->EndPass();
    std::lock_guard<std::mutex> lock(log_->mu_);
    log_->in_pass_ = false;
    log_->pass_blocks_.clear();
    log_->pass_writes_.clear();
    if (st.ok()) {
      log_->passes_.back().ended = true;
      log_->logits_readable_ = true;
    }
    return st;
  }

  absl::Status Embed(WeightId table, ActivationId out) override {
    LLM_RETURN_IF_ERROR(Op("Embed", -1, {out}, {table}));
    return inner_->Embed(table, out);
  }
  absl::Status RmsNorm(ActivationId in, WeightId weight, float eps, ActivationId out) override {
    LLM_RETURN_IF_ERROR(Op("RmsNorm", -1, {in, out}, {weight}));
    return inner_->RmsNorm(in, weight, eps, out);
  }
  absl::Status Rope(ActivationId x, int64_t n_heads, const RopeSpec& rope) override {
    LLM_RETURN_IF_ERROR(Op("Rope", -1, {x}, {}));
    return inner_->Rope(x, n_heads, rope);
  }
  absl::Status Linear(absl::Span<const WeightId> weights, ActivationId in,
                      absl::Span<const ActivationId> outs) override {
    std::vector<ActivationId> acts{in};
    acts.insert(acts.end(), outs.begin(), outs.end());
    LLM_RETURN_IF_ERROR(
        Op("Linear", -1, acts, std::vector<WeightId>(weights.begin(), weights.end())));
    return inner_->Linear(weights, in, outs);
  }
  absl::Status StoreKv(int64_t layer, ActivationId k, ActivationId v) override {
    LLM_RETURN_IF_ERROR(Op("StoreKv", layer, {k, v}, {}));
    return inner_->StoreKv(layer, k, v);
  }
  absl::Status Attention(int64_t layer, int64_t n_head, int64_t window, ActivationId q,
                         ActivationId out, const AttentionSpec& spec) override {
    LLM_RETURN_IF_ERROR(Op("Attention", layer, {q, out}, {}));
    {
      std::lock_guard<std::mutex> lock(log_->mu_);
      log_->passes_.back().ops.back().window = window;
      LLM_RETURN_IF_ERROR(CheckWindowBlocks(layer, window));
    }
    return inner_->Attention(layer, n_head, window, q, out, spec);
  }
  absl::Status SwiGlu(ActivationId gate, ActivationId up, ActivationId out) override {
    LLM_RETURN_IF_ERROR(Op("SwiGlu", -1, {gate, up, out}, {}));
    return inner_->SwiGlu(gate, up, out);
  }
  absl::Status GeGlu(ActivationId gate, ActivationId up, ActivationId out) override {
    LLM_RETURN_IF_ERROR(Op("GeGlu", -1, {gate, up, out}, {}));
    return inner_->GeGlu(gate, up, out);
  }
  absl::Status Add(ActivationId x, ActivationId y) override {
    LLM_RETURN_IF_ERROR(Op("Add", -1, {x, y}, {}));
    return inner_->Add(x, y);
  }
  absl::Status AddBias(ActivationId x, WeightId bias) override {
    LLM_RETURN_IF_ERROR(Op("AddBias", -1, {x}, {bias}));
    return inner_->AddBias(x, bias);
  }
  // Scale and SoftCap may run on a kLogitRows buffer (the logits).
  absl::Status Scale(ActivationId x, float factor) override {
    LLM_RETURN_IF_ERROR(OpOnAnyRows("Scale", x));
    return inner_->Scale(x, factor);
  }
  absl::Status SoftCap(ActivationId x, float cap) override {
    LLM_RETURN_IF_ERROR(OpOnAnyRows("SoftCap", x));
    return inner_->SoftCap(x, cap);
  }
  absl::Status HeadRmsNorm(ActivationId x, int64_t n_heads, WeightId weight, float eps) override {
    LLM_RETURN_IF_ERROR(Op("HeadRmsNorm", -1, {x}, {weight}));
    return inner_->HeadRmsNorm(x, n_heads, weight, eps);
  }
  absl::Status Logits(ActivationId x, WeightId norm, float eps, WeightId output,
                      ActivationId logits) override {
    LLM_RETURN_IF_ERROR(Op("Logits", -1, {x}, {norm, output}, logits));
    return inner_->Logits(x, norm, eps, output, logits);
  }

  // The engine reads only logits: reading another activation is a violation.
  absl::Status ReadActivation(ActivationId logits, int64_t i, float* host) override {
    {
      std::lock_guard<std::mutex> lock(log_->mu_);
      OpRecord op{"ReadLogits", -1, {logits.index}, {}, i};
      if (log_->passes_.empty()) return log_->Violation("ReadLogits before any pass");
      PassRecord& p = log_->passes_.back();
      p.ops.push_back(op);
      if (!log_->logits_readable_) {
        return log_->Violation("ReadLogits of pass " + std::to_string(p.index) +
                               " before its EndPass");
      }
      if (std::this_thread::get_id() != pass_thread_) {
        return log_->Violation("ReadLogits on another thread than the pass's");
      }
      LLM_RETURN_IF_ERROR(CheckAct("ReadLogits", logits, ActivationRows::kLogitRows));
      if (i < 0 || i >= p.logit_rows) {
        return log_->Violation("ReadLogits of row " + std::to_string(i) + " of pass " +
                               std::to_string(p.index) + ", which has " +
                               std::to_string(p.logit_rows) + " logit rows");
      }
    }
    return inner_->ReadActivation(logits, i, host);
  }

 private:
  struct Declared {
    bool declared = false;
    int64_t width = 0;
    ActivationRows rows = ActivationRows::kTokens;
  };

  absl::StatusOr<WeightId> AddWeight(absl::StatusOr<WeightId> id) {
    if (id.ok()) weights_.insert(id->index);
    return id;
  }

  // Records a pass operation and checks it; `logits` (index >= 0) is the
  // kLogitRows output of Logits, every other activation has token rows.
  absl::Status Op(const char* name, int64_t layer, const std::vector<ActivationId>& acts,
                  const std::vector<WeightId>& weights, ActivationId logits = ActivationId{}) {
    std::lock_guard<std::mutex> lock(log_->mu_);
    OpRecord op;
    op.name = name;
    op.layer = layer;
    for (const ActivationId& a : acts) op.acts.push_back(a.index);
    if (logits.index >= 0) op.acts.push_back(logits.index);
    for (const WeightId& w : weights) op.weights.push_back(w.index);
    LLM_RETURN_IF_ERROR(RecordOp(op));
    for (const ActivationId& a : acts)
      LLM_RETURN_IF_ERROR(CheckAct(name, a, ActivationRows::kTokens));
    if (logits.index >= 0 || std::string(name) == "Logits") {
      LLM_RETURN_IF_ERROR(CheckAct(name, logits, ActivationRows::kLogitRows));
    }
    for (const WeightId& w : weights) {
      if (weights_.count(w.index) == 0) {
        return log_->Violation(std::string(name) + " uses weight " + std::to_string(w.index) +
                               ", which was never added");
      }
    }
    if (layer != -1 || std::string(name) == "StoreKv" || std::string(name) == "Attention") {
      if (layer < 0 || layer >= log_->kv_layers_) {
        return log_->Violation(std::string(name) + " of layer " + std::to_string(layer) + " of " +
                               std::to_string(log_->kv_layers_));
      }
    }
    return absl::OkStatus();
  }

  // Op for an operation whose buffer may have token or logit rows.
  absl::Status OpOnAnyRows(const char* name, ActivationId x) {
    bool logit_rows = false;
    {
      std::lock_guard<std::mutex> lock(log_->mu_);
      logit_rows = x.index >= 0 && static_cast<size_t>(x.index) < activations_.size() &&
                   activations_[x.index].rows == ActivationRows::kLogitRows;
    }
    if (logit_rows) return Op(name, -1, {}, {}, x);
    return Op(name, -1, {x}, {});
  }

  // Appends op to the current pass, checking that a pass runs on this
  // thread (mu_ held).
  absl::Status RecordOp(const OpRecord& op) {
    if (log_->passes_.empty()) return log_->Violation(op.name + " before any BeginPass");
    if (!log_->in_pass_) {
      log_->passes_.back().ops.push_back(op);
      return log_->Violation(op.name + " outside BeginPass .. EndPass");
    }
    log_->passes_.back().ops.push_back(op);
    if (std::this_thread::get_id() != pass_thread_) {
      return log_->Violation(op.name + " on another thread than its pass's BeginPass");
    }
    return absl::OkStatus();
  }

  absl::Status CheckAct(const char* op, ActivationId id, ActivationRows rows) {
    if (id.index < 0 || static_cast<size_t>(id.index) >= activations_.size() ||
        !activations_[id.index].declared) {
      return log_->Violation(std::string(op) + " uses activation " + std::to_string(id.index) +
                             ", which was never declared");
    }
    const Declared& d = activations_[id.index];
    if (d.width != id.width) {
      return log_->Violation(std::string(op) + " uses activation " + std::to_string(id.index) +
                             " with width " + std::to_string(id.width) + ", declared " +
                             std::to_string(d.width));
    }
    if (d.rows != rows) {
      return log_->Violation(
          std::string(op) + " uses activation " + std::to_string(id.index) +
          (rows == ActivationRows::kLogitRows ? " as logit rows" : " as token rows"));
    }
    return absl::OkStatus();
  }

  // An Attention of the current pass with this window (mu_ held): every
  // block a query can see (window 0: all of positions [0, pos0 + n_rows);
  // else from the first query's window start pos0 + 1 - window on) is a
  // real block, not a released (-1) one.
  // The layer's KV group's list is checked (with two groups the second
  // one's is the windowed table's).
  absl::Status CheckWindowBlocks(int64_t layer, int64_t window) {
    if (window < 0) return log_->Violation("Attention with window " + std::to_string(window));
    const int g = layer >= 0 && static_cast<size_t>(layer) < log_->layer_group_.size()
                      ? log_->layer_group_[static_cast<size_t>(layer)]
                      : 0;
    const PassRecord& r = log_->passes_.back();
    for (size_t i = 0; i < r.sequences.size(); ++i) {
      const SequenceRecord& s = r.sequences[i];
      if (s.n_rows == 0) continue;
      const int64_t bt = KvLayout::block_tokens(s.kv_type);
      const int64_t first = window > 0 ? std::max<int64_t>(0, s.pos0 + 1 - window) : 0;
      const std::vector<int32_t>& blocks = s.group_blocks(g);
      for (int64_t k = first / bt; k <= (s.pos0 + s.n_rows - 1) / bt; ++k) {
        if (blocks[k] < 0) {
          return log_->Violation("pass " + std::to_string(r.index) + " sequence " +
                                 std::to_string(i) + ": attention with window " +
                                 std::to_string(window) + " reads released KV block index " +
                                 std::to_string(k));
        }
      }
    }
    return absl::OkStatus();
  }

  // The pass's description (mu_ held): sequences tile the tokens in order,
  // each one's blocks cover its positions and have storage, no block is
  // written by two sequences.
  absl::Status CheckPassDesc(const PassRecord& r) {
    int64_t rows = 0;
    log_->pass_blocks_.clear();
    log_->pass_writes_.clear();
    for (size_t i = 0; i < r.sequences.size(); ++i) {
      const SequenceRecord& s = r.sequences[i];
      const std::string seq = "pass " + std::to_string(r.index) + " sequence " + std::to_string(i);
      if (s.row0 != rows || s.n_rows < 0 || s.pos0 < 0) {
        return log_->Violation(seq + " does not continue the rows in order (row0 " +
                               std::to_string(s.row0) + ", expected " + std::to_string(rows) + ")");
      }
      rows += s.n_rows;
      const int64_t bt = KvLayout::block_tokens(s.kv_type);
      if (s.n_blocks() * bt < s.pos0 + s.n_rows) {
        return log_->Violation(seq + ": " + std::to_string(s.n_blocks()) +
                               " KV blocks do not cover " + std::to_string(s.pos0 + s.n_rows) +
                               " positions");
      }
      for (int32_t b : s.blocks) {
        if (b == -1) continue;  // released by a windowed table: checked by Attention
        if (b < 0 || b >= log_->storage_blocks_) {
          return log_->Violation(seq + ": KV block " + std::to_string(b) + " has no storage");
        }
        log_->pass_blocks_.insert(b);
      }
      if (log_->kv_groups_ > 1) {
        // The second group's list: it covers the same positions and its
        // written blocks are real (its ids are another pool's: the sharing
        // checks below are the first group's).
        if (static_cast<int64_t>(s.blocks_group1.size()) * bt < s.pos0 + s.n_rows) {
          return log_->Violation(seq + ": " + std::to_string(s.blocks_group1.size()) +
                                 " KV blocks of group 1 do not cover " +
                                 std::to_string(s.pos0 + s.n_rows) + " positions");
        }
        for (int64_t k = s.pos0 / bt; s.n_rows > 0 && k <= (s.pos0 + s.n_rows - 1) / bt; ++k) {
          if (s.blocks_group1[k] < 0) {
            return log_->Violation(seq + " writes positions of released KV block index " +
                                   std::to_string(k) + " of group 1");
          }
        }
      } else if (!s.blocks_group1.empty()) {
        return log_->Violation(seq + " has a group-1 block list but the model has one KV group");
      }
      if (s.n_rows == 0) continue;
      for (int64_t k = s.pos0 / bt; k <= (s.pos0 + s.n_rows - 1) / bt; ++k) {
        if (s.blocks[k] < 0) {
          return log_->Violation(seq + " writes positions of released KV block index " +
                                 std::to_string(k));
        }
        if (!log_->pass_writes_.insert(s.blocks[k]).second) {
          return log_->Violation(seq + " writes KV block " + std::to_string(s.blocks[k]) +
                                 ", which another sequence of the pass writes too");
        }
      }
    }
    if (rows != r.rows()) {
      return log_->Violation("pass " + std::to_string(r.index) + " has " +
                             std::to_string(r.rows()) + " tokens but its sequences cover " +
                             std::to_string(rows) + " rows");
    }
    // A block one sequence writes must not be one another sequence reads.
    for (const SequenceRecord& s : r.sequences) {
      if (s.n_rows == 0) continue;
      const int64_t bt = KvLayout::block_tokens(s.kv_type);
      const int64_t first_written = s.pos0 / bt;
      for (const SequenceRecord& o : r.sequences) {
        if (&o == &s) continue;
        for (int32_t b : o.blocks) {
          for (int64_t k = first_written; k <= (s.pos0 + s.n_rows - 1) / bt; ++k) {
            if (s.blocks[k] == b) {
              return log_->Violation("pass " + std::to_string(r.index) + " writes KV block " +
                                     std::to_string(b) + " that another of its sequences holds");
            }
          }
        }
      }
    }
    return absl::OkStatus();
  }

  std::unique_ptr<Backend> inner_;
  std::shared_ptr<BackendLog> log_;
  // Set at load, on the loading thread, before any pass (read-only after).
  std::vector<Declared> activations_;
  std::set<int32_t> weights_;
  std::thread::id pass_thread_;  // the running pass's thread (log_->mu_)
};

}  // namespace llm::testing
