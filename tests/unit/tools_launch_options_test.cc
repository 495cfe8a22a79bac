// Tests of grove-launch's --netns and --root-host: option parsing (the pure
// parser of tools/launch/launch_options.cc), and the binary itself: the
// rank variables under --root-host, a missing namespace stopping the job
// before any rank starts, and ranks really joining a network namespace (one
// this test makes with unshare(CLONE_NEWNET); skipped without the privilege).
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/launch/launch_options.h"
#include "unit/launch_runner.h"

namespace {

using grove::tools::LaunchOptions;
using grove::tools::LaunchParse;

LaunchParse parse(std::vector<std::string> words, LaunchOptions* opts, std::string* error) {
  words.insert(words.begin(), "grove-launch");
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  return grove::tools::parseLaunchOptions(static_cast<int>(words.size()), argv.data(), opts, error);
}

TEST(LaunchOptions, Defaults) {
  LaunchOptions o;
  std::string err;
  ASSERT_EQ(parse({"-n", "2", "prog", "--netns", "x"}, &o, &err), LaunchParse::kRun) << err;
  EXPECT_EQ(o.rootHost, "127.0.0.1");
  EXPECT_TRUE(o.netns.empty());  // after the command: the program's own argument
  EXPECT_EQ(o.command, (std::vector<std::string>{"prog", "--netns", "x"}));
  EXPECT_EQ(grove::tools::netnsNameOf(o, 1), "");
}

TEST(LaunchOptions, NetnsList) {
  LaunchOptions o;
  std::string err;
  ASSERT_EQ(parse({"--netns", "r0,r1,r2", "-n", "3", "--", "prog"}, &o, &err), LaunchParse::kRun)
      << err;
  EXPECT_EQ(o.netns, (std::vector<std::string>{"r0", "r1", "r2"}));
  EXPECT_EQ(grove::tools::netnsNameOf(o, 0), "r0");
  EXPECT_EQ(grove::tools::netnsNameOf(o, 2), "r2");
  EXPECT_EQ(grove::tools::netnsPathOf("r2"), "/run/netns/r2");
  EXPECT_EQ(grove::tools::netnsPathOf("/proc/7/ns/net"), "/proc/7/ns/net");
}

TEST(LaunchOptions, NetnsPattern) {
  LaunchOptions o;
  std::string err;
  ASSERT_EQ(parse({"-n", "12", "--netns", "fab-rank%d", "prog"}, &o, &err), LaunchParse::kRun)
      << err;
  EXPECT_EQ(grove::tools::netnsNameOf(o, 0), "fab-rank0");
  EXPECT_EQ(grove::tools::netnsNameOf(o, 11), "fab-rank11");
  // One plain name is fine for one rank.
  ASSERT_EQ(parse({"-n", "1", "--netns", "solo", "prog"}, &o, &err), LaunchParse::kRun) << err;
  EXPECT_EQ(grove::tools::netnsNameOf(o, 0), "solo");
}

TEST(LaunchOptions, NetnsErrors) {
  LaunchOptions o;
  std::string err;
  auto rejects = [&](std::vector<std::string> words, const std::string& what) {
    err.clear();
    EXPECT_EQ(parse(std::move(words), &o, &err), LaunchParse::kError) << what;
    EXPECT_NE(err.find(what), std::string::npos) << err;
  };
  rejects({"-n", "3", "--netns", "a,b", "prog"}, "2 namespace(s) for 3 rank(s)");
  rejects({"-n", "2", "--netns", "one", "prog"}, "1 namespace(s) for 2 rank(s)");
  rejects({"-n", "2", "--netns", "a,,b", "prog"}, "bad network namespace name ''");
  rejects({"-n", "2", "--netns", "a%d,b%d", "prog"}, "bad network namespace name 'a%d'");
  rejects({"-n", "2", "--netns", "r%d-%d", "prog"}, "bad network namespace name");
  rejects({"-n", "2", "--netns", "r%s", "prog"}, "bad network namespace name");
  rejects({"-n", "1", "--netns", "..", "prog"}, "bad network namespace name '..'");
  rejects({"-n", "1", "--netns", "sub/dir", "prog"}, "absolute path");
  rejects({"-n", "1", "--netns", "a b", "prog"}, "bad network namespace name");
  EXPECT_EQ(parse({"-n", "1", "--netns"}, &o, &err), LaunchParse::kError);
  EXPECT_NE(err.find("needs a value"), std::string::npos) << err;
}

TEST(LaunchOptions, RootHost) {
  LaunchOptions o;
  std::string err;
  ASSERT_EQ(parse({"-n", "2", "--root-host", "10.60.0.1", "prog"}, &o, &err), LaunchParse::kRun);
  EXPECT_EQ(o.rootHost, "10.60.0.1");
  EXPECT_EQ(grove::tools::commIdOf(o.rootHost, 29500), "10.60.0.1:29500");
  ASSERT_EQ(parse({"-n", "2", "--root-host", "[fd00::1]", "prog"}, &o, &err), LaunchParse::kRun);
  EXPECT_EQ(o.rootHost, "fd00::1");
  EXPECT_EQ(grove::tools::commIdOf(o.rootHost, 7), "[fd00::1]:7");
  ASSERT_EQ(parse({"-n", "2", "--root-host", "node-0.cluster", "prog"}, &o, &err),
            LaunchParse::kRun);
  EXPECT_EQ(grove::tools::commIdOf(o.rootHost, 7), "node-0.cluster:7");
  for (const char* bad : {"", "fd00::zz", "a b", "host:80", "[]"}) {
    err.clear();
    EXPECT_EQ(parse({"-n", "2", "--root-host", bad, "prog"}, &o, &err), LaunchParse::kError) << bad;
    EXPECT_NE(err.find("bad --root-host"), std::string::npos) << err;
  }
}

TEST(LaunchOptions, Bind) {
  LaunchOptions o;
  std::string err;
  ASSERT_EQ(parse({"-n", "4", "prog"}, &o, &err), LaunchParse::kRun);
  EXPECT_EQ(o.bind, grove::tools::BindPolicy::kAuto);
  const std::vector<int> two{2, 5}, eight{0, 1, 2, 3, 4, 5, 6, 7};
  // auto: 4 ranks on 2 CPUs are bound round-robin; on 8 CPUs nobody is.
  EXPECT_EQ(grove::tools::boundCpuOf(o, 0, two), 2);
  EXPECT_EQ(grove::tools::boundCpuOf(o, 1, two), 5);
  EXPECT_EQ(grove::tools::boundCpuOf(o, 2, two), 2);
  EXPECT_EQ(grove::tools::boundCpuOf(o, 3, two), 5);
  EXPECT_EQ(grove::tools::boundCpuOf(o, 3, eight), -1);
  EXPECT_EQ(grove::tools::boundCpuOf(o, 0, {}), -1);  // CPUs unknown
  ASSERT_EQ(parse({"-n", "4", "--bind", "core", "prog"}, &o, &err), LaunchParse::kRun);
  EXPECT_EQ(grove::tools::boundCpuOf(o, 3, eight), 3);
  ASSERT_EQ(parse({"-n", "4", "--bind", "none", "prog"}, &o, &err), LaunchParse::kRun);
  EXPECT_EQ(grove::tools::boundCpuOf(o, 1, two), -1);
  EXPECT_EQ(parse({"-n", "4", "--bind", "socket", "prog"}, &o, &err), LaunchParse::kError);
  EXPECT_NE(err.find("bad --bind 'socket'"), std::string::npos) << err;
}

using LaunchRun = launchtest::LaunchResult;

// Runs "grove-launch <args>" with its stderr in the output.
LaunchRun launchJoined(const std::string& args) { return launchtest::runLaunch(args, true); }

TEST(LaunchNetns, RootHostSetsCommIdAndMasterAddr) {
  LaunchRun r = launchJoined(
      "-n 1 --port 23457 --root-host 127.0.0.9 sh -c 'echo $GROVE_COMM_ID $MASTER_ADDR'");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "127.0.0.9:23457 127.0.0.9\n");
}

