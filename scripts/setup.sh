#!/usr/bin/env bash
# Install the Debian packages libllm needs to build and test (skips those
# already present). Needs root or sudo on a fresh Debian 12 machine.
set -euo pipefail

# Build and test: the compiler, CMake, the libraries of DESIGN.md, zlib (the
# gzip goldens), Python + pip (fetching the model wheel). Fuzzing (issue 4):
# clang with libFuzzer and the sanitizer runtimes, clang's OpenMP (the engine
# links OpenMP, and clang finds libgomp's omp.h no more than GCC's), and the
# LLVM linker and binutils CMake picks for a clang build when they exist (so a
# fresh machine builds the fuzzers with the same tools as a full one). OpenCL
# headers and loader:
# Debian's dnnl-config.cmake calls find_package(OpenCL), but they are only a
# Recommends of libdnnl-dev, which --no-install-recommends skips. Bindings
# (bindings/*/test.sh, scripts/test_bindings.sh): rustc + cargo (Rust 1.63),
# golang-go (Go 1.19), Mono's C# compiler and runtime, pytest for Python's.
# qemu-user: scripts/test_cpu_isa.sh runs the kernel tests on an emulated
# CPU without AVX-512 (qemu-x86_64 -cpu Haswell-v4), so that an AVX-512
# instruction reachable from the lower levels fails on any host.
# scripts/check_build_deps.py (run by test.sh) fails when a configured build
# uses a package that this list does not cover.
#
#   scripts/setup.sh          install what is missing
#   scripts/setup.sh --list   print the package list, one per line
packages=(cmake g++ make pkg-config libdnnl-dev ocl-icd-opencl-dev opencl-headers
          libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev
          python3 python3-pip unzip ca-certificates clang libclang-rt-14-dev
          libomp-14-dev lld llvm rustc cargo golang-go
          mono-mcs mono-runtime python3-pytest qemu-user)
if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all build dependencies are installed" >&2
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
