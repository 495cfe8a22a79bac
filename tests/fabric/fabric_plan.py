"""The plan of an emulated fabric: namespaces, links, addresses, routes, topology file.

How it works: `makePlan(graph, scale, fid)` is pure (no root, no system
calls), so it is unit tested. Every node of the graph becomes a network
namespace `gf<fid>-<node>`; every link i becomes a veth pair whose two ends
sit in the two nodes' namespaces, named after the peer node, with the /30
10.<100+fid>.<4i / 256>.<4i % 256> (end a = .1, end b = .2) and an egress rate
of gbps x scale MB/s on both ends.

Routes are per destination address. For an address d held by rank v on link
(v, w), every other node routes towards w along a widest-path tree rooted at
w (the bottleneck bandwidth is maximised, then the hop count minimised, ties
broken by name) and w delivers over the link itself. The tree is grown in two
passes: first only routers may be intermediate nodes (a rank other than w is
a leaf), then, for nodes still unreached (a ring-only fabric), ranks may
forward too. A tree gives every node one next hop, so the routes of all
nodes agree and never loop. Routers' own addresses are not routed: only rank
addresses are reachable, which is all a collective needs.

Ranks also get a management address 10.<150+fid>.0.<10+r>/24 on a veth to the
bridge `gf<fid>-br` (10.<150+fid>.0.1) of the root namespace: bootstrap and
Open MPI's out-of-band channel use it; it is unlimited and no fabric route
points at it. The topology file describes the fabric as emulated: link "bw"
in GB/s is the emulated rate (MB/s / 1000), with the end addresses of each
link; NICs are absent.
"""
import heapq

kMaxId = 49
kPrefix = "gf"


def prefix(fid):
    """Name prefix of every namespace and root interface of fabric id `fid`."""
    return f"{kPrefix}{fid}-"


def checkId(fid):
    """ValueError unless `fid` is a valid fabric id."""
    if not (isinstance(fid, int) and 0 <= fid <= kMaxId):
        raise ValueError(f"fabric id {fid!r} out of range 0..{kMaxId}")


def linkSubnet(fid, i):
    """(address of end a, address of end b) of link i, each a /30."""
    base = 4 * i
    if base >= 65536:
        raise ValueError(f"too many links ({i + 1}) for one /16")
    net = f"10.{100 + fid}.{base // 256}"
    return f"{net}.{base % 256 + 1}", f"{net}.{base % 256 + 2}"


def mgmtAddr(fid, r):
    """Management address of rank r (bridge is .1)."""
    if r > 200:
        raise ValueError("too many ranks for the management /24")
    return f"10.{150 + fid}.0.{10 + r}"


def mgmtSubnet(fid):
    """The management /24 of fabric id `fid`."""
    return f"10.{150 + fid}.0.0/24"


def fabricSubnet(fid):
    """The /16 holding every link address of fabric id `fid`."""
    return f"10.{100 + fid}.0.0/16"


def ifName(peer, taken):
    """Interface name for the link to `peer`: the peer's name, unique, <= 15 chars."""
    base = peer[:12]
    name, k = base, 2
    while name in taken:
        name = f"{base}.{k}"
        k += 1
    taken.add(name)
    return name


def widestTree(graph, root, mayForward):
    """{node: (parent, link index)} of a widest-path tree towards `root`.

    Pass 1 lets only `root` and nodes with mayForward(node) forward; pass 2
    starts from everything pass 1 reached and lets every node forward, and
    only places nodes pass 1 did not reach.
    """
    tree = {root: (None, None)}
    label = {root: (float("inf"), 0)}
    for forwards in (lambda n: n == root or mayForward(n), lambda n: True):
        heap = [(-label[n][0], label[n][1], n) for n in tree]
        heapq.heapify(heap)
        fixed = set(tree)
        done = set()
        while heap:
            negbw, hops, n = heapq.heappop(heap)
            if n in done or (-negbw, hops) != label[n]:
                continue
            done.add(n)
            if not forwards(n):
                continue
            for peer, li in sorted(graph.neighbours(n)):
                if peer in fixed or peer in done:
                    continue
                cand = (min(-negbw, graph.links[li][3]), hops + 1)
                if peer in label and not _better(cand, label[peer]):
                    continue
                label[peer] = cand
                tree[peer] = (n, li)
                heapq.heappush(heap, (-cand[0], cand[1], peer))
    return tree


def _better(a, b):
    """Wider, or as wide with fewer hops."""
    return a[0] > b[0] or (a[0] == b[0] and a[1] < b[1])


