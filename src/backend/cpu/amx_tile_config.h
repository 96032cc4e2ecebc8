// The 64-byte tile configuration that ldtilecfg reads (palette 1: up to 8
// tiles of at most 16 rows x 64 bytes), shared by the AMX kernels
// (quant_matmul_amx.cpp, kquant_amx.cpp), which fill rows / colsb for the
// tiles they use and load it with _tile_loadconfig. Unused tiles stay 0.
#pragma once

#include <cstdint>

namespace llm {

struct alignas(64) AmxTileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of tile t
  uint8_t rows[16] = {};    // rows of tile t
};
static_assert(sizeof(AmxTileConfig) == 64, "ldtilecfg reads 64 bytes");

}  // namespace llm
