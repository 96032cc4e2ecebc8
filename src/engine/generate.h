// Streaming generation on a session: prefill a prompt, then decode until an
// end-of-generation token, a stop string, max_tokens, or the callback stops.
// Text reaches the callback in UTF-8-complete pieces; text that might be the
// start of a stop string is held back until it is known not to be one.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/session.h"

namespace llm {

enum class StopReason { kEog = 0, kMaxTokens = 1, kStopString = 2, kCallback = 3, kContextFull = 4 };

struct GenerateOptions {
  int max_tokens = 256;
  std::vector<std::string> stop;
  std::function<bool(std::string_view)> on_piece;  // return false to stop; may be empty
};

struct GenerateResult {
  StopReason stop_reason = StopReason::kEog;
  int n_prompt_tokens = 0;
  int n_generated = 0;
  double prefill_ms = 0;
  double decode_ms = 0;
};

absl::StatusOr<GenerateResult> Generate(Session& session, absl::Span<const int32_t> prompt,
                                        const GenerateOptions& options);

}  // namespace llm
