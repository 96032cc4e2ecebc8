// Reading and writing the caller's structs across ABI versions (docs/ABI.md,
// "Struct sizes"). A caller's struct may be older (smaller) or newer (larger)
// than this library's:
//  - every size a struct has had in a release is accepted; an older caller's
//    missing fields take their defaults and are never read or written;
//  - a larger size, up to kMaxStructSize, comes from a newer header: an input
//    struct is accepted only when the bytes this library does not know are
//    zero (a newer feature asked of an older library must not be ignored
//    silently), and an output struct gets those bytes zeroed;
//  - anything else (0, garbage, a size between two published ones) is refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "llm/llm.h"

namespace llm::api {

// Larger struct_size values are refused as garbage: the largest struct is a
// few hundred bytes, and a getter writes struct_size bytes.
inline constexpr size_t kMaxStructSize = 4096;

// The sizes each public struct has had, oldest first; the last one is the
// current sizeof. Appending a field to a struct appends the new sizeof here
// and keeps the older sizes (the offset of the first field a release added is
// the size the struct had before it).
template <typename T>
struct StructSizes;

#define LLM_STRUCT_SIZES(type, ...)                   \
  template <>                                         \
  struct StructSizes<type> {                          \
    static constexpr const char* kName = #type;       \
    static constexpr size_t kSizes[] = {__VA_ARGS__}; \
  }

LLM_STRUCT_SIZES(llm_model_params, offsetof(llm_model_params, kv_budget_bytes) /* 0.1 */,
                 offsetof(llm_model_params, device) /* 0.2 */, sizeof(llm_model_params) /* 0.3 */);
// llm_model_info: 0.3's `device` took the 4 bytes of tail padding after
// name[128], so the 0.1 size (224) ends just before `device_index`.
LLM_STRUCT_SIZES(llm_model_info, offsetof(llm_model_info, device_index) /* 0.1 */,
                 sizeof(llm_model_info) /* 0.3 */);
LLM_STRUCT_SIZES(llm_kv_stats, offsetof(llm_kv_stats, n_pools) /* 0.2 */,
                 sizeof(llm_kv_stats) /* 0.3 */);
LLM_STRUCT_SIZES(llm_batch_stats, sizeof(llm_batch_stats) /* 0.2 */);
LLM_STRUCT_SIZES(llm_chat_message, sizeof(llm_chat_message) /* 0.1 */);
LLM_STRUCT_SIZES(llm_chat_options, sizeof(llm_chat_options) /* 0.3 */);
LLM_STRUCT_SIZES(llm_sampler_params, sizeof(llm_sampler_params) /* 0.1, frozen */);
LLM_STRUCT_SIZES(llm_sampler_ext, sizeof(llm_sampler_ext) /* 0.3 */);
LLM_STRUCT_SIZES(llm_session_params, offsetof(llm_session_params, sampler_ext) /* 0.1 */,
                 sizeof(llm_session_params) /* 0.3 */);
LLM_STRUCT_SIZES(llm_session_stats, sizeof(llm_session_stats) /* 0.2 */);
LLM_STRUCT_SIZES(llm_generate_params, sizeof(llm_generate_params) /* 0.1 */);
LLM_STRUCT_SIZES(llm_generate_result, sizeof(llm_generate_result) /* 0.1 */);
#undef LLM_STRUCT_SIZES

// The size of T in the release that published its unsized llm_x_init (and
// llm_chat_format): what those symbols write or read forever, because they
// cannot tell which header their caller was built against.
template <typename T>
constexpr size_t FirstSize() {
  return StructSizes<T>::kSizes[0];
}

// The fixed sizes on LP64 (x86-64, AArch64 Linux), as docs/ABI.md tabulates
// them: a field inserted in the middle of a struct, or a type changed, fails
// the build here.
static_assert(sizeof(void*) != 8 ||
                  (FirstSize<llm_model_params>() == 32 &&
                   StructSizes<llm_model_params>::kSizes[1] == 48 &&
                   sizeof(llm_model_params) == 56 && FirstSize<llm_model_info>() == 224 &&
                   sizeof(llm_model_info) == 248 && FirstSize<llm_kv_stats>() == 96 &&
                   sizeof(llm_kv_stats) == 168 &&
                   sizeof(llm_batch_stats) == 72 && sizeof(llm_chat_message) == 16 &&
                   sizeof(llm_sampler_params) == 36 && sizeof(llm_sampler_ext) == 8 &&
                   FirstSize<llm_session_params>() == 64 && sizeof(llm_session_params) == 72 &&
                   sizeof(llm_session_stats) == 32 && sizeof(llm_generate_params) == 40 &&
                   sizeof(llm_generate_result) == 32 && sizeof(llm_chat_options) == 40 &&
                   offsetof(llm_chat_options, date_string) == 16),
              "a public struct's layout changed: see docs/ABI.md, \"Struct sizes\"");

// ---- untemplated parts (abi_structs.cpp) ---------------------------------

// LLM_OK if size is one of sizes[0..n) or in (sizes[n-1], kMaxStructSize];
// else INVALID_ARGUMENT "<what>: <field> <size> is not a size of <name>...".
llm_status CheckSize(size_t size, const size_t* sizes, size_t n, const char* name, const char* what,
                     const char* field);
// LLM_OK if bytes [known, size) of p are zero; else INVALID_ARGUMENT naming
// the offset of the first non-zero byte.
llm_status CheckUnknownBytesZero(const void* p, size_t known, size_t size, const char* name,
                                 const char* what);
// Copies min(size, known) bytes of full into out, zeroes the rest up to size.
void WriteSized(void* out, size_t size, const void* full, size_t known);

// ---- per struct ----------------------------------------------------------

// field: the argument that carries the size, when it is not struct_size.
template <typename T>
llm_status CheckStructSize(size_t size, const char* what, const char* field = "struct_size") {
  return CheckSize(size, StructSizes<T>::kSizes, std::size(StructSizes<T>::kSizes),
                   StructSizes<T>::kName, what, field);
}

// An all-zero T with struct_size = sizeof(T): the defaults of output structs,
// and the base of every params default.
template <typename T>
T ZeroedStruct() {
  T out;
  std::memset(static_cast<void*>(&out), 0, sizeof out);
  out.struct_size = sizeof out;
  return out;
}

// Reads a caller's input struct into *out: defaults, overwritten by the
// first min(struct_size, sizeof(T)) bytes of *user (user NULL: defaults).
template <typename T>
llm_status ReadStruct(const T* user, const T& defaults, const char* what, T* out) {
  *out = defaults;
  if (user == nullptr) return LLM_OK;
  const size_t size = user->struct_size;  // read once
  if (llm_status s = CheckStructSize<T>(size, what); s != LLM_OK) return s;
  if (llm_status s = CheckUnknownBytesZero(user, sizeof(T), size, StructSizes<T>::kName, what);
      s != LLM_OK) {
    return s;
  }
  std::memcpy(static_cast<void*>(out), static_cast<const void*>(user),
              size < sizeof(T) ? size : sizeof(T));
  out->struct_size = sizeof(T);
  return LLM_OK;
}

// Writes full into the caller's struct of size bytes (already checked with
// CheckStructSize): struct_size keeps that value, fields beyond the
// caller's size are not written, bytes beyond this library's are zeroed.
template <typename T>
void WriteStruct(T full, T* user, size_t size) {
  full.struct_size = static_cast<uint32_t>(size);
  WriteSized(user, size, &full, sizeof(T));
}

// The body of every llm_x_init_v: checks size, then writes defaults.
template <typename T>
llm_status InitStruct(T* user, size_t size, const T& defaults, const char* what) {
  if (llm_status s = CheckStructSize<T>(size, what); s != LLM_OK) return s;
  WriteStruct(defaults, user, size);
  return LLM_OK;
}

}  // namespace llm::api
