// Weights repacked at load for the AVX-512 QuantMatMul kernels ("rows16"):
// Q4_0, Q4_1, Q5_0, Q8_0, Q4_K and Q6_K matrices with 16 weight rows interleaved per 32-bit
// lane, the layout the kernels' vpdpbusd wants, so that no call rearranges
// the GGUF blocks (the batch kernel used to, per call; the one-row kernel read
// one row at a time). Same bytes per row as the GGUF blocks: the copy is as
// large as the matrix (plus at most 15 padding rows).
//
// Layout, for n_out rows of nb = n_in / 32 blocks (K-quants: n_in / 256), in groups of 16 rows
// (group G holds rows 16G .. 16G + 15; rows past n_out repeat row n_out - 1,
// computed but never stored). Group G starts at G * GroupBytes and holds
//   qs [nb][kWords][16] u32   word k of lane l: bytes 4k .. 4k + 3 of row
//                             16G + l's block quants (Q4: byte j = element j
//                             in the low nibble, j + 16 in the high one;
//                             Q8_0: the int8 quants XOR 0x80, i.e. w + 128;
//                             Q5_0: word 0 holds the fifth bits, byte j
//                             of it element 4k + j's at bit k and element
//                             16 + 4k + j's at bit 4 + k (k = 0..3), so
//                             that word k + 1's nibbles find theirs with
//                             one shift; words 1..4 as Q4's words 0..3)
//                             Q4_K: words 0..2 the block's 12 bytes of 6-bit
//                             scales and mins as stored, words 3..34 its
//                             qs (byte j of word 3 + 8c + i: element 64c +
//                             4i + j in the low nibble, + 32 in the high)
//                             Q6_K: GGUF words 0..31 ql, 32..47 qh,
//                             48..51 the 16 int8 scales, in the order
//                             WordSlot gives (the order its one-row
//                             kernel reads them)
//                             kWords = 4 (Q4_0, Q4_1), 5 (Q5_0), 8 (Q8_0),
//                             35 (Q4_K) or 52 (Q6_K)
//   sc [nb][kScales][16] u16  the blocks' f16 d (and, for Q4_1, then m;
//                             for Q4_K, then dmin; Q6_K's d is the
//                             block's last field)
// So a group is 16 * row_bytes bytes, and its quants and scales are each read
// front to back, one block at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/cpu/weight_buffer.h"
#include "core/dtype.h"

namespace llm {

class ThreadPool;

namespace rows16 {

constexpr int kRows = 16;

// Whether t has a rows16 layout (Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q6_K).
bool Supports(DType t);
// Elements per block of t (32; Q4_K and Q6_K 256).
int BlockElements(DType t);
// 32-bit quant words per block and lane (4, 5, 8, 35 or 52), f16 scales per
// block and lane (1 or 2).
// (constexpr, as GroupBytes / ChunkOfGroup's copy path below, so that the
// batch kernels' per-chunk address arithmetic folds: out of line it was ~5
// % of a 16-session SmolLM2-shape Q4_0 step.) 0 for other types.
constexpr int Words(DType t) {
  switch (t) {
    case DType::kQ4_0:
    case DType::kQ4_1:
      return 4;
    case DType::kQ5_0:
      return 5;
    case DType::kQ8_0:
      return 8;
    case DType::kQ4_K:
      return 35;
    case DType::kQ6_K:
      return 52;
    default:
      return 0;
  }
}
constexpr int Scales(DType t) {
  return t == DType::kQ4_1 || t == DType::kQ4_K ? 2 : Words(t) != 0 ? 1 : 0;
}

// The slot (0 .. Words - 1) that a block's GGUF quant word k (4 bytes at
// 4k from the quants' start) takes in the copy. Q6_K's words are stored in
// the order its one-row kernel reads them: the 4 scale words (48..51),
// then for each half h = 0, 1 and i = 0..7 the words ql 16h + i, ql 16h +
// 8 + i and qh 32 + 8h + i, which that kernel combines into 4 code words.
// So a decode reads each block front to back: the hardware prefetchers
// follow ascending streams, and in GGUF order (three interleaved streams
// per block) one row from memory ran ~0.9x of the GGUF-row kernel
// (without software prefetches 13 GB/s, GGUF rows ~29). Other types:
// slot k.
constexpr int WordSlot(DType t, int k) {
  if (t != DType::kQ6_K) return k;
  if (k >= 48) return k - 48;                                             // scales
  if (k >= 32) return 4 + 24 * ((k - 32) / 8) + 3 * ((k - 32) % 8) + 2;  // qh
  return 4 + 24 * (k / 16) + 3 * (k % 8) + (k % 16) / 8;                  // ql
}
// Bytes of one block of a group: its 16 rows' words and scales.
constexpr size_t BlockShareBytes(DType t) { return kRows * (4 * Words(t) + 2 * Scales(t)); }
// Bytes of one group of 16 rows of nb blocks.
inline size_t GroupBytes(DType t, int64_t n_blocks) {
  return static_cast<size_t>(n_blocks) * BlockShareBytes(t);
}

// Decode prefetch over a rows16 copy: the copy's groups are contiguous, so
// its bytes are one stream in which block b of the group at `group` owns
// BlockShareBytes (its words and scales); this prefetches into L2 the lines
// of that share `ahead` bytes further on. Consecutive blocks and groups
// cover the stream without gaps. (Prefetching b * Words * 64 bytes past
// the group's quants, as the kernels did, never touched the scales' share
// of each group: 1/9 of a Q4_0 copy left to the hardware prefetcher.)
// Internal linkage: the ISA-flagged kernel files include it.
static inline void PrefetchBlockShare(const uint8_t* group, int64_t b, size_t share,
                                      int64_t ahead) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(group) + static_cast<uintptr_t>(b) * share +
                          static_cast<uintptr_t>(ahead);
  for (uintptr_t line = begin & ~uintptr_t{63}; line < begin + share; line += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 2);
  }
}

