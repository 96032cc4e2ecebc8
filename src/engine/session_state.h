// The serialized form of a session (llm_session_save / llm_session_load, game
// save files): version 1 of the format in docs/SESSION_FORMAT.md.
//
// The buffer holds a fixed 136-byte header (magic, format version, KV type,
// model fingerprint, KV layout, counts, seed, RNG state, sampler settings),
// the token history, the logits for the next position (when the session has
// them), the KV rows of every history position (layer-major: for each layer,
// the K rows of positions 0..n-1, then their V rows, each row
// [n_head_kv * head_dim] elements of the KV type), and a CRC-32 trailer.
// Every field is written explicitly as little-endian fixed-width integers
// (floats as their IEEE-754 bits), so the bytes are the same on every
// platform and compiler.
//
// Not saved: n_ctx and the thread count (they are the loading session's), the
// model (only its fingerprint), the prefix cache and block sharing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kv/block_table.h"
#include "kv/session_kv.h"
#include "kv/kv_layout.h"
#include "sampling/sampler_config.h"

namespace llm {

// The format's version this build writes and reads.
inline constexpr uint32_t kSessionFormatVersion = 1;

// Everything of a session but its KV rows.
struct SessionState {
  uint64_t model_fingerprint = 0;  // engine/model_fingerprint.h
  KvType kv_type = KvType::kF16;
  std::vector<int32_t> tokens;  // history; KV holds positions [0, tokens.size())
  uint64_t seed = 0;
  SamplerConfig sampler;
  std::array<uint64_t, 4> rng_state{};  // Rng::state()
  bool has_logits = false;
  std::vector<float> logits;  // n_vocab floats when has_logits
  bool rope_long = false;     // KV rotated with LongRoPE's long factors (flag bit 1)
};

// Bytes SerializeSession will write for this state (the logits count only
// when has_logits).
size_t SerializedSessionSize(const SessionState& state, const KvLayout& layout);

// Writes the whole format into out[0 .. SerializedSessionSize(state, layout)).
// Preconditions (the session guarantees them; they are not checked):
// kv.type() == state.kv_type, kv.n_positions() >= state.tokens.size(), and
// layout is the layout of kv's pool. Reads kv's blocks through the pool's
// storage (a device error or OUT_OF_MEMORY for the staging block can fail it).
absl::Status SerializeSession(const SessionState& state, const KvBlockTable& kv,
                              const KvLayout& layout, uint8_t* out);
// The same for a session whose KV is split into groups (kv/session_kv.h):
// each layer's rows come from its group's table, so the bytes are those one
// table of every layer would give (the format does not know about groups).
// layout: the model's layout of all layers.
absl::Status SerializeSession(const SessionState& state, const SessionKv& kv,
                              const KvLayout& layout, uint8_t* out);

// What the loading session expects of a buffer.
struct SessionLoadExpect {
  uint64_t model_fingerprint = 0;    // the loading model's ModelFingerprint
  KvType kv_type = KvType::kF16;     // the loading session's KV type
  int64_t n_vocab = 0;               // token ids must be < n_vocab; logits count
  int64_t n_ctx = 0;                 // the loading session's context
  const KvLayout* layout = nullptr;  // the loading model's KV layout
  bool rope_long = false;            // the loading session uses LongRoPE's long factors
};

// Validates the whole buffer before writing anything, then fills kv and
// *state. Checks, in order:
//   size >= header + trailer, magic "LLMSESS\0"     -> INVALID_ARGUMENT (corrupt)
//   format version: > 1 -> UNSUPPORTED ("saved by a newer libllm ..."),
//                   0 -> INVALID_ARGUMENT (corrupt)
//   size recorded in the header == size             -> INVALID_ARGUMENT (truncated /
//                                                      trailing bytes)
//   CRC-32 of every byte before the trailer         -> INVALID_ARGUMENT (checksum mismatch)
//   model fingerprint                               -> INVALID_ARGUMENT ("another model")
//   KV type                                         -> INVALID_ARGUMENT (names both)
//   KV layout (n_layer, n_head_kv, head_dim)        -> INVALID_ARGUMENT
//   n_tokens <= n_ctx                               -> CONTEXT_FULL
//   flag bit 1 (LongRoPE long factors) == expect.rope_long -> INVALID_ARGUMENT
//   flags, logits count (0 or n_vocab), sizes adding up exactly,
//   token ids in [0, n_vocab), sampler settings (ValidateSamplerConfig),
//   RNG state not all zero                          -> INVALID_ARGUMENT
// Then kv->PrepareWrite(0, n_tokens) (LLM_ERR_KV_FULL / LLM_ERR_OUT_OF_MEMORY
// are returned as they are), the rows are copied in, kv->Commit(tokens), and
// *state is replaced. kv must be a FRESH table (n_positions() == 0) of
// expect.kv_type made by the caller, so that any failure leaves the session
// as it was; *state is untouched on failure. A token-free buffer leaves kv
// empty.
absl::Status DeserializeSession(const uint8_t* data, size_t size, const SessionLoadExpect& expect,
                                SessionState* state, KvBlockTable* kv);
// The same into a fresh SessionKv: each layer's rows go to its group's table
// (every table restored as PrepareRestore says: a windowed one allocates
// only its window); on failure every table is empty again.
absl::Status DeserializeSession(const uint8_t* data, size_t size, const SessionLoadExpect& expect,
                                SessionState* state, SessionKv* kv);

}  // namespace llm
