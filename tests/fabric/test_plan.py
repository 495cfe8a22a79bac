#!/usr/bin/python3
"""Unit tests of the pure parts of the fabric tool (no root needed).

How it works: every named fabric is planned (fabric_defs + fabric_plan) and
the plan is checked: names fit Linux's 15 characters and carry the id
prefix, link subnets are distinct /30s, rates follow the scale, every rank
reaches every address of every other rank without a loop and, where a route
free of other ranks exists, over it (e.g. the PCIe/host path of dgx1v-015),
and the topology file says the emulated rates and the link addresses; the
command line splits its arguments and reports bad input clearly. When
GROVE_TOPO_TOOL names grove-topo, each topology file is also loaded by it.
"""
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fabric_defs  # noqa: E402
import fabric_plan  # noqa: E402
import fabric_run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
_loader = importlib.machinery.SourceFileLoader("fabric_cli", os.path.join(HERE, "fabric"))
CLI = importlib.util.module_from_spec(importlib.util.spec_from_loader("fabric_cli", _loader))
_loader.exec_module(CLI)


def plan(name, fid=7, scale=None):
    g, s = fabric_defs.load(name)
    return fabric_plan.makePlan(g, scale or s, fid)


def rankAddresses(p, rank):
    return [l["addr_" + e] for l in p["links"] for e in "ab" if l[e] == rank]


