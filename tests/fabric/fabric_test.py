#!/usr/bin/python3
"""Fabric tests: grove over emulated fabrics (root only; exit 77 = skipped).

How it works: each test builds its fabric on a private id (default 9) with
the `fabric` tool, runs grove ranks on it through `fabric run` (grove-launch
--netns), and always tears the fabric down again (try/finally; SIGTERM from
ctest's timeout becomes an exception so the finally block still runs).

  collectives  on k4, ring4 and dgx1v-015: grove_mp_check --quick (every
               collective, checked values) and all_reduce_perf -c 1; the
               fabric's tc counters must show the data crossed the links.
  mpi          on k4: fabric_mpi_check (exact MPI_Allreduce results) through
               `fabric mpirun`; the tc counters must show the bytes crossed the
               links and almost none the management bridge.
  cut          on k4: a 64 KiB all-reduce loop; once every rank is in the
               loop, the gpu0-gpu1 link is cut. With GROVE_TIMEOUT=5 every
               rank must exit with an error message, none may hang or
               report success, all well before the job's own timeout.
  kill         as cut, but the host gpu3 dies instead: its rank is killed
               (SIGKILL); the three others must exit with an error.

--transport T runs grove over transport T (GROVE_TRANSPORT; default socket,
e.g. net for the libfabric transport over its tcp provider).

Usage: fabric_test.py collectives|cut|kill|mpi --build DIR [--id K] [--fabrics a,b]
       [--transport T] [--mpi-check P]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fabric_net  # noqa: E402

FABRIC = os.path.join(HERE, "fabric")
kSkip = 77


class TestFailure(Exception):
    pass


def fabric(*args, check=True, **kw):
    """Runs the fabric tool; returns the CompletedProcess."""
    p = subprocess.run([FABRIC] + list(args), capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise TestFailure(f"fabric {' '.join(args)} -> {p.returncode}\n{p.stdout}{p.stderr}")
    return p


def runOn(name, a, env, cmd, timeout):
    """(exit status, output) of `fabric run` with --tag-output."""
    args = ["run", name, "--id", str(a.id), "--build", a.build, "--timeout", str(timeout),
            "--tag-output", "--"] + env + [f"GROVE_TRANSPORT={a.transport}", "--"] + cmd
    p = fabric(*args, check=False, timeout=timeout + 30)
    return p.returncode, p.stdout + p.stderr


def testCollectives(a):
    """Checked collectives on each fabric; data must cross the links."""
    bins = os.path.join(a.build, "bin")
    for name in a.fabrics.split(","):
        fabric("up", name, "--id", str(a.id))
        rc, out = runOn(name, a, ["GROVE_TIMEOUT=20"], [os.path.join(bins, "grove_mp_check"), "--quick"], 240)
        if rc != 0 or "SUMMARY" not in out:
            raise TestFailure(f"{name}: grove_mp_check --quick exited {rc}\n{out[-4000:]}")
        print(f"{name}: " + next(l for l in out.splitlines() if "SUMMARY" in l))
        plan = fabric_net.findFabric(name, a.id)
        before = sum(fabric_net.txBytes(plan).values()), fabric_net.mgmtBytes(plan)
        rc, out = runOn(name, a, [], [os.path.join(bins, "all_reduce_perf"), "-b", "1K", "-e", "4M",
                                      "-f", "4", "-c", "1", "-n", "5", "-w", "1"], 120)
        wrong = re.findall(r"Out of bounds values\s*:\s*(\d+)", out)
        if rc != 0 or not wrong or int(wrong[0]) != 0:
            raise TestFailure(f"{name}: all_reduce_perf -c 1 exited {rc}, out of bounds {wrong}\n{out[-4000:]}")
        moved = sum(fabric_net.txBytes(plan).values()) - before[0]
        mgmt = fabric_net.mgmtBytes(plan) - before[1]
        # the 4 MiB all-reduces alone (5 timed + 1 warm-up + 1 checked, out-of-place and in-place)
        # move 14 x 2(n-1)/n x 4 MiB per rank; the data must cross the links, not the bridge
        need = 14 * 2 * (len(plan["ranks"]) - 1) * (4 << 20)
        if moved < need or mgmt > moved / 20:
            raise TestFailure(f"{name}: {moved} bytes crossed the fabric links (want >= {need}), "
                              f"{mgmt} the management bridge (want < 5 % of that)")
        print(f"{name}: all_reduce_perf clean; {moved / 1e6:.1f} MB crossed the emulated links, "
              f"{mgmt / 1e6:.2f} MB the management bridge")
        fabric("down", name, "--id", str(a.id))


def waitReady(readyDir, n, proc, limit):
    """Waits until `n` ranks have written their ready file."""
    deadline = time.time() + limit
    while time.time() < deadline:
        if len([f for f in os.listdir(readyDir) if f.startswith("ready.")]) >= n:
            return
        if proc.poll() is not None:
            raise TestFailure(f"job ended ({proc.returncode}) before every rank was ready")
        time.sleep(0.1)
    raise TestFailure(f"ranks not ready after {limit} s")


def killNode(a, node):
    """SIGKILL to every process in `node`'s namespace: the host is gone."""
    ns = f"gf{a.id}-{node}"
    pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
    if not pids:
        raise TestFailure(f"no process in namespace {ns}")
    for pid in pids:
        os.kill(int(pid), signal.SIGKILL)


