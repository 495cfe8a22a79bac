// grove-launch: starts N ranks of a program on this machine and supervises them.
//
// How it works: it picks a free port for the bootstrap root (GROVE_COMM_ID)
// and another for MASTER_PORT, makes the job's secret (GROVE_COMM_SECRET: 128
// random bits unless the caller set one), then forks N children, each in its
// own process group, with the Grove and torchrun rank variables set. The parent blocks
// SIGCHLD/SIGINT/SIGTERM/SIGHUP and reads them from a signalfd, so one poll()
// loop handles child exits, forwarded signals, the children's output pipes
// (--tag-output) and three deadlines: the grace period after the first
// failure (then SIGTERM to the rest), the SIGKILL 2 s after any SIGTERM, and
// the job --timeout. Exit status: 0 when every rank exits 0, else the first
// failing rank's status (128+signal), 124 on timeout, 128+signal when the
// launcher itself was interrupted.
//
// --netns: before forking, the parent opens every rank's namespace file
// (/run/netns/NAME), so a missing namespace stops the job before any rank
// starts; each child then joins its namespace with setns(CLONE_NEWNET)
// between fork and exec, and exits 126 with a message when it may not
// (no CAP_SYS_ADMIN). --root-host replaces 127.0.0.1 in GROVE_COMM_ID and
// MASTER_ADDR (the free ports are still probed on this host's 127.0.0.1).
//
// --bind: the parent reads the CPUs it may use (sched_getaffinity) once; a
// child bound by the policy (boundCpuOf) restricts itself to its one CPU
// between fork and exec, and runs unbound, with a warning, when it may not.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/launch/launch_options.h"

namespace grove::tools {
namespace {

constexpr double kKillDelaySec = 2.0;  // SIGTERM -> SIGKILL
constexpr double kDrainSec = 1.0;      // output of grandchildren after the last rank exits
constexpr double kNever = 1e300;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void writeAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stdout closed: drop the output, keep supervising
    off += static_cast<size_t>(n);
  }
}

void say(const std::string& msg) { writeAll(2, "grove-launch: " + msg + "\n"); }

// A free TCP port on 127.0.0.1; `hold` keeps the socket open so a second call differs.
int freePort(int* hold) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  *hold = fd;
  return ntohs(addr.sin_port);
}

/// One output stream of one rank (--tag-output).
struct Stream {
  int fd = -1;    ///< read end, -1 once closed
  int outFd = 1;  ///< where its lines go
  int rank = 0;
  std::string partial;
};

/// One child.
struct Child {
  pid_t pid = -1;
  bool running = false;
};

class Launcher {
 public:
  explicit Launcher(const LaunchOptions& o) : opts_(o), children_(static_cast<size_t>(o.nranks)) {}
  int run();

 private:
  bool setUp();
  bool spawn(int rank);
  bool openNamespaces();
  [[noreturn]] void execChild(int rank, int outFd, int errFd);
  void onSignal();
  void reap();
  void onExit(int rank, int status);
  void pump(Stream& s, bool eof);
  void signalAll(int sig);
  void checkDeadlines();
  int runningCount() const;
  int exitStatus() const;

  LaunchOptions opts_;
  std::vector<Child> children_;
  std::vector<Stream> streams_;
  std::vector<int> nsFds_;  // per rank, -1 = stay in this namespace (closed on exec)
  std::vector<int> cpus_;   // the CPUs this launcher may use, ascending (for --bind)
  sigset_t oldMask_{};
  int sigFd_ = -1;
  int commPort_ = 0, masterPort_ = 0;
  std::string secret_;  ///< GROVE_COMM_SECRET of the job: the caller's, else 128 random bits
  int firstFailStatus_ = -1;
  int interruptSig_ = 0;
  bool timedOut_ = false;
  bool terminating_ = false;  // we sent SIGTERM: exits after this are ours
  double graceDeadline_ = kNever, killDeadline_ = kNever, timeoutDeadline_ = kNever;
  double drainDeadline_ = kNever;
};