class PlanTest(unittest.TestCase):
    def testNamesAndAddresses(self):
        for name in fabric_defs.names():
            p = plan(name)
            for info in p["nodes"].values():
                self.assertLessEqual(len(info["ns"]), 15)
                self.assertTrue(info["ns"].startswith("gf7-"))
            for l in p["links"]:
                self.assertLessEqual(max(len(l["if_a"]), len(l["if_b"])), 15)
                self.assertTrue(l["addr_a"].startswith("10.107."))
            addrs = [l["addr_" + e] for l in p["links"] for e in "ab"]
            self.assertEqual(len(addrs), len(set(addrs)), name)
            for r in p["mgmt"]["ranks"]:
                self.assertTrue(r["addr"].startswith("10.157.0."))
                self.assertLessEqual(len(r["root_if"]), 15)

    def testEveryRankReachesEveryAddressOfEveryOtherRank(self):
        for name in fabric_defs.names():
            p = plan(name)
            for src in p["ranks"]:
                for dst in p["ranks"]:
                    if src == dst:
                        continue
                    for addr in rankAddresses(p, dst):
                        path = fabric_plan.routeOf(p, src, addr)
                        self.assertEqual(path[0], src)
                        self.assertEqual(path[-1], dst)

    def testRatesFollowTheScale(self):
        p = plan("k4", scale=2.0)
        self.assertEqual(len(p["links"]), 6)
        for l in p["links"]:
            self.assertAlmostEqual(l["mbps"], 50.0)
        d = plan("dgx1v", scale=0.2)
        rates = {(l["a"], l["b"]): l["mbps"] for l in d["links"]}
        self.assertAlmostEqual(rates[("gpu0", "gpu3")], 10.0)   # 2 NVLinks x 25 GB/s
        self.assertAlmostEqual(rates[("gpu0", "gpu1")], 5.0)
        self.assertAlmostEqual(rates[("cpu0", "cpu1")], 38.4 * 0.2)
        self.assertAlmostEqual(rates[("pci0", "gpu0")], 0.985 * 16 * 0.2)

    def testSubsetsKeepOnlyTheRoutersBetweenTheirGpus(self):
        p = plan("dgx1v-015")
        self.assertEqual(p["ranks"], ["gpu0", "gpu1", "gpu5"])
        self.assertEqual(sorted(p["nodes"]), ["cpu0", "cpu1", "gpu0", "gpu1", "gpu5", "pci0", "pci2"])
        q = plan("dgx1v-0347")
        self.assertEqual(q["ranks"], ["gpu0", "gpu3", "gpu4", "gpu7"])
        self.assertNotIn("gpu1", q["nodes"])
        self.assertEqual(len(plan("dgx1v")["ranks"]), 8)

    def testRoutesAvoidOtherRanksWhenTheyCan(self):
        p = plan("dgx1v-015")
        gpu5 = next(l for l in p["links"] if {l["a"], l["b"]} == {"pci2", "gpu5"})
        addr = gpu5["addr_a"] if gpu5["a"] == "gpu5" else gpu5["addr_b"]
        self.assertEqual(fabric_plan.routeOf(p, "gpu0", addr),
                         ["gpu0", "pci0", "cpu0", "cpu1", "pci2", "gpu5"])
        h = plan("hetero")
        l23 = next(l for l in h["links"] if {l["a"], l["b"]} == {"gpu2", "gpu3"})
        addr3 = l23["addr_a"] if l23["a"] == "gpu3" else l23["addr_b"]
        self.assertEqual(fabric_plan.routeOf(h, "gpu0", addr3), ["gpu0", "pci0", "gpu2", "gpu3"])

    def testRingOnlyFabricsRouteThroughNeighbours(self):
        p = plan("ring4")
        l12 = next(l for l in p["links"] if {l["a"], l["b"]} == {"gpu1", "gpu2"})
        addr2 = l12["addr_a"] if l12["a"] == "gpu2" else l12["addr_b"]
        self.assertEqual(fabric_plan.routeOf(p, "gpu0", addr2), ["gpu0", "gpu1", "gpu2"])
        self.assertEqual(fabric_plan.routeOf(p, "gpu3", addr2)[-2:], ["gpu1", "gpu2"])

    def testWidestBeatsShortest(self):
        g = fabric_defs.Graph("t")
        for n in ("x", "y", "r1", "r2"):
            g.addNode(n, "gpu" if n in "xy" else "pci_switch")
        g.ranks = ["x", "y"]
        g.addLink("x", "r1", "pcie", 1.0)
        g.addLink("r1", "y", "pcie", 1.0)
        g.addLink("x", "r2", "pcie", 5.0)
        g.addLink("r2", "r1", "pcie", 5.0)
        tree = fabric_plan.widestTree(g, "r1", lambda n: n not in g.ranks)
        self.assertEqual(tree["x"][0], "r2")

    def testTopologyFileDescribesTheEmulatedFabric(self):
        p = plan("hetero", scale=1.0)
        doc = fabric_plan.topologyFile(p)
        m = doc["machines"][0]
        self.assertIn("scale 1.0 MB/s", doc["note"])
        self.assertEqual({n["kind"] for n in m["nodes"]}, {"gpu", "pci_switch"})
        fast = [l for l in m["links"] if l["kind"] == "nvlink"]
        self.assertEqual(len(fast), 3)
        for l in fast:
            self.assertAlmostEqual(l["bw"], 0.025)
        for l in m["links"]:
            self.assertTrue(l["addr_a"] and l["addr_b"])

    def testBadInput(self):
        with self.assertRaisesRegex(ValueError, "unknown fabric 'nope'.*k4"):
            fabric_defs.load("nope")
        g, _ = fabric_defs.load("k4")
        with self.assertRaisesRegex(ValueError, "out of range"):
            fabric_plan.makePlan(g, 1.0, 50)
        with self.assertRaisesRegex(ValueError, "scale"):
            fabric_plan.makePlan(g, 0, 1)
        with self.assertRaisesRegex(ValueError, "unknown node"):
            g.addLink("gpu0", "gpu9", "nvlink", 25)

    def testAgentMapsEachHostToItsNamespace(self):
        p = plan("dgx1v-015")
        with tempfile.TemporaryDirectory() as d:
            os.environ["GROVE_FABRIC_DIR"] = d
            try:
                os.makedirs(os.path.join(d, "7"))
                args = fabric_run.mpiArgs(p, {"X": "1"})
                with open(args[args.index("plm_rsh_agent") + 1]) as f:
                    agent = f.read()
            finally:
                del os.environ["GROVE_FABRIC_DIR"]
        self.assertIn("10.157.0.10:1,10.157.0.11:1,10.157.0.12:1", args)
        self.assertEqual(args[args.index("oob_tcp_if_include") + 1], "10.157.0.0/24")
        self.assertEqual(args[args.index("btl_tcp_if_include") + 1], "10.107.0.0/16")
        self.assertIn("X=1", args)
        self.assertIn("10.157.0.12) ns=gf7-gpu5;", agent)
        self.assertEqual(args[args.index("btl_tcp_sndbuf") + 1], str(fabric_run.sendBuffer(p)))

    def testSendBuffersFollowTheSlowestLinkAtARank(self):
        # dgx1v at 0.2: PCIe 3.15 MB/s, 40 ms of it is below the floor;
        # dgx1v-0347 at 0.45: PCIe 7.09 MB/s; k4: NVLink 25 MB/s, above the cap.
        self.assertEqual(fabric_run.sendBuffer(plan("dgx1v")), 128 << 10)
        self.assertEqual(fabric_run.sendBuffer(plan("dgx1v-0347")), int(15.76 * 0.45 * 1e6 * 0.04))
        self.assertEqual(fabric_run.sendBuffer(plan("k4")), 512 << 10)

    def testStreamsGetTheFabricsSendBufferUnlessTheCallerNamesOne(self):
        p = plan("dgx1v")
        env = fabric_run.groveEnv(p, outer={})
        self.assertEqual(env["GROVE_SOCKET_SNDBUF"], str(128 << 10))
        self.assertEqual(env["GROVE_TRANSPORT"], "socket")
        env = fabric_run.groveEnv(p, outer={"GROVE_SOCKET_SNDBUF": "512K"})
        self.assertNotIn("GROVE_SOCKET_SNDBUF", env)


