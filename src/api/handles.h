// What the ABI's opaque handles are, and the guard every extern "C" body runs
// in: argument errors and engine failures become an llm_status plus a
// thread-local message; no exception crosses the boundary.
#pragma once

#include <memory>
#include <cstring>
#include <new>
#include <string>

#include "absl/status/status.h"
#include "engine/model.h"
#include "engine/session.h"
#include "llm/llm.h"

struct llm_model {
  std::shared_ptr<const llm::Model> model;
};

struct llm_session {
  std::unique_ptr<llm::Session> session;  // holds its own reference to the model
};

namespace llm::api {

// Records the failure for llm_last_error() and returns its status.
llm_status Fail(llm_status status, const std::string& message);
llm_status Fail(const absl::Status& status);
void ClearError();

// Reads a caller's params struct of any size >= its struct_size field into a
// default-initialised current struct (fields the caller's version lacks keep
// their defaults). min_size: the first version's size.
template <typename T>
llm_status ReadParams(const T* user, const T& defaults, size_t min_size, const char* what, T* out) {
  *out = defaults;
  if (user == nullptr) return LLM_OK;
  if (user->struct_size < min_size) {
    return Fail(LLM_ERR_INVALID_ARGUMENT,
                std::string(what) + ": struct_size " + std::to_string(user->struct_size) +
                    " is smaller than the smallest known size " + std::to_string(min_size) +
                    " (initialise it with the matching _init function)");
  }
  const size_t n = user->struct_size < sizeof(T) ? user->struct_size : sizeof(T);
  std::memcpy(static_cast<void*>(out), static_cast<const void*>(user), n);
  out->struct_size = sizeof(T);
  return LLM_OK;
}

// Copies text (plus NUL when nul_terminate) into a caller buffer following the
// capacity rule; *len_out receives the length without NUL.
llm_status CopyOut(const std::string& text, bool nul_terminate, char* buf, size_t capacity,
                   size_t* len_out);

}  // namespace llm::api

// Wrap every extern "C" body: LLM_API_BEGIN ... LLM_API_END
#define LLM_API_BEGIN \
  try {               \
    ::llm::api::ClearError();
#define LLM_API_END                                                                          \
  }                                                                                          \
  catch (const std::bad_alloc&) {                                                            \
    return ::llm::api::Fail(LLM_ERR_OUT_OF_MEMORY, "out of memory");                         \
  }                                                                                          \
  catch (const std::exception& e) {                                                          \
    return ::llm::api::Fail(LLM_ERR_INTERNAL, std::string("internal error: ") + e.what());   \
  }                                                                                          \
  catch (...) {                                                                              \
    return ::llm::api::Fail(LLM_ERR_INTERNAL, "internal error: unknown exception");          \
  }

#define LLM_CHECK_ARG(cond, message)                                       \
  do {                                                                     \
    if (!(cond)) return ::llm::api::Fail(LLM_ERR_INVALID_ARGUMENT, message); \
  } while (0)