// Bytes of a packed n_out x n_in matrix (n_in a multiple of the block).
size_t PackedBytes(DType t, int64_t n_out, int64_t n_in);

// Writes the rows16 layout of the n_out x n_in matrix W (row o at W + o *
// row_bytes) into dst (PackedBytes(t, n_out, n_in) bytes, 64-byte aligned for
// the kernels' sake). Groups are packed in parallel on pool (nullable), with
// AVX-512 gathers when that level is active, else word by word (same bytes).
void Pack(DType t, const uint8_t* W, size_t row_bytes, int64_t n_out, int64_t n_in, uint8_t* dst,
          ThreadPool* pool);

// One group: rows are its 16 source rows (GGUF blocks, each pointing at the
// first block to pack), n_blocks blocks of each go to qs (n_blocks * Words
// * 64 bytes) and sc (n_blocks * Scales * 32 bytes), the group's layout
// above for those blocks. Pack() runs this per group; a kernel can run it on
// a chunk of blocks of unpacked weights.
void PackGroup(DType t, const uint8_t* const rows[kRows], int64_t n_blocks, uint8_t* qs,
               uint8_t* sc);
// Bytes of one GGUF block of t (a supported type).
size_t BlockBytes(DType t);

// Blocks [b0, b0 + len) of the group of rows o .. o + 15 of an n_out x
// (nb blocks) matrix, as rows16 words and scales, for kernels that run a
// group chunk by chunk: from W itself when it is the rows16 copy (packed),
// else packed from the GGUF rows (row r at W + r * row_bytes; rows past
// o_end repeat the last) into qs_buf / sc_buf (len * Words * 64 and len *
// Scales * 32 bytes), which then hold them.
struct GroupChunk {
  const uint8_t* qs;
  const uint8_t* sc;
};
// (GGUF rows: packed out of line. A copy: address arithmetic, inline so
// that it folds in the kernels, which ask once per chunk.)
GroupChunk PackChunkOfGroup(DType t, const void* W, size_t row_bytes, int64_t o, int64_t o_end,
                            int64_t b0, int64_t len, uint8_t* qs_buf, uint8_t* sc_buf);
