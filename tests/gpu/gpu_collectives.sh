#!/usr/bin/env bash
# GPU tier: every collective on CUDA communicators in real processes that
# share the one GPU -- grove-launch -n N -- <coll>_perf on device memory,
# every dtype and op, 8 B .. 4 MiB, results checked (-c 1) -- once over
# cuda_p2p (CUDA IPC) and once over host_staged (GROVE_P2P_DISABLE=1), with
# N = 2, 3 and 4. Exits 77 (ctest: Skipped) without a GPU.
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
failed=0
for disable in 0 1; do
  want=cuda_p2p
  [ "$disable" = 1 ] && want=host_staged
  for n in 2 3 4; do
    for coll in all_reduce broadcast reduce all_gather reduce_scatter gather scatter alltoall sendrecv; do
      out=$(GROVE_DEVICE_KIND=cuda GROVE_P2P_DISABLE=$disable GROVE_TIMEOUT=60 GROVE_DEBUG=INFO \
            GROVE_DEBUG_SUBSYS=INIT "$launch" -n "$n" --timeout 500 -- \
            "$bin/${coll}_perf" -b 8 -e 4M -f 8 -d all -o all -n 2 -w 1 -c 1 2>&1)
      rc=$?
      what="$coll n=$n over $want"
      if [ $rc -ne 0 ] || ! grep -q "# Out of bounds values : 0 OK" <<<"$out" ||
         ! grep -q "over $want" <<<"$out"; then
        echo "FAIL $what (exit $rc)"
        echo "$out" | tail -25
        failed=1
      else
        echo "ok   $what"
      fi
    done
  done
done
exit $failed
