// Run-time choice of the SIMD kernels: what this CPU (and OS) supports, and
// which level the kernels use now. The library is never built with
// -march=native; *_avx2.cpp / *_avx512.cpp are compiled with their own ISA
// flags and only called when the level below says so.
#pragma once

#include <optional>

namespace llm {

enum class SimdLevel {
  kScalar,  // portable C++, same results on every CPU
  kAvx2,    // AVX2 + FMA + F16C
  kAvx512,  // AVX-512 F/BW/DQ/VL + VNNI (BF16 reported separately)
};

// Best level this CPU and OS support (cpuid + xgetbv: the OS must save the
// YMM / ZMM state). Computed once.
SimdLevel HardwareSimdLevel();

// The level the library may use: HardwareSimdLevel(), capped by the
// environment variable LLM_CPU_ISA=scalar|avx2|avx512|amx when set (read once, at
// the first call; a value above the hardware's, "auto" or an unknown one
// leaves it uncapped). Kernel choices, weight repacking at load and the
// kernel tests (every level up to this one) follow it, so one machine can
// run the library and its tests at each lower level (docs/CPU_KERNELS.md).
SimdLevel DetectSimdLevel();

// Whether the CPU has AVX512_BF16 (only meaningful with kAvx512).
bool CpuHasAvx512Bf16();

// AMX-INT8 (Intel AMX tile registers and int8 tile products), a capability on
// top of kAvx512 rather than a level of its own (every kAvx512 kernel runs on
// an AMX machine). Hardware: the CPU has AMX-TILE and AMX-INT8, the OS saves
// the tile state (XCR0 bits 17, 18) and granted this process the tile data
// (Linux arch_prctl(ARCH_REQ_XCOMP_PERM), requested once at detection).
bool HardwareHasAmx();
// Whether the kernels may use AMX now: HardwareHasAmx(), the active level is
// kAvx512, LLM_CPU_ISA is unset, "auto" or "amx" (scalar, avx2 or avx512 turn
// it off), and no test switched it off.
bool AmxActive();
// Forces AMX off (false) or back to detection (nullopt or true; never on
// without the hardware). Not meant to be called while kernels run.
void SetAmxForTesting(std::optional<bool> enabled);

// Level the kernels use: DetectSimdLevel() unless overridden for tests.
SimdLevel ActiveSimdLevel();

// Forces the kernels to `level` (clamped to DetectSimdLevel(), so a test can
// never run an unsupported path); nullopt restores auto-detection. Not meant
// to be called while kernels run on other threads.
void SetSimdLevelForTesting(std::optional<SimdLevel> level);

// How far ahead the one-row (decode) kernels prefetch the weights they
// stream, as a multiple of the distances they were tuned with on Sapphire
// Rapids Xeons (4 KB of rows16 words, 4 Q4_K / 8 Q6_K blocks per row): 4 on
// AMD CPUs, where those distances left decode waiting on memory (Zen 4, 2
// threads: 1B Q4_0 41 -> 46, Q4_K_M 31 -> 46 tokens/s; docs/CPU_KERNELS.md),
// 1 elsewhere. LLM_CPU_PREFETCH_SCALE=<1..64> overrides it (read once; for
// measurements). Computed once.
int DecodePrefetchScale();

// "scalar", "avx2", "avx512" (AMX is not a SimdLevel: see AmxActive).
const char* SimdLevelName(SimdLevel level);

}  // namespace llm
