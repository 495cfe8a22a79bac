// What /proc/<pid>/stat says about a process on this host: its state letter
// (R, S, D running or asleep; T, t stopped; Z, X gone) and its start time,
// which tells a process from a later one that reused its pid. Used by the
// shared-memory transport's peer watch and by the call board's view of the
// ranks on this host.
#pragma once

#include <cstdint>

namespace grove {

/// The fields of /proc/<pid>/stat that grove reads.
struct ProcStat {
  char state = '?';        ///< the state letter
  uint64_t startTime = 0;  ///< clock ticks after boot
};

/// Reads /proc/<pid>/stat; false if it cannot be read (process gone or no /proc).
bool readProcStat(int pid, ProcStat* out);

/// True for the letters of a process that has ended (a zombie or dead).
inline bool procEnded(char state) { return state == 'Z' || state == 'X' || state == 'x'; }
/// True for the letters of a stopped process (SIGSTOP, a debugger).
inline bool procStopped(char state) { return state == 'T' || state == 't'; }

}  // namespace grove
