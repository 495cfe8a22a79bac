"""Builds, inspects and tears down an emulated fabric with iproute2 and tc.

How it works: `build(plan)` turns a plan (fabric_plan.py) into kernel state.
It first removes whatever is left on the same fabric id, then: one network
namespace per node (loopback up, ip_forward=1, rp_filter off so asymmetric
routes are accepted); one veth pair per link, created straight into the two
namespaces (`ip link add X netns A type veth peer name Y netns B`, so names
only need to be unique per namespace); addresses, MTU and the static /32
routes of each namespace through one `ip -batch` (MTU 65000: at high rates
it kept the links at their rate where 9000 and 1500 ran out of CPU); a tbf qdisc on each veth
end with the link's rate (its burst is at least 64 KiB + headers, so GSO
packets pass whole, which saves CPU, and its queue holds kQueueBytes, more
than the windows of every TCP stream that may cross the link: a drop costs
a stream a retransmission timeout, and a queue of 100 ms at the rate
dropped a third to half the packets of the forests' many streams at 16 MiB,
which ran 1.5-1.9x slower than at their rate; with every link loaded at
once tbf kept every link at 96-99 % of its rate, htb at 94-97 %, see
README.md); and the management
bridge in the root namespace with one veth per rank.

Everything carries the prefix gf<id>-, so `teardown(fid)` finds it by name
(namespaces, root interfaces) and `teardownAll()` removes every grove
fabric, including the remains of a crashed run. Deleting a namespace deletes
the veth ends in it and their peers. The state folder of a fabric
($GROVE_FABRIC_DIR or /run/grove-fabric, then /<id>) holds plan.json,
topology.json, ranks (node names, one per rank) and namespaces, so any later
process can run on it or remove it.
"""
import json
import os
import re
import shutil
import subprocess

import fabric_plan

kStateRoot = "/run/grove-fabric"
kMtu = 65000
kQueuePackets = 400
# A tbf queue's bytes: above the sum of the TCP windows that may meet on one
# link (a few MB each), so the queue never drops; a limit, not memory held.
kQueueBytes = 64 << 20


class FabricError(Exception):
    """A command failed or the fabric is not in the state asked for."""


def stateRoot():
    """Folder holding one state folder per fabric id."""
    return os.environ.get("GROVE_FABRIC_DIR") or kStateRoot


def stateDir(fid):
    """State folder of fabric id `fid`."""
    return os.path.join(stateRoot(), str(fid))


def sh(args, stdin=None, check=True):
    """Runs a command; FabricError with its output when it fails and `check`."""
    p = subprocess.run(args, input=stdin, text=True, capture_output=True)
    if check and p.returncode != 0:
        shown = " ".join(args)
        raise FabricError(f"'{shown}' failed ({p.returncode}): {p.stderr.strip() or p.stdout.strip()}")
    return p


def batch(tool, ns, lines):
    """Runs `lines` through `tool -n ns -batch -` (tool: ip or tc)."""
    if lines:
        args = [tool] + (["-n", ns] if ns else []) + ["-batch", "-"]
        sh(args, stdin="\n".join(lines) + "\n")


def preflight():
    """None when fabrics can be built here, else the reason (not root, no ip/tc, no netns)."""
    if os.geteuid() != 0:
        return "not root (network namespaces and tc need root)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"'{tool}' not found (install iproute2)"
    probe = "gfprobe-" + str(os.getpid() % 100000)
    p = sh(["ip", "netns", "add", probe], check=False)
    if p.returncode != 0:
        return f"network namespaces not permitted: {p.stderr.strip()}"
    try:
        for what, args in (("sysctl in a namespace", ["ip", "netns", "exec", probe, "sysctl", "-q", "-w",
                                                      "net.ipv4.ip_forward=1"]),
                           ("veth pairs", ["ip", "-n", probe, "link", "add", "p0", "type", "veth",
                                           "peer", "name", "p1"]),
                           ("tc tbf", ["tc", "-n", probe, "qdisc", "add", "dev", "p0", "root", "tbf",
                                       "rate", "8mbit", "burst", "70000", "latency", "100ms"])):
            p = sh(args, check=False)
            if p.returncode != 0:
                return f"{what} not permitted: {p.stderr.strip()}"
    finally:
        sh(["ip", "netns", "del", probe], check=False)
    return None


