#include "engine/session_state.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include "core/status.h"

namespace llm {
namespace {

// ---- the fixed header (docs/SESSION_FORMAT.md) ----------------------------
constexpr uint8_t kMagic[8] = {'L', 'L', 'M', 'S', 'E', 'S', 'S', '\0'};
constexpr size_t kOffVersion = 8;       // u32: fixed forever, with the magic
constexpr size_t kOffKvType = 12;       // u32: 0 F16, 1 F32
constexpr size_t kOffTotalSize = 16;    // u64: bytes of the whole buffer
constexpr size_t kOffFingerprint = 24;  // u64
constexpr size_t kOffNLayer = 32;       // u32
constexpr size_t kOffNHeadKv = 36;      // u32
constexpr size_t kOffHeadDim = 40;      // u32
constexpr size_t kOffFlags = 44;        // u32: bit 0 has_logits, bit 1 rope_long, others 0
constexpr size_t kOffNTokens = 48;      // u64
constexpr size_t kOffNLogits = 56;      // u64: 0, or n_vocab when has_logits
constexpr size_t kOffSeed = 64;         // u64
constexpr size_t kOffRng = 72;          // u64[4]
constexpr size_t kOffSampler = 104;     // 8 x 32-bit fields (SamplerConfig order)
constexpr size_t kHeaderBytes = 136;
constexpr size_t kTrailerBytes = 4;  // u32 CRC-32 of every byte before it
constexpr uint32_t kFlagHasLogits = 1;
constexpr uint32_t kFlagRopeLong = 2;  // K rows rotated with LongRoPE's long factors

constexpr bool kLittleEndianHost =
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
#else
    false;  // unknown: take the byte-by-byte path, correct everywhere
#endif

void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// One KV row between the cache (host order) and the buffer (little-endian),
// elem_bytes 2 (F16 bits) or 4 (F32 bits). Same code both ways: a byte swap
// per element is its own inverse.
void CopyRowLe(uint8_t* dst, const uint8_t* src, size_t row_bytes, size_t elem_bytes) {
  if (kLittleEndianHost) {
    std::memcpy(dst, src, row_bytes);
    return;
  }
  for (size_t e = 0; e < row_bytes; e += elem_bytes) {
    for (size_t b = 0; b < elem_bytes; ++b) dst[e + b] = src[e + elem_bytes - 1 - b];
  }
}

// CRC-32 (zlib's, the polynomial of gzip/PNG/zip) of data[0 .. n).
uint32_t Crc32(const uint8_t* data, size_t n) {
  uLong crc = crc32_z(0L, Z_NULL, 0);
  crc = crc32_z(crc, data, n);
  return static_cast<uint32_t>(crc);
}

const char* KvTypeName(KvType t) { return t == KvType::kF16 ? "F16" : "F32"; }

// Bounds-checked reading of the body: every read says how many bytes it takes
// and fails (returns nullptr) rather than pass the end.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, size_t pos) : data_(data), size_(size), pos_(pos) {}
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* Take(size_t n) {
    if (n > remaining()) return nullptr;
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_;
};

absl::Status Corrupt(const std::string& what) {
  return Error(LLM_ERR_INVALID_ARGUMENT, "session buffer is corrupt: " + what);
}

// a * b + c without wrapping; false on overflow.
bool MulAdd(uint64_t a, uint64_t b, uint64_t c, uint64_t* out) {
  if (a != 0 && b > (std::numeric_limits<uint64_t>::max() - c) / a) return false;
  *out = a * b + c;
  return true;
}

size_t RowBytes(const KvLayout& layout, KvType t) {
  return static_cast<size_t>(layout.row_elems()) * KvLayout::elem_bytes(t);
}

// The serialized KV rows of positions [0, n) are layer-major: layer l's K
// rows of positions 0..n-1, then its V rows ([n][row_bytes] each). A block
// holds every layer's rows of its positions (kv_layout.h), so both
// directions go one block at a time through a host copy of the block: one
// device transfer per block, never per row.
size_t SerializedKvOffset(int64_t layer, bool v, int64_t pos, int64_t n, size_t row_bytes) {
  return (static_cast<size_t>(2 * layer + (v ? 1 : 0)) * static_cast<size_t>(n) +
          static_cast<size_t>(pos)) * row_bytes;
}

// A session's tables as the rows' copy sees them: tables[g] holds the
// layers groups.groups[g].layers, layer layers[s] at slot s of its blocks.
struct KvTables {
  std::vector<KvBlockTable*> tables;  // [groups->size()]
  const KvGroups* groups = nullptr;
};

// One group holding every layer (a lone table).
const KvGroups& AllLayersGroup(int64_t n_layer, KvGroups* storage) {
  *storage = KvGroups::ForWindows(std::vector<int64_t>(static_cast<size_t>(n_layer), 0));
  return *storage;
}

absl::Status SaveKvRows(const KvTables& kv, const KvLayout& layout, int64_t n, uint8_t* out) {
  for (size_t g = 0; g < kv.tables.size(); ++g) {
    const KvBlockTable& table = *kv.tables[g];
    const KvLayout group = kv.groups->Layout(layout, g);
    const std::vector<int64_t>& layers = kv.groups->groups[g].layers;
    const KvType t = table.type();
    const size_t row_bytes = RowBytes(layout, t), elem_bytes = KvLayout::elem_bytes(t);
    const int64_t bt = table.block_tokens();
    std::vector<uint8_t> block(group.block_bytes());
    for (int64_t first = 0; first < n; first += bt) {
      // A block a sliding-window table released (its positions are out of
      // every future window): its rows are saved as zeros, never read back.
      if (table.blocks()[static_cast<size_t>(first / bt)] == KvBlockTable::kReleased) {
        std::fill(block.begin(), block.end(), uint8_t{0});
      } else {
        LLM_RETURN_IF_ERROR(table.ReadBlock(static_cast<size_t>(first / bt), block.data()));
      }
      for (size_t slot = 0; slot < layers.size(); ++slot) {
        const int64_t l = layers[slot];
        const int64_t sl = static_cast<int64_t>(slot);
        for (int64_t p = first; p < std::min(n, first + bt); ++p) {
          const size_t row = static_cast<size_t>(p - first) * row_bytes;
          CopyRowLe(out + SerializedKvOffset(l, false, p, n, row_bytes),
                    block.data() + group.k_offset(t, sl) + row, row_bytes, elem_bytes);
          CopyRowLe(out + SerializedKvOffset(l, true, p, n, row_bytes),
                    block.data() + group.v_offset(t, sl) + row, row_bytes, elem_bytes);
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status LoadKvRows(const uint8_t* in, const KvLayout& layout, int64_t n, const KvTables& kv) {
  for (size_t g = 0; g < kv.tables.size(); ++g) {
    KvBlockTable& table = *kv.tables[g];
    const KvLayout group = kv.groups->Layout(layout, g);
    const std::vector<int64_t>& layers = kv.groups->groups[g].layers;
    const KvType t = table.type();
    const size_t row_bytes = RowBytes(layout, t), elem_bytes = KvLayout::elem_bytes(t);
    const int64_t bt = table.block_tokens();
    std::vector<uint8_t> block(group.block_bytes());  // rows past n stay zero
    for (int64_t first = 0; first < n; first += bt) {
      // PrepareRestore left the blocks a windowed table does not need released.
      if (table.blocks()[static_cast<size_t>(first / bt)] == KvBlockTable::kReleased) continue;
      for (size_t slot = 0; slot < layers.size(); ++slot) {
        const int64_t l = layers[slot];
        const int64_t sl = static_cast<int64_t>(slot);
        for (int64_t p = first; p < std::min(n, first + bt); ++p) {
          const size_t row = static_cast<size_t>(p - first) * row_bytes;
          CopyRowLe(block.data() + group.k_offset(t, sl) + row,
                    in + SerializedKvOffset(l, false, p, n, row_bytes), row_bytes, elem_bytes);
          CopyRowLe(block.data() + group.v_offset(t, sl) + row,
                    in + SerializedKvOffset(l, true, p, n, row_bytes), row_bytes, elem_bytes);
        }
      }
      LLM_RETURN_IF_ERROR(table.WriteBlock(static_cast<size_t>(first / bt), block.data()));
    }
  }
  return absl::OkStatus();
}

absl::Status Deserialize(const uint8_t* data, size_t size, const SessionLoadExpect& expect,
                         SessionState* state, const KvTables& kv) {
  // Caller contract (a libllm bug if broken, never the buffer's fault).
  if (state == nullptr || kv.tables.empty() || kv.groups == nullptr ||
      kv.groups->size() != kv.tables.size() || expect.layout == nullptr || expect.n_vocab <= 0 ||
      expect.n_ctx < 0 || (data == nullptr && size != 0)) {
    return Error(LLM_ERR_INTERNAL, "DeserializeSession: bad arguments");
  }
  const KvLayout& layout = *expect.layout;
  for (const KvBlockTable* t : kv.tables) {
    if (t == nullptr || t->type() != expect.kv_type || t->n_positions() != 0 ||
        t->row_bytes() != RowBytes(layout, expect.kv_type)) {
      return Error(LLM_ERR_INTERNAL,
                   "DeserializeSession: the KV table is not fresh or does not match the expected "
                   "type and layout");
    }
  }
  if (kv.groups->group_of.size() != static_cast<size_t>(layout.n_layer)) {
    return Error(LLM_ERR_INTERNAL, "DeserializeSession: KV groups of another layer count");
  }

  // 1. What it is: magic, then version (before anything whose place or
  //    meaning a later version may change).
  if (size < kHeaderBytes + kTrailerBytes) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "session buffer is corrupt: %u bytes is shorter than the %u-byte header", size,
                  kHeaderBytes + kTrailerBytes);
  }
  if (std::memcmp(data, kMagic, sizeof(kMagic)) != 0) {
    return Corrupt("bad magic (not a libllm session buffer)");
  }
  const uint32_t version = Get32(data + kOffVersion);
  if (version > kSessionFormatVersion) {
    return Errorf(LLM_ERR_UNSUPPORTED,
                  "the session buffer was saved by a newer libllm (format %u; this build reads %u)",
                  version, kSessionFormatVersion);
  }
  if (version == 0) return Corrupt("format version 0");

  // 2. Whole and intact: the recorded size first (a cut or padded file is
  //    named as such), then the checksum over everything before the trailer.
  const uint64_t total = Get64(data + kOffTotalSize);
  if (total > size) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "session buffer is corrupt: truncated (%u bytes, the header says %u)", size,
                  total);
  }
  if (total < size) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "session buffer is corrupt: %u trailing bytes after the %u the header declares",
                  size - total, total);
  }
  if (Crc32(data, size - kTrailerBytes) != Get32(data + size - kTrailerBytes)) {
    return Corrupt("checksum mismatch");
  }

