// Elastic communicators with real processes (grove_mp_elastic ranks):
//   - SIGKILL 1 or 2 of 4 ranks (or 1 of 8) during a loop of all-reduces,
//     over shm and sockets, rank 0 (the host of the bootstrap root) among
//     the dead in some cases: the survivors shrink with GROVE_SHRINK_ABORT
//     and their all-reduces on the shrunk communicator are exact; with grow,
//     new processes replace the dead through groveCommGrow and the grown
//     communicator's all-reduces are exact too.
//   - groveCommRevoke from a second thread while all-reduces are in flight:
//     every rank's call fails with an error naming the revoke, and all of
//     them shrink (excluding nobody) to a working communicator.
// Every wait is bounded; each case prints the time from the kill to the
// shrunk communicator's first exact all-reduces (docs/reliability.md).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mp_job.h"
#include "mp_spawn.h"

namespace {

using mptest::Job;

// The value of "<key> <t> ..." in a rank's output, or -1.
double stamp(const std::string& out, const std::string& key) {
  size_t at = out.find(key + " ");
  if (at == std::string::npos) return -1;
  return std::atof(out.c_str() + at + key.size() + 1);
}

std::string joined(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

struct ShrinkCase {
  const char* transport;
  int nranks;
  std::vector<int> dead;
  bool grow;
};
void PrintTo(const ShrinkCase& c, std::ostream* os) {
  *os << c.transport << ", " << c.nranks << " ranks, kill " << joined(c.dead)
      << (c.grow ? ", grow back" : "");
}

class ShrinkAfterKill : public ::testing::TestWithParam<ShrinkCase> {};

TEST_P(ShrinkAfterKill, SurvivorsShrinkAndGrowBackExactly) {
  const ShrinkCase sc = GetParam();
  const int n = sc.nranks;
  const int m = n - static_cast<int>(sc.dead.size());
  Job job(GROVE_MP_ELASTIC_PATH, "elastic");
  std::vector<std::string> args = {"--dir", job.dir, "--dead", joined(sc.dead)};
  if (sc.grow) args.push_back("--grow");
  job.start(n, sc.transport, "30", args);
  ASSERT_TRUE(job.waitReady(n, 60)) << "ranks never got going\n" << job.allOutput();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double killedAt = mptest::now();
  for (int v : sc.dead) kill(job.ranks[v].pid, SIGKILL);
  std::vector<int> survivors, everyone;
  for (int r = 0; r < n; ++r)
    if (std::find(sc.dead.begin(), sc.dead.end(), r) == sc.dead.end()) survivors.push_back(r);
  everyone = survivors;
  if (sc.grow)
    for (int j = 0; j < n - m; ++j)
      everyone.push_back(job.add(
          {"--dir", job.dir, "--join", std::to_string(m + j)},
          {"GROVE_NRANKS=" + std::to_string(n), "GROVE_TRANSPORT=" + std::string(sc.transport),
           "GROVE_TIMEOUT=30", "GROVE_RANK", "GROVE_COMM_ID"}));
  ASSERT_TRUE(job.waitRanks(everyone, 90)) << "a rank did not end\n" << job.allOutput();
  double slowest = 0;
  for (int r : everyone) {
    const mptest::Rank& k = job.ranks[r];
    ASSERT_TRUE(WIFEXITED(k.status) && WEXITSTATUS(k.status) == 0)
        << "process " << r << " " << mptest::describeStatus(k.status) << "\n"
        << job.allOutput();
    const std::string out = job.output(r);
    if (sc.grow) {
      EXPECT_GE(stamp(out, "GROWN"), 0) << out;
    }
    if (r >= n) continue;  // a new rank
    EXPECT_GT(stamp(out, "FAILED"), killedAt) << out;
    const double shrunk = stamp(out, "SHRUNK");
    ASSERT_GT(shrunk, killedAt) << out;
    slowest = std::max(slowest, shrunk - killedAt);
  }
  std::cout << "[ figures  ] " << n << " ranks over " << sc.transport << ", kill "
            << joined(sc.dead) << ": the last survivor's shrunk communicator ran exact "
            << "all-reduces " << slowest << " s after the kill\n";
  RecordProperty("recovery_seconds", std::to_string(slowest));
}

INSTANTIATE_TEST_SUITE_P(
    Elastic, ShrinkAfterKill,
    ::testing::Values(ShrinkCase{"shm", 4, {2}, true}, ShrinkCase{"socket", 4, {2}, true},
                      ShrinkCase{"shm", 4, {0}, true}, ShrinkCase{"socket", 4, {0, 3}, true},
                      ShrinkCase{"shm", 4, {1, 2}, true}, ShrinkCase{"socket", 4, {1, 2}, false},
                      ShrinkCase{"shm", 8, {0}, false}, ShrinkCase{"socket", 8, {5}, false}));

class RevokeInFlight : public ::testing::TestWithParam<const char*> {};

TEST_P(RevokeInFlight, EveryRankFailsThenAllShrink) {
  constexpr int kRanks = 4;
  Job job(GROVE_MP_ELASTIC_PATH, "revoke");
  job.start(kRanks, GetParam(), "30", {"--dir", job.dir, "--revoke", "1"});
  std::vector<int> all = {0, 1, 2, 3};
  ASSERT_TRUE(job.waitRanks(all, 90)) << "a rank did not end\n" << job.allOutput();
  for (int r : all) {
    const mptest::Rank& k = job.ranks[r];
    ASSERT_TRUE(WIFEXITED(k.status) && WEXITSTATUS(k.status) == 0)
        << "rank " << r << " " << mptest::describeStatus(k.status) << "\n"
        << job.allOutput();
    const std::string out = job.output(r);
    EXPECT_NE(out.find("rank 1 revoked the communicator"), std::string::npos) << out;
    EXPECT_GE(stamp(out, "SHRUNK"), 0) << out;
  }
}

INSTANTIATE_TEST_SUITE_P(Elastic, RevokeInFlight, ::testing::Values("shm", "socket"));

}  // namespace