def htbLines(dev, mbps, mtu):
    """The same with htb and a pfifo (kept to compare: `up --qdisc htb`)."""
    rate = int(mbps * 8e6)
    burst = max(mtu + 1600, int(mbps * 1e6 * 0.002), 65536 + 1600)
    return [f"qdisc replace dev {dev} root handle 1: htb default 1",
            f"class add dev {dev} parent 1: classid 1:1 htb rate {rate}bit ceil {rate}bit "
            f"burst {burst} cburst {burst}",
            f"qdisc add dev {dev} parent 1:1 handle 10: pfifo limit {kQueuePackets}"]


def tbfLines(dev, mbps, mtu, handle=""):
    """tc batch lines limiting the egress of `dev` to `mbps` MB/s with a token bucket."""
    rate = int(mbps * 8e6)
    burst = max(mtu + 1600, int(mbps * 1e6 * 0.002), 65536 + 1600)
    return [f"qdisc replace dev {dev} root {handle}tbf rate {rate}bit burst {burst} limit {kQueueBytes}"]


# A link of the fabric carries two directions that a GPU link keeps apart,
# but TCP does not: the ACKs of the streams one way travel the other way, and
# behind a FIFO they wait for the data queued there. On dgx1v (an 8-rank
# tree reduce, 64 MiB) they waited 53 ms (median; 84 ms at the 90th
# percentile) from the moment the receiver made them, and the streams of the
# fastest tree, their whole send buffers unacknowledged, left its links idle
# a fifth of the time. acksFirstLines keeps tbf as the limiter (the link's
# rate holds whatever the classes do) and puts an htb under it that only
# orders: packets under 256 bytes (pure ACKs) first: 4 ms median, those
# links at their rate. It is not the default: against the cost model
# (docs/planning.md, "Predicted against measured") it mended the large calls
# where streams share links and cost small ones more (123 cells of 135
# within 15 % against tbf's 125).
kSmallPackets = "u32 match u16 0x0000 0xff00 at 2"  # IPv4 total length < 256
kInnerRate = "10gbit"  # the inner htb orders, never limits


def acksFirstLines(dev, mbps, mtu):
    """tbfLines with small packets (TCP's pure ACKs) dequeued before the data."""
    return tbfLines(dev, mbps, mtu, handle="handle 1: ") + [
        f"qdisc replace dev {dev} parent 1:1 handle 2: htb default 20",
        f"class add dev {dev} parent 2: classid 2:1 htb rate {kInnerRate}",
        f"class add dev {dev} parent 2:1 classid 2:10 htb rate {kInnerRate} prio 0",
        f"class add dev {dev} parent 2:1 classid 2:20 htb rate {kInnerRate} prio 1",
        f"qdisc add dev {dev} parent 2:10 handle 10: bfifo limit {kQueueBytes}",
        f"qdisc add dev {dev} parent 2:20 handle 20: bfifo limit {kQueueBytes}",
        f"filter add dev {dev} parent 2: protocol ip prio 1 {kSmallPackets} flowid 2:10"]


kQdiscs = {"acks-first": acksFirstLines, "htb": htbLines, "tbf": tbfLines}
kDefaultQdisc = "tbf"


def nodeSetup(ns):
    """Shell text run inside a new namespace: loopback up, forwarding on, rp_filter off."""
    return ("ip link set lo up && sysctl -q -w net.ipv4.ip_forward=1 "
            "net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 "
            "net.ipv4.conf.lo.rp_filter=0")


