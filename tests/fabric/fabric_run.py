"""Runs programs on a built fabric: grove ranks through grove-launch, or Open MPI.

How it works: `runGrove` starts `grove-launch -n N --netns NS0,NS1,..
--root-host <rank 0's management address>` so each rank joins its node's
namespace and bootstraps over the management bridge, with
GROVE_TRANSPORT=socket (all namespaces share one host, so grove would
otherwise pick shared memory and bypass the fabric), GROVE_TOPO_FILE = the
fabric's topology file and GROVE_TOPO_RANKS = its rank nodes; the socket
transport then moves data over the link addresses of that file. Both grove
and Open MPI streams get the send buffer `sendBuffer(plan)` (below: the
transports' defaults queue a fraction of a second of a slow emulated link
ahead of every other stream on it).

`runMpi` starts mpirun in the root namespace with one "host" per rank, named
by the rank's management address, so mpirun treats every rank as remote. Its
plm_rsh_agent is a script written into the state folder that maps such an
address to its namespace and runs the daemon there (`ip netns exec NS` plus
`unshare --uts` with its own host name, so the daemons look like distinct
machines). The out-of-band channel is restricted to the management subnet
and the tcp BTL to the fabric subnet, so MPI messages cross the emulated
links only.
"""
import os
import signal
import subprocess
import sys

import fabric_net
import fabric_plan

kAgent = """#!/bin/sh
# plm_rsh_agent of an emulated fabric: HOST is a rank's management address.
host="$1"; shift
case "$host" in
{cases}
  *) echo "fabric agent: unknown host $host" >&2; exit 1 ;;
esac
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0"; exec sh -c "$1"' "$name" "$*"
"""


def launcherPath(builddir=None):
    """grove-launch of --build, $GROVE_FABRIC_BUILD, or build/bin of the source tree."""
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    d = builddir or os.environ.get("GROVE_FABRIC_BUILD") or os.path.join(root, "build")
    path = os.path.join(d, "bin", "grove-launch")
    if not os.access(path, os.X_OK):
        raise fabric_net.FabricError(f"{path} not found (build grove-launch, or give --build DIR)")
    return path


# The send buffer of every TCP stream on the fabric (grove's
# GROVE_SOCKET_SNDBUF, Open MPI's btl_tcp_sndbuf; the kernel doubles it): a
# stream keeps about that much queued in its link's tbf, which is FIFO, so a
# stream that joins a link waits behind what the others queued there. The
# socket transport's default (512 KiB, for real networks, where it is
# microseconds of a link) is 0.1-0.3 s of a dgx1v link at scale 0.2 (3-10
# MB/s): its tbf queues held up to 4.3 MB while 16 MiB broadcasts ran, and
# every pipeline hop waited behind them. So the buffer follows the rates:
# kQueueSeconds of the slowest link at a rank, within kSendBufferMin and
# the transport's default. Measured (16 MiB broadcast on dgx1v, against the
# cost model's time): 512 KiB 0.84-0.90, 256 KiB 0.92-0.93, 128 KiB
# 0.96-0.97, 64 KiB 0.87-0.91; 32 and 16 KiB twice as slow (less than two
# of the links' 64 KB packets in flight). On ring4 (37.5 MB/s) 128 KiB took
# the ring all-gather at 4 MiB from 0.96 to 0.70: there 512 KiB is 27 ms.
kQueueSeconds = 0.04
kSendBufferMin = 128 << 10
kSendBufferMax = 512 << 10


def sendBuffer(plan):
    """The send buffer (bytes) of the fabric's streams."""
    ranks = set(plan["ranks"])
    slowest = min(l["mbps"] for l in plan["links"] if l["a"] in ranks or l["b"] in ranks)
    return int(min(kSendBufferMax, max(kSendBufferMin, slowest * 1e6 * kQueueSeconds)))


def groveEnv(plan, outer=None):
    """The environment every grove rank of this fabric gets; the send buffer
    only where `outer` (default os.environ) does not name one."""
    outer = os.environ if outer is None else outer
    d = fabric_net.stateDir(plan["id"])
    env = {"GROVE_TRANSPORT": "socket",
           "GROVE_TOPO_FILE": os.path.join(d, "topology.json"),
           "GROVE_TOPO_RANKS": ",".join(plan["ranks"])}
    if "GROVE_SOCKET_SNDBUF" not in outer:
        env["GROVE_SOCKET_SNDBUF"] = str(sendBuffer(plan))
    return env


def splitEnv(items):
    """{NAME: value} of NAME=value items; FabricError on anything else."""
    out = {}
    for it in items:
        name, eq, value = it.partition("=")
        if not eq or not name:
            raise fabric_net.FabricError(f"'{it}' is not NAME=value")
        out[name] = value
    return out


def _wait(proc, timeout):
    """Exit status of `proc`, killing its process group after `timeout` seconds (then 124)."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        print(f"fabric: timed out after {timeout} s", file=sys.stderr)
        return 124
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGINT)
        return proc.wait()


def runGrove(plan, cmd, env=None, timeout=None, builddir=None, extra=None):
    """Runs `cmd` on every rank of the fabric; returns grove-launch's exit status."""
    ns = [plan["nodes"][n]["ns"] for n in plan["ranks"]]
    args = [launcherPath(builddir), "-n", str(len(ns)), "--netns", ",".join(ns),
            "--root-host", plan["mgmt"]["ranks"][0]["addr"]] + (extra or [])
    if timeout:  # grove-launch enforces it too, so the job ends even if this process is killed
        args += ["--timeout", str(timeout)]
    args += list(cmd)
    full = dict(os.environ)
    full.update(groveEnv(plan))
    full.update(env or {})
    proc = subprocess.Popen(args, env=full, start_new_session=True)
    return _wait(proc, timeout + 15 if timeout else None)


def writeAgent(plan):
    """Writes the plm_rsh_agent script of the fabric into its state folder; returns its path."""
    cases = []
    for r in plan["mgmt"]["ranks"]:
        ns = plan["nodes"][r["node"]]["ns"]
        cases.append(f'  {r["addr"]}) ns={ns}; name={ns} ;;')
    path = os.path.join(fabric_net.stateDir(plan["id"]), "mpi-agent")
    with open(path, "w") as f:
        f.write(kAgent.format(cases="\n".join(cases)))
    os.chmod(path, 0o755)
    return path


def mpiArgs(plan, extraEnv=None):
    """The mpirun arguments (before the program) for this fabric."""
    hosts = ",".join(r["addr"] + ":1" for r in plan["mgmt"]["ranks"])
    args = ["mpirun", "--allow-run-as-root", "-np", str(len(plan["ranks"])), "--host", hosts,
            "--mca", "plm_rsh_agent", writeAgent(plan),
            "--mca", "oob_tcp_if_include", plan["mgmt"]["subnet"],
            "--mca", "btl", "tcp,self",
            "--mca", "btl_tcp_if_include", fabric_plan.fabricSubnet(plan["id"]),
            "--mca", "btl_tcp_sndbuf", str(sendBuffer(plan)),
            "--mca", "pml", "ob1",
            "--mca", "routed", "direct",
            "--mca", "plm_rsh_no_tree_spawn", "1"]
    for name, value in (extraEnv or {}).items():
        args += ["-x", f"{name}={value}"]
    return args


def runMpi(plan, cmd, env=None, timeout=None, extra=None):
    """Runs `cmd` under Open MPI over the fabric; returns mpirun's exit status."""
    full = dict(os.environ)
    full.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    proc = subprocess.Popen(mpiArgs(plan, env) + (extra or []) + list(cmd), env=full, start_new_session=True)
    return _wait(proc, timeout)
