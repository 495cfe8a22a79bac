#!/usr/bin/env bash
# install.consumer: cmake --install the build into a fresh prefix, then use it
# as a user outside the tree would, both ways:
#   1. CMake:      find_package(grove) in tests/install/consumer, grove::grove
#   2. pkg-config: cc consumer.c $(pkg-config --cflags --libs grove)
# Each consumer runs a 2-process all-reduce. The installed tools and a perf
# binary must run from the prefix, loading its library (not the build's), and the
# installed library must carry its soname.
#   test_install.sh <build dir> <source dir>
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/grove-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "install.consumer: FAIL: $*" >&2; exit 1; }

prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
[[ -f $prefix/include/grove/grove.h ]] || fail "no include/grove/grove.h"
libdir=$(dirname "$(find "$prefix" -name 'libgrove.so.0' | head -1)")
[[ -n $libdir && -e $libdir/libgrove.so ]] || fail "no libgrove.so / libgrove.so.0 under $prefix"
soname=$(objdump -p "$libdir/libgrove.so" | awk '/SONAME/ {print $2}')
[[ $soname == libgrove.so.0 ]] || fail "soname is '$soname', not libgrove.so.0"
for f in grove-launch grove-info grove-topo grove-plan all_reduce_perf; do
  [[ -x $prefix/bin/$f ]] || fail "bin/$f was not installed"
done

# What runs must load the prefix's library, not the build tree's.
unset LD_LIBRARY_PATH
loads_installed() {
  local got
  got=$(ldd "$1" | awk '$1 == "libgrove.so.0" {print $3}')
  [[ -n $got && $(realpath "$got") == $(realpath "$libdir/libgrove.so.0") ]] \
    || fail "$1 loads '${got:-no libgrove.so.0}', not $libdir/libgrove.so.0"
}

echo "== CMake consumer (find_package(grove))"
cmake -S "$src/tests/install/consumer" -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "configuring the CMake consumer"; }
cmake --build "$work/cmake" >"$work/cmake-build.log" 2>&1 || { cat "$work/cmake-build.log"; fail "building it"; }
"$work/cmake/consumer" || fail "the CMake consumer"
loads_installed "$work/cmake/consumer"

echo "== pkg-config consumer"
export PKG_CONFIG_PATH=$libdir/pkgconfig
[[ $(pkg-config --modversion grove) == "$(sed -n 's/^project(grove VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")" ]] \
  || fail "pkg-config --modversion grove says $(pkg-config --modversion grove)"
# shellcheck disable=SC2046
cc -std=c99 -Wall -Werror -o "$work/pc-consumer" "$src/tests/install/consumer/consumer.c" \
  $(pkg-config --cflags --libs grove) -Wl,-rpath,"$(pkg-config --variable=libdir grove)" \
  || fail "compiling with pkg-config's flags"
loads_installed "$work/pc-consumer"
"$work/pc-consumer" || fail "the pkg-config consumer"

echo "== NCCL ABI library"
nccl=$libdir/grove-nccl/libnccl.so.2
[[ -f $nccl ]] || fail "no grove-nccl/libnccl.so.2 under $libdir"
[[ $(objdump -p "$nccl" | awk '/SONAME/ {print $2}') == libnccl.so.2 ]] || fail "$nccl: soname is not libnccl.so.2"
loads_installed "$nccl"

echo "== installed programs"
loads_installed "$prefix/bin/all_reduce_perf"
# grove-info is a view of the library's internals: it links the layers
# themselves, not libgrove.so (docs/architecture.md), and must run from the
# prefix with everything it needs found.
if ldd "$prefix/bin/grove-info" | grep -q "not found"; then
  ldd "$prefix/bin/grove-info"
  fail "grove-info from the prefix misses a library"
fi
"$prefix/bin/grove-info" >"$work/info.txt" || fail "grove-info from the prefix"
head -3 "$work/info.txt"
grep -q "^Default selection rules" "$work/info.txt" || fail "grove-info prints no selection rules"
"$prefix/bin/grove-launch" -n 2 "$prefix/bin/all_reduce_perf" -b 8 -e 64K -f 8 -c 1 >"$work/perf.log" 2>&1 \
  || { cat "$work/perf.log"; fail "grove-launch -n 2 all_reduce_perf from the prefix"; }
grep -q "Out of bounds values : 0 OK" "$work/perf.log" || { cat "$work/perf.log"; fail "all_reduce_perf's check"; }
echo "install.consumer: ok"
