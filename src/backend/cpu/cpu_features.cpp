#include "backend/cpu/cpu_features.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define LLM_X86 1
#endif

namespace llm {
namespace {

struct Features {
  SimdLevel level = SimdLevel::kScalar;
  bool avx512_bf16 = false;
  bool amx = false;  // AMX-TILE + AMX-INT8, enabled by the OS for this process
};

#ifdef LLM_X86
uint64_t XGetBv0() {
  uint32_t eax, edx;
  // xgetbv with ecx = 0 (XCR0); encoded as bytes so no -mxsave is needed.
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

// Linux keeps the 8 KB of tile data out of a process's saved state until the
// process asks for it (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA);
// a tile instruction before that faults. The grant is process-wide.
bool RequestAmxPermission() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
#endif

Features Detect() {
  Features f;
#ifdef LLM_X86
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool avx = c & (1u << 28);
  const bool fma = c & (1u << 12);
  const bool f16c = c & (1u << 29);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = XGetBv0();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;    // SSE + AVX state
  const bool os_zmm = (xcr0 & 0xe6) == 0xe6;  // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!os_ymm) return f;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx2 = b & (1u << 5);
  const bool avx512f = b & (1u << 16);
  const bool avx512dq = b & (1u << 17);
  const bool avx512bw = b & (1u << 30);
  const bool avx512vl = b & (1u << 31);
  const bool avx512vnni = c & (1u << 11);
  if (avx2 && fma && f16c) f.level = SimdLevel::kAvx2;
  if (f.level == SimdLevel::kAvx2 && os_zmm && avx512f && avx512dq && avx512bw && avx512vl &&
      avx512vnni) {
    f.level = SimdLevel::kAvx512;
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f.avx512_bf16 = a1 & (1u << 5);
    const bool amx_tile = d & (1u << 24), amx_int8 = d & (1u << 25);
    const bool os_tiles = (xcr0 & 0x60000) == 0x60000;  // XTILECFG + XTILEDATA
    f.amx = amx_tile && amx_int8 && os_tiles && RequestAmxPermission();
  }
#endif
  return f;
}

// LLM_CPU_ISA=scalar|avx2|avx512 caps the level (never raises it: a level
// the CPU lacks would fault) and turns AMX off. Unset, empty, "auto", "amx"
// or anything else: no cap, AMX as detected.
std::optional<SimdLevel> IsaFromEnvironment() {
  const char* v = std::getenv("LLM_CPU_ISA");
  if (v == nullptr) return std::nullopt;
  for (SimdLevel l : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (std::strcmp(v, SimdLevelName(l)) == 0) return l;
  }
  return std::nullopt;
}

const Features& Hardware() {
  static const Features f = Detect();
  return f;
}

const Features& Cached() {
  static const Features f = [] {
    Features c = Hardware();
    const std::optional<SimdLevel> cap = IsaFromEnvironment();
    if (cap && static_cast<int>(*cap) < static_cast<int>(c.level)) c.level = *cap;
    if (cap) c.amx = false;
    return c;
  }();
  return f;
}

// -1: auto; else a SimdLevel value.
std::atomic<int> g_override{-1};
std::atomic<bool> g_amx_off{false};

}  // namespace

SimdLevel HardwareSimdLevel() { return Hardware().level; }

SimdLevel DetectSimdLevel() { return Cached().level; }

bool HardwareHasAmx() { return Hardware().amx; }

bool AmxActive() {
  return Cached().amx && !g_amx_off.load(std::memory_order_relaxed) &&
         ActiveSimdLevel() == SimdLevel::kAvx512;
}

void SetAmxForTesting(std::optional<bool> enabled) {
  g_amx_off.store(enabled.has_value() && !*enabled, std::memory_order_relaxed);
}

bool CpuHasAvx512Bf16() { return Cached().level == SimdLevel::kAvx512 && Cached().avx512_bf16; }

SimdLevel ActiveSimdLevel() {
  const int o = g_override.load(std::memory_order_relaxed);
  return o < 0 ? DetectSimdLevel() : static_cast<SimdLevel>(o);
}

void SetSimdLevelForTesting(std::optional<SimdLevel> level) {
  if (!level) {
    g_override.store(-1, std::memory_order_relaxed);
    return;
  }
  const SimdLevel best = DetectSimdLevel();
  const SimdLevel clamped = static_cast<int>(*level) > static_cast<int>(best) ? best : *level;
  g_override.store(static_cast<int>(clamped), std::memory_order_relaxed);
}

int DecodePrefetchScale() {
  static const int scale = [] {
    const char* v = std::getenv("LLM_CPU_PREFETCH_SCALE");
    if (v != nullptr) {
      const long n = std::strtol(v, nullptr, 10);
      if (n >= 1 && n <= 64) return static_cast<int>(n);
    }
#ifdef LLM_X86
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) {
      char vendor[13];
      std::memcpy(vendor, &b, 4);
      std::memcpy(vendor + 4, &d, 4);
      std::memcpy(vendor + 8, &c, 4);
      vendor[12] = '\0';
      if (std::strcmp(vendor, "AuthenticAMD") == 0) return 4;
    }
#endif
    return 1;
  }();
  return scale;
}

const char* SimdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar:
      return "scalar";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kAvx512:
      return "avx512";
  }
  return "unknown";
}

}  // namespace llm
