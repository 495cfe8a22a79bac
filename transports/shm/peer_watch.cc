#include "transports/shm/peer_watch.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace grove::transport::shm {
namespace {

/// What /proc/<pid>/stat tells: the state letter and the start time.
struct ProcStat {
  char state = '?';
  uint64_t startTime = 0;
};

/// Reads /proc/<pid>/stat; false if it cannot be read (process gone or no /proc).
bool readProcStat(int pid, ProcStat* out) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ppid ...": comm may hold spaces and ')', so parse after the last ')'.
  char* p = strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ') return false;
  p += 2;
  out->state = *p;
  // Field 3 is the state; the start time is field 22, 19 fields further on.
  for (int field = 3; field < 22 && *p != '\0'; ++field) {
    p = strchr(p, ' ');
    if (p == nullptr) return false;
    ++p;
  }
  out->startTime = strtoull(p, nullptr, 10);
  return true;
}

}  // namespace

PeerWatch::PeerWatch(int pid) : pid_(pid) {
  if (pid <= 0 || pid == getpid()) return;
  if (kill(pid, 0) != 0 && errno == ESRCH) return;  // not visible from here: cannot watch it
  enabled_ = true;
  ProcStat st;
  if (readProcStat(pid, &st)) startTime_ = st.startTime;
}

bool PeerWatch::alive() const {
  if (!enabled_) return true;
  if (kill(pid_, 0) != 0 && errno == ESRCH) return false;
  if (startTime_ == 0) return true;
  ProcStat st;
  if (!readProcStat(pid_, &st)) return false;  // /proc worked before: the process is gone
  if (st.state == 'Z' || st.state == 'X' || st.state == 'x') return false;
  return st.startTime == startTime_;
}

}  // namespace grove::transport::shm
