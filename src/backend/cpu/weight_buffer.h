// Memory for the CPU backend's copies of weights (rows16 layouts, or GGUF
// rows copied as they are): anonymous pages, the span 2 MiB-aligned and
// advised for transparent huge pages (madvise MADV_HUGEPAGE; honoured when
// the host's THP setting is "always" or "madvise", ignored otherwise).
//
// Why: one decode token streams every weight byte from memory once. Read
// from the file mapping (4 KiB page-cache pages, each a TLB entry and a
// boundary the hardware prefetcher stops at) the 1B Q4_K_M decode ran 20-25 %
// slower than from an anonymous copy with huge pages (docs/CPU_KERNELS.md,
// "Plain copies for every other matrix"). The copy replaces the mapped rows
// in memory: the caller releases them once the copy is made
// (rows16::ReleaseMappedPages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace llm {

class ThreadPool;

// Unmaps a WeightBuffer's memory: its own mapping, or (a buffer carved from
// a WeightArena's slab) its share of the slab, which is unmapped with the
// last buffer and the arena that hold it.
struct WeightBufferUnmap {
  size_t length = 0;  // the mapping's length (bytes rounded up to pages); 0 in a slab
  std::shared_ptr<uint8_t> slab;
  void operator()(uint8_t* p) const;
};

struct WeightBuffer {
  std::unique_ptr<uint8_t, WeightBufferUnmap> data;  // 2 MiB-aligned when bytes >= 2 MiB
  size_t bytes = 0;
};

// Buffers under 2 MiB cannot hold a huge page of their own, and most
// matrices of a small model are that small (SmolLM2-135M's are 0.1-0.5 MB
// each, ~80 MB in all): on 4 KiB pages a decode token took ~20k TLB misses.
// An arena carves such buffers out of shared slabs of kSlabBytes,
// 2 MiB-aligned and advised for huge pages, one after the other
// (page-aligned). Slab memory is never reused within the arena; a slab is
// unmapped once the arena and every buffer carved from it are gone. Extra
// memory: at most the unused part of each slab's last huge page (< 2 MiB
// per slab) becomes resident. Thread-safe.
class WeightArena {
 public:
  static constexpr size_t kSlabBytes = size_t{32} << 20;
  // A buffer of bytes (0 < bytes < 2 MiB); throws std::bad_alloc when the
  // system refuses a new slab.
  WeightBuffer Allocate(size_t bytes);

 private:
  std::mutex mu_;
  std::shared_ptr<uint8_t> slab_;  // the slab being filled
  size_t used_ = 0;
};

// An uninitialised buffer of `bytes` (> 0) bytes: from arena (nullable) when
// smaller than 2 MiB, else a mapping of its own. Throws std::bad_alloc when
// the system refuses the memory.
WeightBuffer AllocateWeightBuffer(size_t bytes, WeightArena* arena = nullptr);

// A buffer holding a copy of src[0, n) (n > 0), copied in parallel on pool
// (nullable) in 2 MiB pieces, each piece's pages first touched by the thread
// that copies it; allocated as AllocateWeightBuffer does.
WeightBuffer CopyToWeightBuffer(const uint8_t* src, size_t n, ThreadPool* pool,
                                WeightArena* arena = nullptr);

}  // namespace llm
