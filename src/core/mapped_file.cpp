#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "core/status.h"

namespace llm {

namespace {

absl::Status IoError(const char* what, const std::string& path, int err) {
  return Errorf(LLM_ERR_IO, "%s '%s': %s", what, path, std::strerror(err));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return IoError("cannot open", path, errno);

  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return IoError("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Errorf(LLM_ERR_IO, "cannot map '%s': not a regular file", path);
  }
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) > SIZE_MAX) {
    ::close(fd);
    return Errorf(LLM_ERR_IO, "cannot map '%s': file size %d out of range", path,
                  static_cast<int64_t>(st.st_size));
  }
  const size_t size = static_cast<size_t>(st.st_size);

  void* addr = nullptr;
  if (size > 0) {
    addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return IoError("cannot mmap", path, err);
    }
  }
  ::close(fd);  // the mapping keeps its own reference to the file

  std::unique_ptr<MappedFile> file(new (std::nothrow) MappedFile());
  if (!file) {
    if (addr) ::munmap(addr, size);
    return Error(LLM_ERR_OUT_OF_MEMORY, "out of memory mapping '" + path + "'");
  }
  file->data_ = static_cast<const uint8_t*>(addr);
  file->size_ = size;
  file->path_ = path;
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr && size_ > 0) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace llm
