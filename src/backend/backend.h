// The interface between the engine and the hardware (docs/ARCHITECTURE.md).
//
// One Backend per loaded model and device. It owns
//   - the weights, in the layout its kernels want (the CPU backend keeps
//     pointers into the GGUF mapping; a GPU backend uploads them);
//   - the activations of a forward pass, as named 2-D f32 buffers
//     [rows][width] declared once by the model (ActivationId);
//   - the bytes of the model's KV block pool (KvStorage, kv/kv_storage.h);
//   - the operations a transformer forward pass needs over a ragged batch:
//     many sequences (sessions), each with its own new tokens, positions and
//     KV blocks, in one pass.
//
// The engine (src/model, src/engine, src/kv) includes only this header: no
// CPU types (thread pools, host pointers into KV, oneDNN) cross it; every
// operation is described by shapes, ids and block tables.
//
// A pass: BeginPass(desc) sizes every declared activation for desc's rows and
// takes the batch's tokens, positions and block tables (nothing else is
// allocated after it, so a GPU backend can capture a pass and replay it);
// then operations in order; then EndPass(), the synchronize point, after
// which ReadActivation copies rows -- the sampling rows' logits -- to the host. Operations of a
// pass refer only to the pass's rows. All on one thread (the scheduler's).
//
// Every method returns a status instead of throwing: a failure mid-pass
// leaves the KV rows the pass was writing undefined (the engine then keeps
// only what was committed before) and the backend usable for the next pass.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dtype.h"
#include "kv/kv_layout.h"
#include "kv/kv_storage.h"

namespace llm {

// A weight prepared by the backend: an index into its weight table plus the
// matrix shape, so the engine can check shapes without asking.
struct WeightId {
  int32_t index = -1;
  int64_t n_out = 0;  // rows (output features); 1 for a vector
  int64_t n_in = 0;   // elements per row
};

// A GGUF tensor as the model binds it: n_out rows of n_in elements of type,
// row o at data + o * row_bytes (host memory that outlives the backend: the
// mapping). name is for messages only.
struct WeightSource {
  std::string name;
  DType type = DType::kF32;
  const uint8_t* data = nullptr;
  int64_t n_out = 0;
  int64_t n_in = 0;
  size_t row_bytes = 0;
  // The bytes lie in a read-only private file mapping the library made
  // (llm_model_load): a backend that copied the weight may drop their
  // resident pages (they fault back in from the file if ever read). False
  // for a caller's buffer (llm_model_load_from_memory), whose memory a
  // backend only reads.
  bool file_mapped = false;
};

// An activation buffer of a pass: [rows][width] f32, where rows is the pass's
// row count (one per new token) or, for kLogitRows buffers, the number of
// rows that produce logits.
struct ActivationId {
  int32_t index = -1;
  int64_t width = 0;
};

enum class ActivationRows { kTokens, kLogitRows };

// One sequence of a pass: rows [row0, row0 + n_rows) hold its new tokens at
// absolute positions pos0 .. pos0 + n_rows - 1. Its KV blocks cover
// positions [0, pos0 + n_rows) and are prepared for writing at the new
// positions (the block table did copy-on-write); ids of blocks that a
// windowed table released (every position in them is out of every window of
// the pass, see Attention) are -1. wants_logits: its last
// row's logits are produced (a logit row). rope_long: its rows rotate with
// RopeSpec::freq_factors_long instead of freq_factors (Phi-3 LongRoPE: the
// session's context exceeds the model's original one, model/llama.h).
//
// A model whose layers have different attention windows (Gemma 2/3) keeps
// its KV in two groups (docs/SLIDING_WINDOW.md): kv holds the blocks of
// group 0 (the layers of the first CreateKvStorage), kv_group1 those of
// group 1 (the second); both cover the same positions, each from its own
// pool. With one group kv_group1 is empty.
struct PassSequence {
  int64_t row0 = 0;
  int64_t n_rows = 0;
  int64_t pos0 = 0;
  KvBlockList kv;
  bool wants_logits = false;
  KvBlockList kv_group1;
  bool rope_long = false;
};

// KV groups a backend supports (kv and kv_group1 of PassSequence).
inline constexpr int kMaxKvGroups = 2;

// A ragged batch. tokens: [n_rows] ids, validated against the vocabulary by
// the engine. The spans must stay valid until EndPass.
struct PassDesc {
  absl::Span<const int32_t> tokens;
  absl::Span<const PassSequence> sequences;
};

// Rotary position embedding of a model (positions come from the pass):
// the first rope_dims dims of each head rotate by
// theta_i = freq_scale * pos * freq_base^(-2i / rope_dims) / factor_i, and
// cos / sin are multiplied by attn_factor (ggml's rope_ext without YaRN
// extrapolation); neox pairs (i, i + rope_dims/2) instead of (2i, 2i + 1).
// factor_i comes from freq_factors, a vector of rope_dims/2 entries (Llama
// 3's rope_freqs, Phi-3's LongRoPE short factors), or is 1 when it is unset
// (index -1); for the rows of a sequence with PassSequence::rope_long it
// comes from freq_factors_long instead (Phi-3's long factors; 1 when unset),
// so one pass can hold sessions of both kinds. Linear rope scaling is
// freq_scale = 1 / factor.
struct RopeSpec {
  int64_t head_dim = 0;
  int64_t rope_dims = 0;
  float freq_base = 10000.0f;
  bool neox = false;
  float freq_scale = 1.0f;
  float attn_factor = 1.0f;
  WeightId freq_factors;       // [rope_dims / 2] or unset
  WeightId freq_factors_long;  // [rope_dims / 2] or unset: rows of rope_long sequences
};

// How Attention scores a query against a key: s = scale * (q . k), then,
// with softcap > 0, s = softcap * tanh(s / softcap) (Gemma 2), before the
// softmax. scale 0 means 1 / sqrt(head_dim).
struct AttentionSpec {
  float scale = 0.0f;
  float softcap = 0.0f;
};

enum class DeviceKind { kAuto, kCpu, kCuda };

struct BackendOptions {
  int n_threads = 1;           // CPU worker threads (CPU backend)
  bool deterministic = false;  // batch-invariant kernels (docs/BATCHING.md)
};

class Backend {
 public:
  virtual ~Backend() = default;