bool Launcher::openNamespaces() {
  nsFds_.assign(children_.size(), -1);
  for (int r = 0; r < opts_.nranks && !opts_.netns.empty(); ++r) {
    const std::string name = netnsNameOf(opts_, r), path = netnsPathOf(name);
    nsFds_[static_cast<size_t>(r)] = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (nsFds_[static_cast<size_t>(r)] < 0) {
      say("rank " + std::to_string(r) + ": cannot open network namespace '" + name + "' (" + path +
          "): " + std::strerror(errno) +
          (errno == ENOENT && path != name ? " (ip netns add " + name + " makes one)" : ""));
      return false;
    }
  }
  return true;
}

bool Launcher::setUp() {
  if (!openNamespaces()) return false;
  cpus_ = allowedCpus();
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&mask, s);
  if (sigprocmask(SIG_BLOCK, &mask, &oldMask_) != 0) return false;
  sigFd_ = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigFd_ < 0) {
    say(std::string("signalfd: ") + std::strerror(errno));
    return false;
  }
  signal(SIGPIPE, SIG_IGN);
  int hold1 = -1, hold2 = -1;
  commPort_ = opts_.port ? opts_.port : freePort(&hold1);
  do {
    if (hold2 >= 0) close(hold2);
    masterPort_ = freePort(&hold2);
  } while (masterPort_ > 0 && masterPort_ == commPort_);
  if (hold1 >= 0) close(hold1);
  if (hold2 >= 0) close(hold2);
  if (commPort_ <= 0 || masterPort_ <= 0) {
    say(std::string("cannot find a free port on 127.0.0.1: ") + std::strerror(errno));
    return false;
  }
  // The ranks' shared secret: a process that knows only the root's port
  // cannot join the job. Ranks launched on other hosts need the same value
  // (set GROVE_COMM_SECRET for every launcher of the job).
  const char* given = std::getenv("GROVE_COMM_SECRET");
  if (given != nullptr && *given != '\0') {
    secret_ = given;
  } else {
    unsigned char bits[16];
    if (getrandom(bits, sizeof bits, 0) != static_cast<ssize_t>(sizeof bits)) {
      say(std::string("cannot make the job's secret (getrandom): ") + std::strerror(errno));
      return false;
    }
    char hex[2 * sizeof bits + 1];
    for (size_t i = 0; i < sizeof bits; ++i) std::snprintf(hex + 2 * i, 3, "%02x", bits[i]);
    secret_ = hex;
  }
  if (opts_.timeoutSec > 0) timeoutDeadline_ = now() + opts_.timeoutSec;
  return true;
}

void Launcher::execChild(int rank, int outFd, int errFd) {
  setpgid(0, 0);
  sigprocmask(SIG_SETMASK, &oldMask_, nullptr);
  signal(SIGPIPE, SIG_DFL);
  if (outFd >= 0) dup2(outFd, 1);
  if (errFd >= 0) dup2(errFd, 2);
  const int nsFd = nsFds_[static_cast<size_t>(rank)];
  if (nsFd >= 0 && setns(nsFd, CLONE_NEWNET) != 0) {
    const int e = errno;
    std::fprintf(stderr, "grove-launch: rank %d: cannot join network namespace '%s': %s%s\n", rank,
                 netnsNameOf(opts_, rank).c_str(), std::strerror(e),
                 e == EPERM ? " (needs root or CAP_SYS_ADMIN)" : "");
    _exit(126);
  }
  if (const int cpu = boundCpuOf(opts_, rank, cpus_); cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0)
      std::fprintf(stderr, "grove-launch: rank %d: cannot bind to CPU %d (%s); running unbound\n",
                   rank, cpu, std::strerror(errno));
  }
  const std::string n = std::to_string(opts_.nranks), r = std::to_string(rank);
  const std::string commId = commIdOf(opts_.rootHost, commPort_);
  const std::pair<const char*, std::string> vars[] = {{"GROVE_COMM_ID", commId},
                                                      {"GROVE_RANK", r},
                                                      {"GROVE_NRANKS", n},
                                                      {"GROVE_LOCAL_RANK", r},
                                                      {"RANK", r},
                                                      {"WORLD_SIZE", n},
                                                      {"LOCAL_RANK", r},
                                                      {"LOCAL_WORLD_SIZE", n},
                                                      {"GROUP_RANK", "0"},
                                                      {"MASTER_ADDR", opts_.rootHost},
                                                      {"MASTER_PORT", std::to_string(masterPort_)},
                                                      {"GROVE_COMM_SECRET", secret_}};
  for (const auto& [name, value] : vars) setenv(name, value.c_str(), 1);
  std::vector<char*> argv;
  for (auto& a : opts_.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::fprintf(stderr, "grove-launch: rank %d: cannot run '%s': %s\n", rank, argv[0],
               std::strerror(errno));
  _exit(127);
}

