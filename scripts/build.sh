#!/usr/bin/env bash
# Configure and build libllm into ${BUILD_DIR:-build} (Release, warnings as
# errors). Extra arguments go to CMake's configure step; TARGET=name builds
# one target only.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
jobs="${JOBS:-$(nproc)}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DLLM_WERROR=ON "$@" >&2
if [ -n "${TARGET:-}" ]; then
  cmake --build "$build" -j "$jobs" --target "$TARGET" >&2
else
  cmake --build "$build" -j "$jobs" >&2
fi