def build(plan, mtu=kMtu, qdisc=kDefaultQdisc):
    """Creates the fabric of `plan` and writes its state folder; removes it again on failure."""
    fid = plan["id"]
    teardown(fid)
    try:
        _build(plan, mtu, kQdiscs[qdisc])
        writeState(plan)
    except BaseException:
        teardown(fid)
        raise


def _build(plan, mtu, shaper):
    """Namespaces, veth pairs, addresses, rates, routes, management bridge."""
    nodes = plan["nodes"]
    for info in nodes.values():
        sh(["ip", "netns", "add", info["ns"]])
        sh(["ip", "netns", "exec", info["ns"], "sh", "-c", nodeSetup(info["ns"])])
    batch("ip", None, [f"link add {l['if_a']} netns {nodes[l['a']]['ns']} type veth "
                       f"peer name {l['if_b']} netns {nodes[l['b']]['ns']}" for l in plan["links"]])
    ipLines = {n: [] for n in nodes}
    tcLines = {n: [] for n in nodes}
    for l in plan["links"]:
        for end in ("a", "b"):
            node, dev, addr = l[end], l["if_" + end], l["addr_" + end]
            ipLines[node] += [f"addr add {addr}/30 dev {dev}",
                              f"link set {dev} mtu {mtu} up"]
            tcLines[node] += shaper(dev, l["mbps"], mtu)
    for node, routes in plan["routes"].items():
        ipLines[node] += [f"route add {dest}/32 via {via} dev {dev}" for dest, via, dev in routes]
    for node, info in nodes.items():
        batch("tc", info["ns"], tcLines[node])
        batch("ip", info["ns"], ipLines[node])
    buildMgmt(plan)


def buildMgmt(plan):
    """The management bridge in the root namespace and one veth per rank."""
    m = plan["mgmt"]
    lines = [f"link add {m['bridge']} type bridge",
             f"addr add {m['bridge_addr']}/24 dev {m['bridge']}",
             f"link set {m['bridge']} up"]
    for r in m["ranks"]:
        ns = plan["nodes"][r["node"]]["ns"]
        lines += [f"link add {r['root_if']} type veth peer name mgmt netns {ns}",
                  f"link set {r['root_if']} master {m['bridge']} up"]
    batch("ip", None, lines)
    for r in m["ranks"]:
        ns = plan["nodes"][r["node"]]["ns"]
        batch("ip", ns, [f"addr add {r['addr']}/24 dev mgmt", "link set mgmt up"])


def writeState(plan):
    """Writes the state folder of the fabric."""
    d = stateDir(plan["id"])
    os.makedirs(d, exist_ok=True)
    files = {"plan.json": json.dumps(plan, indent=1),
             "topology.json": json.dumps(fabric_plan.topologyFile(plan), indent=1),
             "ranks": "\n".join(plan["ranks"]) + "\n",
             "namespaces": "\n".join(plan["nodes"][n]["ns"] for n in plan["ranks"]) + "\n"}
    for name, text in files.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)


def loadState(fid):
    """The plan of the fabric built on id `fid`; FabricError when there is none."""
    path = os.path.join(stateDir(fid), "plan.json")
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise FabricError(f"no fabric is up on id {fid} (no {path}; run 'fabric up NAME --id {fid}')")


def builtIds():
    """{id: fabric name} of every state folder."""
    out = {}
    root = stateRoot()
    for entry in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if entry.isdigit():
            try:
                out[int(entry)] = loadState(int(entry))["name"]
            except (FabricError, ValueError, KeyError):
                pass
    return out


