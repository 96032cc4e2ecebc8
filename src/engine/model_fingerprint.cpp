#include "engine/model_fingerprint.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "format/gguf.h"

namespace llm {
namespace {

// 64-bit FNV-1a (Fowler, Noll, Vo). Every integer is fed as little-endian
// bytes and every string with its length first, so the byte stream, and the
// hash, are the same on every platform and no two different inputs can
// concatenate to the same stream.
class Fnv1a64 {
 public:
  void Bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= p[i];
      h_ *= 0x100000001b3ull;  // the FNV-64 prime
    }
  }
  void U64(uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    Bytes(b, 8);
  }
  void Str(std::string_view s) {
    U64(s.size());
    Bytes(s.data(), s.size());
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;  // the FNV-64 offset basis
};

void HashValue(const GgufValue& v, Fnv1a64* h) {
  h->U64(static_cast<uint32_t>(v.type));
  switch (v.type) {
    case GgufType::kString:
      h->Str(v.str);
      break;
    case GgufType::kArray:
      // The elements as stored in the file (fixed little-endian GGUF
      // encoding, strings length-prefixed): deterministic for the content.
      h->U64(static_cast<uint32_t>(v.array_type));
      h->U64(v.array_count);
      h->U64(v.array_bytes);
      if (v.array_data != nullptr) h->Bytes(v.array_data, v.array_bytes);
      break;
    case GgufType::kF32:
    case GgufType::kF64: {
      uint64_t bits;
      std::memcpy(&bits, &v.f, sizeof(bits));  // f32 widens to double exactly
      h->U64(bits);
      break;
    }
    case GgufType::kI8:
    case GgufType::kI16:
    case GgufType::kI32:
    case GgufType::kI64:
      h->U64(static_cast<uint64_t>(v.i));
      break;
    default:  // unsigned integers and bool
      h->U64(v.u);
      break;
  }
}

}  // namespace

uint64_t ModelFingerprint(const GgufFile& gguf) {
  Fnv1a64 h;
  h.Str("libllm model fingerprint v1");

  std::string_view arch;
  const GgufValue* a = gguf.Find("general.architecture");
  if (a != nullptr && a->type == GgufType::kString) arch = a->str;
  h.Str(arch);

  // Hyper-parameters: "<arch>." keys, sorted so that the key order in the
  // file does not matter.
  std::vector<const std::pair<std::string, GgufValue>*> hparams;
  if (!arch.empty()) {
    for (const auto& kv : gguf.metadata()) {
      const std::string_view key = kv.first;
      if (key.size() > arch.size() && key.substr(0, arch.size()) == arch &&
          key[arch.size()] == '.') {
        hparams.push_back(&kv);
      }
    }
  }
  std::sort(hparams.begin(), hparams.end(),
            [](const auto* x, const auto* y) { return x->first < y->first; });
  h.U64(hparams.size());
  for (const auto* kv : hparams) {
    h.Str(kv->first);
    HashValue(kv->second, &h);
  }

  const std::vector<GgufTensor>& tensors = gguf.tensors();
  h.U64(tensors.size());
  for (const GgufTensor& t : tensors) {
    h.Str(t.name);
    h.U64(static_cast<uint32_t>(t.type));  // the GGUF type id: fixed by the format
    h.U64(t.dims.size());
    for (uint64_t d : t.dims) h.U64(d);
    h.U64(t.n_bytes);
    // Edge bytes of the data, [256 first][256 last] (overlapping for tensors
    // under 512 bytes, which then are hashed whole).
    const uint64_t edge = std::min<uint64_t>(256, t.n_bytes);
    if (t.data != nullptr && edge > 0) {
      h.Bytes(t.data, edge);
      h.Bytes(t.data + (t.n_bytes - edge), edge);
    }
  }
  return h.value();
}

}  // namespace llm
