#!/bin/sh
# No object compiled with ISA flags (*_avx2.cpp, *_avx512.cpp, *_amx.cpp:
# CMakeLists.txt) may define a weak or unique symbol. Such a symbol -- an
# inline function or template member (std::vector<float>::assign, say)
# instantiated there -- also exists in the files compiled for every CPU, and
# the linker keeps one copy for the whole library: if it keeps the ISA
# file's, every caller runs AVX-512 instructions, and libllm dies with
# SIGILL on CPUs without them (it did: Session::Init on an AVX2-only host).
# Kernel files keep their helpers in anonymous namespaces and call no
# out-of-line library templates; this test holds them to it.
#
# Usage: isa_objects_test.sh NM OBJECT...   (the engine's object files)
set -eu
nm_tool=$1
shift
checked=0
bad=0
for obj in "$@"; do
  case "$obj" in
    *_avx2.cpp.o | *_avx512.cpp.o | *_amx.cpp.o) ;;
    *) continue ;;
  esac
  checked=$((checked + 1))
  # nm: W/V weak (object) symbols, u unique global symbols.
  weak=$("$nm_tool" -C "$obj" | grep -E ' [WVu] ' || true)
  if [ -n "$weak" ]; then
    echo "FAIL: $(basename "$obj") defines symbols the linker may pick for every CPU:" >&2
    echo "$weak" >&2
    bad=1
  fi
done
if [ "$checked" -eq 0 ]; then
  echo "FAIL: no ISA-flagged object among the arguments" >&2
  exit 1
fi
echo "checked $checked ISA-flagged objects"
exit $bad
