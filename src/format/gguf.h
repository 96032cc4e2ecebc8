// Hardened GGUF (v2, v3) parser. Every count, offset and size is checked
// against the buffer size with overflow-safe arithmetic before it is used, and
// nothing is allocated from an unchecked count. Tensor data is never copied:
// TensorInfo::data points into the parsed buffer (a mapping or caller memory).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/dtype.h"

namespace llm {

class MappedFile;  // core/mapped_file.h

enum class GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// One metadata value. Scalars are widened into u/i/f; strings and arrays
// point into the parsed buffer (valid as long as the GgufFile lives).
struct GgufValue {
  GgufType type = GgufType::kU8;
  uint64_t u = 0;            // unsigned integers and bool
  int64_t i = 0;             // signed integers (also set for unsigned that fit)
  double f = 0;              // floats (also set for integers)
  std::string_view str;      // kString
  GgufType array_type = GgufType::kU8;  // kArray: element type
  uint64_t array_count = 0;  // kArray: element count
  const uint8_t* array_data = nullptr;  // kArray: first element in the buffer
  uint64_t array_bytes = 0;  // kArray: bytes the elements occupy
};

struct GgufTensor {
  std::string name;
  DType type = DType::kF32;
  std::vector<uint64_t> dims;  // dims[0] is the row length (contiguous axis)
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  uint64_t offset = 0;         // from the start of the buffer
  const uint8_t* data = nullptr;
};

class GgufFile {
 public:
  // Parse a buffer the caller keeps alive and unchanged while this object
  // (and anything holding its pointers) lives. Errors: LLM_ERR_BAD_MODEL with
  // a message naming the field and byte offset; LLM_ERR_UNSUPPORTED for a
  // valid file using a tensor type libllm cannot compute with.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Parse(const uint8_t* data, size_t size);
  // Memory-map a file (LLM_ERR_IO if it cannot be opened) and parse it; the
  // mapping lives as long as the returned object.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Whether the buffer is this object's own read-only private mapping of a
  // file (Open), rather than a caller's buffer (Parse).
  bool file_mapped() const { return mapping_ != nullptr; }

  const GgufValue* Find(std::string_view key) const;  // nullptr if absent
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }

  // Typed getters: nullopt if absent; a present value of the wrong type is a
  // LLM_ERR_BAD_MODEL error naming the key.
  absl::StatusOr<std::optional<uint64_t>> GetUint(std::string_view key) const;
  absl::StatusOr<std::optional<int64_t>> GetInt(std::string_view key) const;
  absl::StatusOr<std::optional<double>> GetFloat(std::string_view key) const;
  absl::StatusOr<std::optional<bool>> GetBool(std::string_view key) const;
  absl::StatusOr<std::optional<std::string_view>> GetString(std::string_view key) const;
  // Arrays (empty vector if absent). Elements of any integer / float type are
  // converted; a string array of the wrong element type is an error.
  absl::StatusOr<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  absl::StatusOr<std::vector<float>> GetFloatArray(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* FindTensor(std::string_view name) const;  // nullptr if absent

 private:
  GgufFile() = default;
  std::unique_ptr<MappedFile> mapping_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<GgufTensor> tensors_;
  // Name -> index into kv_ / tensors_. The views point into the parsed buffer
  // (keys and names are stored there), so they stay valid as long as data_.
  // std::unordered_map, not absl::flat_hash_map: these grow entry by entry
  // with no safe final size to reserve, and only the std container stays
  // consistent when an insert throws std::bad_alloc (core/oom_safe.h).
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
  friend class GgufParser;
};

}  // namespace llm
