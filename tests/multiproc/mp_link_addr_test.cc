// Link addresses in real processes: grove-launch -n 4 -- grove_mp_check
// (all-reduce: every dtype, op, size, in and out of place) over TCP, with
// GROVE_TOPO_FILE a K4 whose links carry 127.0.L.1 / 127.0.L.2 (all on lo)
// and GROVE_TOPO_RANKS placing the ranks out of order. Results must be
// correct, the INFO log must show each rank's path to each peer, and the
// TRACE log of the connections must show they were bound to and made to the
// chosen link addresses. The cost model's tuning for the fabric runs on
// rank 0 alone, and the other ranks take its plans and tables.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mp_spawn.h"
#include "mp_summary.h"

namespace {

using mptest::RunResult;

RunResult runK4(const std::string& dir) {
  const std::vector<std::string> argv = {GROVE_LAUNCH_PATH,   "-n",       "4",
                                         "--timeout",         "240",      "--",
                                         GROVE_MP_CHECK_PATH, "--filter", "allreduce"};
  const std::vector<std::string> env = {
      "GROVE_TRANSPORT=socket",
      "GROVE_TIMEOUT=30",
      "GROVE_DEBUG=TRACE",
      "GROVE_DEBUG_SUBSYS=NET,TOPO,PLAN",
      "GROVE_TOPO_FILE=" + std::string(GROVE_TOPO_FIXTURES) + "/k4_addr.json",
      "GROVE_TOPO_RANKS=gpu2,gpu0,gpu3,gpu1"};
  return mptest::runCommand(argv, env, 255, dir + "/out.txt");
}

TEST(MpLinkAddresses, AllReduceOverK4LinkAddresses) {
  const std::string dir = mptest::makeTempDir("linkaddr");
  const RunResult r = runK4(dir);
  mptest::expectCheckRun(r, 4, "all-reduce over the K4's link addresses");
  if (HasFatalFailure()) return;
  // Placement: rank 0 on gpu2, rank 1 on gpu0, rank 2 on gpu3, rank 3 on gpu1.
  EXPECT_NE(r.output.find("0->gpu2  1->gpu0  2->gpu3  3->gpu1"), std::string::npos)
      << mptest::tail(r.output);
  // Paths (gpu0-gpu2 is link 2: 127.0.2.1 at gpu0, 127.0.2.2 at gpu2).
  EXPECT_NE(r.output.find("rank 0 -> rank 1: direct gpu2 -nvlink-> gpu0; local 127.0.2.2, "
                          "remote 127.0.2.1"),
            std::string::npos)
      << mptest::tail(r.output);
  EXPECT_NE(r.output.find("rank 3 -> rank 2: direct gpu1 -nvlink-> gpu3; local 127.0.5.1, "
                          "remote 127.0.5.2"),
            std::string::npos)
      << mptest::tail(r.output);
  // The connections themselves.
  EXPECT_NE(r.output.find("rank 0: connected to rank 1 channel 0 from 127.0.2.2:"),
            std::string::npos)
      << mptest::tail(r.output);
  EXPECT_NE(r.output.find("to 127.0.2.1:"), std::string::npos) << mptest::tail(r.output);
  // One rank tuned: the trees were planned once, and three ranks took them.
  auto count = [&](const std::string& text) {
    size_t n = 0;
    for (size_t at = r.output.find(text); at != std::string::npos; at = r.output.find(text, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("trees-allreduce of 4 ranks: planned"), 1u) << mptest::tail(r.output);
  EXPECT_EQ(count("took rank 0's tuning"), 3u) << mptest::tail(r.output);
  EXPECT_EQ(count("tuned for the topology: allreduce"), 4u) << mptest::tail(r.output);
}

}  // namespace
