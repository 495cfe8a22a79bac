// Communicators: unique ids, the init calls, split, shrink, grow, revoke,
// finalize, destroy, abort and the queries. An NCCL communicator is a grove CUDA communicator
// (deviceKind cuda; with GROVE_DEVICE_EMULATION=1 its buffers are host
// memory and the device program runs on CPU threads).
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

#include "comm_state.h"

namespace grove::nccl {

namespace detail {
std::mutex& stateMutex() {
  static std::mutex m;
  return m;
}
std::map<groveComm_t, CommState>& states() {
  static std::map<groveComm_t, CommState> s;
  return s;
}
}  // namespace detail

ncclResult_t takesWork(const char* fn, groveComm_t comm) {
  bool finalized = false, suspended = false;
  {
    std::lock_guard<std::mutex> lock(detail::stateMutex());
    auto it = detail::states().find(comm);  // no entry made for an unknown handle
    if (it != detail::states().end())
      finalized = it->second.finalized, suspended = it->second.suspended;
  }
  if (finalized)
    return refuse(ncclInvalidUsage, fn, "the communicator was finalized (ncclCommFinalize)");
  if (suspended)
    return refuse(ncclInvalidUsage, fn,
                  "the communicator is suspended (ncclCommSuspend); resume it first");
  return ncclSuccess;
}

uint64_t hashBytes(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

uint64_t commHash(groveComm_t comm) {
  uint64_t h = withState(comm, [](CommState& s) { return s.hash; });
  // Unset (a shrunk or grown communicator): grove's own, the same on every rank.
  if (h == 0 && groveCommGetHash(comm, &h) == groveSuccess) setCommHash(comm, h);
  return h;
}

void setCommHash(groveComm_t comm, uint64_t hash) {
  withState(comm, [&](CommState& s) { s.hash = hash; });
}

void forgetComm(groveComm_t comm) {
  std::map<const void*, std::unique_ptr<Registration>> regs;
  {
    std::lock_guard<std::mutex> lock(detail::stateMutex());
    auto it = detail::states().find(comm);
    if (it == detail::states().end()) return;
    regs = std::move(it->second.registrations);
    detail::states().erase(it);
  }
  for (auto& [handle, reg] : regs) retireRegistration(std::move(reg));
}

ncclResult_t toGroveConfig(const ncclConfig_t* in, groveConfig_t* out, const char* fn) {
  *out = GROVE_CONFIG_INITIALIZER;
  out->deviceKind = groveDeviceCuda;
  if (in == nullptr) return ncclSuccess;
  if (ncclResult_t r = checkMagic(fn, in->magic, "config", "NCCL_CONFIG_INITIALIZER");
      r != ncclSuccess)
    return r;
  // A config from an older nccl.h is shorter: read only the fields it has.
  auto has = [&](size_t offset, size_t bytes) { return in->size >= offset + bytes; };
  if (!has(offsetof(ncclConfig_t, blocking), sizeof(int)))
    return refuse(ncclInvalidArgument, fn,
                  "config.size " + std::to_string(in->size) + " is too small");
  if (in->blocking != NCCL_CONFIG_UNDEF_INT) {
    if (in->blocking != 0 && in->blocking != 1)
      return refuse(ncclInvalidArgument, fn,
                    "config.blocking must be 0 or 1 (got " + std::to_string(in->blocking) + ")");
    out->blocking = in->blocking;
  }
  if (has(offsetof(ncclConfig_t, commName), sizeof(const char*)) && in->commName != nullptr)
    out->commName = in->commName;
  // CTA counts, cgaClusterSize, netName, trafficClass, collnet, NVLS and
  // split/shrink sharing tune NCCL's own kernels and network: grove plans
  // its own channels and ignores them.
  return ncclSuccess;
}

}  // namespace grove::nccl

using namespace grove::nccl;

namespace {

// Makes *comm from grove's result, forgetting nothing on failure.
ncclResult_t initRank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank,
                      const ncclConfig_t* config, const char* fn) {
  mapNcclEnvironment();
  if (comm == nullptr) return refuse(ncclInvalidArgument, fn, "comm is NULL");
  groveConfig_t cfg;
  if (ncclResult_t r = toGroveConfig(config, &cfg, fn); r != ncclSuccess) return r;
  groveUniqueId gid;
  static_assert(sizeof gid == sizeof id, "unique ids of one size");
  std::memcpy(&gid, &id, sizeof gid);
  groveComm_t g = nullptr;
  const groveResult_t r = groveCommInitRankConfig(&g, nranks, gid, rank, &cfg);
  if (g != nullptr) setCommHash(g, hashBytes(&id, sizeof id));
  *comm = toNccl(g);
  return toNccl(r);
}

}  // namespace

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  return call("ncclGetUniqueId", [&] {
    mapNcclEnvironment();
    static_assert(sizeof(ncclUniqueId) == sizeof(groveUniqueId), "unique ids of one size");
    return toNccl(groveGetUniqueId(reinterpret_cast<groveUniqueId*>(uniqueId)));
  });
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return queued("ncclCommInitRank", nullptr,
                [&] { return initRank(comm, nranks, commId, rank, nullptr, "ncclCommInitRank"); });
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return queued("ncclCommInitRankConfig", nullptr, [&] {
    return initRank(comm, nranks, commId, rank, config, "ncclCommInitRankConfig");
  });
}

