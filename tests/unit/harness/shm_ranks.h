// Helpers for tests of the shared-memory transport (header-only): unique job
// ids, the names a job leaves in the shm directory, transport contexts of
// ranks on one host, and forked child processes.
#pragma once

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/config.h"
#include "base/wait.h"
#include "transports/transport.h"

namespace grove::harness {

/// Fixture of the shm transport tests: a wait context that fails after 20 s
/// idle, and the directory the segments are made in.
class ShmFixture : public ::testing::Test {
 protected:
  AbortSignal abort_;
  WaitContext wc_ = WaitContext::of(abort_, 20.0);
  std::string dir_ = config::getString("GROVE_SHM_DIR");
};

/// A job id no other test of this process uses.
inline std::string uniqueJob(const char* tag) {
  static std::atomic<int> counter{0};
  return std::string("t") + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" + tag;
}

/// Names left in the shm directory for `job`.
inline int leftovers(const std::string& dir, const std::string& job) {
  std::string prefix = "grove-" + job + "-";
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) ++n;
    closedir(d);
  }
  return n;
}

/// Context of `rank` among `n` ranks on one host; pids[i] (default: this process) per rank.
inline transport::Context shmContext(int rank, int n, const std::string& job, size_t buf,
                                     const WaitContext& wc, std::vector<int> pids = {}) {
  transport::Context c;
  c.rank = rank;
  c.nranks = n;
  c.jobId = job;
  c.bufferBytes = buf;
  c.wait = wc;
  c.peers.resize(n);
  for (int i = 0; i < n; ++i) {
    c.peers[i].rank = i;
    c.peers[i].pid = pids.empty() ? getpid() : pids[i];
    c.peers[i].hostHash = 0x1234abcd;
  }
  return c;
}

/// Runs `child` in a forked process; returns its pid. The child exits with child()'s value.
inline pid_t forkChild(const std::function<int()>& child) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = child();
    } catch (const std::exception& e) {
      fprintf(stderr, "child: %s\n", e.what());
      rc = 98;
    }
    _exit(rc);
  }
  return pid;
}

/// The exit status of a child (128 + signal if it was killed).
inline int waitExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace grove::harness