inline GroupChunk ChunkOfGroup(DType t, const void* W, bool packed, size_t row_bytes, int64_t o,
                               int64_t o_end, int64_t nb, int64_t b0, int64_t len,
                               uint8_t* qs_buf, uint8_t* sc_buf) {
  if (!packed) return PackChunkOfGroup(t, W, row_bytes, o, o_end, b0, len, qs_buf, sc_buf);
  const uint8_t* group = static_cast<const uint8_t*>(W) + (o / kRows) * GroupBytes(t, nb);
  return {group + static_cast<size_t>(b0) * Words(t) * 64,
          group + static_cast<size_t>(nb) * kRows * 4 * Words(t) +
              static_cast<size_t>(b0) * Scales(t) * kRows * 2};
}

// The inverse of PackGroup for blocks [b0, b0 + len) of the group of rows
// o .. o + 15 (o a multiple of 16) of a packed copy of nb blocks per row:
// the 16 rows' GGUF blocks, row l at dst + l * len * BlockBytes(t) (rows
// past the matrix's end repeat its last row, as packed). For kernels that
// want GGUF rows of a matrix that only has its copy (not Q5_0, whose high
// bits are rearranged when packed).
void UnpackGroup(DType t, const uint8_t* packed, int64_t nb, int64_t o, int64_t b0, int64_t len,
                 uint8_t* dst);

// For prefetching: in a rows16 copy W walked group by group (rows o ..
// o + 15, up to o_end) and each group's nb blocks chunk by chunk (up to
// chunk_blocks), the chunk after blocks [b0, b0 + len) of group o -- the
// next group's first after a group's last. len 0 (and null pointers) when
// that would lie past o_end.
struct NextChunk {
  GroupChunk at{nullptr, nullptr};
  int64_t len = 0;
};
inline NextChunk NextChunkOfGroup(DType t, const void* W, int64_t o, int64_t o_end, int64_t nb,
                                  int64_t b0, int64_t len, int64_t chunk_blocks) {
  const bool next_group = b0 + len >= nb;
  const int64_t next_o = next_group ? o + kRows : o;
  if (next_o >= o_end) return NextChunk{};
  const int64_t next_b0 = next_group ? 0 : b0 + len;
  const int64_t next_len = chunk_blocks < nb - next_b0 ? chunk_blocks : nb - next_b0;
  NextChunk next;
  next.at = ChunkOfGroup(t, W, /*packed=*/true, 0, next_o, o_end, nb, next_b0, next_len, nullptr,
                         nullptr);
  next.len = next_len;
  return next;
}

// The AVX-512 packing loop for one group (packed_weight_avx512.cpp): rows
// are the group's 16 source rows, qs / sc where its quants and scales go.
// false (nothing written) when the rows lie too far apart for 32-bit gather
// indices; the caller then packs the group word by word.
bool PackGroupAvx512(DType t, const uint8_t* const rows[kRows], int64_t n_blocks, size_t block_bytes,
                     size_t qs_offset, int words, size_t sc_offset, int scales, uint8_t flip,
                     uint8_t* qs, uint8_t* sc);

// The AVX-512 loop of UnpackGroup (types without a flip): group_qs /
// group_sc the group's words and scales, blocks [b0, b0 + len) to dst.
void UnpackGroupAvx512(DType t, const uint8_t* group_qs, const uint8_t* group_sc, int64_t b0, int64_t len,
                       size_t block_bytes, size_t qs_offset, int words, size_t sc_offset,
                       int scales, uint8_t* dst);

// A packed copy owned by the CPU backend (weight_buffer.h: page-aligned,
// huge pages where the host grants them).
using PackedBuffer = WeightBuffer;
// Allocates (from arena, nullable, when under 2 MiB: weight_buffer.h) and
// packs; throws std::bad_alloc when memory is short.
PackedBuffer MakePacked(DType t, const uint8_t* W, size_t row_bytes, int64_t n_out, int64_t n_in,
                        ThreadPool* pool, WeightArena* arena = nullptr);

// Once a matrix has its copy, the mapped pages it was read from only cost
// resident memory: drops the whole pages of [p, p + n) from this process's
// page tables (madvise MADV_DONTNEED) when they lie in a private, read-only
// mapping of a file (per /proc/self/maps), where a later read just faults
// the bytes back in from the page cache. Anything else (a model loaded from
// memory lives in anonymous memory, which MADV_DONTNEED would zero) is left
// alone. Returns the bytes released.
size_t ReleaseMappedPages(const uint8_t* p, size_t n);

}  // namespace rows16
}  // namespace llm
