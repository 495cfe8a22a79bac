// Process helpers for the multi-process tests: start a program with extra
// environment variables and its output in a file, wait with a deadline,
// kill, read files, find a free port. Header-only, POSIX only; for gtest
// programs (the temporary directories are removed when every test passed).
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace mptest {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// The directories makeTempDir made in this program. When the program's
/// tests are over they are removed if every test passed, and kept (their
/// paths printed) for the rank logs in them if one failed.
class TempDirs : public ::testing::Environment {
 public:
  void add(const std::string& path) { paths_.push_back(path); }
  void TearDown() override {
    const bool passed = ::testing::UnitTest::GetInstance()->Passed();
    for (const std::string& p : paths_) {
      if (!passed) {
        fprintf(stderr, "kept for the failure: %s\n", p.c_str());
        continue;
      }
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
    paths_.clear();
  }

 private:
  std::vector<std::string> paths_;
};

inline TempDirs* const tempDirs =
    static_cast<TempDirs*>(::testing::AddGlobalTestEnvironment(new TempDirs));

/// A fresh directory under $TMPDIR (or /tmp) for one test's files, removed
/// with the others when every test passed (TempDirs).
inline std::string makeTempDir(const std::string& tag) {
  const char* base = getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/grove_mp_" + tag + "_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    fprintf(stderr, "makeTempDir: cannot make %s: %s\n", tmpl.c_str(), strerror(errno));
    abort();
  }
  tempDirs->add(buf.data());
  return buf.data();
}

/// Starts argv[0] (a path) with `env` ("NAME=value", added to / replacing this
/// process's environment); stdout and stderr go to outPath. In its own process
/// group so a kill reaches its children. Returns the pid, or -1.
inline pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                   const std::string& outPath) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  setpgid(0, 0);
  int fd = open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  for (const std::string& kv : env) {
    size_t eq = kv.find('=');
    std::string name = kv.substr(0, eq);
    if (eq == std::string::npos)
      unsetenv(name.c_str());
    else
      setenv(name.c_str(), kv.c_str() + eq + 1, 1);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  fprintf(stderr, "exec %s failed: %s\n", args[0], strerror(errno));
  _exit(127);
}

/// Waits up to timeoutSec for pid; true (and *status) if it ended.
inline bool waitFor(pid_t pid, double timeoutSec, int* status) {
  double end = now() + timeoutSec;
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0) return false;
    if (now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// SIGKILLs pid's process group and reaps it.
inline void killGroup(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
}

/// "exit 3", "signal 9", ... for messages.
inline std::string describeStatus(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

/// Result of runCommand.
struct RunResult {
  bool finished = false;  ///< false: killed at the deadline
  int status = 0;         ///< waitpid status
  double seconds = 0;
  std::string output;  ///< stdout + stderr
  bool ok() const { return finished && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

/// Runs argv with env, waits up to timeoutSec (then kills it), returns its output.
inline RunResult runCommand(const std::vector<std::string>& argv,
                            const std::vector<std::string>& env, double timeoutSec,
                            const std::string& outPath) {
  RunResult r;
  double t0 = now();
  pid_t pid = spawn(argv, env, outPath);
  if (pid < 0) return r;
  r.finished = waitFor(pid, timeoutSec, &r.status);
  if (!r.finished) killGroup(pid);
  r.seconds = now() - t0;
  r.output = readFile(outPath);
  return r;
}

/// The names in `dir` (GROVE_SHM_DIR's default unless given) that start
/// with "grove-", sorted.
inline std::vector<std::string> groveShmFiles(const std::string& dir = "/dev/shm") {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind("grove-", 0) == 0) names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

/// A directory of one's own under /dev/shm to point GROVE_SHM_DIR at, so
/// that a test counts (and removes) only its own segments, never those of
/// tests running beside it in other processes. On destruction the "grove-"
/// files left in it are removed, then the directory. path() is empty if it
/// could not be made.
class ShmDir {
 public:
  explicit ShmDir(const std::string& tag) {
    std::string tmpl = "/dev/shm/" + tag + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) != nullptr) path_ = buf.data();
  }
  ~ShmDir() {
    if (path_.empty()) return;
    for (const std::string& f : groveShmFiles(path_)) unlink((path_ + "/" + f).c_str());
    rmdir(path_.c_str());
  }
  ShmDir(const ShmDir&) = delete;
  ShmDir& operator=(const ShmDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A TCP port on 127.0.0.1 that was free a moment ago.
inline int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

/// The last `maxChars` characters of s (for assertion messages).
inline std::string tail(const std::string& s, size_t maxChars = 6000) {
  return s.size() <= maxChars ? s : "...\n" + s.substr(s.size() - maxChars);
}

}  // namespace mptest
