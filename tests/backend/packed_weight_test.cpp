// Weights repacked at load (backend/cpu/packed_weight.h, "rows16") and the
// AVX-512 kernels that read them: against the float64 reference on fresh
// random inputs, and bit for bit against the AVX2 kernel on the GGUF rows
// (ggml-cpu's vec_dot order, which keeps the logits equal to llama.cpp's),
// for one activation row and batches, partial groups of 16 weight rows, odd
// block counts, padded rows and thread splits.
#include "backend/cpu/packed_weight.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/dequantize.h"
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/quant_matmul_kernels.h"
#include "backend/cpu/thread_pool.h"
#include "core/dtype.h"
#include "gtest/gtest.h"
#include "kernels/cpu/ref/reference_kernels.h"
#include "tests/backend/kernel_test_util.h"

namespace llm {
namespace {

using testing_util::FreshSeed;
using testing_util::RandomVector;
using testing_util::RandomWeights;
using testing_util::SimdLevelGuard;

std::string Name(DType t) { return GetDTypeTraits(static_cast<uint32_t>(t))->name; }

constexpr DType kTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ8_0};
// The layout tests take Q4_K and Q6_K too (their kernels: kquant_test.cpp).
constexpr DType kLayoutTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                                  DType::kQ8_0, DType::kQ4_K, DType::kQ6_K};

// Elements per block: 7 blocks of each type in the tests below.
int64_t BlockElems(DType t) { return t == DType::kQ4_K || t == DType::kQ6_K ? 256 : 32; }

TEST(PackedWeightTest, SizesEqualTheGgufRows) {
  for (DType t : kLayoutTypes) {
    const size_t rb = *RowBytes(t, BlockElems(t) * 7);
    EXPECT_EQ(rows16::BlockElements(t), BlockElems(t)) << Name(t);
    EXPECT_EQ(rows16::GroupBytes(t, 7), 16 * rb) << Name(t);
    EXPECT_EQ(rows16::PackedBytes(t, 33, BlockElems(t) * 7), 3 * 16 * rb) << Name(t);  // 3 groups
  }
  EXPECT_FALSE(rows16::Supports(DType::kQ5_K));
  EXPECT_FALSE(rows16::Supports(DType::kQ5_1));
  EXPECT_FALSE(rows16::Supports(DType::kF16));
}

// Q6_K's word order in the copy as packed_weight.h states it: the scale
// words 48..51, then for each half h and i = 0..7 the words ql 16h + i, ql
// 16h + 8 + i, qh 32 + 8h + i. Returns the slot of GGUF word k.
int ReferenceSlot(DType t, int k) {
  if (t != DType::kQ6_K) return k;
  std::vector<int> order = {48, 49, 50, 51};
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 8; ++i) {
      for (int w : {16 * h + i, 16 * h + 8 + i, 32 + 8 * h + i}) order.push_back(w);
    }
  }
  return static_cast<int>(std::find(order.begin(), order.end(), k) - order.begin());
}

