// PeerWatch: a cheap "is that process still there?" check for a peer on the
// same host, used by the shm halves when their ring has been idle a while.
//
// How it works: at construction it checks that the pid is visible from here
// (kill(pid, 0)) and records the process's start time from /proc/<pid>/stat.
// alive() is false when kill() says ESRCH, when /proc shows the process as a
// zombie (a dead child not yet reaped still answers kill()), or when the pid
// now belongs to a process that started at another time (pid reuse). A pid
// that is not visible at construction (another pid namespace sharing
// /dev/shm) disables the watch: alive() is then always true and the wait
// timeout is what catches a dead peer. Each alive() costs a few syscalls, so
// callers keep it off their hot path.
#pragma once

#include <cstdint>

namespace grove::transport::shm {

/// Liveness check for one process on this host.
class PeerWatch {
 public:
  /// Watches nothing: alive() is always true.
  PeerWatch() = default;
  /// Watches `pid` (disabled if pid <= 0, pid is this process, or it is not visible).
  explicit PeerWatch(int pid);
  /// False once the process is known to be gone.
  bool alive() const;
  /// The pid watched (0 if none).
  int pid() const { return pid_; }
  /// True when alive() really checks something.
  bool enabled() const { return enabled_; }

 private:
  int pid_ = 0;
  bool enabled_ = false;
  uint64_t startTime_ = 0;  // 0: /proc not readable, only kill() is used
};

}  // namespace grove::transport::shm
