// A job of rank processes started directly by a test (GROVE_COMM_ID,
// GROVE_RANK, GROVE_NRANKS set), so that each rank's exit status, time of exit
// and output can be seen and no launcher kills the survivors for them.
#pragma once

#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mp_spawn.h"

namespace mptest {

struct Rank {
  pid_t pid = -1;
  std::string out;
  bool done = false;
  int status = 0;
  double endedAt = 0;
};

struct Job {
  std::string dir;
  std::vector<Rank> ranks;
  double startedAt = 0;

  ~Job() {
    for (Rank& r : ranks)
      if (!r.done && r.pid > 0) mptest::killGroup(r.pid);
  }
  std::string program;  // the rank program

  explicit Job(std::string rankProgram = GROVE_MP_CHECK_PATH, const std::string& tag = "fail")
      : dir(mptest::makeTempDir(tag)), program(std::move(rankProgram)) {}
  // Starts n ranks of the program with args; extraEnv(rank) adds variables.
  void start(int n, const std::string& transport, const std::string& timeout,
             const std::vector<std::string>& args,
             const std::function<std::vector<std::string>(int)>& extraEnv = nullptr) {
    int port = mptest::freePort();
    startedAt = mptest::now();
    ranks.resize(n);
    for (int r = 0; r < n; ++r) {
      std::vector<std::string> env = {
          "GROVE_COMM_ID=127.0.0.1:" + std::to_string(port),
          "GROVE_COMM_SECRET=failure-test-" + std::to_string(port) + "-" + std::to_string(getpid()),
          "GROVE_RANK=" + std::to_string(r),
          "GROVE_NRANKS=" + std::to_string(n),
          "GROVE_LOCAL_RANK=" + std::to_string(r),
          "GROVE_TRANSPORT=" + transport,
          "GROVE_TIMEOUT=" + timeout};
      if (extraEnv) {
        auto more = extraEnv(r);
        env.insert(env.end(), more.begin(), more.end());
      }
      std::vector<std::string> argv = {program};
      argv.insert(argv.end(), args.begin(), args.end());
      ranks[r].out = dir + "/rank" + std::to_string(r) + ".txt";
      ranks[r].pid = mptest::spawn(argv, env, ranks[r].out);
    }
  }
  // Starts one more process of the program (index ranks.size()) with `args`
  // and `env` added to this process's environment; returns its index.
  int add(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    Rank k;
    k.out = dir + "/proc" + std::to_string(ranks.size()) + ".txt";
    std::vector<std::string> argv = {program};
    argv.insert(argv.end(), args.begin(), args.end());
    k.pid = mptest::spawn(argv, env, k.out);
    ranks.push_back(k);
    return static_cast<int>(ranks.size()) - 1;
  }
  // Reaps ranks that ended; true when all ranks in `which` have.
  bool poll(const std::vector<int>& which) {
    bool all = true;
    for (int r : which) {
      Rank& k = ranks[r];
      if (!k.done && waitpid(k.pid, &k.status, WNOHANG) == k.pid) {
        k.done = true;
        k.endedAt = mptest::now();
      }
      all = all && k.done;
    }
    return all;
  }
  bool waitRanks(const std::vector<int>& which, double timeoutSec) {
    double end = mptest::now() + timeoutSec;
    while (!poll(which)) {
      if (mptest::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }
  bool waitReady(int n, double timeoutSec) {
    double end = mptest::now() + timeoutSec;
    for (;;) {
      int ready = 0;
      struct stat st;
      for (int r = 0; r < n; ++r)
        ready += stat((dir + "/ready." + std::to_string(r)).c_str(), &st) == 0;
      if (ready == n) return true;
      if (mptest::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::string output(int r) const { return mptest::readFile(ranks[r].out); }
  std::string allOutput() const {
    std::string s;
    for (size_t r = 0; r < ranks.size(); ++r)
      s += "---- rank " + std::to_string(r) + " (" +
           (ranks[r].done ? mptest::describeStatus(ranks[r].status) : std::string("running")) +
           "):\n" + mptest::tail(output(static_cast<int>(r)), 2500);
    return s;
  }
};

}  // namespace mptest