// NCCL spreads the bootstrap over nId roots; grove's bootstrap has one
// root, so every rank joins through the first id (made by rank 0).
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  return queued("ncclCommInitRankScalable", nullptr, [&] {
    const char* fn = "ncclCommInitRankScalable";
    if (commIds == nullptr || nId < 1)
      return refuse(ncclInvalidArgument, fn,
                    "needs nId >= 1 unique ids (got " + std::to_string(nId) + ")");
    return initRank(newcomm, nranks, commIds[0], myrank, config, fn);
  });
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return call("ncclCommInitAll", [&] {
    mapNcclEnvironment();
    if (comms == nullptr) return refuse(ncclInvalidArgument, "ncclCommInitAll", "comms is NULL");
    std::vector<int> devices;
    if (devlist == nullptr)  // NCCL: devices 0 .. ndev-1
      for (int d = 0; d < ndev; ++d) devices.push_back(d);
    std::vector<groveComm_t> g(ndev > 0 ? ndev : 0, nullptr);
    const groveResult_t r =
        groveCommInitAll(g.data(), ndev, devlist != nullptr ? devlist : devices.data());
    if (r != groveSuccess) return toNccl(r);  // grove refused ndev < 1, a bad device, ...
    const uint64_t hash = hashBytes(g.data(), sizeof(groveComm_t));  // one per call, shared
    for (int i = 0; i < ndev; ++i) {
      setCommHash(g[i], hash);
      withState(g[i], [](CommState& s) { s.initAll = true; });
      comms[i] = toNccl(g[i]);
    }
    return toNccl(r);
  });
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  return queued("ncclCommSplit", comm, [&] {
    const char* fn = "ncclCommSplit";
    if (newcomm == nullptr) return refuse(ncclInvalidArgument, fn, "newcomm is NULL");
    *newcomm = nullptr;
    if (ncclResult_t r = takesWork(fn, toGrove(comm)); r != ncclSuccess) return r;
    groveConfig_t cfg;
    if (config != nullptr)  // NULL: the child inherits the parent's configuration
      if (ncclResult_t r = toGroveConfig(config, &cfg, fn); r != ncclSuccess) return r;
    groveComm_t child = nullptr;
    const groveResult_t r =
        groveCommSplit(toGrove(comm), color, key, &child, config != nullptr ? &cfg : nullptr);
    // Every member of the child got the same color from the same parent;
    // the parent's split count (every rank splits, with a color or not)
    // tells this split from an earlier one. A split refused on one rank
    // fails on every rank (the others time out waiting for it), so only
    // one that went through counts, and the ranks keep the same count.
    if (r != groveSuccess) {
      *newcomm = nullptr;
      return toNccl(r);
    }
    const uint64_t seq = withState(toGrove(comm), [](CommState& s) { return ++s.splits; });
    if (child != nullptr) {
      uint64_t h = hashBytes(&color, sizeof color, commHash(toGrove(comm)));
      setCommHash(child, hashBytes(&seq, sizeof seq, h));
    }
    *newcomm = toNccl(child);
    return toNccl(r);
  });
}

