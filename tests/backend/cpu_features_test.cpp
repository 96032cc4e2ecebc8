// SIMD detection vs the kernel's own view (/proc/cpuinfo flags, which Linux
// fills from cpuid and clears when the OS does not save the registers), and
// the test override's clamping.
#include "backend/cpu/cpu_features.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace llm {
namespace {

std::set<std::string> CpuinfoFlags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(f, line)) {
    if (line.compare(0, 5, "flags") != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string w;
    while (words >> w) flags.insert(w);
    break;
  }
  return flags;
}

// The first "vendor_id" of /proc/cpuinfo ("" when there is none).
std::string CpuinfoVendor() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.compare(0, 9, "vendor_id") != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string v;
    words >> v;
    return v;
  }
  return "";
}

// The decode prefetch distance's scale: 4 on AMD, 1 elsewhere, unless
// LLM_CPU_PREFETCH_SCALE (1..64) says otherwise.
TEST(CpuFeaturesTest, DecodePrefetchScaleFollowsTheVendor) {
  const std::string vendor = CpuinfoVendor();
  if (vendor.empty()) GTEST_SKIP() << "no /proc/cpuinfo vendor_id on this system";
  int expect = vendor == "AuthenticAMD" ? 4 : 1;
  if (const char* v = std::getenv("LLM_CPU_PREFETCH_SCALE")) {
    const long n = std::strtol(v, nullptr, 10);
    if (n >= 1 && n <= 64) expect = static_cast<int>(n);
  }
  EXPECT_EQ(DecodePrefetchScale(), expect) << vendor;
  std::cout << "[ SIMD ] " << vendor << ": decode prefetch x" << DecodePrefetchScale() << "\n";
}

TEST(CpuFeaturesTest, DetectionAgreesWithProcCpuinfo) {
  const std::set<std::string> flags = CpuinfoFlags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags on this system";
  auto has = [&](const char* f) { return flags.count(f) > 0; };
  SimdLevel expect = SimdLevel::kScalar;
  if (has("avx2") && has("fma") && has("f16c")) expect = SimdLevel::kAvx2;
  if (expect == SimdLevel::kAvx2 && has("avx512f") && has("avx512bw") && has("avx512dq") &&
      has("avx512vl") && has("avx512_vnni")) {
    expect = SimdLevel::kAvx512;
  }
  EXPECT_EQ(HardwareSimdLevel(), expect) << "detected " << SimdLevelName(HardwareSimdLevel());
  // LLM_CPU_ISA caps the level the library uses (and only caps it).
  SimdLevel capped = expect;
  const char* isa = std::getenv("LLM_CPU_ISA");
  const std::string cap = isa != nullptr ? isa : "";
  if (cap == "scalar") capped = SimdLevel::kScalar;
  if (cap == "avx2" && expect == SimdLevel::kAvx512) capped = SimdLevel::kAvx2;
  EXPECT_EQ(DetectSimdLevel(), capped) << "LLM_CPU_ISA=" << cap;
  EXPECT_EQ(CpuHasAvx512Bf16(), capped == SimdLevel::kAvx512 && has("avx512_bf16"));
  // AMX: the flags say the CPU has it and Linux saves the tile state; the
  // permission request (Linux 5.16+) is what the library adds.
  const bool amx = expect == SimdLevel::kAvx512 && has("amx_tile") && has("amx_int8");
  EXPECT_EQ(HardwareHasAmx(), amx);
  const bool amx_allowed = cap != "scalar" && cap != "avx2" && cap != "avx512";
  EXPECT_EQ(AmxActive(), amx && amx_allowed) << "LLM_CPU_ISA=" << cap;
  std::cout << "[ SIMD ] detected " << SimdLevelName(DetectSimdLevel())
            << (CpuHasAvx512Bf16() ? " (+bf16)" : "") << (AmxActive() ? " (+amx)" : "") << "\n";
}

TEST(CpuFeaturesTest, OverrideIsClampedAndResettable) {
  const SimdLevel best = DetectSimdLevel();
  SetSimdLevelForTesting(SimdLevel::kScalar);
  EXPECT_EQ(ActiveSimdLevel(), SimdLevel::kScalar);
  SetSimdLevelForTesting(SimdLevel::kAvx512);  // never above what the CPU has
  EXPECT_EQ(ActiveSimdLevel(), best);
  SetSimdLevelForTesting(std::nullopt);
  EXPECT_EQ(ActiveSimdLevel(), best);
  EXPECT_STREQ(SimdLevelName(SimdLevel::kScalar), "scalar");
  EXPECT_STREQ(SimdLevelName(SimdLevel::kAvx2), "avx2");
  EXPECT_STREQ(SimdLevelName(SimdLevel::kAvx512), "avx512");
}

TEST(CpuFeaturesTest, AmxFollowsTheLevelAndTheOverride) {
  const bool amx = AmxActive();
  SetAmxForTesting(false);
  EXPECT_FALSE(AmxActive());
  SetAmxForTesting(true);  // never on without the hardware
  EXPECT_EQ(AmxActive(), amx);
  SetAmxForTesting(std::nullopt);
  EXPECT_EQ(AmxActive(), amx);
  SetSimdLevelForTesting(SimdLevel::kAvx2);  // AMX kernels need the AVX-512 level
  EXPECT_FALSE(AmxActive());
  SetSimdLevelForTesting(std::nullopt);
  EXPECT_EQ(AmxActive(), amx);
}

}  // namespace
}  // namespace llm
