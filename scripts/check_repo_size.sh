#!/usr/bin/env bash
# Fails when the tracked files (git ls-files) add up to more than the limit:
# the repository is vendored as a submodule and the GPU test machine takes at
# most 64 MiB of working tree. Large test data that needs a download anyway
# is stored compactly (docs/GOLDENS.md). LLM_REPO_SIZE_LIMIT overrides the
# limit in bytes (default 32 MiB).
set -euo pipefail
cd "$(dirname "$0")/.."
limit="${LLM_REPO_SIZE_LIMIT:-33554432}"
total=$(git ls-files -z | xargs -0 stat -c %s -- 2>/dev/null | awk '{s += $1} END {print s + 0}')
if [ "$total" -gt "$limit" ]; then
  echo "check_repo_size: tracked files total $total bytes, over the limit of $limit bytes" \
       "($((limit / 1048576)) MiB). Largest:" >&2
  git ls-files -z | xargs -0 stat -c '%s %n' -- 2>/dev/null | sort -rn | head -10 >&2
  echo "Store large data compactly or outside the tree (see docs/GOLDENS.md)." >&2
  exit 1
fi
echo "check_repo_size: tracked files total $total bytes (limit $limit)" >&2