// Shrink, grow and revoke are grove's (core/comm_elastic.cc); the children's
// commHash is grove's hash of the new communicator.
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return call("ncclCommShrink", [&] {
    const char* fn = "ncclCommShrink";
    if (newcomm == nullptr) return refuse(ncclInvalidArgument, fn, "newcomm is NULL");
    *newcomm = nullptr;
    if (ncclResult_t r = takesWork(fn, toGrove(comm)); r != ncclSuccess) return r;
    if ((shrinkFlags & ~NCCL_SHRINK_ABORT) != 0)
      return refuse(ncclInvalidArgument, fn,
                    "unknown shrinkFlags " + std::to_string(shrinkFlags) +
                        " (NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT)");
    groveConfig_t cfg;
    if (config != nullptr)  // NULL: the child inherits the parent's configuration
      if (ncclResult_t r = toGroveConfig(config, &cfg, fn); r != ncclSuccess) return r;
    groveComm_t child = nullptr;
    const groveResult_t r = groveCommShrink(
        toGrove(comm), excludeRanksList, excludeRanksCount, &child,
        config != nullptr ? &cfg : nullptr,
        (shrinkFlags & NCCL_SHRINK_ABORT) != 0 ? GROVE_SHRINK_ABORT : GROVE_SHRINK_DEFAULT);
    *newcomm = toNccl(child);
    return toNccl(r);
  });
}

// A grow id is asked of one rank of the existing communicator: one at a
// time, consumed by the grow (NCCL 2.29).
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  return call("ncclCommGetUniqueId", [&] {
    const char* fn = "ncclCommGetUniqueId";
    if (uniqueId == nullptr) return refuse(ncclInvalidArgument, fn, "uniqueId is NULL");
    if (ncclResult_t r = takesWork(fn, toGrove(comm)); r != ncclSuccess) return r;
    int n = 0;
    if (groveResult_t r = groveCommCount(toGrove(comm), &n); r != groveSuccess) return toNccl(r);
    if (withState(toGrove(comm), [](CommState& s) { return s.growIdOutstanding; }))
      return refuse(ncclInvalidUsage, fn,
                    "an id from an earlier call has not been consumed by ncclCommGrow yet");
    if (groveResult_t r =
            groveCommGetUniqueId(toGrove(comm), reinterpret_cast<groveUniqueId*>(uniqueId));
        r != groveSuccess)
      return toNccl(r);
    withState(toGrove(comm), [](CommState& s) { s.growIdOutstanding = true; });
    return ncclSuccess;
  });
}