// The layout as packed_weight.h states it, written byte by byte: row r's
// block b lands in group r / 16, lane r % 16, quant word k at
// qs[b][k][lane], scales at sc[b][s][lane]; rows past n_out repeat the last.
std::vector<uint8_t> ReferencePack(DType t, const uint8_t* W, size_t rb, int64_t n_out,
                                   int64_t n_in) {
  const size_t block = t == DType::kQ4_0   ? 18
                       : t == DType::kQ4_1 ? 20
                       : t == DType::kQ5_0 ? 22
                       : t == DType::kQ4_K ? 144
                       : t == DType::kQ6_K ? 210
                                           : 34;
  // Q4_K: the scale bytes then qs as words 0..34, d and dmin as the scales;
  // Q6_K: ql, qh, scales as words 0..51, d (at the block's end) the scale.
  const size_t qs_off = t == DType::kQ4_1 || t == DType::kQ4_K ? 4 : t == DType::kQ6_K ? 0 : 2;
  const size_t sc_off = t == DType::kQ6_K ? 208 : 0;
  const int words = rows16::Words(t), scales = rows16::Scales(t);
  const uint8_t flip = t == DType::kQ8_0 ? 0x80 : 0;
  const int64_t nb = n_in / BlockElems(t), n_groups = (n_out + 15) / 16;
  const size_t group = rows16::GroupBytes(t, nb),
               qs_bytes = static_cast<size_t>(nb) * 16 * 4 * words;
  std::vector<uint8_t> out(static_cast<size_t>(n_groups) * group);
  for (int64_t g = 0; g < n_groups; ++g) {
    for (int l = 0; l < 16; ++l) {
      const int64_t row = std::min(g * 16 + l, n_out - 1);
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = W + row * rb + b * block;
        for (int k = 0; k < words; ++k) {
          for (int j = 0; j < 4; ++j) {
            out[g * group + ((b * words + ReferenceSlot(t, k)) * 16 + l) * 4 + j] =
                blk[qs_off + 4 * k + j] ^ flip;
          }
        }
        if (t == DType::kQ5_0) {
          // Word 0: byte j, bit k = element 4k + j's fifth bit, bit 4 + k =
          // element 16 + 4k + j's (qh bit e = element e's).
          uint32_t qh;
          std::memcpy(&qh, blk + 2, 4);
          for (int j = 0; j < 4; ++j) {
            uint8_t byte = 0;
            for (int k = 0; k < 4; ++k) {
              byte |= static_cast<uint8_t>(((qh >> (4 * k + j)) & 1u) << k);
              byte |= static_cast<uint8_t>(((qh >> (16 + 4 * k + j)) & 1u) << (4 + k));
            }
            out[g * group + ((b * words) * 16 + l) * 4 + j] = byte;
          }
        }
        for (int sidx = 0; sidx < scales; ++sidx) {
          for (int j = 0; j < 2; ++j) {
            out[g * group + qs_bytes + ((b * scales + sidx) * 16 + l) * 2 + j] =
                blk[sc_off + 2 * sidx + j];
          }
        }
      }
    }
  }
  return out;
}

// Both packing loops: AVX-512 gathers (where the CPU has them) and word by
// word (the level forced to AVX2).
TEST(PackedWeightTest, PackWritesTheDocumentedLayout) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ThreadPool pool(3);
  SimdLevelGuard guard;
  for (int forced = 0; forced <= 1; ++forced) {
    SetSimdLevelForTesting(forced ? std::optional<SimdLevel>(SimdLevel::kAvx2) : std::nullopt);
    for (DType t : kLayoutTypes) {
      for (int64_t n_out : {int64_t{1}, int64_t{16}, int64_t{37}}) {
        const int64_t n_in = BlockElems(t) * 7;
        const size_t rb = *RowBytes(t, n_in) + (n_out == 37 ? 10 : 0);  // padded rows
        const std::vector<uint8_t> w = RandomWeights(rng, t, n_out, n_in, rb);
        const std::vector<uint8_t> want = ReferencePack(t, w.data(), rb, n_out, n_in);
        const rows16::PackedBuffer got = rows16::MakePacked(t, w.data(), rb, n_out, n_in, &pool);
        ASSERT_EQ(got.bytes, want.size());
        EXPECT_EQ(std::memcmp(got.data.get(), want.data(), want.size()), 0)
            << Name(t) << " n_out " << n_out << (forced ? " (word loop)" : "");
      }
    }
  }
}

// UnpackGroup gives back each group's GGUF blocks (rows past n_out: the
// last row), for any block range; AVX-512 transposes and the word loop.
TEST(PackedWeightTest, UnpackGroupInvertsPack) {
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  SimdLevelGuard guard;
  for (int forced = 0; forced <= 1; ++forced) {
    SetSimdLevelForTesting(forced ? std::optional<SimdLevel>(SimdLevel::kAvx2) : std::nullopt);
    for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
      const int64_t n_out = 37, nb = 5, n_in = BlockElems(t) * nb;
      const size_t rb = *RowBytes(t, n_in), bb = rb / nb;
      const std::vector<uint8_t> w = RandomWeights(rng, t, n_out, n_in, rb);
      const rows16::PackedBuffer packed = rows16::MakePacked(t, w.data(), rb, n_out, n_in, nullptr);
      for (int64_t o = 0; o < n_out; o += 16) {
        for (int64_t b0 : {int64_t{0}, int64_t{2}}) {
          const int64_t len = b0 == 0 ? nb : 3;
          std::vector<uint8_t> got(16 * len * bb, 0xAA);
          rows16::UnpackGroup(t, packed.data.get(), nb, o, b0, len, got.data());
          for (int l = 0; l < 16; ++l) {
            const int64_t row = std::min(o + l, n_out - 1);
            EXPECT_EQ(std::memcmp(got.data() + l * len * bb, w.data() + row * rb + b0 * bb, len * bb),
                      0)
                << Name(t) << " rows " << o << " lane " << l << " b0 " << b0
                << (forced ? " (word loop)" : "");
          }
        }
      }
    }
  }
}

