// Trees and the hierarchical all-reduce in real processes: grove-launch -n N
// -- grove_mp_check on allreduce, broadcast and reduce (every dtype, op,
// size, root, in and out of place) with GROVE_ALGO=tree or =allreduce:hier,
// over shared memory and TCP (GROVE_TRANSPORT=socket), N in 2..4. Runs with
// GROVE_TOPO_FILE give the ranks a richer graph: a DGX-1 (host ranks on its
// two sockets) and a two-machine cluster (so the hierarchical plan has two
// machines and leaders). Planned rings: with those files the ring search
// gives rings in other orders than rank order (several on the cluster), which
// ring all-reduce, all-gather and reduce-scatter then follow. Each run must
// pass, and the INFO log must show that the requested algorithm really ran.
// With GROVE_PLAN_CACHE_DIR a second job takes its plans from the folder.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mp_spawn.h"
#include "mp_summary.h"

namespace {

using mptest::RunResult;

struct TreeRun {
  int n;
  std::string transport;
  std::string algo;      // GROVE_ALGO
  std::string topoFile;  // fixture name under tests/fixtures/topology, or ""
  std::string wantAlgo;  // the algorithm name the log must show
  std::string filter = "allreduce,broadcast,reduce";
  std::vector<std::string> env = {};  // more variables
};

RunResult runTrees(const TreeRun& t) {
  const std::string dir = mptest::makeTempDir("trees");
  const std::vector<std::string> argv = {GROVE_LAUNCH_PATH,   "-n",       std::to_string(t.n),
                                         "--timeout",         "240",      "--",
                                         GROVE_MP_CHECK_PATH, "--filter", t.filter};
  std::vector<std::string> env = {"GROVE_TRANSPORT=" + t.transport, "GROVE_TIMEOUT=30",
                                  "GROVE_ALGO=" + t.algo, "GROVE_DEBUG=INFO",
                                  "GROVE_DEBUG_SUBSYS=COLL,PLAN"};
  env.insert(env.end(), t.env.begin(), t.env.end());
  if (!t.topoFile.empty())
    env.push_back("GROVE_TOPO_FILE=" + std::string(GROVE_TOPO_FIXTURES) + "/" + t.topoFile);
  std::string what = "n=" + std::to_string(t.n) + " " + t.transport + " GROVE_ALGO=" + t.algo +
                     (t.topoFile.empty() ? "" : " GROVE_TOPO_FILE=" + t.topoFile);
  const RunResult r = mptest::runCommand(argv, env, 255, dir + "/out.txt");
  printf("[ %s ] %.1f s\n", what.c_str(), r.seconds);
  mptest::expectCheckRun(r, t.n, what);
  if (::testing::Test::HasFatalFailure()) return r;
  EXPECT_NE(r.output.find("algo " + t.wantAlgo + " "), std::string::npos)
      << "the log never names algorithm " << t.wantAlgo << ": " << what;
  return r;
}

TEST(MpTrees, N2Shm) { runTrees({2, "shm", "tree", "", "tree"}); }
TEST(MpTrees, N3Shm) { runTrees({3, "shm", "tree", "", "tree"}); }
TEST(MpTrees, N4Shm) { runTrees({4, "shm", "tree", "", "tree"}); }
TEST(MpTrees, N2Socket) { runTrees({2, "socket", "tree", "", "tree"}); }
TEST(MpTrees, N4Socket) { runTrees({4, "socket", "tree", "", "tree"}); }
TEST(MpTrees, N4ShmDgx1) { runTrees({4, "shm", "trees", "dgx1_v100.json", "tree"}); }
// GROVE_PLAN_CACHE_DIR: the first job plans and leaves its plans there; the
// second takes every plan from the folder (no rank plans again), exactly.
TEST(MpTrees, N4ShmDgx1PlanCacheDir) {
  const std::string plans = mptest::makeTempDir("plans") + "/plans";
  const TreeRun run{4,
                    "shm",
                    "trees",
                    "dgx1_v100.json",
                    "tree",
                    "allreduce,broadcast,reduce",
                    {"GROVE_PLAN_CACHE_DIR=" + plans}};
  const RunResult first = runTrees(run);
  if (::testing::Test::HasFailure()) return;
  EXPECT_NE(first.output.find("trees-allreduce of 4 ranks: planned in"), std::string::npos)
      << first.output.substr(0, 4000);
  const RunResult second = runTrees(run);
  if (::testing::Test::HasFailure()) return;
  EXPECT_NE(second.output.find("trees-allreduce of 4 ranks: from the plan cache"),
            std::string::npos)
      << second.output.substr(0, 4000);
  EXPECT_EQ(second.output.find(": planned in"), std::string::npos)
      << "a rank planned again: " << second.output.substr(second.output.find(": planned in"), 200);
}
TEST(MpTrees, N3SocketCluster) { runTrees({3, "socket", "tree", "cluster_2x4nic.json", "tree"}); }

TEST(MpHier, N4ShmOneMachine) { runTrees({4, "shm", "allreduce:hier", "", "hier"}); }
TEST(MpHier, N4SocketCluster) {
  runTrees({4, "socket", "allreduce:hier", "cluster_2x4nic.json", "hier"});
}
TEST(MpHier, N3ShmCluster) {
  runTrees({3, "shm", "allreduce:hier", "cluster_2x4nic.json", "hier"});
}

const char* const kRingColls = "allreduce,allgather,reducescatter";
TEST(MpPlannedRings, N8ShmDgx1) {
  runTrees({8, "shm", "ring", "dgx1_v100.json", "ring", kRingColls});
}
TEST(MpPlannedRings, N4SocketCluster) {
  runTrees({4, "socket", "ring", "cluster_2x4nic.json", "ring", kRingColls});
}

}  // namespace
