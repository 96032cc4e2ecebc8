#!/usr/bin/env bash
# Build and test the Rust bindings (llm-sys's header check, the safe crate's
# tests, the greedy example) against the libllm in BUILD_DIR, with Debian's
# rustc/cargo (rustc 1.63, the crates' rust-version) when installed.
#
#   bindings/rust/test.sh BUILD_DIR
#
# The model tests use $LLM_MODEL_PATH and skip without it; with CI=true a
# missing model fails instead.
set -euo pipefail
build="$(cd "${1:?usage: bindings/rust/test.sh BUILD_DIR}" && pwd)"
cd "$(dirname "$0")"
[ -e "$build/libllm.so" ] || { echo "rust: no libllm.so in $build" >&2; exit 1; }
if [ -z "${LLM_MODEL_PATH:-}" ] || [ ! -f "$LLM_MODEL_PATH" ]; then
  [ "${CI:-}" = "true" ] && { echo "rust: LLM_MODEL_PATH is not a file (CI=true)" >&2; exit 1; }
  echo "rust: LLM_MODEL_PATH is not set: the model tests will skip" >&2
fi

# Debian's packaged toolchain, not a newer rustup one earlier on PATH.
cargo=cargo
if [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustc ]; then
  cargo=/usr/bin/cargo
  export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
fi
echo "rust: $("${RUSTC:-rustc}" --version), $("$cargo" --version)" >&2

export LLM_LIB_DIR="$build"
export LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$build/bindings/rust}"
"$cargo" test --offline --workspace -- --test-threads=2
if [ -n "${LLM_MODEL_PATH:-}" ] && [ -f "$LLM_MODEL_PATH" ]; then
  ids="$("$cargo" run --offline --quiet --example greedy -- "The capital of France is")"
  echo "rust: greedy example: $ids" >&2
  [ "$(wc -w <<<"$ids")" -eq 16 ] || { echo "rust: the greedy example did not print 16 ids" >&2; exit 1; }
fi
echo "rust: all tests passed" >&2
