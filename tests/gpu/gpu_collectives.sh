#!/usr/bin/env bash
# GPU tier: every collective on CUDA communicators whose ranks share the one
# GPU, results checked (-c 1), 8 B .. 4 MiB:
#  - in 2, 3 and 4 processes (grove-launch), once over cuda_p2p (CUDA IPC)
#    and once over host_staged (GROVE_P2P_DISABLE=1). With 2 processes every
#    dtype and op; with 3 and 4, float sum. Without MPS these processes run
#    stream tapes (GROVE_DEVICE_ENGINE=auto); these runs check results, not
#    speed.
#  - in 2 threads of one process (-t 2), whose kernels do run concurrently,
#    over cuda_p2p: every dtype and op.
# GROVE_GPU_QUICK=1 keeps a short set: every collective in 2 threads (float,
# sum, every op for all_reduce) and in 2 processes over cuda_p2p.
# Exits 77 (ctest: Skipped) without a GPU.
# Usage: gpu_collectives.sh <grove-launch> <folder of the perf binaries>
set -u
launch=$1
bin=$2
probe=$(GROVE_DEVICE_KIND=cuda "$bin/all_reduce_perf" -b 8 -e 8 -n 1 -w 0 -c 0 2>&1)
if ! grep -q "# Memory: CUDA device memory" <<<"$probe"; then
  echo "no CUDA device: GPU tests skipped"
  echo "$probe" | tail -3
  exit 77
fi
colls="all_reduce broadcast reduce all_gather reduce_scatter gather scatter alltoall sendrecv"
failed=0
# check <what> <transport it must use> <command...>
check() {
  local what=$1 want=$2
  shift 2
  local out rc
  out=$(GROVE_DEVICE_KIND=cuda GROVE_TIMEOUT=60 GROVE_DEBUG=INFO GROVE_DEBUG_SUBSYS=INIT "$@" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] || ! grep -q "# Out of bounds values : 0 OK" <<<"$out" ||
     ! grep -q "over $want" <<<"$out"; then
    echo "FAIL $what (exit $rc)"
    echo "$out" | tail -25
    failed=1
  else
    echo "ok   $what"
  fi
}
if [ "${GROVE_GPU_QUICK:-0}" = 1 ]; then
  for coll in $colls; do
    check "$coll 2 threads over cuda_p2p" cuda_p2p \
      "$bin/${coll}_perf" -t 2 -b 8 -e 4M -f 16 -d float -o all -n 2 -w 1 -c 1
    check "$coll n=2 over cuda_p2p" cuda_p2p \
      "$launch" -n 2 --timeout 120 -- "$bin/${coll}_perf" -b 8 -e 4M -f 64 -d float -o sum -n 2 -w 1 -c 1
  done
  # The persistent kernel in processes too (each call costs a time slice: short)
  check "all_reduce n=2 over cuda_p2p, persistent kernel" cuda_p2p env GROVE_DEVICE_ENGINE=kernel \
    "$launch" -n 2 --timeout 120 -- "$bin/all_reduce_perf" -b 8 -e 4M -f 64 -d float -o sum -n 2 -w 1 -c 1
  exit $failed
fi
for disable in 0 1; do
  want=cuda_p2p
  [ "$disable" = 1 ] && want=host_staged
  for n in 2 3 4; do
    sweep=(-d float -o sum -f 64)
    [ "$n" = 2 ] && sweep=(-d all -o all -f 8)
    for coll in $colls; do
      check "$coll n=$n over $want" $want env GROVE_P2P_DISABLE=$disable \
        "$launch" -n "$n" --timeout 500 -- "$bin/${coll}_perf" -b 8 -e 4M "${sweep[@]}" -n 2 -w 1 -c 1
    done
  done
done
for coll in $colls; do
  check "$coll 2 threads over cuda_p2p" cuda_p2p \
    "$bin/${coll}_perf" -t 2 -b 8 -e 4M -f 8 -d all -o all -n 2 -w 1 -c 1
done
exit $failed