  // 3. Made for this session: model, KV type, layout, context.
  const uint64_t fingerprint = Get64(data + kOffFingerprint);
  if (fingerprint != expect.model_fingerprint) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "the buffer was saved from another model (fingerprint %016x; this model's is "
                  "%016x)",
                  fingerprint, expect.model_fingerprint);
  }
  const uint32_t kv_type_id = Get32(data + kOffKvType);
  if (kv_type_id > 1) return Corrupt(absl::StrFormat("unknown KV type %u", kv_type_id));
  const KvType kv_type = kv_type_id == 0 ? KvType::kF16 : KvType::kF32;
  if (kv_type != expect.kv_type) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "the buffer holds an %s KV cache but this session's KV type is %s",
                  KvTypeName(kv_type), KvTypeName(expect.kv_type));
  }
  const uint64_t n_layer = Get32(data + kOffNLayer);
  const uint64_t n_head_kv = Get32(data + kOffNHeadKv);
  const uint64_t head_dim = Get32(data + kOffHeadDim);
  if (n_layer != static_cast<uint64_t>(layout.n_layer) ||
      n_head_kv != static_cast<uint64_t>(layout.n_head_kv) ||
      head_dim != static_cast<uint64_t>(layout.head_dim)) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "the buffer's KV layout (n_layer %u, n_head_kv %u, head_dim %u) differs from "
                  "this model's (n_layer %d, n_head_kv %d, head_dim %d)",
                  n_layer, n_head_kv, head_dim, layout.n_layer, layout.n_head_kv, layout.head_dim);
  }
  const uint64_t n_tokens = Get64(data + kOffNTokens);
  if (n_tokens > static_cast<uint64_t>(expect.n_ctx)) {
    return Errorf(LLM_ERR_CONTEXT_FULL,
                  "the buffer holds %u tokens but this session's context is %d", n_tokens,
                  expect.n_ctx);
  }

  // 4. Consistent: flags and counts add up to exactly the buffer.
  const uint32_t flags = Get32(data + kOffFlags);
  if ((flags & ~(kFlagHasLogits | kFlagRopeLong)) != 0) {
    return Corrupt(absl::StrFormat("unknown flags %#x", flags));
  }
  const bool has_logits = (flags & kFlagHasLogits) != 0;
  // The K rows are only valid for a session that rotates the same way
  // (LlamaModel::UsesLongRope of its n_ctx).
  const bool rope_long = (flags & kFlagRopeLong) != 0;
  if (rope_long != expect.rope_long) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "the buffer's KV was computed with the %s LongRoPE factors but this session "
                  "(n_ctx = %d) uses the %s ones: its context must be on the same side of the "
                  "model's original context",
                  rope_long ? "long" : "short", expect.n_ctx, expect.rope_long ? "long" : "short");
  }
  const uint64_t n_logits = Get64(data + kOffNLogits);
  if (!has_logits && n_logits != 0) return Corrupt("logits stored without the has-logits flag");
  if (has_logits && n_logits != static_cast<uint64_t>(expect.n_vocab)) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT,
                  "the buffer's logits cover %u tokens but this model's vocabulary has %d",
                  n_logits, expect.n_vocab);
  }
  if (has_logits && n_tokens == 0) return Corrupt("logits without any token history");
  const size_t row_bytes = RowBytes(layout, kv_type);
  uint64_t kv_bytes = 0;
  uint64_t expected = 0;
  if (!MulAdd(2 * n_layer * row_bytes, n_tokens, 0, &kv_bytes) ||
      !MulAdd(4, n_tokens + n_logits, kHeaderBytes + kTrailerBytes, &expected) ||
      expected > std::numeric_limits<uint64_t>::max() - kv_bytes || expected + kv_bytes != size) {
    return Corrupt(absl::StrFormat(
        "%u tokens, %u logits and their KV rows do not add up to the buffer's %u bytes", n_tokens,
        n_logits, size));
  }

  // 5. Valid values. Counts were checked against the size above, and each
  //    Take() checks again, before anything is allocated from them.
  Reader r(data, size - kTrailerBytes, kHeaderBytes);
  const uint8_t* tok_bytes = r.Take(static_cast<size_t>(n_tokens) * 4);
  if (tok_bytes == nullptr) return Corrupt("token history past the end");
  std::vector<int32_t> tokens(static_cast<size_t>(n_tokens));
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t id = static_cast<int32_t>(Get32(tok_bytes + 4 * i));
    if (id < 0 || id >= expect.n_vocab) {
      return Errorf(LLM_ERR_INVALID_ARGUMENT,
                    "session buffer is corrupt: token %u of the history is %d, outside this "
                    "model's vocabulary [0, %d)",
                    i, id, expect.n_vocab);
    }
    tokens[i] = id;
  }
  const uint8_t* logit_bytes = r.Take(static_cast<size_t>(n_logits) * 4);
  if (logit_bytes == nullptr) return Corrupt("logits past the end");
  std::vector<float> logits(static_cast<size_t>(n_logits));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = BitsFloat(Get32(logit_bytes + 4 * i));

  SamplerConfig sampler;
  const uint8_t* s = data + kOffSampler;
  sampler.temperature = BitsFloat(Get32(s + 0));
  sampler.top_k = static_cast<int32_t>(Get32(s + 4));
  sampler.top_p = BitsFloat(Get32(s + 8));
  sampler.min_p = BitsFloat(Get32(s + 12));
  sampler.repeat_penalty = BitsFloat(Get32(s + 16));
  sampler.presence_penalty = BitsFloat(Get32(s + 20));
  sampler.frequency_penalty = BitsFloat(Get32(s + 24));
  sampler.penalty_last_n = static_cast<int32_t>(Get32(s + 28));
  absl::Status sampler_ok = ValidateSamplerConfig(sampler);
  if (!sampler_ok.ok()) {
    return Corrupt("sampler settings: " + std::string(sampler_ok.message()));
  }
  std::array<uint64_t, 4> rng{};
  bool rng_zero = true;
  for (size_t i = 0; i < 4; ++i) {
    rng[i] = Get64(data + kOffRng + 8 * i);
    rng_zero = rng_zero && rng[i] == 0;
  }
  if (rng_zero) return Corrupt("the RNG state is all zero");

  const uint8_t* kv_data = r.Take(static_cast<size_t>(kv_bytes));
  if (kv_data == nullptr || r.remaining() != 0) return Corrupt("KV rows do not fill the buffer");

  // 6. Everything checked: only now touch the table. Layer-major: layer l's
  //    K rows of positions 0..n-1, then its V rows.
  const int64_t n = static_cast<int64_t>(n_tokens);
  if (n > 0) {
    for (size_t g = 0; g < kv.tables.size(); ++g) {
      if (absl::Status st = kv.tables[g]->PrepareRestore(n); !st.ok()) {
        for (size_t h = 0; h < g; ++h) kv.tables[h]->Truncate(0);
        return st;
      }
    }
    LLM_RETURN_IF_ERROR(LoadKvRows(kv_data, layout, n, kv));
    for (KvBlockTable* t : kv.tables) t->Commit(tokens);
  }

  state->model_fingerprint = fingerprint;
  state->kv_type = kv_type;
  state->tokens = std::move(tokens);
  state->seed = Get64(data + kOffSeed);
  state->sampler = sampler;
  state->rng_state = rng;
  state->has_logits = has_logits;
  state->logits = std::move(logits);
  state->rope_long = rope_long;
  return absl::OkStatus();
}

