// Builds small in-memory GGUF v3 files holding only metadata, for tokenizer
// tests of malformed tokenizer.ggml.* values (tests only).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace llm {
namespace testing_gguf {

class GgufBuilder {
 public:
  GgufBuilder& Str(const std::string& key, const std::string& value) {
    Key(key, 8);
    PutStr(value);
    ++n_kv_;
    return *this;
  }
  GgufBuilder& U32(const std::string& key, uint32_t v) {
    Key(key, 4);
    Put(v);
    ++n_kv_;
    return *this;
  }
  GgufBuilder& I32(const std::string& key, int32_t v) {
    Key(key, 5);
    Put(v);
    ++n_kv_;
    return *this;
  }
  GgufBuilder& Bool(const std::string& key, bool v) {
    Key(key, 7);
    const uint8_t b = v ? 1 : 0;
    Put(b);
    ++n_kv_;
    return *this;
  }
  GgufBuilder& StrArray(const std::string& key, const std::vector<std::string>& values) {
    Key(key, 9);
    Put(uint32_t{8});
    Put(static_cast<uint64_t>(values.size()));
    for (const auto& v : values) PutStr(v);
    ++n_kv_;
    return *this;
  }
  GgufBuilder& I32Array(const std::string& key, const std::vector<int32_t>& values) {
    Key(key, 9);
    Put(uint32_t{5});
    Put(static_cast<uint64_t>(values.size()));
    for (int32_t v : values) Put(v);
    ++n_kv_;
    return *this;
  }
  GgufBuilder& F32Array(const std::string& key, const std::vector<float>& values) {
    Key(key, 9);
    Put(uint32_t{6});
    Put(static_cast<uint64_t>(values.size()));
    for (float v : values) Put(v);
    ++n_kv_;
    return *this;
  }

  // The complete file: header, metadata, no tensors.
  std::vector<uint8_t> Build() const {
    std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
    auto put = [&](const void* p, size_t n) {
      const auto* b = static_cast<const uint8_t*>(p);
      out.insert(out.end(), b, b + n);
    };
    const uint32_t version = 3;
    const uint64_t n_tensors = 0;
    put(&version, 4);
    put(&n_tensors, 8);
    put(&n_kv_, 8);
    out.insert(out.end(), kv_.begin(), kv_.end());
    return out;
  }

 private:
  template <typename T>
  void Put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    kv_.insert(kv_.end(), b, b + sizeof(T));
  }
  void PutStr(const std::string& s) {
    Put(static_cast<uint64_t>(s.size()));
    kv_.insert(kv_.end(), s.begin(), s.end());
  }
  void Key(const std::string& key, uint32_t type) {
    PutStr(key);
    Put(type);
  }
  std::vector<uint8_t> kv_;
  uint64_t n_kv_ = 0;
};

}  // namespace testing_gguf
}  // namespace llm