TEST(LaunchNetns, MissingNamespaceStopsTheJob) {
  LaunchRun r = launchJoined("-n 2 --netns grove-no-such-ns-%d sh -c 'echo started'");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_EQ(r.out.find("started"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cannot open network namespace 'grove-no-such-ns-0' "
                       "(/run/netns/grove-no-such-ns-0)"),
            std::string::npos)
      << r.out;
  // A file that is not a namespace: the rank cannot join it and fails.
  r = launchJoined("-n 1 --grace 0 --netns /dev/null sh -c 'echo started'");
  EXPECT_EQ(r.status, 126) << r.out;
  EXPECT_NE(r.out.find("rank 0: cannot join network namespace '/dev/null'"), std::string::npos)
      << r.out;
}

std::string readLink(const std::string& path) {
  char buf[PATH_MAX];
  ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

TEST(LaunchNetns, RanksJoinTheirNamespaces) {
  // Two holder processes, each in a new network namespace of its own.
  std::vector<pid_t> holders;
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      char ok = unshare(CLONE_NEWNET) == 0 ? 'y' : 'n';
      (void)!write(fds[1], &ok, 1);
      if (ok == 'y') pause();
      _exit(0);
    }
    close(fds[1]);
    char ok = 'n';
    (void)!read(fds[0], &ok, 1);
    close(fds[0]);
    holders.push_back(pid);
    if (ok != 'y') break;
    ids.push_back(readLink("/proc/" + std::to_string(pid) + "/ns/net"));
  }
  const bool privileged = ids.size() == 2;
  std::string list;
  for (pid_t pid : holders)
    list += (list.empty() ? "/proc/" : ",/proc/") + std::to_string(pid) + "/ns/net";
  LaunchRun r;
  if (privileged)
    r = launchJoined("-n 2 --tag-output --netns " + list + " sh -c 'readlink /proc/self/ns/net'");
  for (pid_t pid : holders) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  if (!privileged) GTEST_SKIP() << "cannot make a network namespace here (needs CAP_SYS_ADMIN)";
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_NE(r.out.find("[0] " + ids[0] + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] " + ids[1] + "\n"), std::string::npos) << r.out;
}

}  // namespace