absl::Status Serialize(const SessionState& state, const KvTables& kv, const KvLayout& layout,
                       uint8_t* out);

}  // namespace

size_t SerializedSessionSize(const SessionState& state, const KvLayout& layout) {
  const size_t n = state.tokens.size();
  const size_t n_logits = state.has_logits ? state.logits.size() : 0;
  return kHeaderBytes + 4 * n + 4 * n_logits +
         2 * static_cast<size_t>(layout.n_layer) * n * RowBytes(layout, state.kv_type) +
         kTrailerBytes;
}

absl::Status SerializeSession(const SessionState& state, const KvBlockTable& kv,
                              const KvLayout& layout, uint8_t* out) {
  KvGroups one;
  KvTables tables{{const_cast<KvBlockTable*>(&kv)}, &AllLayersGroup(layout.n_layer, &one)};
  return Serialize(state, tables, layout, out);
}

absl::Status SerializeSession(const SessionState& state, const SessionKv& kv,
                              const KvLayout& layout, uint8_t* out) {
  KvTables tables;
  for (size_t g = 0; g < kv.n_groups(); ++g) {
    tables.tables.push_back(const_cast<KvBlockTable*>(&kv.table(g)));  // only read
  }
  tables.groups = &kv.groups();
  return Serialize(state, tables, layout, out);
}

