#!/usr/bin/env bash
# Set up, build and run every test. With CI=true a missing model or reference
# file fails the run instead of being skipped.
#
# Budget on 2 cores (CI allows 90 minutes in all): setup ~3 min, model fetch
# ~1 min, build ~15 min, tests ~10 min.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export LLM_MODEL_PATH="${LLM_MODEL_PATH:-$(./scripts/fetch_model.sh)}"
./scripts/build.sh
build="${BUILD_DIR:-build}"
ctest --test-dir "$build" --output-on-failure -j "${JOBS:-$(nproc)}"