bool Launcher::spawn(int rank) {
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (opts_.tagOutput && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)) {
    say(std::string("pipe: ") + std::strerror(errno));
    return false;
  }
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    say(std::string("fork: ") + std::strerror(errno));
    return false;
  }
  if (pid == 0) execChild(rank, out[1], err[1]);
  setpgid(pid, pid);  // also here: no race with signalAll
  children_[static_cast<size_t>(rank)] = {pid, true};
  if (opts_.tagOutput) {
    close(out[1]);
    close(err[1]);
    streams_.push_back({out[0], 1, rank, {}});
    streams_.push_back({err[0], 2, rank, {}});
  }
  return true;
}

int Launcher::runningCount() const {
  int n = 0;
  for (const Child& c : children_) n += c.running;
  return n;
}

void Launcher::signalAll(int sig) {
  for (const Child& c : children_)
    if (c.running && kill(-c.pid, sig) != 0) kill(c.pid, sig);
}

void Launcher::onExit(int rank, int status) {
  children_[static_cast<size_t>(rank)].running = false;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code == 0 || terminating_) return;
  if (WIFSIGNALED(status))
    say("rank " + std::to_string(rank) + " killed by signal " + std::to_string(WTERMSIG(status)) +
        " (" + strsignal(WTERMSIG(status)) + ")");
  else
    say("rank " + std::to_string(rank) + " exited with code " + std::to_string(code));
  if (firstFailStatus_ < 0) {
    firstFailStatus_ = code;
    if (runningCount() > 0 && !interruptSig_) {
      graceDeadline_ = now() + opts_.graceSec;
      char buf[160];
      std::snprintf(buf, sizeof(buf), "waiting up to %g s for the other %d rank(s) to finish",
                    opts_.graceSec, runningCount());
      say(buf);
    }
  }
}

void Launcher::reap() {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (size_t r = 0; r < children_.size(); ++r)
      if (children_[r].pid == pid && children_[r].running) onExit(static_cast<int>(r), status);
  }
}

void Launcher::onSignal() {
  signalfd_siginfo info;
  while (read(sigFd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) continue;  // reaped below
    if (interruptSig_) {
      say("second signal: killing every rank");
      signalAll(SIGKILL);
      continue;
    }
    interruptSig_ = sig;
    say(std::string("got ") + strsignal(sig) + ": forwarding it to " +
        std::to_string(runningCount()) + " rank(s)");
    signalAll(sig);
    terminating_ = true;
    killDeadline_ = now() + opts_.graceSec;
  }
  reap();
}