// Packing in parallel gives the same bytes as packing on one thread.
TEST(PackedWeightTest, PackIsThreadInvariant) {
  std::mt19937 rng(FreshSeed());
  ThreadPool pool(3);
  for (DType t : kTypes) {
    const int64_t n_out = 53, n_in = 32 * 5;
    const size_t rb = *RowBytes(t, n_in) + 6;  // padded rows
    const std::vector<uint8_t> w = RandomWeights(rng, t, n_out, n_in, rb);
    const rows16::PackedBuffer a = rows16::MakePacked(t, w.data(), rb, n_out, n_in, nullptr);
    const rows16::PackedBuffer b = rows16::MakePacked(t, w.data(), rb, n_out, n_in, &pool);
    ASSERT_EQ(a.bytes, b.bytes);
    EXPECT_EQ(std::memcmp(a.data.get(), b.data.get(), a.bytes), 0) << Name(t);
  }
}

// The kernels on the copy alone, at every level with rows16 kernels (AVX2,
// AVX-512): every row count (row tiles, a leftover row),
// weight-row remainders and block chunking, bit-identical to the same order
// on the GGUF rows -- the AVX2 kernel for the vec_dot-order types (Q4_1,
// Q5_0), the per-block kernel on unpacked rows for Q4_0 and Q8_0 -- and
// within the 8-bit-activation error of the float64 product.
TEST(PackedWeightTest, KernelMatchesAvx2BitForBitAndFloat64Reference) {
  if (DetectSimdLevel() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  const uint32_t seed = FreshSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  std::vector<SimdLevel> levels = {SimdLevel::kAvx2};
  if (DetectSimdLevel() == SimdLevel::kAvx512) levels.push_back(SimdLevel::kAvx512);
  for (const SimdLevel level : levels) {
    SCOPED_TRACE(SimdLevelName(level));
    const bool avx512 = level == SimdLevel::kAvx512;
    for (DType t : kTypes) {
      for (int64_t n_rows : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}, int64_t{16},
                             int64_t{17}, int64_t{40}}) {
        for (int64_t n_out : {int64_t{5}, int64_t{16}, int64_t{16 * 2 + 7}}) {
          for (int64_t n_in : {int64_t{32 * 11}, int64_t{32 * 75}}) {
            SCOPED_TRACE(Name(t) + " n_rows=" + std::to_string(n_rows) +
                         " n_out=" + std::to_string(n_out) + " n_in=" + std::to_string(n_in));
            // Padded GGUF rows (the copy is dense) for two of the three row counts.
            const size_t rb = *RowBytes(t, static_cast<size_t>(n_in)) + (n_out != 16 ? 4 : 0);
            const std::vector<uint8_t> w = RandomWeights(rng, t, n_out, n_in, rb);
            const std::vector<float> x =
                RandomVector(rng, static_cast<size_t>(n_rows * n_in), 0.01f, 3.0f);
            std::vector<int8_t> q(static_cast<size_t>(n_rows * n_in));
            std::vector<float> ds(static_cast<size_t>(2 * n_rows * n_in / 32));
            for (int64_t r = 0; r < n_rows; ++r) {
              qmm::QuantizeRowQ8Scalar(x.data() + r * n_in, n_in, q.data() + r * n_in,
                                       ds.data() + 2 * r * (n_in / 32));
            }
            qmm::Acts acts;
            acts.x = x.data();
            acts.x_stride = static_cast<size_t>(n_in);
            acts.n_rows = n_rows;
            acts.n_in = n_in;
            acts.q = q.data();
            acts.ds = ds.data();
            acts.n_blocks = n_in / 32;
            qmm::BiasBuffers biases;
            const bool block_order = qmm::Avx2BlockOrderKernel(t, true) != nullptr;
            if (block_order) {
              qmm::SetBlockBias(t, &acts, &biases);
            } else {
              qmm::SetBias(t, avx512 ? qmm::kFloatSumStart : 0, &acts, &biases);
            }
            const rows16::PackedBuffer p =
                rows16::MakePacked(t, w.data(), rb, n_out, n_in, nullptr);
            std::vector<float> y2(static_cast<size_t>(n_rows * n_out)), yp(y2.size(), NAN),
                scratch(static_cast<size_t>(qmm::ScratchFloats(n_in, n_rows)));
            const qmm::Kernel on_rows = !block_order ? qmm::Avx2Kernel(t)
                                        : avx512     ? qmm::Avx512BlockOrderKernel(t, false)
                                                     : qmm::Avx2BlockOrderKernel(t, false);
            const qmm::Kernel on_copy = block_order ? (avx512 ? qmm::Avx512BlockOrderKernel(t, true)
                                                              : qmm::Avx2BlockOrderKernel(t, true))
                                        : avx512    ? qmm::Avx512PackedKernel(t)
                                                    : qmm::Avx2PackedKernel(t);
            on_rows(w.data(), rb, 0, n_out, acts, y2.data(), n_out, scratch.data());
            on_copy(p.data.get(), rb, 0, n_out, acts, yp.data(), n_out, scratch.data());
            ASSERT_EQ(std::memcmp(y2.data(), yp.data(), y2.size() * sizeof(float)), 0);

            std::vector<double> wd(static_cast<size_t>(n_out * n_in)),
                xd(static_cast<size_t>(n_rows * n_in));
            std::vector<float> tmp(static_cast<size_t>(n_in));
            for (int64_t o = 0; o < n_out; ++o) {
              ASSERT_TRUE(DequantizeRow(t, w.data() + o * rb, n_in, tmp.data()).ok());
              for (int64_t i = 0; i < n_in; ++i) wd[o * n_in + i] = tmp[i];
            }
            for (size_t i = 0; i < xd.size(); ++i) xd[i] = x[i];
            std::vector<double> yr(static_cast<size_t>(n_rows * n_out)), abs_sum(yr.size());
            ref::RefMatMul(wd.data(), xd.data(), n_out, n_in, n_rows, yr.data(), abs_sum.data());
            for (size_t i = 0; i < yr.size(); ++i) {
              ASSERT_LE(std::fabs(yp[i] - yr[i]) / abs_sum[i], 5e-3) << "output " << i;
            }
          }
        }
      }
    }
  }
}

