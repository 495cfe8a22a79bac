// Topology files: JSON round trip and overrides, NCCL XML import, error
// messages on bad files, and the communicator's merge of rank views.
#include <gtest/gtest.h>

#include <dirent.h>

#include <string>

#include "base/config.h"
#include "base/error.h"
#include "topology/comm_topology.h"
#include "topology/detect.h"
#include "topology/paths.h"
#include "topology/topo_file.h"

namespace grove::topo {
namespace {

std::string fixturePath(const std::string& name) {
  return std::string(GROVE_TOPO_FIXTURES) + "/" + name;
}

// The message of the grove::Error `fn` throws ("" when it does not throw).
template <typename Fn>
std::string errorOf(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TopologyFiles, JsonRoundTripEveryFixture) {
  DIR* d = opendir(GROVE_TOPO_FIXTURES);
  ASSERT_NE(d, nullptr);
  int n = 0;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 5 ||
        (name.substr(name.size() - 5) != ".json" && name.substr(name.size() - 4) != ".xml"))
      continue;
    Graph g = loadTopologyFile(fixturePath(name));
    Graph back = fromJson(toJson(g), "dump of " + name);
    std::string why;
    EXPECT_TRUE(g.sameAs(back, &why)) << name << ": " << why;
    EXPECT_EQ(toJson(back), toJson(g)) << name;
    ++n;
  }
  closedir(d);
  EXPECT_GE(n, 9);
}

TEST(TopologyFiles, NcclXmlMatchesJsonFixture) {
  Graph x = loadTopologyFile(fixturePath("dgx1_v100_nccl.xml"));
  Graph j = loadTopologyFile(fixturePath("dgx1_v100.json"));
  EXPECT_EQ(x.nodesOfKind(NodeKind::kGpu).size(), 8u);
  EXPECT_EQ(x.nodesOfKind(NodeKind::kPciSwitch).size(), 4u);
  EXPECT_EQ(x.nodesOfKind(NodeKind::kNic).size(), 4u);
  EXPECT_EQ(x.node(x.nodesOfKind(NodeKind::kNic)[0]).attr("device"), "mlx5_0");
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      NodeId xa = x.find(x.machines()[0], "gpu" + std::to_string(a));
      NodeId xb = x.find(x.machines()[0], "gpu" + std::to_string(b));
      NodeId ja = j.find(j.machines()[0], "gpu" + std::to_string(a));
      NodeId jb = j.find(j.machines()[0], "gpu" + std::to_string(b));
      EXPECT_EQ(classify(x, xa, xb), classify(j, ja, jb)) << a << "," << b;
      if (a != b && classify(j, ja, jb) == PathType::kNvLink) {
        EXPECT_DOUBLE_EQ(bottleneckBw(x, xa, xb), bottleneckBw(j, ja, jb)) << a << "," << b;
      }
      NodeId xn = closestNic(x, xa), jn = closestNic(j, ja);
      EXPECT_EQ(x.node(xn).name, j.node(jn).name);
    }
}

TEST(TopologyFiles, NcclXmlNvSwitchAndPcieGen) {
  const char* text = R"(<?xml version="1.0"?>
<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="AuthenticAMD" familyid="23" modelid="49">
    <pci busid="0000:07:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="80" rank="0" gdr="1">
        <nvlink target="0000:c8:00.0" count="12" tclass="0x068000"/>
      </gpu>
    </pci>
    <pci busid="0000:0f:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="80" rank="1" gdr="1">
        <nvlink target="0000:c8:00.0" count="12" tclass="0x068000"/>
      </gpu>
    </pci>
    <nic>
      <net name="eth0" dev="0" speed="25000" port="0" gdr="0"/>
    </nic>
  </cpu>
</system>
)";
  Graph g = fromNcclXml(text, "a100.xml", "box");
  NodeId g0 = g.findQualified("box/gpu0"), g1 = g.findQualified("box/gpu1");
  Path p = pathBetween(g, g0, g1);
  EXPECT_EQ(p.type, PathType::kNvSwitch);
  EXPECT_DOUBLE_EQ(p.bottleneck, 300);
  int li = g.findLink(g.findQualified("box/cpu0"), g0, LinkKind::kPcie);
  ASSERT_GE(li, 0);
  EXPECT_EQ(g.links()[li].pciGen, 4);
  EXPECT_EQ(g.node(g.findQualified("box/nic0")).attr("speed_gbps"), "25");
}