class CliTest(unittest.TestCase):
    def cli(self, *args):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, GROVE_FABRIC_DIR=d)
            return subprocess.run([os.path.join(HERE, "fabric")] + list(args), capture_output=True,
                                  text=True, env=env)

    def testCommandSplitting(self):
        self.assertEqual(CLI.splitCommand(["A=1", "B=2", "--", "prog", "-x"]), (["A=1", "B=2"], ["prog", "-x"]))
        self.assertEqual(CLI.splitCommand(["prog", "--", "x"]), ([], ["prog", "--", "x"]))
        self.assertEqual(fabric_run.splitEnv(["A=1=2"]), {"A": "1=2"})
        with self.assertRaises(Exception):
            fabric_run.splitEnv(["nope"])

    def testShowAndListNeedNoRoot(self):
        r = self.cli("show", "dgx1v-0347", "--id", "7")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("not up", r.stdout)
        self.assertIn("gf7-gpu7", r.stdout)
        r = self.cli("list")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.splitlines()), len(fabric_defs.names()))

    def testClearErrors(self):
        r = self.cli("show", "nope")
        self.assertEqual(r.returncode, 1)
        self.assertIn("unknown fabric 'nope'", r.stderr)
        r = self.cli("run", "k4", "--id", "7", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no fabric is up on id 7", r.stderr)
        r = self.cli("run", "k4")
        self.assertEqual(r.returncode, 2)
        self.assertIn("needs '-- CMD ARGS'", r.stderr)

    @unittest.skipUnless(os.environ.get("GROVE_TOPO_TOOL"), "GROVE_TOPO_TOOL (grove-topo) not given")
    def testGroveLoadsEveryTopologyFile(self):
        with tempfile.TemporaryDirectory() as d:
            for name in fabric_defs.names():
                path = os.path.join(d, name + ".json")
                with open(path, "w") as f:
                    json.dump(fabric_plan.topologyFile(plan(name)), f)
                r = subprocess.run([os.environ["GROVE_TOPO_TOOL"], "--file", path],
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, f"{name}: {r.stderr}")


if __name__ == "__main__":
    unittest.main()
