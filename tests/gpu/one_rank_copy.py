#!/usr/bin/env python3
"""One rank, out of place, against cudaMemcpyAsync: all_reduce_perf,
all_gather_perf and broadcast_perf with one rank on device memory, 1 MiB to
1 GiB, beside grove_kernel_bench's memcpy_d2d at the same sizes, on the same
GPU in the same run. Prints, per size, each collective's algbw, its share of
memcpy's (grove_kernel_bench counts bytes read plus written: memcpy's algbw is
half its GB/s), and the in-place call's time (a no-op: the call overhead),
and where the host's time per call went (the device path's INFO summary:
select, prepare, enqueue).

A report, not a pass/fail check of speed: it exits 1 only when a program
fails or reports wrong results (#wrong), 0 otherwise.

    one_rank_copy.py BIN_DIR
"""
import json
import os
import subprocess
import sys

SIZES = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]


def memcpy_algbw(bench):
    out = subprocess.run([bench, "--benchmark_filter=^memcpy_d2d/", "--benchmark_format=json"],
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"grove_kernel_bench failed: {out.stderr.strip()[-300:]}")
    text = out.stdout[out.stdout.index("{"):]
    data, _ = json.JSONDecoder().raw_decode(text)
    result = {}
    for b in data["benchmarks"]:
        size = int(b["name"].split("/")[1])
        result[size] = b["GB/s"] / 2  # read + write counted: algbw is half
    return result


def perf_rows(binary):
    cmd = [binary, "-b", "1M", "-e", "1G", "-f", "4", "-n", "20", "-w", "5", "-c", "1"]
    env = dict(os.environ, GROVE_DEBUG="INFO", GROVE_DEBUG_SUBSYS="INIT")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {(out.stdout + out.stderr)[-400:]}")
    host = [l.split("INIT ", 1)[-1] for l in (out.stdout + out.stderr).splitlines()
            if "device path:" in l]
    rows = {}
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) < 9 or not f[0].isdigit():
            continue
        oop_time, oop_algbw, _, oop_wrong, ip_time, _, _, ip_wrong = f[-8:]
        rows[int(f[0])] = (float(oop_algbw), float(oop_time), float(ip_time),
                           int(oop_wrong) + int(ip_wrong))
    return rows, host


def main():
    bindir = sys.argv[1] if len(sys.argv) > 1 else "build/bin"
    ref = memcpy_algbw(f"{bindir}/grove_kernel_bench")
    failed = False
    print(f"{'collective':<16}{'size':>10}{'algbw GB/s':>12}{'memcpy':>10}{'share':>8}"
          f"{'in-place us':>13}")
    for coll in ("all_reduce", "all_gather", "broadcast"):
        rows, host = perf_rows(f"{bindir}/{coll}_perf")
        for size in SIZES:
            if size not in rows:
                print(f"{coll:<16}{size >> 20:>8}Mi  missing from the output")
                failed = True
                continue
            algbw, _, ip_time, wrong = rows[size]
            m = ref.get(size, 0)
            share = f"{100 * algbw / m:.1f}%" if m else "?"
            print(f"{coll:<16}{size >> 20:>8}Mi{algbw:>12.1f}{m:>10.1f}{share:>8}{ip_time:>13.2f}")
            if wrong:
                print(f"  {wrong} wrong elements")
                failed = True
        for line in host:
            print(f"  {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