TEST(TopologyFiles, XmlErrorsNameLineAndElement) {
  std::string e = errorOf(
      [] { fromNcclXml("<system>\n  <cpu numaid=\"0\">\n  </pci>\n</system>\n", "bad.xml", "h"); });
  EXPECT_NE(e.find("bad.xml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("</pci>"), std::string::npos) << e;
  e = errorOf([] {
    fromNcclXml(
        "<system>\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\">\n<gpu "
        "sm=\"70\"/>\n</pci>\n</cpu>\n</system>",
        "nodev.xml", "h");
  });
  EXPECT_NE(e.find("nodev.xml:4: <gpu>: missing attribute 'dev'"), std::string::npos) << e;
  e = errorOf([] { fromNcclXml("<system><cpu numaid=\"0\">", "cut.xml", "h"); });
  EXPECT_NE(e.find("cut.xml:1"), std::string::npos) << e;
  EXPECT_NE(e.find("never closed"), std::string::npos) << e;
  e = errorOf([] { fromNcclXml("<system version=\"1\"/>", "empty.xml", "h"); });
  EXPECT_NE(e.find("no <cpu>"), std::string::npos) << e;
  e = errorOf([] { fromNcclXml("<system><cpu numaid=\"x\"/></system>", "num.xml", "h"); });
  EXPECT_NE(e.find("numaid=\"x\" is not a number"), std::string::npos) << e;
}

TEST(TopologyFiles, JsonErrorsNameLineAndElement) {
  std::string e = errorOf([] {
    fromJson(
        "{\n \"machines\": [\n  {\"host\": \"h\", \"nodes\": [\n   {\"name\": \"g\", \"kind\": "
        "\"gpuu\"}\n]}]}",
        "k.json");
  });
  EXPECT_NE(e.find("k.json:4: machine 'h': node 'g': unknown node kind 'gpuu'"), std::string::npos)
      << e;
  e = errorOf([] {
    fromJson(
        "{\"machines\": [{\"host\": \"h\", \"nodes\": [{\"name\": \"a\", \"kind\": \"cpu\"}],\n"
        "\"links\": [{\"a\": \"a\", \"b\": \"zz\", \"kind\": \"pcie\"}]}]}",
        "l.json");
  });
  EXPECT_NE(e.find("l.json:2: machine 'h': unknown node 'zz'"), std::string::npos) << e;
  e = errorOf([] { fromJson("{\"machines\": [\n{\"host\": \"h\",,}]}", "s.json"); });
  EXPECT_NE(e.find("s.json:2"), std::string::npos) << e;
  e = errorOf([] {
    fromJson(
        "{\"machines\": [{\"host\": \"h\", \"nodes\": [{\"name\": \"a\", \"kind\": \"cpu\"},"
        "{\"name\": \"b\", \"kind\": \"cpu\"}], \"links\": [{\"a\": \"a\", \"b\": \"b\", \"kind\": "
        "\"smp\"}]}]}",
        "bw.json");
  });
  EXPECT_NE(e.find("link a <-> b: a smp link needs \"bw\""), std::string::npos) << e;
  e = errorOf([] { fromJson("{\"grove_topology\": 2, \"machines\": []}", "v.json"); });
  EXPECT_NE(e.find("unsupported"), std::string::npos) << e;
  e = errorOf([] { loadTopologyFile("/nonexistent/topo.json"); });
  EXPECT_NE(e.find("/nonexistent/topo.json"), std::string::npos) << e;
}

// Numbers out of range are refused, naming the field: the fuzzer found that
// "index": 4e88 was converted to int (undefined behaviour).
TEST(TopologyFiles, JsonNumbersOutOfRangeAreRefused) {
  auto doc = [](const std::string& node, const std::string& link) {
    return "{\"machines\": [{\"host\": \"h\", \"nodes\": [{\"name\": \"a\", \"kind\": "
           "\"cpu\"" +
           node +
           "}, {\"name\": \"g\", \"kind\": \"gpu\"}], \"links\": [{\"a\": "
           "\"a\", \"b\": \"g\", \"kind\": \"pcie\"" +
           link + "}]}]}";
  };
  const std::pair<std::string, std::string> bad[] = {
      {doc(", \"index\": 4e88", ""), "\"index\" must be a whole number"},
      {doc(", \"index\": 1.5", ""), "\"index\" must be a whole number"},
      {doc("", ", \"gen\": -3"), "\"gen\" must be a whole number"},
      {doc("", ", \"width\": 1e300"), "\"width\" must be a whole number"},
      {doc("", ", \"count\": 99999999999"), "\"count\" must be a whole number"},
      {doc("", ", \"bw\": -1"), "\"bw\" must be a finite number >= 0"},
      {doc("", ", \"latency_us\": -0.5"), "\"latency_us\" must be a finite number >= 0"},
      {doc("", ", \"latency_us\": 1e999"), "bad number"}};
  for (const auto& [text, want] : bad) {
    std::string e = errorOf([&] { fromJson(text, "n.json"); });
    EXPECT_NE(e.find(want), std::string::npos) << text << "\n -> " << e;
  }
  const std::string good = doc(", \"index\": 3", ", \"gen\": 4, \"width\": 16");
  EXPECT_EQ(errorOf([&] { fromJson(good, "ok.json"); }), "");
}

TEST(TopologyFiles, OverrideEditsDetectedGraph) {
  Graph g = loadTopologyFile(fixturePath("pcie_8gpu_2socket.json"));
  const char* over = R"({"override": true, "machines": [{
    "nodes": [{"name": "gpu0", "model": "patched"}, {"name": "nic1", "remove": true},
              {"name": "nvs0", "kind": "nvswitch"}],
    "links": [{"a": "cpu0", "b": "cpu1", "kind": "smp", "bw": 5},
              {"a": "gpu0", "b": "nvs0", "kind": "nvlink", "count": 2},
              {"a": "gpu1", "b": "nvs0", "kind": "nvlink", "count": 2}]}]})";
  ASSERT_TRUE(isOverrideJson(over, "o.json"));
  applyJson(g, over, "o.json");
  NodeId m = g.machines()[0];
  EXPECT_EQ(g.node(g.find(m, "gpu0")).attr("model"), "patched");
  EXPECT_LT(g.find(m, "nic1"), 0);
  EXPECT_DOUBLE_EQ(bottleneckBw(g, g.find(m, "cpu0"), g.find(m, "cpu1")), 5);
  EXPECT_DOUBLE_EQ(bottleneckBw(g, g.find(m, "gpu0"), g.find(m, "gpu1")), 50);
  std::string e = errorOf([&] {
    applyJson(g,
              R"({"override": true, "machines": [{"nodes": [{"name": "gpu42", "remove": true}]}]})",
              "r.json");
  });
  EXPECT_NE(e.find("node 'gpu42': there is no such node to remove"), std::string::npos) << e;
}

