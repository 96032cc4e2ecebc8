// The library is quiet: messages go only to the sink the host installs with
// llm_set_log_callback (none by default). Thread-safe.
#pragma once

#include <string>

#include "absl/strings/str_format.h"
#include "llm/llm.h"

namespace llm {

void SetLogSink(llm_log_fn fn, void* user, int32_t min_level);
bool LogEnabled(int32_t level);
void LogMessage(int32_t level, const std::string& message);

template <typename... Args>
void Logf(int32_t level, const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (LogEnabled(level)) LogMessage(level, absl::StrFormat(format, args...));
}

}  // namespace llm
