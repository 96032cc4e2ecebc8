// Status names, versions, the last-error message and the log sink.
#include "api/handles.h"
#include "core/log.h"
#include "core/status.h"

namespace llm::api {
namespace {
thread_local std::string t_last_error;
}

llm_status Fail(llm_status status, const std::string& message) {
  try {
    t_last_error = message;
  } catch (...) {
    t_last_error.clear();
  }
  return status;
}

llm_status Fail(const absl::Status& status) {
  return Fail(ToLlmStatus(status), std::string(status.message()));
}

void ClearError() { t_last_error.clear(); }

llm_status FailInternal(const char* what) noexcept {
  try {
    t_last_error = std::string("internal error: ") + what;
  } catch (...) {
    t_last_error.clear();
  }
  return LLM_ERR_INTERNAL;
}

llm_status CopyOut(const std::string& text, bool nul_terminate, char* buf, size_t capacity,
                   size_t* len_out) {
  if (len_out == nullptr) return Fail(LLM_ERR_INVALID_ARGUMENT, "len_out must not be NULL");
  if (buf == nullptr && capacity != 0) {
    return Fail(LLM_ERR_INVALID_ARGUMENT, "buf is NULL but capacity is not 0");
  }
  *len_out = text.size();
  const size_t need = text.size() + (nul_terminate ? 1 : 0);
  if (capacity < need) {
    return Fail(LLM_ERR_BUFFER_TOO_SMALL, "buf: capacity " + std::to_string(capacity) +
                                              " is too small, " + std::to_string(need) +
                                              " bytes are needed");
  }
  if (!text.empty()) std::memcpy(buf, text.data(), text.size());
  if (nul_terminate) buf[text.size()] = '\0';
  return LLM_OK;
}

}  // namespace llm::api

extern "C" {

LLM_API const char* llm_status_string(llm_status status) {
  switch (status) {
    case LLM_OK: return "LLM_OK";
    case LLM_ERR_INVALID_ARGUMENT: return "LLM_ERR_INVALID_ARGUMENT";
    case LLM_ERR_IO: return "LLM_ERR_IO";
    case LLM_ERR_BAD_MODEL: return "LLM_ERR_BAD_MODEL";
    case LLM_ERR_UNSUPPORTED: return "LLM_ERR_UNSUPPORTED";
    case LLM_ERR_OUT_OF_MEMORY: return "LLM_ERR_OUT_OF_MEMORY";
    case LLM_ERR_CONTEXT_FULL: return "LLM_ERR_CONTEXT_FULL";
    case LLM_ERR_KV_FULL: return "LLM_ERR_KV_FULL";
    case LLM_ERR_CANCELLED: return "LLM_ERR_CANCELLED";
    case LLM_ERR_BUFFER_TOO_SMALL: return "LLM_ERR_BUFFER_TOO_SMALL";
    case LLM_ERR_BUSY: return "LLM_ERR_BUSY";
    case LLM_ERR_DEVICE: return "LLM_ERR_DEVICE";
    case LLM_ERR_INTERNAL: return "LLM_ERR_INTERNAL";
    default: return "LLM_ERR_UNKNOWN";
  }
}

LLM_API const char* llm_last_error(void) { return llm::api::t_last_error.c_str(); }

#define LLM_STRINGIFY_(x) #x
#define LLM_STRINGIFY(x) LLM_STRINGIFY_(x)
// Built from the header's numbers, so the two cannot drift apart.
LLM_API const char* llm_version(void) {
  return LLM_STRINGIFY(LLM_VERSION_MAJOR) "." LLM_STRINGIFY(LLM_VERSION_MINOR) "." LLM_STRINGIFY(
      LLM_VERSION_PATCH);
}

LLM_API llm_status llm_set_log_callback(llm_log_fn fn, void* user, int32_t min_level) {
  LLM_API_BEGIN
  LLM_CHECK_ARG(min_level >= LLM_LOG_DEBUG && min_level <= LLM_LOG_ERROR,
                "min_level must be one of LLM_LOG_DEBUG..LLM_LOG_ERROR");
  llm::SetLogSink(fn, user, min_level);
  return LLM_OK;
  LLM_API_END
}

}  // extern "C"
