// Planned routes in real processes: tree all-reduce on DGX-1 V100 GPUs
// {0,3,4,7} (grove-launch -n 4 -- grove_mp_check, GROVE_ALGO=tree) over TCP,
// with the DGX-1 topology whose links carry 127/8 addresses (all on lo).
// The trees send part of their data between NVLink neighbours over the PCIe
// path; those links must open as connections of their own (a route id in the
// hello) bound to the GPU's PCIe address, and the results must be correct.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "mp_spawn.h"
#include "mp_summary.h"

namespace {

using mptest::RunResult;

/// The DGX-1 V100 fixture with its 10.50.L.x link addresses moved to 127.50.L.x.
std::string loopbackDgx1(const std::string& dir) {
  std::ifstream in(std::string(GROVE_TOPO_FIXTURES) + "/dgx1_v100_addr.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  for (size_t at = s.find("\"10.50."); at != std::string::npos; at = s.find("\"10.50.", at))
    s.replace(at, 4, "\"127.");
  const std::string path = dir + "/dgx1_lo.json";
  std::ofstream(path) << s;
  return path;
}

TEST(MpPlannedRoutes, TreeAllReduceOpensItsPlannedRoutes) {
  const std::string dir = mptest::makeTempDir("routes");
  const std::vector<std::string> argv = {
      GROVE_LAUNCH_PATH,   "-n",       "4",         "--timeout", "240", "--",
      GROVE_MP_CHECK_PATH, "--filter", "allreduce", "--quick"};
  const std::vector<std::string> env = {"GROVE_TRANSPORT=socket",
                                        "GROVE_TIMEOUT=30",
                                        "GROVE_ALGO=allreduce:tree",
                                        "GROVE_DEBUG=TRACE",
                                        "GROVE_DEBUG_SUBSYS=NET",
                                        "GROVE_TOPO_FILE=" + loopbackDgx1(dir),
                                        "GROVE_TOPO_RANKS=gpu0,gpu3,gpu4,gpu7"};
  const RunResult r = mptest::runCommand(argv, env, 255, dir + "/out.txt");
  mptest::expectCheckRun(r, 4, "tree all-reduce over planned routes");
  if (HasFatalFailure()) return;
  // Rank 0 (gpu0) opened planned-route connections from its PCIe address
  // (link pci0-gpu0: 127.50.3.2), besides its NVLink ones.
  EXPECT_NE(r.output.find(" route "), std::string::npos) << "no planned-route connection\n"
                                                         << mptest::tail(r.output);
  EXPECT_NE(r.output.find("rank 0: connected to rank "), std::string::npos);
  bool pcieFromGpu0 = false;
  std::istringstream lines(r.output);
  for (std::string l; std::getline(lines, l);)
    pcieFromGpu0 |= l.find("rank 0: connected to rank ") != std::string::npos &&
                    l.find(" route ") != std::string::npos &&
                    l.find("from 127.50.3.2:") != std::string::npos;
  EXPECT_TRUE(pcieFromGpu0) << "no route of rank 0 left over its PCIe address\n"
                            << mptest::tail(r.output);
}

}  // namespace