namespace {

absl::Status Serialize(const SessionState& state, const KvTables& kv, const KvLayout& layout,
                       uint8_t* out) {
  const size_t total = SerializedSessionSize(state, layout);
  const size_t n = state.tokens.size();
  const size_t n_logits = state.has_logits ? state.logits.size() : 0;

  std::memcpy(out, kMagic, sizeof(kMagic));
  Put32(out + kOffVersion, kSessionFormatVersion);
  Put32(out + kOffKvType, state.kv_type == KvType::kF16 ? 0 : 1);
  Put64(out + kOffTotalSize, total);
  Put64(out + kOffFingerprint, state.model_fingerprint);
  Put32(out + kOffNLayer, static_cast<uint32_t>(layout.n_layer));
  Put32(out + kOffNHeadKv, static_cast<uint32_t>(layout.n_head_kv));
  Put32(out + kOffHeadDim, static_cast<uint32_t>(layout.head_dim));
  Put32(out + kOffFlags, (state.has_logits ? kFlagHasLogits : 0) |
                            (state.rope_long ? kFlagRopeLong : 0));
  Put64(out + kOffNTokens, n);
  Put64(out + kOffNLogits, n_logits);
  Put64(out + kOffSeed, state.seed);
  for (size_t i = 0; i < 4; ++i) Put64(out + kOffRng + 8 * i, state.rng_state[i]);
  uint8_t* s = out + kOffSampler;
  const SamplerConfig& c = state.sampler;
  Put32(s + 0, FloatBits(c.temperature));
  Put32(s + 4, static_cast<uint32_t>(c.top_k));
  Put32(s + 8, FloatBits(c.top_p));
  Put32(s + 12, FloatBits(c.min_p));
  Put32(s + 16, FloatBits(c.repeat_penalty));
  Put32(s + 20, FloatBits(c.presence_penalty));
  Put32(s + 24, FloatBits(c.frequency_penalty));
  Put32(s + 28, static_cast<uint32_t>(c.penalty_last_n));

  uint8_t* p = out + kHeaderBytes;
  for (size_t i = 0; i < n; ++i, p += 4) Put32(p, static_cast<uint32_t>(state.tokens[i]));
  for (size_t i = 0; i < n_logits; ++i, p += 4) Put32(p, FloatBits(state.logits[i]));

  LLM_RETURN_IF_ERROR(SaveKvRows(kv, layout, static_cast<int64_t>(n), p));
  Put32(out + total - kTrailerBytes, Crc32(out, total - kTrailerBytes));
  return absl::OkStatus();
}

}  // namespace

