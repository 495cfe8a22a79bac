#include "base/proc_stat.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace grove {

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

}  // namespace grove
