// grove-plan on the machine fixtures: text report, JSON fields, SVG, the
// planning time of DGX-1 V100, and clear errors for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "topology/json.h"

namespace {

namespace json = grove::topo::json;

struct ToolRun {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string fixture(const std::string& name) {
  return std::string(GROVE_TOPO_FIXTURES) + "/" + name;
}

ToolRun plan(const std::string& args) {
  // One file per process: ctest runs the PlanTool tests in parallel processes.
  const std::string errPath =
      testing::TempDir() + "grove_plan_test." + std::to_string(getpid()) + ".err";
  const std::string cmd = std::string(GROVE_PLAN_PATH) + " " + args + " 2>" + errPath;
  ToolRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = slurp(errPath);
  std::remove(errPath.c_str());
  return r;
}

TEST(PlanTool, TextReportOnDgx1V100) {
  const ToolRun r = plan("--file " + fixture("dgx1_v100.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* want :
       {"allreduce of 256 MiB over 8 rank(s)", "planning time:", "best rings:", "NCCL-like rings:",
        "all-reduce trees:", "link utilisation", "nccl-rings", "selected (", "upper bound"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  const size_t at = r.out.find("planning time:");
  std::printf("dgx1_v100, 8 GPUs: %s\n", r.out.substr(at, r.out.find('\n', at) - at).c_str());
}

// An emulated fabric's links run at a few MB/s: the report shows their
// rates with three significant digits, not as 0.0 GB/s.
TEST(PlanTool, RatesBelowOneGBpsKeepTheirDigits) {
  const std::string path =
      testing::TempDir() + "grove_plan_slow." + std::to_string(getpid()) + ".json";
  std::ofstream(path) << R"({"grove_topology": 1, "machines": [{"host": "slow", "nodes": [
      {"name": "gpu0", "kind": "gpu", "index": 0}, {"name": "gpu1", "kind": "gpu", "index": 1},
      {"name": "gpu2", "kind": "gpu", "index": 2}],
    "links": [{"a": "gpu0", "b": "gpu1", "kind": "nvlink", "bw": 0.005},
              {"a": "gpu1", "b": "gpu2", "kind": "nvlink", "bw": 0.005},
              {"a": "gpu2", "b": "gpu0", "kind": "nvlink", "bw": 0.0025}]}]})";
  const ToolRun r = plan("--file " + path + " --transport socket --size 4M");
  std::remove(path.c_str());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find(" 0.0 GB/s"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" 0.00 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0.005  "), std::string::npos) << r.out;  // a link's capacity
  EXPECT_NE(r.out.find("0.0025 "), std::string::npos) << r.out;
}

