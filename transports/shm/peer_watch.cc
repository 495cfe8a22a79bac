#include "transports/shm/peer_watch.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "base/proc_stat.h"

namespace grove::transport::shm {

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
  if (procEnded(st.state)) return false;
  return st.startTime == startTime_;
}

}  // namespace grove::transport::shm
