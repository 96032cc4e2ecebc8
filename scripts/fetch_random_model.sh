#!/usr/bin/env bash
# Generate (once) the ~1.1B-parameter random-weight Llama used by the
# throughput benchmarks (tools/make_random_llama.py: TinyLlama shapes, Q4_0,
# seeded, ~622 MB) into the cache directory, and print its path. Nothing is
# downloaded; the file is never committed. Cache: $LLM_CACHE_DIR or
# ~/.cache/libllm.
set -euo pipefail

cache="${LLM_CACHE_DIR:-$HOME/.cache/libllm}"
model="$cache/random-llama-1b-q4_0.gguf"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ ! -s "$model" ]; then
  echo "fetch_random_model: generating $model (about 30 s, 1.2 GB of memory)" >&2
  python3 "$here/../tools/make_random_llama.py" "$model" >&2
fi
echo "$model"
