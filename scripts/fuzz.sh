#!/usr/bin/env bash
# Build the libFuzzer targets (fuzz/) with clang and run each for SECONDS.
#
#   scripts/fuzz.sh [options] [SECONDS]      (default 30 s per target)
#     --targets a,b     run only these targets (default: all in fuzz/CMakeLists.txt)
#     --merge           afterwards, merge the new inputs into fuzz/corpus/<target>/
#                       (only inputs with new edges: -set_cover_merge=1
#                       -use_counters=0); without it fuzz/corpus is
#                       never written: each run works on a copy
#     --keep-going      after a crash, record it and continue fuzzing for the
#                       rest of SECONDS (long runs); still exits non-zero
#     --logs DIR        where logs, copies of the corpus and crash inputs go
#                       (default: build-fuzz/runs)
#     --coverage        instead of fuzzing: build with -fprofile-instr-generate
#                       into build-fuzz-cov, replay fuzz/corpus/<target>/ and
#                       print llvm-cov summaries (docs/FUZZING.md)
#
# Exits non-zero if any target crashes, leaks, times out (> 10 s on one input)
# or exceeds its memory limits (-rss_limit_mb=2048 -malloc_limit_mb=512).
# Needs clang and libFuzzer (Debian: clang, libclang-rt-14-dev; --coverage
# also llvm-14 for llvm-profdata-14 / llvm-cov-14).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

seconds=30 merge=0 keep_going=0 coverage=0 targets="" logs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --merge) merge=1 ;;
    --keep-going) keep_going=1 ;;
    --coverage) coverage=1 ;;
    --targets) targets=${2//,/ }; shift ;;
    --logs) logs=$2; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    [0-9]*) seconds=$1 ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
all_targets="gguf_parse_fuzzer model_load_fuzzer tokenizer_fuzzer chat_format_fuzzer session_load_fuzzer"
targets=${targets:-$all_targets}
case " $targets " in  # tokenizer_fuzzer reads llama.cpp's vocabularies
  *" tokenizer_fuzzer "*) export LLM_VOCAB_DIR="${LLM_VOCAB_DIR:-$(scripts/fetch_vocabs.sh)}" ;;
esac
jobs=${JOBS:-2}

configure_and_build() {  # DIR EXTRA_CMAKE_ARGS...
  local dir=$1
  shift
  cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DLLM_BUILD_TESTS=OFF -DLLM_BUILD_BENCH=OFF -DLLM_FUZZ=ON "$@" >/dev/null
  # Only the engine and the fuzz targets (the shared library and CLI cannot
  # link against a sanitizer-instrumented llm_engine).
  # shellcheck disable=SC2086
  for t in $targets; do cmake --build "$dir" --target "$t" -j "$jobs" >/dev/null; done
}

if [ "$coverage" = 1 ]; then
  dir="$root/build-fuzz-cov"
  configure_and_build "$dir" -DLLM_FUZZ_COVERAGE=ON
  profiles=()
  for t in $targets; do
    rm -f "$dir/$t".*.profraw
    # Replaying a directory runs every file once (no fuzzing).
    LLVM_PROFILE_FILE="$dir/$t.%p.profraw" "$dir/fuzz/$t" -runs=0 "$root/fuzz/corpus/$t" \
      >"$dir/$t.replay.log" 2>&1 || { echo "fuzz.sh: $t failed on its corpus (see $dir/$t.replay.log)" >&2; exit 1; }
    profiles+=("$dir"/"$t".*.profraw)
  done
  llvm-profdata-14 merge -sparse "${profiles[@]}" -o "$dir/fuzz.profdata"
  objs=()
  first=""
  for t in $targets; do
    if [ -z "$first" ]; then first="$dir/fuzz/$t"; else objs+=(-object "$dir/fuzz/$t"); fi
  done
  llvm-cov-14 report "$first" "${objs[@]}" -instr-profile="$dir/fuzz.profdata" \
    "$root/src/format" "$root/src/tokenizer" "$root/src/engine/model.cpp" "$root/src/model" \
    "$root/src/engine/session_state.cpp" "$root/src/engine/model_fingerprint.cpp"
  exit 0
fi

dir="$root/build-fuzz"
configure_and_build "$dir"
logs=${logs:-$dir/runs}
mkdir -p "$logs"

failed=()
for t in $targets; do
  work="$logs/$t"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/crashes"
  cp "$root/fuzz/corpus/$t"/* "$work/corpus/"
  start=$SECONDS
  segment=0
  status=0
  while :; do
    left=$((seconds - (SECONDS - start)))
    [ "$left" -gt 0 ] || break
    segment=$((segment + 1))
    rc=0
    "$dir/fuzz/$t" -max_total_time="$left" -print_final_stats=1 -timeout=10 \
      -rss_limit_mb=2048 -malloc_limit_mb=512 -artifact_prefix="$work/crashes/" \
      "$work/corpus" >"$work/log.$segment.txt" 2>&1 || rc=$?
    if [ "$rc" != 0 ]; then
      status=1
      echo "fuzz.sh: $t FAILED (exit $rc) after $((SECONDS - start)) s; log: $work/log.$segment.txt" >&2
      grep -E "^(==[0-9]+==)?ERROR|^SUMMARY|invariant" "$work/log.$segment.txt" | head -5 >&2 || true
      [ "$keep_going" = 1 ] || break
    else
      break
    fi
  done
  stats=$(grep -E "^stat::" "$work/log.$segment.txt" | tr '\n' ' ' || true)
  echo "fuzz.sh: $t ran $((SECONDS - start)) s in $segment segment(s); last: $stats" >&2
  [ "$status" = 0 ] || failed+=("$t")
  if [ "$merge" = 1 ]; then
    # Minimize: add only inputs with new edges to the committed corpus
    # (greedy set cover over edges; hit counters ignored to keep it small).
    "$dir/fuzz/$t" -set_cover_merge=1 -use_counters=0 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 \
      "$root/fuzz/corpus/$t" "$work/corpus" >"$work/merge.txt" 2>&1
    echo "fuzz.sh: merged into fuzz/corpus/$t: $(ls "$root/fuzz/corpus/$t" | wc -l) files" >&2
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: crashes in: ${failed[*]} (inputs under $logs/<target>/crashes/)" >&2
  exit 1
fi
echo "fuzz.sh: all targets ran ${seconds} s without a crash" >&2
