// Topology model, paths and the machine fixtures of tests/fixtures/topology.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "topology/comm_topology.h"
#include "topology/graph.h"
#include "topology/paths.h"
#include "topology/render.h"
#include "topology/topo_file.h"
#include "unit/topo_fixtures.h"

namespace grove::topo {
namespace {

using fixtures::fixture;

NodeId byName(const Graph& g, const std::string& name) {
  NodeId id = g.find(g.machines().at(0), name);
  EXPECT_GE(id, 0) << name;
  return id;
}

double bw(const Graph& g, const std::string& a, const std::string& b) {
  return bottleneckBw(g, byName(g, a), byName(g, b));
}

PathType cls(const Graph& g, const std::string& a, const std::string& b) {
  return classify(g, byName(g, a), byName(g, b));
}

// GB/s of a NIC's link to its network.
double netBw(const Graph& g, NodeId nic) {
  for (int li : g.outLinks(nic))
    if (g.links()[li].kind == LinkKind::kNet) return g.links()[li].bw;
  return 0;
}

size_t count(const Graph& g, NodeKind k) { return g.nodesOfKind(k).size(); }

TEST(TopologyModel, BandwidthFormulas) {
  EXPECT_DOUBLE_EQ(nvlinkBwPerLink(1), 20);
  EXPECT_DOUBLE_EQ(nvlinkBwPerLink(2), 25);
  EXPECT_NEAR(pcieBw(3, 16), 15.76, 1e-9);
  EXPECT_NEAR(pcieBw(4, 16), 31.5, 0.01);
  EXPECT_NEAR(pcieBw(5, 16), 63.0, 0.01);
}

TEST(TopologyModel, BuildAndRemove) {
  Graph g;
  NodeId m = g.addMachine("h");
  Node cpu;
  cpu.kind = NodeKind::kCpu, cpu.name = "cpu0", cpu.machine = m;
  NodeId c = g.addNode(cpu);
  Node gpu;
  gpu.kind = NodeKind::kGpu, gpu.name = "gpu0", gpu.machine = m;
  NodeId x = g.addNode(gpu);
  Link l;
  l.from = c, l.to = x, l.kind = LinkKind::kPcie, l.bw = 12;
  g.addBidi(l);
  EXPECT_EQ(g.links().size(), 2u);
  EXPECT_EQ(g.findQualified("h/gpu0"), x);
  EXPECT_THROW(g.addNode(gpu), Error);  // duplicate name
  l.bw = 0;
  EXPECT_THROW(g.addLink(l), Error);
  g.removeNode(c);
  EXPECT_EQ(g.links().size(), 0u);
  EXPECT_EQ(g.findQualified("h/gpu0"), 1);
}

TEST(TopologyFixtures, Dgx1P100) {
  Graph g = fixture("dgx1_p100.json");
  EXPECT_EQ(count(g, NodeKind::kGpu), 8u);
  EXPECT_EQ(count(g, NodeKind::kCpu), 2u);
  EXPECT_EQ(count(g, NodeKind::kPciSwitch), 4u);
  EXPECT_EQ(count(g, NodeKind::kNic), 4u);
  for (NodeId gpu : g.nodesOfKind(NodeKind::kGpu)) {
    int links = 0;
    for (int li : g.outLinks(gpu))
      if (g.links()[li].kind == LinkKind::kNvLink) links += g.links()[li].count;
    EXPECT_EQ(links, 4) << g.node(gpu).name;
  }
  EXPECT_DOUBLE_EQ(bw(g, "gpu0", "gpu1"), 20);  // one NVLink 1
  EXPECT_DOUBLE_EQ(bw(g, "gpu0", "gpu4"), 20);
  EXPECT_EQ(cls(g, "gpu0", "gpu5"), PathType::kSys);  // no NVLink, other socket
  EXPECT_NEAR(bw(g, "gpu0", "gpu5"), 15.76, 1e-9);    // PCIe, then 38.4 GB/s QPI
}

TEST(TopologyFixtures, Dgx1V100DoubledPairs) {
  Graph g = fixture("dgx1_v100.json");
  EXPECT_EQ(count(g, NodeKind::kGpu), 8u);
  for (NodeId gpu : g.nodesOfKind(NodeKind::kGpu)) {
    int links = 0;
    for (int li : g.outLinks(gpu))
      if (g.links()[li].kind == LinkKind::kNvLink) links += g.links()[li].count;
    EXPECT_EQ(links, 6) << g.node(gpu).name;
  }
  EXPECT_DOUBLE_EQ(bw(g, "gpu0", "gpu3"), 50);  // doubled pair: 2 links
  EXPECT_DOUBLE_EQ(bw(g, "gpu0", "gpu1"), 25);
  Path p = pathBetween(g, byName(g, "gpu0"), byName(g, "gpu3"));
  EXPECT_EQ(p.type, PathType::kNvLink);
  EXPECT_EQ(p.nvlinks, 2);
  EXPECT_EQ(cls(g, "gpu0", "gpu5"), PathType::kSys);
  EXPECT_EQ(cls(g, "gpu0", "nic0"), PathType::kPix);
  EXPECT_EQ(cls(g, "gpu0", "nic1"), PathType::kPhb);  // other switch, same socket
  EXPECT_EQ(cls(g, "gpu0", "nic2"), PathType::kSys);
  EXPECT_TRUE(canP2P(g, byName(g, "gpu0"), byName(g, "gpu2")));
  EXPECT_FALSE(canP2P(g, byName(g, "gpu0"), byName(g, "gpu5")));  // across QPI, no NVLink
  for (int i = 0; i < 8; ++i) {  // two PCIe switches per socket, one NIC per switch
    NodeId gpu = byName(g, "gpu" + std::to_string(i));
    EXPECT_EQ(g.node(closestNic(g, gpu)).name, "nic" + std::to_string(i / 2));
    EXPECT_EQ(g.node(localCpu(g, gpu)).name, i < 4 ? "cpu0" : "cpu1");
  }
}

TEST(TopologyFixtures, Dgx2NvSwitch) {
  Graph g = fixture("dgx2.json");
  EXPECT_EQ(count(g, NodeKind::kGpu), 16u);
  EXPECT_EQ(count(g, NodeKind::kNvSwitch), 1u);
  EXPECT_EQ(count(g, NodeKind::kNic), 8u);
  Path p = pathBetween(g, byName(g, "gpu0"), byName(g, "gpu15"));
  EXPECT_EQ(p.type, PathType::kNvSwitch);
  EXPECT_DOUBLE_EQ(p.bottleneck, 150);  // 6 links x 25 GB/s
  EXPECT_EQ(p.nvlinks, 6);
  EXPECT_TRUE(canP2P(g, byName(g, "gpu0"), byName(g, "gpu15")));
  EXPECT_EQ(cls(g, "gpu0", "nic0"), PathType::kPix);
  EXPECT_EQ(cls(g, "gpu0", "nic1"), PathType::kPxb);  // leaf -> top -> leaf
}

TEST(TopologyFixtures, DgxA100AndH100) {
  Graph a = fixture("dgx_a100.json");
  EXPECT_EQ(count(a, NodeKind::kGpu), 8u);
  EXPECT_EQ(count(a, NodeKind::kNic), 8u);
  EXPECT_DOUBLE_EQ(bw(a, "gpu0", "gpu7"), 300);
  EXPECT_DOUBLE_EQ(bw(a, "gpu0", "nic0"),
                   pcieBw(4, 16));  // GPU -> NIC is PCIe; the wire is beyond it
  EXPECT_EQ(cls(a, "gpu0", "nic1"), PathType::kPix);
  Graph h = fixture("dgx_h100.json");
  EXPECT_DOUBLE_EQ(bw(h, "gpu3", "gpu4"), 450);  // 18 links x 25 GB/s
  EXPECT_DOUBLE_EQ(bw(h, "gpu0", "nic0"), pcieBw(5, 16));
  NodeId nic = byName(h, "nic0");
  EXPECT_DOUBLE_EQ(netBw(h, nic), 50);  // 400 Gb/s
  EXPECT_EQ(h.node(closestNic(h, byName(h, "gpu5"))).name, "nic4");
}

TEST(TopologyFixtures, PcieOnlyTwoSockets) {
  Graph g = fixture("pcie_8gpu_2socket.json");
  EXPECT_EQ(count(g, NodeKind::kGpu), 8u);
  EXPECT_EQ(cls(g, "gpu0", "gpu1"), PathType::kPix);
  EXPECT_EQ(cls(g, "gpu0", "gpu2"), PathType::kPhb);
  EXPECT_EQ(cls(g, "gpu0", "gpu4"), PathType::kSys);
  EXPECT_NEAR(bw(g, "gpu0", "gpu4"), 15.76, 1e-9);
  EXPECT_TRUE(canP2P(g, byName(g, "gpu0"), byName(g, "gpu3")));
  EXPECT_FALSE(canP2P(g, byName(g, "gpu0"), byName(g, "gpu4")));
  EXPECT_EQ(g.node(closestNic(g, byName(g, "gpu6"))).name, "nic1");
}

TEST(TopologyFixtures, CpuOnlyHost) {
  Graph g = fixture("cpu_host.json");
  EXPECT_EQ(count(g, NodeKind::kGpu), 0u);
  EXPECT_EQ(count(g, NodeKind::kCpu), 1u);
  EXPECT_EQ(g.node(closestNic(g, byName(g, "cpu0"))).name, "nic0");
  CommTopology t = placeRanks(g, 4, 0, DeviceKind::kHost);
  for (const RankPlacement& r : t.ranks) EXPECT_EQ(g.node(r.node).name, "cpu0");
  EXPECT_THROW(placeRanks(g, 2, 0, DeviceKind::kCuda), Error);
  EXPECT_NE(summaryText(g).find("cpu0"), std::string::npos);
}

TEST(TopologyFixtures, TwoMachineCluster) {
  Graph g = fixture("cluster_2x4nic.json");
  ASSERT_EQ(g.machines().size(), 2u);
  EXPECT_EQ(count(g, NodeKind::kNic), 8u);
  EXPECT_EQ(count(g, NodeKind::kNet), 1u);
  NodeId a = g.findQualified("node0/gpu0"), b = g.findQualified("node1/gpu0");
  Path p = pathBetween(g, a, b);
  EXPECT_EQ(p.type, PathType::kNet);
  EXPECT_DOUBLE_EQ(p.bottleneck, 25);  // one 200 Gb/s NIC on each side
  // Inside a machine the network is never a shortcut.
  EXPECT_EQ(classify(g, g.findQualified("node0/gpu0"), g.findQualified("node0/nic3")),
            PathType::kSys);
  for (int m = 0; m < 2; ++m)
    for (int i = 0; i < 8; ++i) {
      std::string host = "node" + std::to_string(m);
      NodeId gpu = g.findQualified(host + "/gpu" + std::to_string(i));
      EXPECT_EQ(g.qualifiedName(closestNic(g, gpu)), host + "/nic" + std::to_string(i / 2));
    }
  CommTopology t = placeRanks(g, 16, 8, DeviceKind::kCuda);
  EXPECT_EQ(t.ranksByMachine.size(), 2u);
  EXPECT_EQ(t.ranksByMachine[1].front(), 8);
  EXPECT_EQ(g.qualifiedName(t.ranks[9].node), "node1/gpu1");
  EXPECT_EQ(t.ranks[9].localRank, 1);
  EXPECT_THROW(placeRanks(g, 17, 8, DeviceKind::kCuda), Error);
}

TEST(TopologyRender, MatrixAndDot) {
  Graph g = fixture("dgx1_v100.json");
  std::string m = matrixText(g, g.machines()[0]);
  EXPECT_NE(m.find("NV2"), std::string::npos);
  EXPECT_NE(m.find("PIX"), std::string::npos);
  std::string dot = toDot(fixture("dgx_a100.json"));
  EXPECT_EQ(dot.rfind("digraph", 0), 0u);
  EXPECT_NE(dot.find("NVLink x12 300 GB/s"), std::string::npos);
}

}  // namespace
}  // namespace grove::topo
