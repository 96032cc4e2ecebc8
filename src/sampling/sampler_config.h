// Sampler settings (mirrors llm_sampler_params in include/llm/llm.h).
#pragma once

#include <cstdint>

#include "absl/status/status.h"

namespace llm {

struct SamplerConfig {
  float temperature = 0.8f;        // <= 0: greedy argmax (ties -> lowest id)
  int32_t top_k = 40;              // <= 0: off
  float top_p = 0.95f;             // >= 1: off; 0 keeps only the most likely token
  float min_p = 0.05f;             // 0: off; keep tokens with p >= min_p * p_max
  float repeat_penalty = 1.0f;     // 1: off; > 1 discourages repeats
  float presence_penalty = 0.0f;   // 0: off; subtracted once from seen tokens
  float frequency_penalty = 0.0f;  // 0: off; subtracted per occurrence
  int32_t penalty_last_n = 64;     // history tokens the penalties look at; 0: off, -1: all
};

// Refuses (LLM_ERR_INVALID_ARGUMENT, the message names the field):
//  temperature: NaN or infinite (negative is allowed: greedy, as the ABI says);
//  top_p: NaN, infinite or < 0 (> 1 is allowed: off);
//  min_p: NaN, < 0 or > 1;
//  repeat_penalty: NaN, infinite or <= 0 (it divides logits);
//  presence_penalty, frequency_penalty: NaN or infinite (negative encourages);
//  penalty_last_n: < -1.
// top_k accepts every value (<= 0: off).
absl::Status ValidateSamplerConfig(const SamplerConfig& config);

}  // namespace llm
