#!/usr/bin/env bash
# Generate (once) a random-weight Llama used by the throughput benchmarks
# (tools/make_random_llama.py) into the cache directory, and print its path.
# Nothing is downloaded; the file is never committed. Cache: $LLM_CACHE_DIR
# or ~/.cache/libllm.
#
# Usage: scripts/fetch_random_model.sh [SHAPE [TYPE]]
#   SHAPE: 1b (default; TinyLlama shapes), smollm2, 3b
#   TYPE:  q4_0 (default), q4_1, q8_0, f16, q4_k_m, q6_k (the K-quant types
#          need llama-cpp-python, whose quantizer makes them, or a
#          llama-quantize binary named by $LLM_LLAMA_QUANTIZE)
# The default, 1b q4_0, is ~622 MB and takes about 30 s and 1.2 GB of memory;
# 3b takes a few minutes and up to ~5 GB.
set -euo pipefail

shape="${1:-1b}"
type="${2:-q4_0}"
cache="${LLM_CACHE_DIR:-$HOME/.cache/libllm}"
model="$cache/random-llama-$shape-$type.gguf"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ ! -s "$model" ]; then
  # The generator needs numpy and gguf (PyPI); a fresh machine has neither.
  if ! python3 -c 'import numpy, gguf' 2>/dev/null; then
    echo "fetch_random_model: installing numpy and gguf from PyPI" >&2
    python3 -m pip install --quiet --disable-pip-version-check numpy gguf >&2
  fi
  echo "fetch_random_model: generating $model" >&2
  python3 "$here/../tools/make_random_llama.py" --shape "$shape" --type "$type" \
    ${LLM_LLAMA_QUANTIZE:+--llama-quantize "$LLM_LLAMA_QUANTIZE"} "$model" >&2
fi
echo "$model"
