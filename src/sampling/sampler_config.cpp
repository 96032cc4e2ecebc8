#include "sampling/sampler_config.h"

#include <cmath>

#include "core/status.h"

namespace llm {
namespace {

absl::Status Refuse(const char* field, double value, const char* rule) {
  return Errorf(LLM_ERR_INVALID_ARGUMENT, "sampler %s = %g is invalid: %s", field, value, rule);
}

}  // namespace

absl::Status ValidateSamplerConfig(const SamplerConfig& c) {
  if (!std::isfinite(c.temperature)) {
    return Refuse("temperature", c.temperature, "it must be finite (<= 0 means greedy)");
  }
  if (!std::isfinite(c.top_p) || c.top_p < 0.0f) {
    return Refuse("top_p", c.top_p, "it must be finite and >= 0 (>= 1 means off)");
  }
  if (!(c.min_p >= 0.0f && c.min_p <= 1.0f)) {
    return Refuse("min_p", c.min_p, "it must be in [0, 1] (0 means off)");
  }
  if (!std::isfinite(c.repeat_penalty) || c.repeat_penalty <= 0.0f) {
    return Refuse("repeat_penalty", c.repeat_penalty, "it must be finite and > 0 (1 means off)");
  }
  if (!std::isfinite(c.presence_penalty)) {
    return Refuse("presence_penalty", c.presence_penalty, "it must be finite (0 means off)");
  }
  if (!std::isfinite(c.frequency_penalty)) {
    return Refuse("frequency_penalty", c.frequency_penalty, "it must be finite (0 means off)");
  }
  if (c.penalty_last_n < -1) {
    return Refuse("penalty_last_n", c.penalty_last_n,
                  "it must be >= -1 (-1 means the whole history, 0 means off)");
  }
  return absl::OkStatus();
}

}  // namespace llm
