// Runs the grove-launch binary (GROVE_LAUNCH_PATH) for the launcher's tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace launchtest {

struct LaunchResult {
  int status = -1;       ///< grove-launch's exit status (128 + signal if killed)
  std::string out, err;  ///< its stdout and stderr (with joinStderr: both in out)
  double seconds = 0;    ///< how long it ran
};

/// Runs "grove-launch <args>" through sh (args are shell words); with
/// joinStderr its stderr goes to `out` too, in the order written.
inline LaunchResult runLaunch(const std::string& args, bool joinStderr = false) {
  char errPath[] = "/tmp/grove_launch_test_XXXXXX";
  if (!joinStderr) {
    const int fd = mkstemp(errPath);
    if (fd < 0) return {};
    close(fd);
  }
  const std::string cmd = std::string("'") + GROVE_LAUNCH_PATH + "' " + args +
                          (joinStderr ? std::string(" 2>&1") : std::string(" 2>") + errPath);
  LaunchResult r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  if (p != nullptr) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) r.out.append(buf, n);
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!joinStderr) {
    std::ifstream in(errPath);
    std::stringstream ss;
    ss << in.rdbuf();
    r.err = ss.str();
    unlink(errPath);
  }
  return r;
}

}  // namespace launchtest
