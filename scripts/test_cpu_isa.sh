#!/usr/bin/env bash
# Runs the CPU kernel tests once per SIMD level this host has, forcing the
# level with LLM_CPU_ISA (src/backend/cpu/cpu_features.h), and names the
# levels it could not run (the host lacks them). The kernel tests compare
# every level up to the forced one against float64 references and against
# each other, so each run also checks the kernel choice and weight repacking
# a machine of that level gets.
#   scripts/test_cpu_isa.sh [BUILD_DIR]   (default: ${BUILD_DIR:-build})
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-${BUILD_DIR:-build}}"
# gtest names of the kernel suites (ctest -R).
kernel_tests='^(CpuFeaturesTest|QuantMatMulTest|PackedWeightTest|KQuant.*|MatMulTest|DequantizeTest|AttentionTest|OpsTest|LinearTest)\.'

flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
# The same rules as cpu_features.cpp (and its test against /proc/cpuinfo).
declare -A needs=(
  [scalar]=""
  [avx2]="avx2 fma f16c"
  [avx512]="avx2 fma f16c avx512f avx512bw avx512dq avx512vl avx512_vnni"
  # Not a SimdLevel: AMX-INT8 on top of avx512 (LLM_CPU_ISA=avx512 turns it off).
  [amx]="avx2 fma f16c avx512f avx512bw avx512dq avx512vl avx512_vnni amx_tile amx_int8"
)
ran=() skipped=()
for level in scalar avx2 avx512 amx; do
  # shellcheck disable=SC2086
  if ! has ${needs[$level]}; then
    skipped+=("$level")
    continue
  fi
  echo "=== kernel tests at LLM_CPU_ISA=$level" >&2
  LLM_CPU_ISA=$level ctest --test-dir "$build" -R "$kernel_tests" --output-on-failure \
    -j "${JOBS:-$(nproc)}" >&2
  ran+=("$level")
done
echo "test_cpu_isa: kernel tests passed at: ${ran[*]}; skipped (not on this host): ${skipped[*]:-none}"
