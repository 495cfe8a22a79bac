// Tests of the grove-launch binary with trivial commands: environment of the
// ranks, output tagging, exit-status propagation, the grace period after a
// failure, SIGKILL for ranks that ignore SIGTERM, --timeout, --bind, usage
// errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tools/launch/launch_options.h"
#include "unit/launch_runner.h"

namespace {

using RunResult = launchtest::LaunchResult;

// Runs "grove-launch <args>" through sh; args are shell words.
RunResult launch(const std::string& args) { return launchtest::runLaunch(args); }

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GroveLaunch, SetsRankEnvironment) {
  RunResult r = launch(
      "-n 3 -- sh -c 'echo $GROVE_RANK $GROVE_NRANKS $GROVE_LOCAL_RANK $RANK $WORLD_SIZE "
      "$LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(lines(r.out),
            (std::vector<std::string>{"0 3 0 0 3 0 3 127.0.0.1", "1 3 1 1 3 1 3 127.0.0.1",
                                      "2 3 2 2 3 2 3 127.0.0.1"}));
}

// Every rank of a job gets the same secret, 128 random bits that differ from
// job to job (a process that knows only the root's port cannot join), unless
// the caller gave one.
TEST(GroveLaunch, EachJobHasARandomSecretUnlessOneIsGiven) {
  std::set<std::string> secrets;
  for (int job = 0; job < 2; ++job) {
    RunResult r = launch("-n 2 sh -c 'echo $GROVE_COMM_SECRET'");
    ASSERT_EQ(r.status, 0) << r.err;
    auto l = lines(r.out);
    ASSERT_EQ(l.size(), 2u);
    EXPECT_EQ(l[0], l[1]);
    EXPECT_EQ(l[0].size(), 32u) << l[0];
    EXPECT_EQ(l[0].find_first_not_of("0123456789abcdef"), std::string::npos) << l[0];
    secrets.insert(l[0]);
  }
  EXPECT_EQ(secrets.size(), 2u);
  RunResult mine = [] {
    setenv("GROVE_COMM_SECRET", "shared-by-all-hosts", 1);
    RunResult r = launch("-n 2 sh -c 'echo $GROVE_COMM_SECRET'");
    unsetenv("GROVE_COMM_SECRET");
    return r;
  }();
  ASSERT_EQ(mine.status, 0) << mine.err;
  EXPECT_EQ(lines(mine.out),
            (std::vector<std::string>{"shared-by-all-hosts", "shared-by-all-hosts"}));
}

TEST(GroveLaunch, CommIdAndMasterPortDiffer) {
  RunResult r = launch("-n 2 sh -c 'echo $GROVE_COMM_ID $MASTER_PORT'");
  ASSERT_EQ(r.status, 0) << r.err;
  auto l = lines(r.out);
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0], l[1]);  // every rank sees the same addresses
  std::istringstream in(l[0]);
  std::string commId, masterPort;
  in >> commId >> masterPort;
  ASSERT_EQ(commId.rfind("127.0.0.1:", 0), 0u) << commId;
  EXPECT_NE(commId.substr(10), masterPort);
  EXPECT_GT(std::stoi(masterPort), 0);

  r = launch("-n 1 --port 23456 sh -c 'echo $GROVE_COMM_ID'");
  EXPECT_EQ(r.out, "127.0.0.1:23456\n");
}

TEST(GroveLaunch, TagOutput) {
  RunResult r = launch("-n 2 --tag-output -- sh -c 'echo hello; echo oops >&2; printf tail'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(lines(r.out),
            (std::vector<std::string>{"[0] hello", "[0] tail", "[1] hello", "[1] tail"}));
  EXPECT_NE(r.err.find("[1] oops"), std::string::npos) << r.err;
}

TEST(GroveLaunch, PropagatesTheFailingRanksExitCode) {
  RunResult r = launch("-n 3 -- sh -c 'if [ $GROVE_RANK = 1 ]; then exit 3; fi'");
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("rank 1 exited with code 3"), std::string::npos) << r.err;
  r = launch("-n 2 -- sh -c 'if [ $GROVE_RANK = 0 ]; then kill -9 $$; fi'");
  EXPECT_EQ(r.status, 128 + 9);
  EXPECT_NE(r.err.find("rank 0 killed by signal 9"), std::string::npos) << r.err;
  r = launch("-n 2 -- /nonexistent/grove-program");
  EXPECT_EQ(r.status, 127);
  EXPECT_NE(r.err.find("cannot run"), std::string::npos) << r.err;
}

