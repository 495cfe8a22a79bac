"""The named fabrics: which machine graph each one emulates, and at what scale.

How it works: a fabric is a small graph -- nodes (GPUs that become ranks,
PCIe switches and CPU sockets that become routers) and undirected links with
a bandwidth in GB/s of the real machine -- read from a grove topology fixture
or written here. `load(name)` returns a `Graph` for one fabric: for the DGX-1
subsets the GPUs not chosen and every NIC are dropped, then routers that
no longer lie between two ranks are pruned (a router left with fewer than
two links, repeatedly), so only the PCIe/host path remains as the slower
shared route between GPUs that have no NVLink. Bandwidths follow grove's
formulas (docs/topology-format.md): NVLink count x 25 GB/s (x 20 for version
1), PCIe 0.985 GB/s per gen3 lane doubling per generation, smp/net from "bw".

Each fabric has a default scale in MB/s emulated per GB/s real, chosen so
that every link of the fabric can run at its rate at once on a 2-core host
(tests/fabric/README.md gives the measurements); `--scale` overrides it.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "topology")

kRankKinds = ("gpu",)
kRouterKinds = ("cpu", "pci_switch", "nvswitch")


class Graph:
    """Nodes {name: kind}, rank node names in rank order, links [(a, b, kind, gbps)]."""

    def __init__(self, name, note=""):
        self.name = name
        self.note = note
        self.nodes = {}
        self.ranks = []
        self.links = []

    def addNode(self, name, kind):
        """Adds node `name` of grove kind `kind`."""
        if name in self.nodes:
            raise ValueError(f"fabric {self.name}: node {name} given twice")
        self.nodes[name] = kind

    def addLink(self, a, b, kind, gbps):
        """Adds an undirected link of `gbps` GB/s per direction."""
        for n in (a, b):
            if n not in self.nodes:
                raise ValueError(f"fabric {self.name}: link {a}-{b} names unknown node {n}")
        if a == b or not gbps > 0:
            raise ValueError(f"fabric {self.name}: bad link {a}-{b} ({gbps} GB/s)")
        self.links.append((a, b, kind, float(gbps)))

    def neighbours(self, n):
        """[(peer, link index)] of node n."""
        out = []
        for i, (a, b, _, _) in enumerate(self.links):
            if a == n:
                out.append((b, i))
            elif b == n:
                out.append((a, i))
        return out


def linkGbps(link):
    """GB/s per direction of one fixture link, as grove computes it."""
    if "bw" in link:
        return float(link["bw"])
    kind = link["kind"]
    if kind == "nvlink":
        per = 20.0 if link.get("version", 2) == 1 else 25.0
        return per * link.get("count", 1)
    if kind == "pcie":
        return 0.985 * (2 ** (link.get("gen", 3) - 3)) * link.get("width", 16)
    raise ValueError(f"link {link.get('a')}-{link.get('b')} of kind {kind} has no bw")


def fromFixture(name, path, gpus=None, note=""):
    """A fabric from a one-machine grove JSON fixture, keeping GPUs `gpus` (all if None)."""
    with open(path) as f:
        doc = json.load(f)
    machine = doc["machines"][0] if "machines" in doc else doc
    g = Graph(name, note)
    for n in machine["nodes"]:
        kind = n["kind"]
        if kind in kRankKinds and (gpus is None or n.get("index") in gpus):
            g.addNode(n["name"], kind)
        elif kind in kRouterKinds:
            g.addNode(n["name"], kind)
    for l in machine["links"]:
        if "a" not in l or l["a"] not in g.nodes or l["b"] not in g.nodes:
            continue
        g.addLink(l["a"], l["b"], l["kind"], linkGbps(l))
    g.ranks = sorted((n for n, k in g.nodes.items() if k in kRankKinds),
                     key=lambda s: int("".join(c for c in s if c.isdigit()) or 0))
    if gpus is not None and len(g.ranks) != len(gpus):
        raise ValueError(f"fabric {name}: GPUs {sorted(gpus)} not all in {path}")
    prune(g)
    return g


def prune(g):
    """Drops routers with fewer than two links until none is left (they carry no route)."""
    while True:
        dead = [n for n in g.nodes if n not in g.ranks and len(g.neighbours(n)) < 2]
        if not dead:
            return
        for n in dead:
            del g.nodes[n]
        g.links = [l for l in g.links if l[0] in g.nodes and l[1] in g.nodes]


def k4():
    """4 GPUs, every pair joined by one NVLink."""
    g = Graph("k4", "4 GPUs fully connected by equal NVLinks (25 GB/s)")
    for i in range(4):
        g.addNode(f"gpu{i}", "gpu")
    for i in range(4):
        for j in range(i + 1, 4):
            g.addLink(f"gpu{i}", f"gpu{j}", "nvlink", 25.0)
    g.ranks = [f"gpu{i}" for i in range(4)]
    return g


def ring4():
    """4 GPUs on a ring of NVLinks only."""
    g = Graph("ring4", "4 GPUs on a ring of NVLinks (25 GB/s), nothing else")
    for i in range(4):
        g.addNode(f"gpu{i}", "gpu")
    for i in range(4):
        g.addLink(f"gpu{i}", f"gpu{(i + 1) % 4}", "nvlink", 25.0)
    g.ranks = [f"gpu{i}" for i in range(4)]
    return g


def hetero():
    """A fast chain that does not close a ring, plus a slow shared switch."""
    g = Graph("hetero", "fast NVLink chain gpu0-gpu1-gpu2-gpu3 (25 GB/s, no ring) "
              "plus every GPU on one slow shared PCIe switch (gen3 x8, 7.88 GB/s)")
    for i in range(4):
        g.addNode(f"gpu{i}", "gpu")
    g.addNode("pci0", "pci_switch")
    for i in range(3):
        g.addLink(f"gpu{i}", f"gpu{i + 1}", "nvlink", 25.0)
    for i in range(4):
        g.addLink("pci0", f"gpu{i}", "pcie", 0.985 * 8)
    g.ranks = [f"gpu{i}" for i in range(4)]
    return g


def dgx1v(name="dgx1v", gpus=None):
    """The DGX-1 V100 fixture, or the subset of its GPUs `gpus`."""
    note = "NVIDIA DGX-1 V100 (hybrid cube-mesh) NVLinks, PCIe switches and CPU sockets"
    if gpus is not None:
        note += f", GPUs {','.join(str(i) for i in sorted(gpus))} only"
    return fromFixture(name, os.path.join(FIXTURES, "dgx1_v100.json"), gpus, note)


# name -> (builder, default scale in MB/s emulated per GB/s real)
kFabrics = {
    "k4": (k4, 1.0),
    "ring4": (ring4, 1.5),
    "hetero": (hetero, 1.4),
    "dgx1v": (dgx1v, 0.2),
    "dgx1v-0347": (lambda: dgx1v("dgx1v-0347", {0, 3, 4, 7}), 0.45),
    "dgx1v-015": (lambda: dgx1v("dgx1v-015", {0, 1, 5}), 0.8),
}


def names():
    """The fabric names, sorted."""
    return sorted(kFabrics)


def load(name):
    """(Graph, default scale) of fabric `name`; ValueError names the known ones."""
    if name not in kFabrics:
        raise ValueError(f"unknown fabric '{name}' (known: {', '.join(names())})")
    builder, scale = kFabrics[name]
    return builder(), scale
