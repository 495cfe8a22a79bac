#!/usr/bin/env python3
"""Processes sharing one GPU: all_reduce_perf in 2 and 4 processes on device
memory (grove-launch), 8 B to 128 MiB, results checked (-c 1), in four
setups on the same GPU in the same run:

  kernel         GROVE_DEVICE_ENGINE=kernel, no MPS: the persistent kernel,
                 whose waits for a kernel of another process cost a time slice
  auto           no MPS, the default: must choose stream tapes (the INFO line
                 "device engine stream" is checked)
  mps            under an MPS daemon started here, the default (the kernel)
  mps-stream     under MPS, GROVE_DEVICE_ENGINE=stream

Prints per size each setup's out-of-place time and busbw, auto's time
against mps's, and rank 0's host time per call (select, prepare, enqueue):
the goal is auto within 2x of mps. A report:
it exits 1 only when a run fails, reports wrong results, or auto did not
choose stream tapes; 77 when an MPS daemon already serves this environment
(the runs without MPS cannot be made).

    shared_gpu.py BIN_DIR
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SIZES = [8, 128, 2048, 32768, 524288, 8 << 20, 128 << 20]
SETUPS = ["kernel", "auto", "mps", "mps-stream"]


def run(bindir, n, engine, env_extra):
    env = dict(os.environ, GROVE_DEVICE_KIND="cuda", GROVE_TIMEOUT="120", GROVE_DEBUG="INFO",
               GROVE_DEBUG_SUBSYS="INIT", GROVE_DEVICE_ENGINE=engine, **env_extra)
    cmd = [f"{bindir}/grove-launch", "-n", str(n), "--timeout", "500", "--",
           f"{bindir}/all_reduce_perf", "-b", "8", "-e", "128M", "-f", "16", "-n", "20",
           "-w", "3", "-c", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    text = out.stdout + out.stderr
    if out.returncode != 0 or "# Out of bounds values : 0 OK" not in text:
        raise RuntimeError(f"n={n} {engine}: exit {out.returncode}\n{text[-1500:]}")
    rows = {}
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) < 9 or not f[0].isdigit():
            continue
        oop_time, _, oop_busbw, oop_wrong, _, _, _, ip_wrong = f[-8:]
        if int(oop_wrong) + int(ip_wrong) != 0:
            raise RuntimeError(f"n={n} {engine}: wrong results at {f[0]} B")
        rows[int(f[0])] = (float(oop_time), float(oop_busbw))
    chosen = next((l.split("device engine ", 1)[1] for l in text.splitlines()
                   if "device engine " in l), "?")
    host = next((l.split("device path: ", 1)[1] for l in text.splitlines()
                 if "[0] grove INFO INIT device path: " in l), "")
    return rows, chosen + ("\n      rank 0 " + host if host else "")


def main():
    bindir = sys.argv[1] if len(sys.argv) > 1 else "build/bin"
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
    if os.path.exists(os.path.join(pipe, "control")):
        print(f"an MPS daemon already serves {pipe}: the runs without MPS cannot be made")
        return 77
    mps_dir = tempfile.mkdtemp(prefix="grove-mps.")
    mps_env = {"CUDA_MPS_PIPE_DIRECTORY": mps_dir, "CUDA_MPS_LOG_DIRECTORY": mps_dir}
    # A time limit (SIGTERM) must not leave the MPS daemon behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    try:
        return report(bindir, mps_env)
    finally:
        subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True,
                       env=dict(os.environ, **mps_env), capture_output=True)
        shutil.rmtree(mps_dir, ignore_errors=True)


def report(bindir, mps_env):
    failed = False
    for n in (2, 4):
        results = {}
        started = False
        for setup in SETUPS:
            engine = {"kernel": "kernel", "mps-stream": "stream"}.get(setup, "auto")
            extra = {}
            if setup.startswith("mps"):
                extra = mps_env
                if setup == "mps":
                    start = subprocess.run(["nvidia-cuda-mps-control", "-d"],
                                           env=dict(os.environ, **mps_env))
                    if start.returncode != 0:
                        print("MPS did not start: the mps setups are left out")
                        break
                    started = True
            try:
                results[setup] = run(bindir, n, engine, extra)
            except Exception as e:  # noqa: BLE001 -- report and go on
                print(f"FAIL {e}")
                failed = True
        if started:
            subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True,
                           env=dict(os.environ, **mps_env))
            time.sleep(3)  # the daemon's clients and server go away
        print(f"\n{n} processes on one GPU: out-of-place time (us) / busbw (GB/s)")
        for setup, (_, chosen) in results.items():
            print(f"  {setup:<11} device engine {chosen}")
        if "auto" in results and not results["auto"][1].startswith("stream"):
            print("FAIL auto did not choose stream tapes without MPS")
            failed = True
        head = f"{'size':>10}" + "".join(f"{s:>22}" for s in results) + f"{'auto/mps time':>15}"
        print(head)
        for size in SIZES:
            line = f"{size:>10}"
            for setup, (rows, _) in results.items():
                t, bw = rows.get(size, (float("nan"), float("nan")))
                line += f"{t:>12.1f} /{bw:>8.2f}"
            if "auto" in results and "mps" in results and size in results["mps"][0]:
                line += f"{results['auto'][0][size][0] / results['mps'][0][size][0]:>15.2f}"
            print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
