// Link end addresses in topology files (read, written, compared, rejected),
// explicit rank placement (GROVE_TOPO_RANKS through the merged topology),
// and the per-peer address resolver on fixtures whose links carry addresses:
// a K4, a 4-ring (non-neighbours only by forwarding) and a DGX-1 V100 with an
// address pair on every link (GPUs 0,3,4,7: NVLink pairs use their NVLink's
// addresses, the others the ends of their PCIe path).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "topology/comm_topology.h"
#include "topology/link_addresses.h"
#include "topology/render.h"
#include "topology/topo_file.h"
#include "unit/topo_fixtures.h"

namespace grove::topo {
namespace {

using fixtures::fixture;

const Link& linkBetween(const Graph& g, const std::string& a, const std::string& b) {
  const int li = g.findLink(g.findQualified(a), g.findQualified(b));
  EXPECT_GE(li, 0) << a << " -> " << b;
  return g.links().at(static_cast<size_t>(li));
}

std::string errorOf(const std::string& json) {
  try {
    fromJson(json, "t.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string oneLink(const std::string& fields) {
  return R"({"machines": [{"host": "h", "nodes": [{"name": "g0", "kind": "gpu"},
            {"name": "g1", "kind": "gpu"}], "links": [{"kind": "nvlink", "bw": 5, )" +
         fields + "}]}]}";
}

TEST(LinkAddressFiles, ReadSwappedForTheReverseDirection) {
  Graph g = fixture("k4_addr.json");
  EXPECT_TRUE(g.hasLinkAddresses());
  const Link& fwd = linkBetween(g, "k4/gpu0", "k4/gpu2");
  EXPECT_EQ(fwd.srcAddr, "127.0.2.1");
  EXPECT_EQ(fwd.dstAddr, "127.0.2.2");
  const Link& back = linkBetween(g, "k4/gpu2", "k4/gpu0");
  EXPECT_EQ(back.srcAddr, "127.0.2.2");
  EXPECT_EQ(back.dstAddr, "127.0.2.1");
  const Link& pcie = linkBetween(g, "k4/cpu0", "k4/gpu1");
  EXPECT_TRUE(pcie.srcAddr.empty() && pcie.dstAddr.empty());
  EXPECT_FALSE(fixture("dgx1_v100.json").hasLinkAddresses());
}

TEST(LinkAddressFiles, RoundTripAndSameAs) {
  Graph g = fixture("dgx1_v100_addr.json");
  const std::string text = toJson(g);
  EXPECT_NE(text.find("\"addr_a\""), std::string::npos);
  Graph again = fromJson(text, "dump");
  std::string why;
  EXPECT_TRUE(g.sameAs(again, &why)) << why;
  // Without addresses the graphs differ.
  EXPECT_FALSE(g.sameAs(fixture("dgx1_v100.json"), &why));
  EXPECT_NE(why.find("addr="), std::string::npos) << why;
  // A graph without addresses writes none.
  EXPECT_EQ(toJson(fixture("dgx1_v100.json")).find("addr_"), std::string::npos);
  // grove-topo's summary shows them.
  EXPECT_NE(summaryText(g).find("addr 10.50.20.1 <-> 10.50.20.2"), std::string::npos);
}

TEST(LinkAddressFiles, OneWayLinksAndIpv6) {
  Graph g = fromJson(oneLink(R"("from": "g0", "to": "g1", "addr_from": "FD00:0:0::1",
                               "addr_to": "fd00::2")"),
                     "t.json");
  const Link& l = linkBetween(g, "h/g0", "h/g1");
  EXPECT_EQ(l.srcAddr, "fd00::1");  // canonical text
  EXPECT_EQ(l.dstAddr, "fd00::2");
  EXPECT_EQ(g.findLink(g.findQualified("h/g1"), g.findQualified("h/g0")), -1);
  std::string why;
  EXPECT_TRUE(g.sameAs(fromJson(toJson(g), "dump"), &why)) << why;
  EXPECT_NE(toJson(g).find("\"addr_from\""), std::string::npos);
  // Only one end given: the other stays empty.
  g = fromJson(oneLink(R"("a": "g0", "b": "g1", "addr_b": "10.1.1.2")"), "t.json");
  EXPECT_EQ(linkBetween(g, "h/g1", "h/g0").srcAddr, "10.1.1.2");
  EXPECT_EQ(linkBetween(g, "h/g1", "h/g0").dstAddr, "");
}

TEST(LinkAddressFiles, MalformedAddressesAreRejected) {
  std::string e = errorOf(oneLink(R"("a": "g0", "b": "g1", "addr_a": "10.50.3.x")"));
  EXPECT_NE(e.find("link g0 <-> g1"), std::string::npos) << e;
  EXPECT_NE(e.find("\"addr_a\" '10.50.3.x' is not an IPv4 or IPv6 address"), std::string::npos)
      << e;
  e = errorOf(oneLink(R"("a": "g0", "b": "g1", "addr_b": "host.example")"));
  EXPECT_NE(e.find("'host.example' is not an IPv4 or IPv6 address"), std::string::npos) << e;
  e = errorOf(oneLink(R"("a": "g0", "b": "g1", "addr_b": 7)"));
  EXPECT_NE(e.find("\"addr_b\" is not an IPv4"), std::string::npos) << e;
  e = errorOf(oneLink(R"("a": "g0", "b": "g1", "addr_a": "10.0.0.1", "addr_b": "fd00::1")"));
  EXPECT_NE(e.find("different families"), std::string::npos) << e;
  e = errorOf(oneLink(R"("a": "g0", "b": "g1", "addr_from": "10.0.0.1")"));
  EXPECT_NE(e.find("\"addr_from\" belongs to a \"from\"/\"to\" link"), std::string::npos) << e;
  e = errorOf(oneLink(R"("from": "g0", "to": "g1", "addr_a": "10.0.0.1")"));
  EXPECT_NE(e.find("\"addr_a\" belongs to a \"a\"/\"b\" link"), std::string::npos) << e;
}

// Views of `n` ranks on one host with the graph `g` and placement `names`.
std::vector<LocalView> views(const Graph& g, int n, const std::vector<std::string>& names) {
  LocalView v;
  v.graphJson = toJson(g);
  v.host = g.node(g.machines().at(0)).name;
  v.placement = names;
  return std::vector<LocalView>(static_cast<size_t>(n), v);
}

std::string mergeError(const std::vector<LocalView>& vs) {
  try {
    buildCommTopology(vs);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RankPlacement, TopoRanksOverridesTheAutomaticPlacement) {
  Graph g = fixture("k4_addr.json");
  CommTopology t = buildCommTopology(views(g, 4, {"gpu3", "gpu0", "k4/gpu1", "gpu2"}));
  const char* want[] = {"gpu3", "gpu0", "gpu1", "gpu2"};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(t.graph.node(t.ranks[r].node).name, want[r]) << r;
    EXPECT_EQ(t.ranks[r].localRank, r);
  }
  ASSERT_EQ(t.ranksByMachine.size(), 1u);
  EXPECT_EQ(t.ranksByMachine[0], (std::vector<int>{0, 1, 2, 3}));
  // A node named twice holds two ranks.
  t = buildCommTopology(views(g, 2, {"gpu1", "gpu1"}));
  EXPECT_EQ(t.ranks[0].node, t.ranks[1].node);
  // Without a list: automatic (host ranks on the CPU node).
  t = buildCommTopology(views(g, 2, {}));
  EXPECT_EQ(t.graph.node(t.ranks[1].node).name, "cpu0");
}

TEST(RankPlacement, ClusterRanksMayMoveBetweenMachines) {
  Graph g = fixture("cluster_2x4nic.json");
  std::vector<std::string> hosts;
  for (NodeId m : g.machines()) hosts.push_back(g.node(m).name);
  ASSERT_EQ(hosts.size(), 2u);
  LocalView v;
  v.graphJson = toJson(g);
  v.host = "somewhere";
  v.placement = {hosts[1] + "/gpu0", hosts[0] + "/gpu2", hosts[0] + "/gpu0"};
  CommTopology t = buildCommTopology(std::vector<LocalView>(3, v));
  EXPECT_EQ(t.graph.qualifiedName(t.ranks[0].node), hosts[1] + "/gpu0");
  EXPECT_EQ(t.ranks[0].machine, g.machines()[1]);
  EXPECT_EQ(t.ranksByMachine, (std::vector<std::vector<int>>{{1, 2}, {0}}));
  EXPECT_EQ(t.ranks[2].localRank, 1);
  // A plain name is looked up on the rank's own machine (ranks 0, 1 on the
  // first, rank 2 on the second); without one it must be unique.
  v.placement = {"gpu1", "gpu1", "gpu1"};
  t = buildCommTopology(std::vector<LocalView>(3, v));
  EXPECT_EQ(t.graph.qualifiedName(t.ranks[1].node), hosts[0] + "/gpu1");
  EXPECT_EQ(t.graph.qualifiedName(t.ranks[2].node), hosts[1] + "/gpu1");
  try {
    placeRanksOn(g, {"gpu1", hosts[0] + "/gpu1"});
    ADD_FAILURE() << "an ambiguous name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--place entry 0 ('gpu1'): node 'gpu1' exists on 2 "
                                         "machines; qualify it as host/gpu1"),
              std::string::npos)
        << e.what();
  }
}

TEST(RankPlacement, BadListsAreRejected) {
  Graph g = fixture("k4_addr.json");
  std::string e = mergeError(views(g, 3, {"gpu0", "gpu1"}));
  EXPECT_NE(e.find("GROVE_TOPO_RANKS names 2 node(s) for 3 rank(s)"), std::string::npos) << e;
  e = mergeError(views(g, 2, {"gpu0", "gpu9"}));
  EXPECT_NE(e.find("entry 1 ('gpu9'): no node 'gpu9'"), std::string::npos) << e;
  e = mergeError(views(g, 2, {"gpu0", "k4"}));
  EXPECT_NE(e.find("no node 'k4'"), std::string::npos) << e;
  e = mergeError(views(g, 2, {"gpu0", "other/gpu1"}));
  EXPECT_NE(e.find("no node 'other/gpu1'"), std::string::npos) << e;
  std::vector<LocalView> vs = views(g, 2, {"gpu0", "gpu1"});
  vs[1].placement = {"gpu1", "gpu0"};
  e = mergeError(vs);
  EXPECT_NE(e.find("differs between rank 0 ('gpu0,gpu1') and rank 1 ('gpu1,gpu0')"),
            std::string::npos)
      << e;
  EXPECT_EQ(parseNodeList(" gpu0, k4/gpu1 "), (std::vector<std::string>{"gpu0", "k4/gpu1"}));
  EXPECT_TRUE(parseNodeList("").empty());
  EXPECT_THROW(parseNodeList("gpu0,,gpu1"), Error);
  // The list travels in the encoded view.
  LocalView v = views(g, 1, {"gpu2", "gpu1"})[0];
  EXPECT_EQ(decodeLocalView(encodeLocalView(v), "v").placement, v.placement);
}

TEST(LinkAddressResolver, K4UsesTheDirectLinkBothWays) {
  CommTopology t = placeRanksOn(fixture("k4_addr.json"), {"gpu2", "gpu0", "gpu3", "gpu1"});
  std::vector<PeerLinkAddress> a = resolvePeerLinkAddresses(t, 0);  // on gpu2
  ASSERT_EQ(a.size(), 4u);
  EXPECT_TRUE(a[0].local.empty() && a[0].remote.empty());
  EXPECT_EQ(a[1].local, "127.0.2.2");  // gpu2's end of gpu0-gpu2
  EXPECT_EQ(a[1].remote, "127.0.2.1");
  EXPECT_EQ(a[1].path, "direct gpu2 -nvlink-> gpu0");
  EXPECT_EQ(a[2].local, "127.0.6.1");
  EXPECT_EQ(a[2].remote, "127.0.6.2");
  EXPECT_EQ(a[3].local, "127.0.4.2");
  EXPECT_EQ(a[3].remote, "127.0.4.1");
  std::vector<PeerLinkAddress> b = resolvePeerLinkAddresses(t, 1);  // on gpu0
  EXPECT_EQ(b[0].local, "127.0.2.1");
  EXPECT_EQ(b[0].remote, "127.0.2.2");
  EXPECT_THROW(resolvePeerLinkAddresses(t, 4), Error);
}

TEST(LinkAddressResolver, RingNonNeighboursGoToAnAddressOfThePeer) {
  CommTopology t = placeRanksOn(fixture("ring4_addr.json"), {"gpu0", "gpu1", "gpu2", "gpu3"});
  std::vector<PeerLinkAddress> a = resolvePeerLinkAddresses(t, 0);
  EXPECT_EQ(a[1].local, "10.60.1.1");
  EXPECT_EQ(a[1].remote, "10.60.1.2");
  EXPECT_EQ(a[3].local, "10.60.4.2");  // gpu3-gpu0 is written from gpu3's side
  EXPECT_EQ(a[3].remote, "10.60.4.1");
  EXPECT_EQ(a[2].local, "");            // no route that does not relay through a GPU
  EXPECT_EQ(a[2].remote, "10.60.3.1");  // gpu2's end of its widest link (gpu2-gpu3, 50 GB/s)
  EXPECT_NE(a[2].path.find("forwarded"), std::string::npos) << a[2].path;
  std::vector<PeerLinkAddress> c = resolvePeerLinkAddresses(t, 2);
  EXPECT_EQ(c[0].remote, "10.60.1.1");  // gpu0-gpu1 and gpu3-gpu0 tie: the first link
}

// The PCIe switch above a GPU of the DGX-1 subset.
std::string switchOf(const std::string& gpu) {
  return gpu == "gpu0" ? "pci0" : gpu == "gpu3" ? "pci1" : gpu == "gpu4" ? "pci2" : "pci3";
}

TEST(LinkAddressResolver, Dgx1NvLinkPairsAndPciePaths) {
  Graph g = fixture("dgx1_v100_addr.json");
  CommTopology t = placeRanksOn(g, {"gpu0", "gpu3", "gpu4", "gpu7"});
  auto ends = [&](const std::string& a, const std::string& b) {
    const Link& l = linkBetween(g, "dgx1-v100/" + a, "dgx1-v100/" + b);
    return std::make_pair(l.srcAddr, l.dstAddr);
  };
  for (int r = 0; r < 4; ++r) {
    std::vector<PeerLinkAddress> a = resolvePeerLinkAddresses(t, r);
    for (int p = 0; p < 4; ++p) {
      if (p == r) continue;
      const std::string me = g.node(t.ranks[r].node).name, peer = g.node(t.ranks[p].node).name;
      SCOPED_TRACE(me + " -> " + peer + ": " + a[p].path);
      if (g.findLink(t.ranks[r].node, t.ranks[p].node, LinkKind::kNvLink) >= 0) {
        EXPECT_EQ(std::make_pair(a[p].local, a[p].remote), ends(me, peer));
        EXPECT_EQ(a[p].path.rfind("direct " + me + " -nvlink-> " + peer, 0), 0u);
        continue;
      }
      // 0-7 and 3-4: up PCIe to a CPU, across SMP, down to the peer.
      const std::string up = switchOf(me), down = switchOf(peer);
      EXPECT_EQ(a[p].local, ends(me, up).first);
      EXPECT_EQ(a[p].remote, ends(down, peer).second);
      EXPECT_NE(a[p].path.find("-smp->"), std::string::npos);
    }
  }
  // Hard numbers for one pair: gpu0's end of pci0-gpu0 (link 3), gpu7's end of pci3-gpu7 (link 16).
  std::vector<PeerLinkAddress> a = resolvePeerLinkAddresses(t, 0);
  EXPECT_EQ(a[3].local, "10.50.3.2");
  EXPECT_EQ(a[3].remote, "10.50.16.2");
  EXPECT_EQ(a[1].local, "10.50.20.1");  // gpu0-gpu3 NVLink (link 20)
  EXPECT_EQ(a[1].remote, "10.50.20.2");
}

TEST(LinkAddressResolver, NoAddressesMeansNothingChanges) {
  CommTopology t = placeRanksOn(fixture("dgx1_v100.json"), {"gpu0", "gpu3", "gpu4", "gpu7"});
  for (const PeerLinkAddress& p : resolvePeerLinkAddresses(t, 2))
    EXPECT_TRUE(p.local.empty() && p.remote.empty() && p.path.empty());
}

}  // namespace
}  // namespace grove::topo
