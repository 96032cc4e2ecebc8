#!/usr/bin/env bash
# Run every language binding's tests against a built libllm, then the
# cross-language agreement test (tests/bindings/same_tokens.sh).
#   scripts/test_bindings.sh BUILD_DIR
# Each bindings/<language>/test.sh BUILD_DIR exits 0 (passed), 77 (its
# toolchain is missing locally: skipped; under CI=true it fails instead) or
# anything else (failed). The model: $LLM_MODEL_PATH. Prints one summary line
# per binding; exits 1 if any failed.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:?usage: test_bindings.sh BUILD_DIR}" && pwd)"
summary=()
failed=0
run() {  # run NAME COMMAND...: one timed test with a summary line
  local name=$1 start=$SECONDS status
  shift
  echo "=== bindings: $name" >&2
  "$@"
  status=$?
  local took=$((SECONDS - start))
  case $status in
    0) summary+=("PASS $name (${took} s)") ;;
    77) summary+=("SKIP $name: toolchain not installed") ;;
    *) summary+=("FAIL $name (exit status $status, ${took} s)"); failed=1 ;;
  esac
}
for t in "$repo"/bindings/*/test.sh; do
  run "$(basename "$(dirname "$t")")" bash "$t" "$build"
done
run same_tokens bash "$repo/tests/bindings/same_tokens.sh" "$build"
echo "=== bindings summary" >&2
printf '  %s\n' "${summary[@]}" >&2
exit $failed