def testCut(a, kill=False):
    """Cut a link (or kill a host) under a running all-reduce loop: every rank must fail cleanly."""
    name = "k4"
    fabric("up", name, "--id", str(a.id))
    with tempfile.TemporaryDirectory() as d:
        cmd = [FABRIC, "run", name, "--id", str(a.id), "--build", a.build, "--timeout", "90",
               "--tag-output", "--", "GROVE_TIMEOUT=5", f"GROVE_TRANSPORT={a.transport}", "--",
               os.path.join(a.build, "bin", "grove_mp_check"), "--loop-seconds", "60", "--ready-dir", d]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            waitReady(d, 4, proc, 40)
            time.sleep(1.5)
            if kill:
                killNode(a, "gpu3")
            else:
                fabric("cut", name, "gpu0", "gpu1", "--id", str(a.id))
            cutAt = time.time()
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:  # `fabric run` stops its job on SIGTERM
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    took = time.time() - cutAt
    print(out[-3000:])
    what = "the kill" if kill else "the cut"
    if proc.returncode in (0, 124) or proc.returncode < 0:
        raise TestFailure(f"job exit {proc.returncode} after {what} (want a rank's error status)")
    for r in range(3 if kill else 4):
        lines = [l for l in out.splitlines() if re.match(rf"\[{r}\]", l)]
        if not any(re.search(r"failed.*(timed out|network error|abort)", l, re.I) for l in lines):
            raise TestFailure(f"rank {r} printed no error after {what}:\n" + "\n".join(lines[-5:]))
        # each rank must end by itself with an error status, not be killed by the launcher
        if not re.search(rf"grove-launch: rank {r} exited with code [1-9]", out):
            raise TestFailure(f"rank {r} did not exit by itself with an error status")
    print(f"{'kill' if kill else 'cut'} ({a.transport}): every rank failed with an error; the job "
          f"ended {took:.1f} s after {what} (exit {proc.returncode})")


def testMpi(a):
    """Open MPI over the fabric: exact all-reduce results, bytes over the links, not the bridge."""
    if shutil.which("mpirun") is None:
        print("fabric mpi test skipped: mpirun not found (apt-get install openmpi-bin)")
        return kSkip
    name, count, iters = "k4", 262144, 4
    fabric("up", name, "--id", str(a.id))
    plan = fabric_net.findFabric(name, a.id)
    before = sum(fabric_net.txBytes(plan).values()), fabric_net.mgmtBytes(plan)
    p = fabric("mpirun", name, "--id", str(a.id), "--timeout", "120", "--",
               a.mpi_check, str(count), str(iters), check=False, timeout=180)
    out = p.stdout + p.stderr
    if p.returncode != 0 or "fabric_mpi_check: OK" not in out:
        raise TestFailure(f"mpirun exited {p.returncode}\n{out[-4000:]}")
    moved = sum(fabric_net.txBytes(plan).values()) - before[0]
    mgmt = fabric_net.mgmtBytes(plan) - before[1]
    need = iters * (len(plan["ranks"]) - 1) * count * 4   # no all-reduce moves less
    if moved < need or mgmt > moved / 20:
        raise TestFailure(f"{moved} bytes crossed the fabric links (want >= {need}), "
                          f"{mgmt} the management bridge (want < 5 % of that)")
    print(f"mpi: {next(l for l in out.splitlines() if 'OK' in l)}; {moved / 1e6:.1f} MB crossed the "
          f"emulated links, {mgmt / 1e6:.3f} MB the management bridge")
    return 0


def interrupted(signum, frame):
    """SIGTERM (ctest's timeout) unwinds like Ctrl-C, so the fabric is still torn down."""
    raise KeyboardInterrupt


def main():
    """Runs one test; 77 when fabrics cannot be built here."""
    p = argparse.ArgumentParser()
    p.add_argument("test", choices=["collectives", "cut", "kill", "mpi"])
    p.add_argument("--transport", default="socket")
    p.add_argument("--mpi-check", help="the fabric_mpi_check program (test mpi)")
    p.add_argument("--build", required=True)
    p.add_argument("--id", type=int, default=9)
    p.add_argument("--fabrics", default="k4,ring4,dgx1v-015")
    a = p.parse_args()
    why = fabric_net.preflight()
    if why:
        print(f"fabric tests skipped: {why}")
        return kSkip
    signal.signal(signal.SIGTERM, interrupted)
    try:
        tests = {"collectives": testCollectives, "cut": testCut, "mpi": testMpi,
                 "kill": lambda a: testCut(a, kill=True)}
        return tests[a.test](a) or 0
    except TestFailure as e:
        print(f"FAIL: {e}")
        return 1
    finally:
        fabric_net.teardown(a.id)


if __name__ == "__main__":
    sys.exit(main())
