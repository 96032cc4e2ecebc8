#!/usr/bin/env bash
# C# binding: compile with mcs (C# 7) into BUILD_DIR/bindings/csharp, run the
# tests (our own runner, tests/TestRunner.cs) and the NPC example against
# BUILD_DIR's libllm.so.
#   bindings/csharp/test.sh BUILD_DIR [--build-only]
# The model: $LLM_MODEL_PATH (its tests are skipped when unset). Without mcs
# or mono: exit 77 (skipped), or 1 under CI=true.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "${1:?usage: test.sh BUILD_DIR [--build-only]}" && pwd)"
for tool in mcs mono; do
  if ! command -v "$tool" >/dev/null; then
    echo "csharp: $tool not found (Debian: mono-mcs, mono-runtime)" >&2
    [ "${CI:-}" = "true" ] && exit 1
    exit 77
  fi
done
if [ ! -e "$build/libllm.so" ]; then
  echo "csharp: $build/libllm.so not found: DllImport(\"llm\") needs the unversioned library" >&2
  exit 1
fi
out="$build/bindings/csharp"
mkdir -p "$out"
mcs_flags=(-langversion:7 -warnaserror -nologo)
# -noconfig: the library references mscorlib only (what Unity and IL2CPP always have).
mcs "${mcs_flags[@]}" -noconfig -target:library -out:"$out/LibLlm.dll" "$here"/src/*.cs
mcs "${mcs_flags[@]}" -r:"$out/LibLlm.dll" -r:System.Core -out:"$out/LibLlm.Tests.exe" "$here"/tests/*.cs
mcs "${mcs_flags[@]}" -r:"$out/LibLlm.dll" -r:System.Core -out:"$out/Greedy.exe" "$here/examples/Greedy.cs"
mcs "${mcs_flags[@]}" -r:"$out/LibLlm.dll" -r:System.Core -out:"$out/Npc.exe" "$repo/examples/npc/Npc.cs"
[ "${2:-}" = "--build-only" ] && exit 0

export LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mono --debug "$out/LibLlm.Tests.exe"
if [ -n "${LLM_MODEL_PATH:-}" ]; then
  echo "csharp: the NPC example (examples/npc/Npc.cs):"
  mono --debug "$out/Npc.exe" "$LLM_MODEL_PATH"
fi