TEST(GroveLaunch, HangingRankIsKilledAfterTheGracePeriod) {
  RunResult r =
      launch("-n 3 --grace 1 -- sh -c 'if [ $GROVE_RANK = 2 ]; then exit 5; fi; exec sleep 60'");
  EXPECT_EQ(r.status, 5) << r.err;
  EXPECT_LT(r.seconds, 15.0);
  EXPECT_NE(r.err.find("grace period over"), std::string::npos) << r.err;
  // A rank that ignores SIGTERM gets SIGKILL 2 s later.
  r = launch(
      "-n 2 --grace 0.5 -- sh -c 'if [ $GROVE_RANK = 0 ]; then exit 4; fi; trap \"\" TERM; "
      "sleep 60'");
  EXPECT_EQ(r.status, 4) << r.err;
  EXPECT_LT(r.seconds, 15.0);
  EXPECT_NE(r.err.find("ignored SIGTERM"), std::string::npos) << r.err;
}

TEST(GroveLaunch, OthersMayFinishWithinTheGracePeriod) {
  RunResult r = launch(
      "-n 2 --grace 20 -- sh -c 'if [ $GROVE_RANK = 0 ]; then exit 6; fi; sleep 0.3; echo done'");
  EXPECT_EQ(r.status, 6);
  EXPECT_EQ(r.out, "done\n");
  EXPECT_LT(r.seconds, 10.0);
}

TEST(GroveLaunch, Timeout) {
  RunResult r = launch("-n 2 --timeout 1 -- sleep 60");
  EXPECT_EQ(r.status, 124);
  EXPECT_LT(r.seconds, 15.0);
  EXPECT_NE(r.err.find("timeout"), std::string::npos) << r.err;
}

// This process's Cpus_allowed_list ("0-1", "3", ...), as each rank prints its own.
std::string cpusAllowed() {
  std::ifstream in("/proc/self/status");
  for (std::string l; std::getline(in, l);)
    if (l.rfind("Cpus_allowed_list:", 0) == 0) return l.substr(l.find_first_not_of(" \t", 18));
  return "";
}

// --bind core puts rank r on the (r mod C)-th CPU the launcher may use; none
// leaves every rank the launcher's own CPUs; auto binds only past C ranks.
TEST(GroveLaunch, BindsRanksToCpus) {
  const std::vector<int> cpus = grove::tools::allowedCpus();
  ASSERT_FALSE(cpus.empty());
  const std::string show =
      " -- sh -c 'echo $GROVE_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)'";
  const int n = static_cast<int>(cpus.size()) + 1;
  for (const char* policy : {"core", "auto"}) {
    RunResult r = launch("-n " + std::to_string(n) + " --bind " + policy + show);
    ASSERT_EQ(r.status, 0) << r.err;
    std::vector<std::string> want;
    for (int rank = 0; rank < n; ++rank)
      want.push_back(std::to_string(rank) + " " + std::to_string(cpus[rank % cpus.size()]));
    std::sort(want.begin(), want.end());
    EXPECT_EQ(lines(r.out), want) << policy;
  }
  const std::string mine = cpusAllowed();
  for (const char* args : {"-n 2 --bind none", "-n 1"}) {
    RunResult r = launch(std::string(args) + show);
    ASSERT_EQ(r.status, 0) << r.err;
    for (const std::string& l : lines(r.out)) EXPECT_EQ(l.substr(l.find(' ') + 1), mine) << args;
  }
}

TEST(GroveLaunch, UsageErrors) {
  EXPECT_EQ(launch("-- true").status, 2);    // no -n
  EXPECT_EQ(launch("-n 2").status, 2);       // no command
  EXPECT_EQ(launch("-n 0 true").status, 2);  // bad count
  EXPECT_EQ(launch("-n two true").status, 2);
  EXPECT_EQ(launch("-n 2 --bogus true").status, 2);
  EXPECT_EQ(launch("-n 2 --bind numa true").status, 2);
  RunResult r = launch("-n");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("usage"), std::string::npos);
  EXPECT_EQ(launch("--help").status, 0);
}

}  // namespace