def makePlan(graph, scale, fid):
    """The whole plan of `graph` at `scale` MB/s per GB/s, as a JSON-ready dict."""
    checkId(fid)
    if not scale > 0:
        raise ValueError(f"scale must be > 0 MB/s per GB/s, not {scale}")
    pre = prefix(fid)
    nodes = {}
    for n, kind in graph.nodes.items():
        ns = pre + n
        nodes[n] = {"kind": kind, "ns": ns, "rank": graph.ranks.index(n) if n in graph.ranks else None}
    taken = {n: set() for n in graph.nodes}
    links = []
    for i, (a, b, kind, gbps) in enumerate(graph.links):
        addr_a, addr_b = linkSubnet(fid, i)
        links.append({"a": a, "b": b, "kind": kind, "gbps": gbps, "mbps": round(gbps * scale, 6),
                      "if_a": ifName(b, taken[a]), "if_b": ifName(a, taken[b]),
                      "addr_a": addr_a, "addr_b": addr_b})
    mgmt = {"bridge": pre + "br", "bridge_addr": f"10.{150 + fid}.0.1", "subnet": mgmtSubnet(fid),
            "ranks": [{"node": n, "addr": mgmtAddr(fid, r), "root_if": f"{pre}m{r}"}
                      for r, n in enumerate(graph.ranks)]}
    plan = {"name": graph.name, "id": fid, "scale": scale, "note": graph.note,
            "ranks": list(graph.ranks), "nodes": nodes, "links": links, "mgmt": mgmt,
            "routes": makeRoutes(graph, links)}
    for n in nodes.values():
        if len(n["ns"]) > 15:
            raise ValueError(f"namespace name {n['ns']} longer than 15 characters")
    return plan


def endOf(link, node):
    """(interface, own address, peer address) of `node`'s end of a planned link."""
    if link["a"] == node:
        return link["if_a"], link["addr_a"], link["addr_b"]
    return link["if_b"], link["addr_b"], link["addr_a"]


def makeRoutes(graph, links):
    """{node: [[destination /32, next-hop address, device]]} for every rank address."""
    routes = {n: [] for n in graph.nodes}
    ranks = set(graph.ranks)
    for li, link in enumerate(links):
        for v, w in ((link["a"], link["b"]), (link["b"], link["a"])):
            if v not in ranks:
                continue
            dest = link["addr_a"] if v == link["a"] else link["addr_b"]
            tree = widestTree(graph, w, lambda n: n not in ranks)
            for x, (parent, pl) in tree.items():
                if parent is None or x == v:
                    continue
                dev, _, peer_addr = endOf(links[pl], x)
                routes[x].append([dest, peer_addr, dev])
    return routes


def routeOf(plan, src, dest):
    """The node path a packet from node `src` to address `dest` takes (for checks)."""
    owner = other = None
    for l in plan["links"]:
        for end, far in (("a", "b"), ("b", "a")):
            if l["addr_" + end] == dest:
                owner, other = l[end], l[far]
    if owner is None:
        raise ValueError(f"{dest} is no link address")
    table = {n: {r[0]: r for r in rs} for n, rs in plan["routes"].items()}
    path, at = [src], src
    while at != owner:
        if at == other:  # the connected /30 of the link itself
            path.append(owner)
            break
        r = table[at].get(dest)
        if r is None:
            raise ValueError(f"{at} has no route to {dest}")
        at = next(l["b"] if l["addr_b"] == r[1] else l["a"]
                  for l in plan["links"] if r[1] in (l["addr_a"], l["addr_b"]))
        if at in path:
            raise ValueError(f"routing loop to {dest}: {path + [at]}")
        path.append(at)
    return path


def topologyFile(plan):
    """The grove topology document of the fabric as emulated (GB/s = emulated MB/s / 1000)."""
    nodes = []
    for n, info in plan["nodes"].items():
        entry = {"name": n, "kind": info["kind"]}
        digits = "".join(c for c in n if c.isdigit())
        if info["kind"] in ("gpu", "cpu") and digits:
            entry["index"] = int(digits)
        nodes.append(entry)
    links = [{"a": l["a"], "b": l["b"], "kind": l["kind"], "bw": l["mbps"] / 1000.0,
              "addr_a": l["addr_a"], "addr_b": l["addr_b"]} for l in plan["links"]]
    note = (f"emulated fabric '{plan['name']}' (id {plan['id']}): {plan['note']}; "
            f"scale {plan['scale']} MB/s emulated per GB/s of the real machine, "
            f"so bw here (GB/s) = real GB/s x {plan['scale']} / 1000")
    return {"grove_topology": 1, "note": note,
            "machines": [{"host": f"fabric-{plan['name']}", "nodes": nodes, "links": links}]}
