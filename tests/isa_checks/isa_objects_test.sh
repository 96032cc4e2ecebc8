#!/bin/sh
# No object compiled with ISA flags (*_avx2.cpp, *_avx512.cpp, *_amx.cpp:
# CMakeLists.txt) may define a weak or unique function. Such a function --
# an inline function or template member (std::vector<float>::assign, say)
# instantiated there -- also exists in the files compiled for every CPU, and
# the linker keeps one copy for the whole library: if it keeps the ISA
# file's, every caller runs AVX-512 instructions, and libllm dies with
# SIGILL on CPUs without them (it did: Session::Init on an AVX2-only host).
# Kernel files keep their helpers in anonymous namespaces and call no
# out-of-line library templates; this test holds them to it. Weak data
# (inline constant tables, the sanitizer builds' DW.ref.__gxx_personality_v0)
# holds no instructions and is allowed.
#
# Usage: isa_objects_test.sh READELF OBJECT...   (the engine's object files)
set -eu
readelf_tool=$1
shift
"$readelf_tool" --version >/dev/null 2>&1 || {
  echo "FAIL: cannot run readelf ('$readelf_tool')" >&2
  exit 1
}
checked=0
bad=0
for obj in "$@"; do
  case "$obj" in
    *_avx2.cpp.o | *_avx512.cpp.o | *_amx.cpp.o) ;;
    *) continue ;;
  esac
  checked=$((checked + 1))
  # readelf -Ws: Num Value Size Type Bind Vis Ndx Name; defined FUNC
  # symbols bound WEAK or UNIQUE.
  weak=$("$readelf_tool" -Ws --wide "$obj" |
    awk '$4 == "FUNC" && ($5 == "WEAK" || $5 == "UNIQUE") && $7 != "UND" { print $8 }')
  if [ -n "$weak" ]; then
    echo "FAIL: $(basename "$obj") defines functions the linker may pick for every CPU:" >&2
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
