#!/usr/bin/env bash
# Side-by-side speed of libllm and llama.cpp on the same GGUF files
# (issue 15): `llm bench -p 512 -n 128 -t 2` against llama.cpp's
# `llama-bench -p 512 -n 128 -t 2 -fa 0`, in interleaved rounds, printing a
# table of medians and libllm / llama.cpp ratios (bench/compare_llamacpp.py).
#
# llama.cpp is the one inside llama-cpp-python 0.3.36 (the reference
# implementation of the golden files): its source distribution is fetched
# with `pip download --no-binary :all:` and its sha256 checked, then only
# llama-bench is built, natively (-march=native, as llama.cpp builds by
# default), into a cache directory, once.
#
# Usage:
#   bench/compare_llamacpp.sh [options] MODEL.gguf [MODEL.gguf ...]
# Options:
#   --llama-bench PATH  use an existing llama-bench instead of building one
#   --sdist PATH        build from this llama_cpp_python-0.3.36.tar.gz instead
#                       of downloading it (its sha256 is still printed and
#                       compared)
#   --llm PATH          the libllm CLI (default: build/llm)
#   --rounds N          interleaved rounds (default 3)
#   -t N, -p N, -n N    threads, prompt and generated tokens (default 2, 512, 128)
#   --no-amx            build llama.cpp without its AMX code (-mno-amx-*, into
#                       a separate directory): on the AMX host of BENCHMARKS.md
#                       its AMX matmul crashes (SIGSEGV in
#                       ggml_backend_amx_mul_mat), so it is compared with its
#                       next best configuration, the default CPU repacking
#   --build-only        build (or find) llama-bench, print its path, and stop
# llama-quantize is built next to llama-bench: LLM_LLAMA_QUANTIZE=<it>
# scripts/fetch_random_model.sh 1b q4_k_m makes the K-quant files without
# llama-cpp-python.
# Environment: LLM_CACHE_DIR (default ~/.cache/libllm) holds the build;
# JOBS (default 2) compiler jobs; CMAKE_C(XX)_COMPILER_LAUNCHER (e.g. ccache)
# are honoured by CMake.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

SDIST_VERSION=0.3.36
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
cache="${LLM_CACHE_DIR:-$HOME/.cache/libllm}"
workdir="$cache/llamacpp-$SDIST_VERSION-native"   # the source, and the default build
builddir="$workdir/build"
extra_flags=""

llama_bench=""
sdist=""
llm="$root/build/llm"
rounds=3
threads=2
n_prompt=512
n_gen=128
build_only=0
models=()

while [ $# -gt 0 ]; do
  case "$1" in
    --llama-bench) llama_bench="$2"; shift 2 ;;
    --sdist) sdist="$2"; shift 2 ;;
    --llm) llm="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    -t) threads="$2"; shift 2 ;;
    -p) n_prompt="$2"; shift 2 ;;
    -n) n_gen="$2"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --no-amx)
      builddir="$cache/llamacpp-$SDIST_VERSION-native-noamx"
      extra_flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
      shift ;;
    -h|--help) sed -n '2,34p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "compare_llamacpp: unknown option $1" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# Fetches (or takes) the source distribution and unpacks it into $workdir/src.
unpack_sdist() {
  mkdir -p "$workdir"
  if [ -z "$sdist" ]; then
    sdist="$workdir/llama_cpp_python-$SDIST_VERSION.tar.gz"
    # scripts/fetch_vocabs.sh keeps the same file (the tests' vocabularies).
    local shared="$cache/sdist/llama_cpp_python-$SDIST_VERSION.tar.gz"
    if [ ! -s "$sdist" ] && [ -s "$shared" ]; then cp "$shared" "$sdist"; fi
    if [ ! -s "$sdist" ]; then
      echo "compare_llamacpp: downloading llama-cpp-python $SDIST_VERSION (source)" >&2
      local dl="$workdir/download"
      rm -rf "$dl"
      python3 -m pip download --quiet --no-deps --no-binary :all: \
        -d "$dl" "llama-cpp-python==$SDIST_VERSION" >&2
      mv "$dl/llama_cpp_python-$SDIST_VERSION.tar.gz" "$sdist"
      rm -rf "$dl"
    fi
    local got
    got="$(sha256_of "$sdist")"
    if [ "$got" != "$SDIST_SHA256" ]; then
      echo "compare_llamacpp: $sdist has sha256 $got, expected $SDIST_SHA256" >&2
      rm -f "$sdist"
      exit 1
    fi
  else
    local got
    got="$(sha256_of "$sdist")"
    if [ "$got" != "$SDIST_SHA256" ]; then
      echo "compare_llamacpp: warning: $sdist has sha256 $got, not that of llama-cpp-python $SDIST_VERSION" >&2
    fi
  fi
  if [ ! -f "$workdir/src/vendor/llama.cpp/CMakeLists.txt" ]; then
    rm -rf "$workdir/src" "$workdir/src.tmp"
    mkdir -p "$workdir/src.tmp"
    tar -xzf "$sdist" -C "$workdir/src.tmp" --strip-components=1
    mv "$workdir/src.tmp" "$workdir/src"
  fi
}

# Builds llama-bench and llama-quantize (static, native CPU backend only)
# into $builddir.
build_llama_bench() {
  local bin="$builddir/bin/llama-bench"
  if [ -x "$bin" ]; then
    echo "$bin"
    return
  fi
  unpack_sdist
  echo "compare_llamacpp: building llama-bench in $builddir (several minutes)" >&2
  cmake -S "$workdir/src/vendor/llama.cpp" -B "$builddir" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DGGML_OPENMP=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_COMMON=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DCMAKE_C_FLAGS="$extra_flags" -DCMAKE_CXX_FLAGS="$extra_flags" \
    >"$builddir.cmake.log" 2>&1 || { tail -30 "$builddir.cmake.log" >&2; exit 1; }
  cmake --build "$builddir" --target llama-bench llama-quantize -j "${JOBS:-2}" \
    >"$builddir.build.log" 2>&1 || { tail -30 "$builddir.build.log" >&2; exit 1; }
  echo "$bin"
}

if [ -z "$llama_bench" ]; then
  llama_bench="$(build_llama_bench)"
fi
if [ ! -x "$llama_bench" ]; then
  echo "compare_llamacpp: $llama_bench is not an executable" >&2
  exit 1
fi
if [ "$build_only" = 1 ]; then
  echo "$llama_bench"
  exit 0
fi
if [ "${#models[@]}" -eq 0 ]; then
  echo "compare_llamacpp: no model given (e.g. \$(scripts/fetch_random_model.sh))" >&2
  exit 2
fi
if [ ! -x "$llm" ]; then
  echo "compare_llamacpp: $llm not found: build it (./scripts/build.sh) or pass --llm" >&2
  exit 1
fi

model_args=()
for m in "${models[@]}"; do model_args+=(--model "$m"); done
exec python3 "$here/compare_llamacpp.py" --llm "$llm" --llama-bench "$llama_bench" \
  --rounds "$rounds" -t "$threads" -p "$n_prompt" -n "$n_gen" "${model_args[@]}"