TEST(TopologyFiles, LocalTopologyUsesFileAndDumps) {
  std::string dump = testing::TempDir() + "grove_topo_dump.json";
  config::setOverride("GROVE_TOPO_FILE", fixturePath("dgx1_v100.json"));
  config::setOverride("GROVE_TOPO_DUMP_FILE", dump);
  DetectOptions o;
  o.host = "here";
  Graph g = localTopology(o);
  config::setOverride("GROVE_TOPO_FILE", std::nullopt);
  config::setOverride("GROVE_TOPO_DUMP_FILE", std::nullopt);
  ASSERT_EQ(g.machines().size(), 1u);
  EXPECT_EQ(g.node(g.machines()[0]).name, "here");  // a one-machine file describes this machine
  EXPECT_EQ(g.nodesOfKind(NodeKind::kGpu).size(), 8u);
  Graph back = loadTopologyFile(dump);
  std::string why;
  EXPECT_TRUE(g.sameAs(back, &why)) << why;
}

TEST(TopologyDetect, NeverFailsOnThisMachine) {
  Graph g = detectLocal();
  EXPECT_EQ(g.machines().size(), 1u);
  EXPECT_GE(g.nodesOfKind(NodeKind::kCpu).size(), 1u);
  DetectOptions o;
  o.sysRoot = "/nonexistent-sys";
  o.useHwloc = false;
  Graph bare = detectLocal(o);  // no sysfs at all: one CPU node, nothing else
  EXPECT_EQ(bare.nodesOfKind(NodeKind::kCpu).size(), 1u);
  EXPECT_EQ(bare.nodesOfKind(NodeKind::kNic).size(), 0u);
}