def findFabric(name, fid=None):
    """The plan of fabric `name` (on id `fid`, or the only id it is up on)."""
    if fid is not None:
        plan = loadState(fid)
        if plan["name"] != name:
            raise FabricError(f"id {fid} holds fabric '{plan['name']}', not '{name}'")
        return plan
    ids = [i for i, n in builtIds().items() if n == name]
    if len(ids) != 1:
        where = f"on ids {ids}: give --id" if ids else "up (run 'fabric up " + name + "')"
        raise FabricError(f"fabric '{name}' is not {where}" if not ids else f"fabric '{name}' is up {where}")
    return loadState(ids[0])


def _names(pattern):
    """(namespaces, root interfaces) whose names match the regex `pattern`."""
    rx = re.compile(pattern)
    nss = [l.split()[0] for l in sh(["ip", "netns", "list"]).stdout.splitlines() if l.strip()]
    links = []
    for l in sh(["ip", "-o", "link", "show"]).stdout.splitlines():
        parts = l.split(":")
        if len(parts) > 1:
            links.append(parts[1].strip().split("@")[0])
    return [n for n in nss if rx.match(n)], [n for n in links if rx.match(n)]


def _remove(pattern):
    """Deletes the namespaces and root interfaces matching `pattern`; returns how many."""
    nss, links = _names(pattern)
    for n in nss:
        sh(["ip", "netns", "del", n], check=False)
    for l in links:
        sh(["ip", "link", "del", l], check=False)
    return len(nss) + len(links)


def teardown(fid):
    """Removes fabric id `fid` (namespaces, bridge, state); idempotent. Returns objects removed."""
    fabric_plan.checkId(fid)
    n = _remove("^" + re.escape(fabric_plan.prefix(fid)))
    shutil.rmtree(stateDir(fid), ignore_errors=True)
    return n


def teardownAll():
    """Removes every grove fabric (any id) and every state folder."""
    n = _remove("^" + fabric_plan.kPrefix + r"(\d+|probe)-")
    root = stateRoot()
    for entry in os.listdir(root) if os.path.isdir(root) else []:
        if entry.isdigit():
            shutil.rmtree(os.path.join(root, entry), ignore_errors=True)
    return n


def linkBetween(plan, a, b):
    """The planned link between nodes a and b; FabricError when there is none."""
    for l in plan["links"]:
        if {l["a"], l["b"]} == {a, b}:
            return l
    raise FabricError(f"fabric '{plan['name']}' has no link between {a} and {b}")


def setLink(plan, a, b, up):
    """Takes the link between nodes a and b down (both ends) or back up."""
    l = linkBetween(plan, a, b)
    for end in ("a", "b"):
        ns = plan["nodes"][l[end]]["ns"]
        sh(["ip", "-n", ns, "link", "set", l["if_" + end], "up" if up else "down"])
    if up:  # routes through the link vanished with it: put them back
        for end in ("a", "b"):
            node = l[end]
            dev = l["if_" + end]
            lines = [f"route replace {d}/32 via {v} dev {dv}" for d, v, dv in plan["routes"][node] if dv == dev]
            batch("ip", plan["nodes"][node]["ns"], lines)


def txBytes(plan):
    """{(node, interface): bytes sent} from the root qdisc of every link end."""
    out = {}
    for l in plan["links"]:
        for end in ("a", "b"):
            node, dev = l[end], l["if_" + end]
            q = sh(["tc", "-n", plan["nodes"][node]["ns"], "-s", "qdisc", "show", "dev", dev], check=False)
            m = re.search(r"qdisc \S+ \S+ root .*?Sent (\d+) bytes", q.stdout, re.S)
            out[(node, dev)] = int(m.group(1)) if m else 0
    return out


def mgmtBytes(plan):
    """Bytes through the management bridge so far (the root ends of the ranks' veths, both ways)."""
    total = 0
    for r in plan["mgmt"]["ranks"]:
        for stat in ("rx_bytes", "tx_bytes"):
            try:
                with open(f"/sys/class/net/{r['root_if']}/statistics/{stat}") as f:
                    total += int(f.read())
            except OSError:
                pass
    return total