// Existing ranks pass comm (rank -1: each keeps its rank); new ranks pass
// comm NULL, the id and their rank.
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config) {
  return call("ncclCommGrow", [&] {
    const char* fn = "ncclCommGrow";
    if (comm == nullptr) mapNcclEnvironment();
    if (newcomm == nullptr) return refuse(ncclInvalidArgument, fn, "newcomm is NULL");
    *newcomm = nullptr;
    if (comm != nullptr)
      if (ncclResult_t r = takesWork(fn, toGrove(comm)); r != ncclSuccess) return r;
    groveConfig_t cfg;
    // NULL: the parent's configuration (a new rank's default: a CUDA communicator)
    if (config != nullptr || comm == nullptr)
      if (ncclResult_t r = toGroveConfig(config, &cfg, fn); r != ncclSuccess) return r;
    groveComm_t child = nullptr;
    const groveResult_t r =
        groveCommGrow(toGrove(comm), nRanks, reinterpret_cast<const groveUniqueId*>(uniqueId), rank,
                      &child, config != nullptr || comm == nullptr ? &cfg : nullptr);
    if (comm != nullptr && uniqueId != nullptr && r != groveInvalidArgument)
      withState(toGrove(comm), [](CommState& s) { s.growIdOutstanding = false; });
    *newcomm = toNccl(child);
    return toNccl(r);
  });
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return call("ncclCommRevoke", [&] {
    if (revokeFlags != NCCL_REVOKE_DEFAULT)
      return refuse(
          ncclInvalidArgument, "ncclCommRevoke",
          "unknown revokeFlags " + std::to_string(revokeFlags) + " (NCCL_REVOKE_DEFAULT)");
    return toNccl(groveCommRevoke(toGrove(comm), GROVE_REVOKE_DEFAULT));
  });
}

// Finalize: grove's destroy already waits for the communicator's work, so
// finalize only ends the communicator's use for new calls.
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return call("ncclCommFinalize", [&] {
    int n = 0;
    if (groveResult_t r = groveCommCount(toGrove(comm), &n); r != groveSuccess) return toNccl(r);
    withState(toGrove(comm), [](CommState& s) { s.finalized = true; });
    return ncclSuccess;
  });
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return call("ncclCommDestroy", [&] {
    const groveResult_t r = groveCommDestroy(toGrove(comm));
    if (r == groveSuccess) forgetComm(toGrove(comm));
    return toNccl(r);
  });
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return call("ncclCommAbort", [&] {
    const groveResult_t r = groveCommAbort(toGrove(comm));
    if (r == groveSuccess) forgetComm(toGrove(comm));
    return toNccl(r);
  });
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return call("ncclCommGetAsyncError", [&] {
    if (asyncError == nullptr)
      return refuse(ncclInvalidArgument, "ncclCommGetAsyncError", "asyncError is NULL");
    groveResult_t e = groveSuccess;
    const groveResult_t r = groveCommGetAsyncError(toGrove(comm), &e);
    *asyncError = toNccl(e);
    // The failure's text (which peer aborted, and why) also for
    // ncclGetLastError(NULL), the form NCCL's examples use.
    if (r == groveSuccess && e != groveSuccess && e != groveInProgress)
      noteLastError(groveGetLastError(toGrove(comm)));
    return toNccl(r);
  });
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return call("ncclCommCount", [&] { return toNccl(groveCommCount(toGrove(comm), count)); });
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return call("ncclCommCuDevice", [&] { return toNccl(groveCommCuDevice(toGrove(comm), device)); });
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return call("ncclCommUserRank", [&] { return toNccl(groveCommUserRank(toGrove(comm), rank)); });
}

}  // extern "C"

GROVE_NCCL_PNAME(GetUniqueId);
GROVE_NCCL_PNAME(CommInitRank);
GROVE_NCCL_PNAME(CommInitRankConfig);
GROVE_NCCL_PNAME(CommInitRankScalable);
GROVE_NCCL_PNAME(CommInitAll);
GROVE_NCCL_PNAME(CommSplit);
GROVE_NCCL_PNAME(CommShrink);
GROVE_NCCL_PNAME(CommRevoke);
GROVE_NCCL_PNAME(CommFinalize);
GROVE_NCCL_PNAME(CommDestroy);
GROVE_NCCL_PNAME(CommAbort);
GROVE_NCCL_PNAME(CommGetAsyncError);
GROVE_NCCL_PNAME(CommCount);
GROVE_NCCL_PNAME(CommCuDevice);
GROVE_NCCL_PNAME(CommUserRank);
GROVE_NCCL_PNAME(CommGetUniqueId);
GROVE_NCCL_PNAME(CommGrow);
