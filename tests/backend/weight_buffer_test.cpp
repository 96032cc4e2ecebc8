// The CPU backend's weight-copy memory (weight_buffer.h): a copy holds the
// source's bytes exactly for odd sizes, with and without a thread pool;
// buffers of 2 MiB or more start on a 2 MiB boundary (a huge page needs
// one); what a buffer unmaps is exactly its pages; a size of 0 is refused;
// an arena's small buffers are page-aligned and disjoint, and keep their
// slab mapped after the arena is gone.
#include "backend/cpu/weight_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <random>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "gtest/gtest.h"

namespace llm {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(WeightBufferTest, CopyHoldsTheSourceBytes) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (size_t n : {size_t{1}, size_t{4097}, 2 * kMiB - 3, 2 * kMiB, 5 * kMiB + 123}) {
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      SCOPED_TRACE(testing::Message() << n << " bytes, " << (p ? "pool" : "no pool"));
      const std::vector<uint8_t> src = RandomBytes(n, seed++);
      const WeightBuffer buf = CopyToWeightBuffer(src.data(), n, p);
      ASSERT_NE(buf.data, nullptr);
      EXPECT_EQ(buf.bytes, n);
      EXPECT_EQ(std::memcmp(buf.data.get(), src.data(), n), 0);
    }
  }
}

TEST(WeightBufferTest, LargeBuffersAreHugePageAlignedAndWritable) {
  for (size_t n : {2 * kMiB, 7 * kMiB + 5}) {
    WeightBuffer buf = AllocateWeightBuffer(n);
    ASSERT_NE(buf.data, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data.get()) % (2 * kMiB), 0u) << n;
    std::memset(buf.data.get(), 0x5A, n);  // every byte is ours
    EXPECT_EQ(buf.data.get()[n - 1], 0x5A);
  }
}

// What the buffer unmaps is its own pages: the bytes rounded up to whole
// pages (the over-allocation's head and tail went back at allocation).
TEST(WeightBufferTest, UnmapsExactlyItsPages) {
  const long page = sysconf(_SC_PAGESIZE);
  ASSERT_GT(page, 0);
  for (size_t n : {size_t{100}, 3 * kMiB + 1}) {
    WeightBuffer buf = AllocateWeightBuffer(n);
    const size_t pages = (n + page - 1) / page * page;
    EXPECT_EQ(buf.data.get_deleter().length, pages) << n;
    std::vector<unsigned char> resident(pages / page);
    EXPECT_EQ(mincore(buf.data.get(), pages, resident.data()), 0) << "not all mapped: " << n;
  }
}

TEST(WeightBufferTest, ZeroBytesIsRefused) {
  EXPECT_THROW(AllocateWeightBuffer(0), std::bad_alloc);
  WeightArena arena;
  EXPECT_THROW(AllocateWeightBuffer(0, &arena), std::bad_alloc);
  EXPECT_THROW(arena.Allocate(0), std::bad_alloc);
}

// Small buffers come from the arena's slabs: page-aligned, disjoint, each
// holding its own bytes, across more than one slab; a buffer of 2 MiB or
// more still gets a mapping of its own.
TEST(WeightBufferTest, ArenaBuffersAreDisjointAndPageAligned) {
  const long page = sysconf(_SC_PAGESIZE);
  ASSERT_GT(page, 0);
  WeightArena arena;
  std::vector<WeightBuffer> bufs;
  std::vector<std::vector<uint8_t>> srcs;
  size_t total = 0;
  uint32_t seed = 7;
  for (size_t n = 1; total < WeightArena::kSlabBytes + 3 * kMiB; n = n * 3 + 4097) {
    if (n >= 2 * kMiB) n = n % (2 * kMiB - 1) + 1;
    srcs.push_back(RandomBytes(n, seed++));
    bufs.push_back(CopyToWeightBuffer(srcs.back().data(), n, nullptr, &arena));
    ASSERT_EQ(bufs.back().data.get_deleter().length, 0u) << n << ": not from the arena";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(bufs.back().data.get()) % page, 0u) << n;
    total += n;
  }
  for (size_t i = 0; i < bufs.size(); ++i) {
    EXPECT_EQ(std::memcmp(bufs[i].data.get(), srcs[i].data(), srcs[i].size()), 0) << i;
    for (size_t j = 0; j < i; ++j) {
      const uint8_t* a = bufs[i].data.get();
      const uint8_t* b = bufs[j].data.get();
      EXPECT_TRUE(a + bufs[i].bytes <= b || b + bufs[j].bytes <= a) << i << " overlaps " << j;
    }
  }
  const WeightBuffer big = AllocateWeightBuffer(2 * kMiB, &arena);
  EXPECT_GT(big.data.get_deleter().length, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data.get()) % (2 * kMiB), 0u);
}

// A slab outlives its arena while a buffer carved from it lives.
TEST(WeightBufferTest, ArenaBufferOutlivesTheArena) {
  const std::vector<uint8_t> src = RandomBytes(10000, 99);
  WeightBuffer buf;
  {
    WeightArena arena;
    buf = CopyToWeightBuffer(src.data(), src.size(), nullptr, &arena);
  }
  const long page = sysconf(_SC_PAGESIZE);
  ASSERT_GT(page, 0);
  std::vector<unsigned char> resident((src.size() + page - 1) / page);
  EXPECT_EQ(mincore(buf.data.get(), src.size(), resident.data()), 0) << "unmapped with the arena";
  EXPECT_EQ(std::memcmp(buf.data.get(), src.data(), src.size()), 0);
}

}  // namespace
}  // namespace llm
