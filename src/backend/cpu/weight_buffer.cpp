#include "backend/cpu/weight_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "backend/cpu/thread_pool.h"

namespace llm {
namespace {

// The x86-64 transparent huge page size.
constexpr size_t kHugePage = size_t{2} << 20;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t PageSize() {
  const long page_size = ::sysconf(_SC_PAGESIZE);
  return page_size > 0 ? static_cast<size_t>(page_size) : 4096;
}

}  // namespace

void WeightBufferUnmap::operator()(uint8_t* p) const {
  // A slab's share: the slab goes with its last holder (slab's deleter).
  if (p != nullptr && slab == nullptr) ::munmap(p, length);
}

WeightBuffer WeightArena::Allocate(size_t bytes) {
  if (bytes == 0 || bytes >= kHugePage) throw std::bad_alloc();
  const size_t length = RoundUp(bytes, PageSize());
  std::lock_guard<std::mutex> lock(mu_);
  if (slab_ == nullptr || used_ + length > kSlabBytes) {
    WeightBuffer slab = AllocateWeightBuffer(kSlabBytes);  // 2 MiB-aligned, advised
    const size_t slab_length = slab.data.get_deleter().length;
    slab_ = std::shared_ptr<uint8_t>(slab.data.release(), WeightBufferUnmap{slab_length, {}});
    used_ = 0;
  }
  WeightBuffer buf;
  buf.data =
      std::unique_ptr<uint8_t, WeightBufferUnmap>(slab_.get() + used_, WeightBufferUnmap{0, slab_});
  buf.bytes = bytes;
  used_ += length;
  return buf;
}

WeightBuffer AllocateWeightBuffer(size_t bytes, WeightArena* arena) {
  if (arena != nullptr && bytes > 0 && bytes < kHugePage) return arena->Allocate(bytes);
  const size_t page = PageSize();
  if (bytes == 0 || bytes > SIZE_MAX - 2 * kHugePage) throw std::bad_alloc();
  const size_t length = RoundUp(bytes, page);
  // A huge page needs a 2 MiB-aligned virtual range: map 2 MiB more than
  // needed and unmap the unaligned head and the rest of the tail, so no
  // memory is held beyond `length`. Buffers under 2 MiB cannot hold a huge
  // page: mapped as they are.
  const size_t slack = bytes >= kHugePage ? kHugePage : 0;
  void* raw =
      ::mmap(nullptr, length + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  uint8_t* p = static_cast<uint8_t*>(raw);
  if (slack > 0) {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
    uint8_t* aligned = reinterpret_cast<uint8_t*>(RoundUp(addr, kHugePage));
    const size_t head = static_cast<size_t>(aligned - p);
    if (head > 0) ::munmap(p, head);
    const size_t tail = slack - head;
    if (tail > 0) ::munmap(aligned + length, tail);
    p = aligned;
    // Advice only: a host without THP (or with it off) keeps 4 KiB pages.
    (void)::madvise(p, length, MADV_HUGEPAGE);
  }
  WeightBuffer buf;
  buf.data = std::unique_ptr<uint8_t, WeightBufferUnmap>(p, WeightBufferUnmap{length, {}});
  buf.bytes = bytes;
  return buf;
}

WeightBuffer CopyToWeightBuffer(const uint8_t* src, size_t n, ThreadPool* pool,
                                WeightArena* arena) {
  WeightBuffer buf = AllocateWeightBuffer(n, arena);
  uint8_t* dst = buf.data.get();
  const int64_t pieces = static_cast<int64_t>((n + kHugePage - 1) / kHugePage);
  auto copy = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const size_t off = static_cast<size_t>(i) * kHugePage;
      std::memcpy(dst + off, src + off, std::min(kHugePage, n - off));
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(pieces, copy, 4);
  } else {
    copy(0, pieces);
  }
  return buf;
}

}  // namespace llm
