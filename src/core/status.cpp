#include "core/status.h"

#include <cstdlib>
#include <exception>
#include <new>

#include "absl/strings/cord.h"

namespace llm {
namespace {

constexpr char kPayloadUrl[] = "libllm/status";

absl::StatusCode CanonicalCode(llm_status code) {
  switch (code) {
    case LLM_OK: return absl::StatusCode::kOk;
    case LLM_ERR_INVALID_ARGUMENT: return absl::StatusCode::kInvalidArgument;
    case LLM_ERR_IO: return absl::StatusCode::kNotFound;
    case LLM_ERR_BAD_MODEL: return absl::StatusCode::kDataLoss;
    case LLM_ERR_UNSUPPORTED: return absl::StatusCode::kUnimplemented;
    case LLM_ERR_OUT_OF_MEMORY: return absl::StatusCode::kResourceExhausted;
    case LLM_ERR_CONTEXT_FULL: return absl::StatusCode::kOutOfRange;
    case LLM_ERR_KV_FULL: return absl::StatusCode::kResourceExhausted;
    case LLM_ERR_CANCELLED: return absl::StatusCode::kCancelled;
    case LLM_ERR_BUFFER_TOO_SMALL: return absl::StatusCode::kOutOfRange;
    case LLM_ERR_BUSY: return absl::StatusCode::kUnavailable;
    case LLM_ERR_DEVICE: return absl::StatusCode::kAborted;
    default: return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status Error(llm_status code, std::string message) {
  absl::Status status(CanonicalCode(code), message);
  status.SetPayload(kPayloadUrl, absl::Cord(std::to_string(code)));
  return status;
}

absl::Status StatusFromCurrentException(const char* context) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return Errorf(LLM_ERR_OUT_OF_MEMORY, "%s: out of memory", context);
  } catch (const std::exception& e) {
    return Errorf(LLM_ERR_INTERNAL, "%s: %s", context, e.what());
  } catch (...) {
    return Errorf(LLM_ERR_INTERNAL, "%s: unknown exception", context);
  }
}

llm_status ToLlmStatus(const absl::Status& status) {
  if (status.ok()) return LLM_OK;
  if (auto payload = status.GetPayload(kPayloadUrl)) {
    return static_cast<llm_status>(std::atoi(std::string(*payload).c_str()));
  }
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument: return LLM_ERR_INVALID_ARGUMENT;
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied: return LLM_ERR_IO;
    case absl::StatusCode::kDataLoss: return LLM_ERR_BAD_MODEL;
    case absl::StatusCode::kUnimplemented: return LLM_ERR_UNSUPPORTED;
    case absl::StatusCode::kResourceExhausted: return LLM_ERR_OUT_OF_MEMORY;
    case absl::StatusCode::kCancelled: return LLM_ERR_CANCELLED;
    case absl::StatusCode::kOutOfRange: return LLM_ERR_CONTEXT_FULL;
    case absl::StatusCode::kUnavailable: return LLM_ERR_BUSY;
    default: return LLM_ERR_INTERNAL;
  }
}

}  // namespace llm
