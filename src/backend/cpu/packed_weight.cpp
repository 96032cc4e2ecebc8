#include "backend/cpu/packed_weight.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/quant_blocks.h"
#include "backend/cpu/thread_pool.h"

namespace llm {
namespace rows16 {
namespace {

struct TypeInfo {
  size_t block_bytes;  // GGUF block
  size_t qs_offset;    // quants after d (and Q4_1's m)
  int words;           // 32-bit quant words per block
  int scales;          // f16 scales per block
  uint8_t flip;        // XOR applied to every quant byte
  int block_elems = 32;  // elements per block
  size_t sc_offset = 0;  // the f16 scales' offset in the block
};

TypeInfo Info(DType t) {
  switch (t) {
    case DType::kQ4_0:
      return {sizeof(BlockQ4_0), 2, Words(t), Scales(t), 0};
    case DType::kQ4_1:
      return {sizeof(BlockQ4_1), 4, Words(t), Scales(t), 0};
    case DType::kQ8_0:
      return {sizeof(BlockQ8_0), 2, Words(t), Scales(t), 0x80};
    case DType::kQ5_0:  // word 0: qh (then SpreadQ5HighBits), words 1..4: qs
      return {sizeof(BlockQ5_0), 2, Words(t), Scales(t), 0};
    case DType::kQ4_K:  // words 0..2: the 12 scale bytes, 3..34: qs; scales d, dmin
      return {sizeof(BlockQ4_K), 4, Words(t), Scales(t), 0, 256};
    case DType::kQ6_K:  // words 0..31: ql, 32..47: qh, 48..51: the int8 scales; d last
      return {sizeof(BlockQ6_K), 0, Words(t), Scales(t), 0, 256, offsetof(BlockQ6_K, d)};
    default:
      return {0, 0, 0, 0, 0};
  }
}

// Q5_0's word 0 of every block and lane: qh (bit e = element e's fifth bit)
// rearranged so that byte j holds, at bit k, the bit of element 4k + j and,
// at bit 4 + k, that of element 16 + 4k + j (packed_weight.h).
void SpreadQ5HighBits(uint8_t* group_qs, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* word0 = group_qs + static_cast<size_t>(b) * 5 * kRows * 4;
    for (int l = 0; l < kRows; ++l) {
      uint32_t qh;
      std::memcpy(&qh, word0 + 4 * l, 4);
      uint32_t spread = 0;
      for (int j = 0; j < 4; ++j) {
        for (int k = 0; k < 4; ++k) {
          spread |= ((qh >> (4 * k + j)) & 1u) << (8 * j + k);
          spread |= ((qh >> (16 + 4 * k + j)) & 1u) << (8 * j + 4 + k);
        }
      }
      std::memcpy(word0 + 4 * l, &spread, 4);
    }
  }
}

}  // namespace

bool Supports(DType t) { return Info(t).block_bytes != 0; }
int BlockElements(DType t) { return Info(t).block_elems; }
size_t PackedBytes(DType t, int64_t n_out, int64_t n_in) {
  const int64_t n_groups = (n_out + kRows - 1) / kRows;
  return static_cast<size_t>(n_groups) * GroupBytes(t, n_in / Info(t).block_elems);
}

void PackGroup(DType t, const uint8_t* const rows[kRows], int64_t n_blocks, uint8_t* qs,
               uint8_t* sc) {
  const TypeInfo ti = Info(t);
  // Word by word, in the copy's order: for each block, its quant words for
  // the 16 lanes, then its scales. The 16 source rows are 16 sequential read
  // streams and the group is written front to back (a byte loop over the
  // rows, writing with a 64-byte stride, made a 1B model's load 8x slower).
  const uint32_t flip = ti.flip * 0x01010101u;
  uint8_t* const group_qs = qs;
  const bool packed = ActiveSimdLevel() == SimdLevel::kAvx512 &&
                      PackGroupAvx512(t, rows, n_blocks, ti.block_bytes, ti.qs_offset, ti.words,
                                      ti.sc_offset, ti.scales, ti.flip, qs, sc);
  for (int64_t b = 0; !packed && b < n_blocks; ++b) {
    const size_t blk = static_cast<size_t>(b) * ti.block_bytes;
    for (int k = 0; k < ti.words; ++k) {
      uint32_t words[kRows];
      for (int l = 0; l < kRows; ++l) {
        std::memcpy(&words[l], rows[l] + blk + ti.qs_offset + 4 * k, 4);
        words[l] ^= flip;
      }
      std::memcpy(qs + WordSlot(t, k) * sizeof words, words, sizeof words);
    }
    qs += ti.words * sizeof(uint32_t[kRows]);
    // d (and m) as stored: f16 bits, in block order d, m.
    for (int s = 0; s < ti.scales; ++s) {
      uint16_t halves[kRows];
      for (int l = 0; l < kRows; ++l) {
        std::memcpy(&halves[l], rows[l] + blk + ti.sc_offset + 2 * s, 2);
      }
      std::memcpy(sc, halves, sizeof halves);
      sc += sizeof halves;
    }
  }
  if (t == DType::kQ5_0) SpreadQ5HighBits(group_qs, n_blocks);
}

size_t BlockBytes(DType t) { return Info(t).block_bytes; }

GroupChunk PackChunkOfGroup(DType t, const void* W, size_t row_bytes, int64_t o, int64_t o_end,
                            int64_t b0, int64_t len, uint8_t* qs_buf, uint8_t* sc_buf) {
  const size_t block_bytes = Info(t).block_bytes;
  const uint8_t* rows[kRows];
  for (int l = 0; l < kRows; ++l) {
    const int64_t row = std::min(o + l, o_end - 1);
    rows[l] = static_cast<const uint8_t*>(W) + row * row_bytes + b0 * block_bytes;
  }
  PackGroup(t, rows, len, qs_buf, sc_buf);
  return {qs_buf, sc_buf};
}

void UnpackGroup(DType t, const uint8_t* packed, int64_t nb, int64_t o, int64_t b0, int64_t len,
                 uint8_t* dst) {
  const TypeInfo ti = Info(t);
  const uint8_t* group = packed + (o / kRows) * GroupBytes(t, nb);
  const uint8_t* sc = group + static_cast<size_t>(nb) * kRows * 4 * ti.words;
  if (ActiveSimdLevel() == SimdLevel::kAvx512 && ti.flip == 0) {
    UnpackGroupAvx512(t, group, sc, b0, len, ti.block_bytes, ti.qs_offset, ti.words, ti.sc_offset,
                      ti.scales, dst);
    return;
  }
  const uint32_t flip = ti.flip * 0x01010101u;
  for (int64_t b = b0; b < b0 + len; ++b) {
    for (int l = 0; l < kRows; ++l) {
      uint8_t* blk = dst + (l * len + (b - b0)) * ti.block_bytes;
      for (int k = 0; k < ti.words; ++k) {
        uint32_t word;
        std::memcpy(&word, group + ((b * ti.words + WordSlot(t, k)) * kRows + l) * 4, 4);
        word ^= flip;
        std::memcpy(blk + ti.qs_offset + 4 * k, &word, 4);
      }
      for (int s = 0; s < ti.scales; ++s) {
        std::memcpy(blk + ti.sc_offset + 2 * s, sc + ((b * ti.scales + s) * kRows + l) * 2, 2);
      }
    }
  }
}

void Pack(DType t, const uint8_t* W, size_t row_bytes, int64_t n_out, int64_t n_in, uint8_t* dst,
          ThreadPool* pool) {
  const int64_t nb = n_in / Info(t).block_elems;
  const int64_t n_groups = (n_out + kRows - 1) / kRows;
  const size_t group_bytes = GroupBytes(t, nb);
  const size_t qs_bytes = static_cast<size_t>(nb) * kRows * 4 * Words(t);
  auto pack_groups = [&](int64_t g_begin, int64_t g_end) {
    const uint8_t* rows[kRows];
    for (int64_t g = g_begin; g < g_end; ++g) {
      for (int l = 0; l < kRows; ++l) {
        const int64_t row = g * kRows + l < n_out ? g * kRows + l : n_out - 1;
        rows[l] = W + row * row_bytes;
      }
      uint8_t* qs = dst + g * group_bytes;
      PackGroup(t, rows, nb, qs, qs + qs_bytes);
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(n_groups, pack_groups, 4);
  } else {
    pack_groups(0, n_groups);
  }
}

PackedBuffer MakePacked(DType t, const uint8_t* W, size_t row_bytes, int64_t n_out, int64_t n_in,
                        ThreadPool* pool, WeightArena* arena) {
  PackedBuffer buf = AllocateWeightBuffer(PackedBytes(t, n_out, n_in), arena);
  Pack(t, W, row_bytes, n_out, n_in, buf.data.get(), pool);
  return buf;
}

size_t ReleaseMappedPages(const uint8_t* p, size_t n) {
  const long page_size = sysconf(_SC_PAGESIZE);
  if (p == nullptr || page_size <= 0) return 0;
  const uintptr_t page = static_cast<uintptr_t>(page_size);
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (begin >= end) return 0;
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return 0;
  bool file_backed = false;
  char line[512];
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    // "start-end perms offset dev inode path"
    uintptr_t lo = 0, hi = 0;
    char perms[5] = {0};
    unsigned long long offset = 0, inode = 0;
    char dev[32] = {0};
    if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %llx %31s %llu", &lo, &hi, perms, &offset,
                    dev, &inode) != 6) {
      continue;
    }
    if (begin >= lo && end <= hi) {
      file_backed = inode != 0 && std::strcmp(perms, "r--p") == 0;
      break;
    }
  }
  std::fclose(maps);
  if (!file_backed) return 0;
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) != 0) return 0;
  return end - begin;
}

}  // namespace rows16
}  // namespace llm
