#!/usr/bin/env bash
# Builds the peer harnesses of perf/compare (a CMake project of its own, not
# part of grove's build) into build/compare/bin:
#   perf/compare/build.sh [build dir, default build/compare]
# Peers that are not installed are skipped (scripts/install-deps --compare).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/build/compare}"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$here" -B "$out" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$out" -j "$(nproc)"
echo "build.sh: harnesses in $out/bin: $(cd "$out/bin" && ls | tr '\n' ' ')"
