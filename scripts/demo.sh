#!/usr/bin/env bash
# Set up, build, fetch the default model and stream a chat answer:
#   ./scripts/demo.sh "Write a haiku about lanterns"
set -euo pipefail
cd "$(dirname "$0")/.."
prompt="${1:-Write a haiku about lanterns}"
shift || true
./scripts/setup.sh
model=$(./scripts/fetch_model.sh)
TARGET=llm_cli ./scripts/build.sh
exec "${BUILD_DIR:-build}/llm" run -m "$model" -p "$prompt" --temp 0.7 --seed 42 -n 200 "$@"
