#!/usr/bin/env bash
# install.minimal_build: the bare build, as on a machine that has only what
# `scripts/install-deps --minimal` installs: every optional feature off (CUDA,
# hwloc, ibverbs, MPI, torch), no tests or perf binaries. Configures it,
# builds libgrove and grove-info, and checks that grove-info reports every
# optional feature absent. Compiled without optimisation: the tier checks
# that the bare build configures, builds and runs, and -O0 compiles it in
# about three quarters of -O3's time.
#   test_minimal_build.sh <build dir for it> <source dir>
set -euo pipefail
dir=$1 src=$2
cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O0 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O0 -DNDEBUG" \
  -DGROVE_WITH_CUDA=OFF -DGROVE_WITH_HWLOC=OFF -DGROVE_WITH_IBVERBS=OFF -DGROVE_WITH_MPI=OFF \
  -DGROVE_WITH_TORCH=OFF -DGROVE_BUILD_TESTS=OFF -DGROVE_BUILD_PERF=OFF -DGROVE_BUILD_EXAMPLES=OFF \
  >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; echo "minimal configure failed"; exit 1; }
cmake --build "$dir" -j 2 --target grove grove-info >"$dir.build.log" 2>&1 \
  || { tail -40 "$dir.build.log"; echo "minimal build failed"; exit 1; }
info=$("$dir/bin/grove-info")
echo "$info" | grep -E '^ *(CUDA|HWLOC|IBVERBS|MPI|TORCH):'
for f in CUDA HWLOC IBVERBS MPI TORCH; do
  echo "$info" | grep -qE "^ *$f: no" || { echo "grove-info does not report $f absent"; exit 1; }
done
echo "install.minimal_build: ok"