absl::Status DeserializeSession(const uint8_t* data, size_t size, const SessionLoadExpect& expect,
                                SessionState* state, KvBlockTable* kv) {
  try {
    if (kv == nullptr || expect.layout == nullptr) {
      return Error(LLM_ERR_INTERNAL, "DeserializeSession: bad arguments");
    }
    KvGroups one;
    KvTables tables{{kv}, &AllLayersGroup(expect.layout->n_layer, &one)};
    return Deserialize(data, size, expect, state, tables);
  } catch (const std::bad_alloc&) {
    return Error(LLM_ERR_OUT_OF_MEMORY, "out of memory loading a session buffer");
  }
}

absl::Status DeserializeSession(const uint8_t* data, size_t size, const SessionLoadExpect& expect,
                                SessionState* state, SessionKv* kv) {
  try {
    if (kv == nullptr) return Error(LLM_ERR_INTERNAL, "DeserializeSession: bad arguments");
    KvTables tables;
    for (size_t g = 0; g < kv->n_groups(); ++g) tables.tables.push_back(&kv->table(g));
    tables.groups = &kv->groups();
    return Deserialize(data, size, expect, state, tables);
  } catch (const std::bad_alloc&) {
    return Error(LLM_ERR_OUT_OF_MEMORY, "out of memory loading a session buffer");
  }
}

}  // namespace llm
