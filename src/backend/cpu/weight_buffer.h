// Memory for the CPU backend's copies of weights (rows16 layouts, or GGUF
// rows copied as they are): anonymous pages, the span 2 MiB-aligned and
// advised for transparent huge pages (madvise MADV_HUGEPAGE; honoured when
// the host's THP setting is "always" or "madvise", ignored otherwise).
//
// Why: one decode token streams every weight byte from memory once. Read
// from the file mapping (4 KiB page-cache pages, each a TLB entry and a
// boundary the hardware prefetcher stops at) the 1B Q4_K_M decode ran 20-25 %
// slower than from an anonymous copy with huge pages (docs/CPU_KERNELS.md,
// "Weight copies"). The copy replaces the mapped rows in memory: the caller
// releases them once the copy is made (rows16::ReleaseMappedPages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace llm {

class ThreadPool;

// Unmaps a WeightBuffer's memory.
struct WeightBufferUnmap {
  size_t length = 0;  // the mapping's length (bytes rounded up to pages)
  void operator()(uint8_t* p) const;
};

struct WeightBuffer {
  std::unique_ptr<uint8_t, WeightBufferUnmap> data;  // 2 MiB-aligned when bytes >= 2 MiB
  size_t bytes = 0;
};

// An uninitialised buffer of `bytes` (> 0) bytes; throws std::bad_alloc when
// the system refuses the memory.
WeightBuffer AllocateWeightBuffer(size_t bytes);

// A buffer holding a copy of src[0, n) (n > 0), copied in parallel on pool
// (nullable) in 2 MiB pieces, each piece's pages first touched by the thread
// that copies it.
WeightBuffer CopyToWeightBuffer(const uint8_t* src, size_t n, ThreadPool* pool);

}  // namespace llm
