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

# The levels a host lacks cannot run natively, but a CPU without AVX-512 can
# be emulated: qemu-x86_64 -cpu Haswell-v4 (AVX2, FMA, F16C; QEMU's TCG has
# no AVX-512 at all). There the kernel tests and a CLI generation run the
# avx2 level on a CPU that faults on any AVX-512 instruction, so code that
# reaches one from a lower level (it happened: an AVX-512 copy of
# std::vector<float>::assign, linked in for the whole library, killed
# Session::Init on AVX2-only CPUs) fails on AVX-512 hosts too. On an
# AVX2-only host this repeats the native avx2 run (about 30 s).
qemu="$(command -v qemu-x86_64 || true)"
if [ -n "$qemu" ] && has avx2 fma f16c; then
  echo "=== kernel tests and a generation on an emulated AVX2-only CPU (qemu-x86_64 -cpu Haswell-v4)" >&2
  gtest_filter='QuantMatMulTest.*:PackedWeightTest.*:KQuant*:MatMulTest.*:DequantizeTest.*:AttentionTest.*:OpsTest.*:LinearTest.*'
  "$qemu" -cpu Haswell-v4 "$build/tests/llm_tests" --gtest_filter="$gtest_filter" \
    --gtest_brief=1 2>&1 | grep -v "TCG doesn't support" >&2
  out="$("$qemu" -cpu Haswell-v4 "$build/llm" run -m tests/data/tiny/tiny-llama-Q8_0.gguf \
    -p hello --raw -n 8 --temp 0 -q 2>/dev/null)" || {
    echo "test_cpu_isa: llm run failed on the emulated AVX2-only CPU" >&2
    exit 1
  }
  [ -n "$out" ] || { echo "test_cpu_isa: no text from the emulated AVX2-only CPU" >&2; exit 1; }
  ran+=("avx2 (emulated: qemu Haswell-v4)")
else
  skipped+=("emulated avx2 (no qemu-x86_64; scripts/setup.sh installs qemu-user)")
fi
echo "test_cpu_isa: kernel tests passed at: ${ran[*]}; skipped: ${skipped[*]:-none}"