TEST(TopologyComm, MergeViewsOfTwoHosts) {
  Graph a = loadTopologyFile(fixturePath("dgx_a100.json"));
  std::vector<LocalView> views;
  for (int r = 0; r < 16; ++r) {
    Graph g;
    std::string host = r < 8 ? "hostA" : "hostB";
    g.appendMachine(a, a.machines()[0], host);
    LocalView v;
    v.graphJson = toJson(g);
    v.host = host;
    v.device = DeviceKind::kCuda;
    v.cudaDevice = 7 - r % 8;  // reverse order: placement must follow the device, not the rank
    views.push_back(v);
  }
  std::vector<std::string> encoded;
  for (const LocalView& v : views) encoded.push_back(encodeLocalView(v));
  CommTopology t = buildCommTopology(encoded);
  ASSERT_EQ(t.graph.machines().size(), 2u);
  EXPECT_EQ(t.graph.nodesOfKind(NodeKind::kNet).size(), 1u);  // both hosts on the same "ib"
  EXPECT_EQ(t.graph.qualifiedName(t.ranks[0].node), "hostA/gpu7");
  EXPECT_EQ(t.graph.qualifiedName(t.ranks[15].node), "hostB/gpu0");
  EXPECT_EQ(t.ranks[9].localRank, 1);
  EXPECT_EQ(pathBetween(t.graph, t.ranks[0].node, t.ranks[8].node).type, PathType::kNet);
}

TEST(TopologyComm, ExchangeOverAllGatherAndEmulatedCluster) {
  // Every rank loaded the same two-machine cluster file: ranks are spread in blocks.
  Graph c = loadTopologyFile(fixturePath("cluster_2x4nic.json"));
  const int n = 4;
  std::vector<std::string> blobs(n);
  for (int r = 0; r < n; ++r) {
    LocalView v;
    v.graphJson = toJson(c);
    v.host = "box";
    v.device = DeviceKind::kHost;
    v.numa = r % 2;
    blobs[r] = encodeLocalView(v);
  }
  // A fake all-gather: rank 0's call sees every rank's contribution of the same round.
  int round = 0;
  AllGatherFn gather = [&](const void* data, size_t bytes) {
    std::vector<uint8_t> out;
    for (int r = 0; r < n; ++r) {
      if (round == 0) {
        uint64_t s = blobs[r].size();
        out.insert(out.end(), reinterpret_cast<uint8_t*>(&s),
                   reinterpret_cast<uint8_t*>(&s) + sizeof(s));
      } else {
        std::string padded = blobs[r];
        padded.resize(bytes, '\0');
        out.insert(out.end(), padded.begin(), padded.end());
      }
    }
    ++round;
    return out;
  };
  CommTopology t = exchangeCommTopology(decodeLocalView(blobs[0], "mine"), n, gather);
  EXPECT_EQ(round, 2);
  ASSERT_EQ(t.ranksByMachine.size(), 2u);
  EXPECT_EQ(t.ranksByMachine[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(t.graph.qualifiedName(t.ranks[2].node), "node1/cpu0");
  EXPECT_EQ(t.graph.qualifiedName(t.ranks[3].node), "node1/cpu1");
}

}  // namespace
}  // namespace grove::topo
