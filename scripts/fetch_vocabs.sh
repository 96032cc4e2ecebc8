#!/usr/bin/env bash
# Fetch the tokenizer test vocabularies (llama.cpp's vocab-only GGUFs,
# models/ggml-vocab-*.gguf with their .inp/.out test strings) and print the
# directory holding them. They ship inside the source distribution of the PyPI
# package llama-cpp-python, pinned here by version and sha256; only those
# files are extracted. Nothing is committed (tests/data/tokenizer/README.md).
# Cache: $LLM_CACHE_DIR or ~/.cache/libllm. Download: 77 MB, once.
# The tests read the directory from $LLM_VOCAB_DIR.
set -euo pipefail

cache="${LLM_CACHE_DIR:-$HOME/.cache/libllm}"
version="0.3.36"
sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
dir="$cache/llama_cpp_vocab-$version"
stamp="$dir/.sdist-sha256"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sha256" ]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$cache/sdist"
sdist="$cache/sdist/llama_cpp_python-$version.tar.gz"
if ! { [ -f "$sdist" ] && echo "$sha256  $sdist" | sha256sum -c --status; }; then
  echo "fetch_vocabs: downloading llama-cpp-python==$version (source, 77 MB) from PyPI" >&2
  python3 -m pip download --quiet --no-deps --no-binary :all: --disable-pip-version-check \
    -d "$cache/sdist" "llama-cpp-python==$version" >&2
fi
if ! echo "$sha256  $sdist" | sha256sum -c --status; then
  echo "fetch_vocabs: $sdist does not have the expected sha256 $sha256" >&2
  exit 1
fi
rm -rf "$dir"
mkdir -p "$dir"
python3 - "$sdist" "$dir" <<'PY'
import os, re, shutil, sys, tarfile
sdist, dst = sys.argv[1], sys.argv[2]
pattern = re.compile(r"^[^/]+/vendor/llama\.cpp/models/(ggml-vocab-[A-Za-z0-9._-]+\.gguf(\.inp|\.out)?)$")
n = 0
with tarfile.open(sdist, "r:gz") as tar:
    for member in tar:
        m = pattern.match(member.name)
        if not m or not member.isfile():
            continue
        with tar.extractfile(member) as src, open(os.path.join(dst, m.group(1)), "wb") as out:
            shutil.copyfileobj(src, out)
        n += 1
if n == 0:
    sys.exit("fetch_vocabs: no ggml-vocab-*.gguf in " + sdist)
PY
echo "$sha256" >"$stamp"
rm -f "$sdist"  # the extracted files are what the tests need
echo "$dir"
