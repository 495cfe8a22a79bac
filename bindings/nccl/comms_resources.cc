// A communicator's resources (NCCL 2.30): ncclCommSuspend and
// ncclCommResume over groveCommSuspend/Resume (the scratch memory given
// back and made again; every call between them a clear ncclInvalidUsage),
// ncclCommMemStats over groveCommMemory (grove's own count of the memory
// one rank holds for the communicator), and ncclSetEncryption (2.32).
#include "comm_state.h"

using namespace grove::nccl;

extern "C" {

ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  return call("ncclCommSuspend", [&] {
    if ((flags & ~NCCL_SUSPEND_MEM) != 0)
      return refuse(ncclInvalidArgument, "ncclCommSuspend",
                    "unknown flags " + std::to_string(flags) + " (NCCL_SUSPEND_MEM is the one)");
    const groveResult_t r = groveCommSuspend(toGrove(comm));
    if (r == groveSuccess) withState(toGrove(comm), [](CommState& s) { s.suspended = true; });
    return toNccl(r);
  });
}

ncclResult_t ncclCommResume(ncclComm_t comm) {
  return call("ncclCommResume", [&] {
    const groveResult_t r = groveCommResume(toGrove(comm));
    if (r == groveSuccess) withState(toGrove(comm), [](CommState& s) { s.suspended = false; });
    return toNccl(r);
  });
}

ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  return call("ncclCommMemStats", [&] {
    const char* fn = "ncclCommMemStats";
    if (value == nullptr) return refuse(ncclInvalidArgument, fn, "value is NULL");
    groveCommMemory_t m;
    if (groveResult_t r = groveCommMemory(toGrove(comm), &m); r != groveSuccess) return toNccl(r);
    switch (stat) {
      case ncclStatGpuMemSuspend: *value = m.releasable; return ncclSuccess;
      case ncclStatGpuMemSuspended: *value = static_cast<uint64_t>(m.suspended); return ncclSuccess;
      case ncclStatGpuMemPersist: *value = m.persistent; return ncclSuccess;
      case ncclStatGpuMemTotal: *value = m.releasable + m.persistent; return ncclSuccess;
    }
    return refuse(ncclInvalidArgument, fn,
                  "unknown stat " + std::to_string(static_cast<int>(stat)));
  });
}

// grove's sockets are authenticated (GROVE_COMM_SECRET keys every hello)
// but carry data in the clear: plaintext is what it has, a pre-shared key
// for encryption it cannot honour.
ncclResult_t ncclSetEncryption(const ncclEncryptionConfig_t* config) {
  return call("ncclSetEncryption", [&] {
    const char* fn = "ncclSetEncryption";
    if (config == nullptr) return refuse(ncclInvalidArgument, fn, "config is NULL");
    if (ncclResult_t r =
            checkMagic(fn, config->magic, "config", "NCCL_ENCRYPTION_CONFIG_INITIALIZER");
        r != ncclSuccess)
      return r;
    if (config->mode == NCCL_ENCRYPTION_MODE_NONE) return ncclSuccess;
    if (config->mode == NCCL_ENCRYPTION_MODE_PSK)
      return refuse(ncclInvalidUsage, fn,
                    "grove's sockets are authenticated (GROVE_COMM_SECRET) but not encrypted; "
                    "a pre-shared key for encryption is not supported");
    return refuse(ncclInvalidArgument, fn, "unknown mode " + std::to_string(config->mode));
  });
}

}  // extern "C"

GROVE_NCCL_PNAME(CommSuspend);
GROVE_NCCL_PNAME(CommResume);
GROVE_NCCL_PNAME(CommMemStats);
GROVE_NCCL_PNAME(SetEncryption);