  // A short name for messages ("cpu").
  virtual const char* name() const = 0;
  // The kind of device it runs on (kCpu or kCuda), for llm_model_get_info.
  virtual DeviceKind device() const = 0;
  // One line for the load log, e.g. "CPU kernels: avx512, 2 threads".
  virtual std::string Describe() const = 0;

  // ---- weights (at load) ----------------------------------------------------
  // A matrix the linear products multiply by. A type (or row layout) the
  // backend cannot multiply -> LLM_ERR_UNSUPPORTED naming the tensor, here at
  // load rather than at the first pass.
  virtual absl::StatusOr<WeightId> AddMatrix(const WeightSource& source) = 0;
  // A vector (norm weight, n_out == 1), kept as f32.
  virtual absl::StatusOr<WeightId> AddVector(const WeightSource& source) = 0;
  // Whether passes read weight id's source bytes (the host memory its
  // WeightSource pointed at). False where the backend keeps its own copy
  // (a repacked CPU matrix, an f32 norm vector, a device upload): the engine
  // prefaults only the source bytes that passes read, so a copied weight is
  // not resident twice. The default, true, is always safe.
  virtual bool ReadsSource(WeightId id) const {
    (void)id;
    return true;
  }
  // Bytes of host memory the backend holds for weights beyond their sources
  // (repacked copies, f32 vectors), for the load report: never more than
  // the sources they replace, plus padding.
  virtual uint64_t WeightCopyBytes() const { return 0; }
  // Called once per load, after every weight is added and the engine has
  // prefaulted the source bytes that passes read (ReadsSource). A backend
  // that dropped the pages its copies replaced drops them once more here:
  // a read fault maps the page-cache folio around it, which on kernels with
  // large folios (ext4/xfs after readahead) reaches into neighbouring
  // matrices whose pages were already dropped.
  virtual void SourcesPrefaulted() {}

  // ---- memory (at load) -----------------------------------------------------
  // Declares a pass buffer of the given width; sized by each BeginPass.
  virtual ActivationId DeclareActivation(int64_t width, ActivationRows rows) = 0;
  // The storage of one KV group's pool: the blocks holding the K/V of the
  // model layers `layers` (layout.n_layer == layers.size()), layer
  // layers[s] at slot s of the block (KvLayout::k_offset(type, s)). Called
  // once per group, at most kMaxKvGroups times; groups are numbered in call
  // order (group 0: PassSequence::kv, group 1: kv_group1) and together hold
  // every layer once. A model with one group passes all layers in order, so
  // a layer's slot is its index.
  virtual absl::StatusOr<std::unique_ptr<KvStorage>> CreateKvStorage(
      const KvLayout& layout, absl::Span<const int64_t> layers) = 0;

  // ---- a pass -----------------------------------------------------------------
  virtual absl::Status BeginPass(const PassDesc& pass) = 0;
  virtual absl::Status EndPass() = 0;