TEST(PlanTool, JsonHasThePlansAndPredictions) {
  const ToolRun r = plan("--file " + fixture("dgx1_v100.json") +
                         " --gpus 0,3,4,7 --coll broadcast --root 1 --size 64M --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const json::Value v = json::parse(r.out, "grove-plan --json");
  ASSERT_TRUE(v.isObject());
  EXPECT_EQ(v.get("collective")->text, "broadcast");
  EXPECT_EQ(v.get("nranks")->number, 4);
  EXPECT_EQ(v.get("root")->number, 1);
  EXPECT_EQ(v.get("bytes")->number, 64.0 * (1 << 20));
  EXPECT_TRUE(v.get("plan_ms")->isNumber());
  ASSERT_TRUE(v.get("ranks")->isArray());
  EXPECT_EQ(v.get("ranks")->items.at(1).text, "dgx1-v100/gpu3");
  for (const char* key : {"rings", "nccl_rings"}) {
    const json::Value* rings = v.get(key);
    ASSERT_NE(rings, nullptr) << key;
    ASSERT_FALSE(rings->get("rings")->items.empty()) << key;
    EXPECT_EQ(rings->get("rings")->items[0].get("order")->items.size(), 4u);
  }
  const json::Value* trees = v.get("trees");
  ASSERT_NE(trees, nullptr);
  ASSERT_FALSE(trees->get("trees")->items.empty());
  double weights = 0;
  for (const json::Value& t : trees->get("trees")->items) {
    EXPECT_EQ(t.get("root")->number, 1);
    EXPECT_EQ(t.get("parent")->items.size(), 4u);
    weights += t.get("weight")->number;
  }
  EXPECT_NEAR(weights, 1.0, 1e-6);
  bool sawSelected = false;
  for (const json::Value& p : v.get("predictions")->items) {
    if (!p.get("ok")->boolean) continue;
    EXPECT_GT(p.get("algbw")->number, 0) << p.get("algorithm")->text;
    EXPECT_DOUBLE_EQ(p.get("busbw")->number, p.get("algbw")->number);  // broadcast: factor 1
    sawSelected |= p.get("algorithm")->text == "selected";
  }
  EXPECT_TRUE(sawSelected);
  EXPECT_GT(v.get("bound")->get("algbw")->number, 0);
  ASSERT_FALSE(v.get("links")->items.empty());
  EXPECT_TRUE(v.get("links")->items[0].get("cap")->isNumber());
}

TEST(PlanTool, SvgIsWritten) {
  const std::string svg = testing::TempDir() + "grove_plan_test.svg";
  std::remove(svg.c_str());
  const ToolRun r = plan("--file " + fixture("dgx1_p100.json") + " --gpus 0,1,2,3,4 --svg " + svg);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string text = slurp(svg);
  EXPECT_EQ(text.rfind("<?xml", 0), 0u);
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find("marker-end"), std::string::npos);  // tree edges
  EXPECT_NE(text.find("gpu4 r4"), std::string::npos);
  EXPECT_NE(text.find("</svg>"), std::string::npos);
}

TEST(PlanTool, ClusterXmlAndReduce) {
  const ToolRun c = plan("--file " + fixture("cluster_2x4nic.json") + " --ranks 8 --size 16M");
  ASSERT_EQ(c.rc, 0) << c.err;
  EXPECT_NE(c.out.find("on 2 machine(s)"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("hierarchical:"), std::string::npos);
  const ToolRun x =
      plan("--file " + fixture("dgx1_v100_nccl.xml") + " --coll reduce --root 3 --size 4M");
  ASSERT_EQ(x.rc, 0) << x.err;
  EXPECT_NE(x.out.find("reduce of 4 MiB over 8 rank(s)"), std::string::npos) << x.out;
}

TEST(PlanTool, BadInputFailsClearly) {
  const std::string dgx = " --file " + fixture("dgx1_v100.json");
  const struct {
    std::string args, want;
  } cases[] = {
      {"--bogus", "unknown option '--bogus'"},
      {dgx + " --gpus 0,9", "no GPU with CUDA index 9"},
      {dgx + " --gpus 0,0", "lists GPU 0 twice"},
      {dgx + " --gpus 0,x", "--gpus needs a non-negative integer"},
      {dgx + " --coll sendrecv", "--coll 'sendrecv'"},
      {dgx + " --size 12Q", "bad size '12Q'"},
      {dgx + " --root 8", "root 8 out of range"},
      {dgx + " --gpus 0 ", "at least 2 ranks"},
      {"--file /nonexistent/topo.json", "/nonexistent/topo.json"},
      {" --file " + fixture("cluster_2x4nic.json") + " --gpus 0,1",
       "--gpus needs a single-machine topology"},
      {dgx + " --size", "--size needs a value"},
  };
  for (const auto& c : cases) {
    const ToolRun r = plan(c.args);
    EXPECT_EQ(r.rc, 1) << c.args;
    EXPECT_NE(r.err.find("grove-plan: "), std::string::npos) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.want), std::string::npos) << c.args << ": " << r.err;
  }
  const ToolRun help = plan("--help");
  EXPECT_EQ(help.rc, 0);
  EXPECT_NE(help.out.find("usage: grove-plan"), std::string::npos);
}

}  // namespace
