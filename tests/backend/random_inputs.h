// Seeded random test inputs, never zero: float vectors and GGUF weight
// blocks with sane scales. Device-neutral (no backend types), so the CPU
// kernel tests and the backend contract suite share them.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"

namespace llm {
namespace testing_util {

// A fresh seed per call (printed by the tests through SCOPED_TRACE).
inline uint32_t FreshSeed() { return std::random_device{}(); }

// Uniform in +-[lo, hi] with a random sign: never zero.
inline float NonZero(std::mt19937& rng, float lo = 0.05f, float hi = 1.0f) {
  std::uniform_real_distribution<float> mag(lo, hi);
  return (rng() & 1) ? mag(rng) : -mag(rng);
}

inline std::vector<float> RandomVector(std::mt19937& rng, size_t n, float lo = 0.05f,
                                       float hi = 1.0f) {
  std::vector<float> v(n);
  for (float& f : v) f = NonZero(rng, lo, hi);
  return v;
}

inline void PutF16(void* dst, float f) {
  const uint16_t h = F32ToF16(f);
  std::memcpy(dst, &h, 2);
}

// n_out rows of n_in elements of `type`, each row_bytes long (row_bytes >=
// RowBytes; padding bytes are random too). Quant bytes are random, scales are
// small positive/negative f16 so that no value is inf/NaN.
inline std::vector<uint8_t> RandomWeights(std::mt19937& rng, DType type, int64_t n_out,
                                          int64_t n_in, size_t row_bytes) {
  std::vector<uint8_t> w(static_cast<size_t>(n_out) * row_bytes);
  for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  for (int64_t o = 0; o < n_out; ++o) {
    uint8_t* row = w.data() + o * row_bytes;
    switch (type) {
      case DType::kF32:
        for (int64_t i = 0; i < n_in; ++i) {
          const float f = NonZero(rng);
          std::memcpy(row + 4 * i, &f, 4);
        }
        break;
      case DType::kF16:
        for (int64_t i = 0; i < n_in; ++i) PutF16(row + 2 * i, NonZero(rng));
        break;
      case DType::kBF16:
        for (int64_t i = 0; i < n_in; ++i) {
          const uint16_t h = F32ToBF16(NonZero(rng));
          std::memcpy(row + 2 * i, &h, 2);
        }
        break;
      case DType::kQ8_0:
        for (int64_t b = 0; b < n_in / 32; ++b) PutF16(row + b * 34, NonZero(rng, 0.002f, 0.05f));
        break;
      case DType::kQ4_0:
        for (int64_t b = 0; b < n_in / 32; ++b) PutF16(row + b * 18, NonZero(rng, 0.002f, 0.05f));
        break;
      case DType::kQ4_1:
        for (int64_t b = 0; b < n_in / 32; ++b) {
          PutF16(row + b * 20, scale(rng));
          PutF16(row + b * 20 + 2, NonZero(rng, 0.01f, 0.3f));
        }
        break;
      case DType::kQ4_K:
        for (int64_t b = 0; b < n_in / 256; ++b) {
          PutF16(row + b * 144, scale(rng) * 0.1f);
          PutF16(row + b * 144 + 2, scale(rng) * 0.1f);
        }
        break;
      case DType::kQ6_K:
        for (int64_t b = 0; b < n_in / 256; ++b) PutF16(row + b * 210 + 208, scale(rng) * 0.1f);
        break;
      case DType::kQ5_0:
        for (int64_t b = 0; b < n_in / 32; ++b) PutF16(row + b * 22, NonZero(rng, 0.002f, 0.05f));
        break;
      case DType::kQ5_1:
        for (int64_t b = 0; b < n_in / 32; ++b) {
          PutF16(row + b * 24, scale(rng));
          PutF16(row + b * 24 + 2, NonZero(rng, 0.01f, 0.3f));
        }
        break;
      case DType::kIQ4_NL:
        for (int64_t b = 0; b < n_in / 32; ++b) PutF16(row + b * 18, NonZero(rng, 0.0002f, 0.005f));
        break;
      case DType::kQ2_K:  // d, dmin are the last 4 bytes
        for (int64_t b = 0; b < n_in / 256; ++b) {
          PutF16(row + b * 84 + 80, scale(rng) * 0.1f);
          PutF16(row + b * 84 + 82, scale(rng) * 0.1f);
        }
        break;
      case DType::kQ3_K:
        for (int64_t b = 0; b < n_in / 256; ++b) PutF16(row + b * 110 + 108, scale(rng) * 0.1f);
        break;
      case DType::kQ5_K:
        for (int64_t b = 0; b < n_in / 256; ++b) {
          PutF16(row + b * 176, scale(rng) * 0.1f);
          PutF16(row + b * 176 + 2, scale(rng) * 0.1f);
        }
        break;
      case DType::kIQ4_XS:
        for (int64_t b = 0; b < n_in / 256; ++b) PutF16(row + b * 136, scale(rng) * 0.01f);
        break;
      default:
        break;
    }
  }
  return w;
}

}  // namespace testing_util
}  // namespace llm