  // out[r] = table row tokens[r].                                  out: [rows][n_in]
  virtual absl::Status Embed(WeightId table, ActivationId out) = 0;
  // out[r] = in[r] / sqrt(mean(in[r]^2) + eps) * weight; out may be in.
  virtual absl::Status RmsNorm(ActivationId in, WeightId weight, float eps, ActivationId out) = 0;
  // x: [rows][n_heads * head_dim], rotated in place at each row's position.
  virtual absl::Status Rope(ActivationId x, int64_t n_heads, const RopeSpec& rope) = 0;
  // outs[i] = in · weights[i]ᵀ for up to 4 weights sharing one input (Q/K/V,
  // gate/up): the backend may quantize the input once and run them together.
  // in: [rows][n_in], outs[i]: [rows][weights[i].n_out].
  virtual absl::Status Linear(absl::Span<const WeightId> weights, ActivationId in,
                              absl::Span<const ActivationId> outs) = 0;
  // Writes k and v ([rows][n_head_kv * head_dim]) of every row into its
  // sequence's KV blocks at the row's position, for layer (in the block list
  // and slot of the layer's KV group).
  virtual absl::Status StoreKv(int64_t layer, ActivationId k, ActivationId v) = 0;
  // Causal attention of each sequence's new queries over its KV blocks
  // (positions [0, pos0 + n_rows)) in layer, scored as spec says.
  // q, out: [rows][n_head * head_dim].
  // window: the layer's attention window, 0 = full causal attention; with
  // window > 0 the query at position p sees only keys in (p - window, p]
  // (llama.cpp's LLAMA_SWA_TYPE_STANDARD mask: key p0 is hidden from query p1
  // when p1 - p0 >= window), and blocks holding only positions before
  // pos0 + 1 - window are never read (a windowed block table releases them:
  // their ids may be -1).
  virtual absl::Status Attention(int64_t layer, int64_t n_head, int64_t window, ActivationId q,
                                 ActivationId out,
                                 const AttentionSpec& spec = AttentionSpec()) = 0;
  // out = silu(gate) * up, elementwise; out may be gate or up.
  virtual absl::Status SwiGlu(ActivationId gate, ActivationId up, ActivationId out) = 0;
  // out = gelu(gate) * up, elementwise, gelu with the tanh approximation
  // (ggml's GELU); out may be gate or up.
  virtual absl::Status GeGlu(ActivationId gate, ActivationId up, ActivationId out) = 0;
  // x += y.
  virtual absl::Status Add(ActivationId x, ActivationId y) = 0;
  // x[r] += bias for every row (Q/K/V biases).  x: [rows][bias.n_in]
  virtual absl::Status AddBias(ActivationId x, WeightId bias) = 0;
  // x *= factor (Gemma's embedding scale).  Any buffer, kLogitRows included.
  virtual absl::Status Scale(ActivationId x, float factor) = 0;
  // x = cap * tanh(x / cap), elementwise (final-logit soft-capping). cap > 0.
  virtual absl::Status SoftCap(ActivationId x, float cap) = 0;
  // RMSNorm of each head of each row, in place (Qwen 3 / Gemma 3 Q/K norms):
  // x: [rows][n_heads * weight.n_in], every head normed with weight [head_dim].
  virtual absl::Status HeadRmsNorm(ActivationId x, int64_t n_heads, WeightId weight, float eps) = 0;
  // For each logit row (the last row of each sequence that wants logits, in
  // sequence order): logits[i] = RmsNorm(x[row], norm, eps) · outputᵀ.
  // x: [rows][n_embd], logits: a kLogitRows buffer [logit rows][n_vocab].
  virtual absl::Status Logits(ActivationId x, WeightId norm, float eps, WeightId output,
                              ActivationId logits) = 0;

  // After EndPass, until the next BeginPass: copies row `row` of activation
  // id ([id.width] floats, as the pass left it) to host. row < the buffer's
  // rows in the pass (tokens, or logit rows for a kLogitRows buffer), else an
  // error. The engine reads the sampling rows' logits with it; tests read
  // any activation (a device backend does a synchronous device-to-host copy).
  virtual absl::Status ReadActivation(ActivationId id, int64_t row, float* host) = 0;
};

// Whether this build and host can run a model on the device: OK, or the
// status CreateBackend would fail with.
absl::Status CheckDevice(DeviceKind kind, int index);

// The backend for a device choice: kAuto picks the best device this build and
// host have (the CPU until a GPU backend exists); kCpu needs index 0
// (LLM_ERR_INVALID_ARGUMENT otherwise); kCuda in a build without the CUDA
// backend is LLM_ERR_UNSUPPORTED. Never falls back silently.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(DeviceKind kind, int index,
                                                       const BackendOptions& options);

// The CPU backend (backend/cpu/cpu_backend.h).
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const BackendOptions& options);

// Physical cores of the host (a default thread count), at least 1.
int HostPhysicalCores();

}  // namespace llm
