#!/usr/bin/env bash
# Python binding tests (pytest) against BUILD_DIR's libllm.so.
#   bindings/python/test.sh BUILD_DIR
# The model: $LLM_MODEL_PATH (its tests are skipped when unset). Without a
# Python that has pytest: exit 77 (skipped), or 1 under CI=true.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:?usage: test.sh BUILD_DIR}" && pwd)"
py=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c "import pytest" 2>/dev/null; then
    py="$candidate"
    break
  fi
done
if [ -z "$py" ]; then
  echo "python: no python3 with pytest (Debian: python3-pytest)" >&2
  [ "${CI:-}" = "true" ] && exit 1
  exit 77
fi
export LLM_LIB_DIR="$build"
cd "$here"
exec "$py" -m pytest -q -p no:cacheprovider tests