void Launcher::pump(Stream& s, bool eof) {
  char buf[65536];
  ssize_t n = eof ? 0 : read(s.fd, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n > 0) s.partial.append(buf, static_cast<size_t>(n));
  const std::string tag = "[" + std::to_string(s.rank) + "] ";
  std::string out;
  size_t start = 0, nl;
  while ((nl = s.partial.find('\n', start)) != std::string::npos) {
    out += tag + s.partial.substr(start, nl - start + 1);
    start = nl + 1;
  }
  s.partial.erase(0, start);
  if (n <= 0) {  // EOF or error: flush the unterminated rest and close
    if (!s.partial.empty()) out += tag + s.partial + "\n";
    s.partial.clear();
    close(s.fd);
    s.fd = -1;
  }
  writeAll(s.outFd, out);
}

void Launcher::checkDeadlines() {
  const double t = now();
  if (t >= timeoutDeadline_ && !timedOut_) {
    timedOut_ = true;
    timeoutDeadline_ = kNever;
    char buf[160];
    std::snprintf(buf, sizeof(buf), "timeout: the job ran longer than %g s; terminating %d rank(s)",
                  opts_.timeoutSec, runningCount());
    say(buf);
    terminating_ = true;
    signalAll(SIGTERM);
    killDeadline_ = t + kKillDelaySec;
  }
  if (t >= graceDeadline_) {
    graceDeadline_ = kNever;
    if (runningCount() > 0 && !terminating_) {
      say("grace period over: terminating " + std::to_string(runningCount()) + " rank(s)");
      terminating_ = true;
      signalAll(SIGTERM);
      killDeadline_ = t + kKillDelaySec;
    }
  }
  if (t >= killDeadline_) {
    killDeadline_ = kNever;
    if (runningCount() > 0) {
      say("killing " + std::to_string(runningCount()) + " rank(s) that ignored SIGTERM");
      signalAll(SIGKILL);
    }
  }
}

int Launcher::exitStatus() const {
  if (timedOut_) return 124;
  if (firstFailStatus_ > 0) return firstFailStatus_;
  if (interruptSig_) return 128 + interruptSig_;
  return 0;
}

int Launcher::run() {
  if (!setUp()) return 1;
  for (int r = 0; r < opts_.nranks; ++r)
    if (!spawn(r)) {
      signalAll(SIGKILL);
      firstFailStatus_ = 1;
      break;
    }
  for (;;) {
    reap();
    bool anyOpen = false;
    for (const Stream& s : streams_) anyOpen |= s.fd >= 0;
    if (runningCount() == 0) {
      if (!anyOpen || now() >= drainDeadline_) break;
      if (drainDeadline_ == kNever) drainDeadline_ = now() + kDrainSec;
    }
    double next = std::min({graceDeadline_, killDeadline_, timeoutDeadline_, drainDeadline_});
    int waitMs = next >= kNever ? -1 : static_cast<int>(std::max(0.0, next - now()) * 1000) + 1;
    std::vector<pollfd> fds{{sigFd_, POLLIN, 0}};
    std::vector<Stream*> owners{nullptr};
    for (Stream& s : streams_)
      if (s.fd >= 0) {
        fds.push_back({s.fd, POLLIN, 0});
        owners.push_back(&s);
      }
    int n = poll(fds.data(), fds.size(), waitMs);
    if (n < 0 && errno != EINTR) {
      say(std::string("poll: ") + std::strerror(errno));
      break;
    }
    if (fds[0].revents) onSignal();
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents) pump(*owners[i], false);
    checkDeadlines();
  }
  for (Stream& s : streams_)
    if (s.fd >= 0) pump(s, true);
  return exitStatus();
}

}  // namespace
}  // namespace grove::tools

int main(int argc, char** argv) {
  using namespace grove::tools;
  LaunchOptions opts;
  std::string error;
  switch (parseLaunchOptions(argc, argv, &opts, &error)) {
    case LaunchParse::kHelp: std::fputs(launchUsage().c_str(), stdout); return 0;
    case LaunchParse::kError:
      std::fprintf(stderr, "grove-launch: %s\n%s", error.c_str(), launchUsage().c_str());
      return 2;
    case LaunchParse::kRun: break;
  }
  return Launcher(opts).run();
}
