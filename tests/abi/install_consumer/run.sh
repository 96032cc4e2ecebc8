#!/bin/sh
# Install test: `cmake --install` the build tree into a fresh prefix, then
# build and run two consumers against the installed copy only:
#   1. cc consumer.c $(pkg-config --cflags --libs llm)   (PKG_CONFIG_PATH)
#   2. a CMake project: find_package(llm REQUIRED) + llm::llm
# Each must print llm_version=<expected> and load libllm.so.<major> from the
# prefix, not from the build tree.
#
# usage: run.sh <build-dir> <expected-version>
set -u

BUILD=${1:?usage: run.sh <build-dir> <expected-version>}
EXPECT=${2:?usage: run.sh <build-dir> <expected-version>}
MAJOR=${EXPECT%%.*}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/llm-install-XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
PREFIX=$WORK/prefix
FAILED=0

fail() {
  echo "FAIL: $*" >&2
  FAILED=1
}
die() {
  echo "FAIL: $*" >&2
  exit 1
}

echo "== cmake --install $BUILD --prefix $PREFIX"
cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" 2>&1 ||
  { cat "$WORK/install.log" >&2; die "cmake --install failed"; }

# ---- what was installed ---------------------------------------------------
[ -f "$PREFIX/include/llm/llm.h" ] || fail "include/llm/llm.h not installed"
cmp -s "$PREFIX/include/llm/llm.h" "$HERE/../../../include/llm/llm.h" ||
  fail "installed llm.h differs from include/llm/llm.h"
LIB=$(find "$PREFIX" -name "libllm.so.$MAJOR" | head -n 1)
[ -n "$LIB" ] || die "libllm.so.$MAJOR not installed; installed files:
$(cd "$PREFIX" && find . | sort)"
LIBDIR=$(dirname "$LIB")
[ -e "$LIBDIR/libllm.so" ] || fail "the development link libllm.so is not installed in $LIBDIR"
PC=$(find "$PREFIX" -name llm.pc | head -n 1)
[ -n "$PC" ] || die "llm.pc not installed"
CFG=$(find "$PREFIX" -name llmConfig.cmake | head -n 1)
[ -n "$CFG" ] || die "llmConfig.cmake not installed"
echo "   library $LIB"
echo "   pkg-config file $PC"
echo "   CMake package $CFG"

# Runs "$@", expects llm_version=$EXPECT, and that libllm resolves into the prefix.
check_binary() {
  name=$1
  shift
  out=$(LD_LIBRARY_PATH="$LIBDIR" "$@" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] || [ "$out" != "llm_version=$EXPECT" ]; then
    fail "$name printed '$out' (exit $rc), expected 'llm_version=$EXPECT'"
  else
    echo "   $name: $out"
  fi
  resolved=$(LD_LIBRARY_PATH="$LIBDIR" ldd "$1" 2>/dev/null | grep "libllm\.so")
  case "$resolved" in
    *"$PREFIX"*) ;;
    *) fail "$name loads libllm from outside the prefix: $resolved" ;;
  esac
}

# ---- 1. pkg-config ------------------------------------------------------------
echo "== pkg-config consumer"
export PKG_CONFIG_PATH="$(dirname "$PC")"
if ! FLAGS=$(pkg-config --cflags --libs llm 2>"$WORK/pc.err"); then
  cat "$WORK/pc.err" >&2
  fail "pkg-config --cflags --libs llm failed"
else
  echo "   pkg-config --cflags --libs llm: $FLAGS"
  case "$FLAGS" in
    *"$PREFIX"*) ;;
    *) fail "llm.pc does not point into the install prefix $PREFIX (it says: $FLAGS;
      prefix=$(pkg-config --variable=prefix llm)). llm.pc is configured with the
      configure-time CMAKE_INSTALL_PREFIX, so 'cmake --install --prefix' gives a wrong
      .pc file; make it relocatable (prefix=\${pcfiledir}/../..)" ;;
  esac
  # shellcheck disable=SC2086
  if ${CC:-cc} -std=c99 -Wall -Wextra -Werror "$HERE/consumer.c" $FLAGS \
      -o "$WORK/consumer_pc" >"$WORK/pc_build.log" 2>&1; then
    check_binary consumer_pc "$WORK/consumer_pc"
  else
    cat "$WORK/pc_build.log" >&2
    fail "the pkg-config consumer did not build"
  fi
fi

# ---- 2. find_package(llm) -------------------------------------------------------
echo "== find_package(llm) consumer"
if cmake -S "$HERE" -B "$WORK/cmake-build" -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON >"$WORK/cmake.log" 2>&1 &&
  cmake --build "$WORK/cmake-build" -j2 >>"$WORK/cmake.log" 2>&1; then
  grep "llm_DIR=" "$WORK/cmake.log" | sed 's/^-- /   /'
  grep -q "llm_DIR=$PREFIX" "$WORK/cmake.log" || fail "find_package(llm) found a package outside $PREFIX"
  check_binary consumer_c "$WORK/cmake-build/consumer_c"
  check_binary consumer_cxx "$WORK/cmake-build/consumer_cxx"
else
  cat "$WORK/cmake.log" >&2
  fail "the find_package(llm) consumer did not configure or build"
fi

# ---- 3. the installed CLI starts from the prefix alone (its RUNPATH) ------
echo "== $PREFIX/bin/llm --help, no LD_LIBRARY_PATH"
if [ -x "$PREFIX/bin/llm" ]; then
  out=$(env -u LD_LIBRARY_PATH "$PREFIX/bin/llm" --help 2>&1)
  rc=$?
  case "$out" in
    usage:*) [ $rc -eq 0 ] && echo "   starts, prints its usage" || fail "llm --help exited $rc" ;;
    *) fail "the installed llm did not start or print its usage (exit $rc): $out" ;;
  esac
  got=$(env -u LD_LIBRARY_PATH ldd "$PREFIX/bin/llm" | awk '/libllm.so/ {print $3}')
  [ -n "$got" ] && [ "$(realpath "$got")" = "$(realpath "$LIBDIR/libllm.so.$MAJOR")" ] ||
    fail "the installed llm loads '$got', not $LIBDIR/libllm.so.$MAJOR"
else
  fail "bin/llm not installed"
fi

if [ $FAILED -ne 0 ]; then
  echo "install test FAILED" >&2
  exit 1
fi
echo "install test passed"
