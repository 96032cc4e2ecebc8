// Internal error handling: absl::Status everywhere inside the engine, mapped
// to the ABI's llm_status at the boundary (src/api).
//
// absl's canonical codes are coarser than llm_status (BAD_MODEL, CONTEXT_FULL,
// KV_FULL... have no canonical twin), so the exact llm_status travels as a
// payload on the absl::Status; ToLlmStatus() reads it back.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "llm/llm.h"

namespace llm {

// Build an error with an exact llm_status code and a message naming the problem.
absl::Status Error(llm_status code, std::string message);

// Same with absl::StrFormat formatting.
template <typename... Args>
absl::Status Errorf(llm_status code, const absl::FormatSpec<Args...>& format, const Args&... args) {
  return Error(code, absl::StrFormat(format, args...));
}

// The llm_status an absl::Status stands for (OK -> LLM_OK). Statuses made
// without Error() map by canonical code (InvalidArgument -> INVALID_ARGUMENT,
// ResourceExhausted -> OUT_OF_MEMORY, Cancelled -> CANCELLED, ...).
llm_status ToLlmStatus(const absl::Status& status);

// The status for the exception being handled -- call it only inside a catch
// block: std::bad_alloc -> LLM_ERR_OUT_OF_MEMORY "<context>: out of memory";
// any other -> LLM_ERR_INTERNAL "<context>: <what()>" (or "unknown
// exception"). For the try blocks that keep exceptions off the C ABI.
absl::Status StatusFromCurrentException(const char* context);

}  // namespace llm

// Propagate a non-OK status: LLM_RETURN_IF_ERROR(expr);
#define LLM_RETURN_IF_ERROR(expr)                 \
  do {                                            \
    ::absl::Status llm_status_ = (expr);          \
    if (!llm_status_.ok()) return llm_status_;    \
  } while (0)

#define LLM_CONCAT_INNER_(a, b) a##b
#define LLM_CONCAT_(a, b) LLM_CONCAT_INNER_(a, b)
// LLM_ASSIGN_OR_RETURN(auto x, StatusOrExpr());
#define LLM_ASSIGN_OR_RETURN(lhs, expr) \
  LLM_ASSIGN_OR_RETURN_IMPL_(LLM_CONCAT_(llm_statusor_, __LINE__), lhs, expr)
#define LLM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
