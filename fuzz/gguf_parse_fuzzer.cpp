// GgufFile::Parse on arbitrary bytes. On success every accessor is exercised
// and every pointer the parser hands out (strings, arrays, tensor data) is
// read at its first and last byte, so ASan reports any view that escapes the
// input buffer (libFuzzer passes the input in a heap block of exactly `size`
// bytes).
#include <cstddef>
#include <cstdint>

#include "format/gguf.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = llm::GgufFile::Parse(data, size);
  if (!parsed.ok()) {
    LLM_FUZZ_CHECK(!parsed.status().message().empty());
    return 0;
  }
  const llm::GgufFile& f = **parsed;
  volatile uint8_t sink = 0;
  const uint8_t* end = data + size;
  for (const auto& [key, v] : f.metadata()) {
    LLM_FUZZ_CHECK(f.Find(key) != nullptr);
    if (v.type == llm::GgufType::kString && !v.str.empty()) {
      const auto* s = reinterpret_cast<const uint8_t*>(v.str.data());
      LLM_FUZZ_CHECK(s >= data && s + v.str.size() <= end);
      sink = sink + s[0] + s[v.str.size() - 1];
    }
    if (v.type == llm::GgufType::kArray && v.array_bytes > 0) {
      LLM_FUZZ_CHECK(v.array_data >= data && v.array_bytes <= static_cast<uint64_t>(end - v.array_data));
      sink = sink + v.array_data[0] + v.array_data[v.array_bytes - 1];
    }
    // Typed getters: errors for the wrong type are fine, crashes are not.
    (void)f.GetUint(key);
    (void)f.GetInt(key);
    (void)f.GetFloat(key);
    (void)f.GetBool(key);
    (void)f.GetString(key);
    auto strs = f.GetStringArray(key);
    if (strs.ok()) {
      for (std::string_view s : *strs) {
        if (!s.empty()) sink = sink + static_cast<uint8_t>(s.back());
      }
    }
    (void)f.GetIntArray(key);
    (void)f.GetFloatArray(key);
  }
  for (const llm::GgufTensor& t : f.tensors()) {
    LLM_FUZZ_CHECK(f.FindTensor(t.name) != nullptr);
    LLM_FUZZ_CHECK(t.offset <= size && t.n_bytes <= size - t.offset);
    if (t.n_bytes > 0) sink = sink + t.data[0] + t.data[t.n_bytes - 1];
  }
  (void)sink;
  return 0;
}