// Through QuantMatMulShared as the CPU backend calls it: a packed copy gives
// the same bits as the GGUF rows, threaded or not, mixed with an unpacked
// output, at every level with rows16 kernels (AVX-512: all four types; AVX2:
// Q4_0 and Q8_0, the copy of the others ignored).
TEST(PackedWeightTest, SharedProductsUseTheCopyWithTheSameBits) {
  if (DetectSimdLevel() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  SimdLevelGuard guard;
  std::mt19937 rng(FreshSeed());
  ThreadPool pool(2);
  const int64_t n_in = 32 * 9;
  constexpr size_t kN = std::size(kTypes);
  std::vector<SimdLevel> levels = {SimdLevel::kAvx2};
  if (DetectSimdLevel() == SimdLevel::kAvx512) levels.push_back(SimdLevel::kAvx512);
  for (const SimdLevel level : levels) {
    SetSimdLevelForTesting(level);
    for (int64_t n_rows : {int64_t{1}, int64_t{4}}) {
      SCOPED_TRACE(std::string(SimdLevelName(level)) + " n_rows " + std::to_string(n_rows));
      std::vector<std::vector<uint8_t>> ws;
      std::vector<rows16::PackedBuffer> packed;
      std::vector<int64_t> n_outs = {77, 48, 19, 33};
      for (size_t i = 0; i < kN; ++i) {
        const DType t = kTypes[i];
        const size_t rb = *RowBytes(t, n_in);
        ws.push_back(RandomWeights(rng, t, n_outs[i], n_in, rb));
        packed.push_back(rows16::MakePacked(t, ws.back().data(), rb, n_outs[i], n_in, &pool));
      }
      const std::vector<float> x = RandomVector(rng, static_cast<size_t>(n_rows * n_in));
      auto run = [&](bool use_packed, ThreadPool* p) {
        std::vector<std::vector<float>> ys(kN);
        QuantMatMulOutput outs[kN];
        for (size_t i = 0; i < kN; ++i) {
          ys[i].assign(static_cast<size_t>(n_rows * n_outs[i]), NAN);
          outs[i].wtype = kTypes[i];
          outs[i].W = ws[i].data();
          outs[i].row_bytes = *RowBytes(kTypes[i], n_in);
          outs[i].n_out = n_outs[i];
          // The second output stays unpacked: mixed lists work.
          outs[i].packed = use_packed && i != 1 ? packed[i].data.get() : nullptr;
          outs[i].y = ys[i].data();
          outs[i].y_stride = static_cast<size_t>(n_outs[i]);
        }
        EXPECT_TRUE(QuantMatMulShared(outs, kN, n_in, x.data(), n_in, n_rows, p).ok());
        return ys;
      };
      const auto want = run(false, nullptr);
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        const auto got = run(true, p);
        for (size_t i = 0; i < kN; ++i) {
          ASSERT_EQ(std::memcmp(want[i].data(), got[i].data(), want[i].size() * sizeof(float)), 0)
              << Name(kTypes[i]);
        }
      }
      // A garbage copy shows whether the copy is read at all: it must change
      // the outputs of the types this level reads a copy of, and no other.
      for (auto& b : packed) std::memset(b.data.get(), 0x5A, b.bytes);
      const auto garbage = run(true, nullptr);
      for (size_t i = 0; i < kN; ++i) {
        if (i == 1) continue;  // unpacked
        const bool changed =
            std::memcmp(want[i].data(), garbage[i].data(), want[i].size() * sizeof(float)) != 0;
        EXPECT_EQ(changed, QuantMatMulReadsRows16(kTypes[i])) << Name(kTypes[i]);
      }
    }
  }
}

