#!/usr/bin/env bash
# Build, vet and test the Go binding (and run its greedy example) against the
# libllm in BUILD_DIR, with Debian's Go (golang-go, Go 1.19) when installed.
#
#   bindings/go/test.sh BUILD_DIR
#
# The package links through `#cgo pkg-config: llm`; this script writes an
# llm.pc naming BUILD_DIR and the repository's include/ into a temporary
# directory on PKG_CONFIG_PATH. The model tests use $LLM_MODEL_PATH and skip
# without it; with CI=true a missing model fails instead.
set -euo pipefail
build="$(cd "${1:?usage: bindings/go/test.sh BUILD_DIR}" && pwd)"
cd "$(dirname "$0")"
repo="$(cd ../.. && pwd)"
[ -e "$build/libllm.so" ] || { echo "go: no libllm.so in $build" >&2; exit 1; }
if [ -z "${LLM_MODEL_PATH:-}" ] || [ ! -f "$LLM_MODEL_PATH" ]; then
  [ "${CI:-}" = "true" ] && { echo "go: LLM_MODEL_PATH is not a file (CI=true)" >&2; exit 1; }
  echo "go: LLM_MODEL_PATH is not set: the model tests will skip" >&2
fi

[ -x /usr/lib/go-1.19/bin/go ] && export PATH="/usr/lib/go-1.19/bin:$PATH"
echo "go: $(go version)" >&2

pc="$(mktemp -d)"
trap 'rm -rf "$pc"' EXIT
version="$(sed -n 's/^#define LLM_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$repo/include/llm/llm.h" | paste -sd.)"
cat >"$pc/llm.pc" <<PC
Name: llm
Description: libllm (build directory $build)
Version: $version
Libs: -L$build -lllm
Cflags: -I$repo/include
PC
export PKG_CONFIG_PATH="$pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GOFLAGS="${GOFLAGS:-} -count=1" GOPROXY=off

go vet ./...
unformatted="$(gofmt -l .)"
[ -z "$unformatted" ] || { echo "go: not gofmt-formatted: $unformatted" >&2; exit 1; }
go test -race -v ./... 2>&1 | grep -vE '^=== (RUN|PAUSE|CONT)'
[ "${PIPESTATUS[0]}" -eq 0 ]
if [ -n "${LLM_MODEL_PATH:-}" ] && [ -f "$LLM_MODEL_PATH" ]; then
  ids="$(go run ./examples/greedy "The capital of France is")"
  echo "go: greedy example: $ids" >&2
  [ "$(wc -w <<<"$ids")" -eq 16 ] || { echo "go: the greedy example did not print 16 ids" >&2; exit 1; }
fi
echo "go: all tests passed" >&2
