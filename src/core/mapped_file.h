// Read-only memory mapping of a whole file (model weights are mmapped, never
// copied). The mapping lives as long as the MappedFile object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace llm {

class MappedFile {
 public:
  // Maps `path` read-only. LLM_ERR_IO naming the path and strerror(errno) if
  // it cannot be opened, stat'ed or mapped. An empty file maps to data() ==
  // nullptr, size() == 0 (mmap of length 0 is invalid, so nothing is mapped).
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace llm