// Releasing the mapped rows after packing: a read-only private file mapping
// gives its pages back and reads the same bytes afterwards; anonymous memory
// (a model loaded from a buffer) is never touched.
// The chunk a batch kernel prefetches: the next chunk of the same group, or
// the next group's first after a group's last, none past o_end.
TEST(PackedWeightTest, NextChunkOfGroupWalksChunksThenGroups) {
  const uint8_t* W = reinterpret_cast<const uint8_t*>(uintptr_t{1} << 20);  // never read
  const int64_t nb = 48, chunk = 32, o_end = 40;  // 3 groups (the last one partial)
  for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ8_0}) {
    SCOPED_TRACE(static_cast<int>(t));
    auto at = [&](int64_t o, int64_t b0) {
      return rows16::ChunkOfGroup(t, W, true, 0, o, o_end, nb, b0, 1, nullptr, nullptr);
    };
    rows16::NextChunk n = rows16::NextChunkOfGroup(t, W, 0, o_end, nb, 0, 32, chunk);
    EXPECT_EQ(n.len, 16);
    EXPECT_EQ(n.at.qs, at(0, 32).qs);
    EXPECT_EQ(n.at.sc, at(0, 32).sc);
    n = rows16::NextChunkOfGroup(t, W, 16, o_end, nb, 32, 16, chunk);
    EXPECT_EQ(n.len, 32);
    EXPECT_EQ(n.at.qs, at(32, 0).qs);
    EXPECT_EQ(n.at.sc, at(32, 0).sc);
    n = rows16::NextChunkOfGroup(t, W, 32, o_end, nb, 32, 16, chunk);
    EXPECT_EQ(n.len, 0);
    EXPECT_EQ(n.at.qs, nullptr);
  }
}

TEST(PackedWeightTest, ReleasesOnlyFileMappedPages) {
  const long page = sysconf(_SC_PAGESIZE);
  ASSERT_GT(page, 0);
  const size_t n = static_cast<size_t>(page) * 8;
  std::mt19937 rng(FreshSeed());
  std::vector<uint8_t> bytes(n);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  char path[] = "/tmp/llm_packed_weight_testXXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, bytes.data(), n), static_cast<ssize_t>(n));
  void* map = mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  std::remove(path);
  ASSERT_NE(map, MAP_FAILED);
  const auto* mapped = static_cast<const uint8_t*>(map);
  ASSERT_EQ(std::memcmp(mapped, bytes.data(), n), 0);  // faults every page in
  // An unaligned range [100, 7 pages - 100): only its whole pages 1..5 go.
  EXPECT_EQ(rows16::ReleaseMappedPages(mapped + 100, n - page - 200),
            static_cast<size_t>(page) * 5);
  EXPECT_EQ(std::memcmp(mapped, bytes.data(), n), 0);
  munmap(map, n);

  std::vector<uint8_t> heap(bytes);
  EXPECT_EQ(rows16::ReleaseMappedPages(heap.data(), heap.size()), 0u);
  EXPECT_EQ(heap, bytes);
  EXPECT_EQ(rows16::ReleaseMappedPages(nullptr, n), 0u);
}

}  // namespace
}  // namespace llm
