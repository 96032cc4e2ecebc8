// The untemplated half of abi_structs.h: size checks and their messages.
#include "api/abi_structs.h"

#include <string>

#include "api/handles.h"

namespace llm::api {

llm_status CheckSize(size_t size, const size_t* sizes, size_t n, const char* name, const char* what,
                     const char* field) {
  for (size_t i = 0; i < n; ++i)
    if (size == sizes[i]) return LLM_OK;
  const size_t current = sizes[n - 1];
  if (size > current && size <= kMaxStructSize) return LLM_OK;
  std::string known;
  for (size_t i = 0; i < n; ++i) known += (i ? ", " : "") + std::to_string(sizes[i]);
  return Fail(LLM_ERR_INVALID_ARGUMENT,
              std::string(what) + ": " + field + " " + std::to_string(size) + " is not a size of " +
                  name + " (its sizes: " + known + "; a newer header's, up to " +
                  std::to_string(kMaxStructSize) + "); fill it with the matching _init function");
}

llm_status CheckUnknownBytesZero(const void* p, size_t known, size_t size, const char* name,
                                 const char* what) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  for (size_t i = known; i < size; ++i) {
    if (b[i] != 0) {
      return Fail(LLM_ERR_INVALID_ARGUMENT,
                  std::string(what) + ": the byte at offset " + std::to_string(i) +
                      " is not zero, but this libllm's " + name + " ends at " +
                      std::to_string(known) + " bytes (struct_size " + std::to_string(size) +
                      "): a field of a newer libllm is set; this library cannot honour it");
    }
  }
  return LLM_OK;
}

void WriteSized(void* out, size_t size, const void* full, size_t known) {
  const size_t n = size < known ? size : known;
  std::memcpy(out, full, n);
  if (size > known) std::memset(static_cast<unsigned char*>(out) + known, 0, size - known);
}

}  // namespace llm::api
