// Windows: ncclCommWindowRegister/Deregister, ncclWinGetUserPtr, the window
// pointer queries of the device API's host side, and the one-sided calls.
//
// How it works: a window is a registration (comm_state.h) that remembers
// its communicator, rank and user buffer, since NCCL's window queries take
// the window alone. grove maps no other process's memory: a pointer query
// answers for this rank's own window and for the windows of its LSA team
// (device_api.cc), which is every rank of an ncclCommInitAll communicator
// on host memory (all of them live in this process): the peer's
// registration of the same window (same communicator hash, same grove
// window id) holds its address. As NCCL's, ncclGetPeerDevicePointer gives
// NULL for a peer outside the team and ncclGetLsaDevicePointer refuses an
// LSA rank outside it. Multimem and CFT handles do not exist here.
//
// One-sided put/signal (ncclPutSignal, ncclSignal, ncclWaitSignal) run on
// grove's one-sided access (groveWindowRegister, grovePutSignal,
// groveWaitSignal): a window of a communicator on host memory or the
// emulated device is also registered with grove, collectively as NCCL's
// are, and NCCL's peerWin (this rank's handle of the window) carries
// grove's handle of it (this rank's too). NCCL's (ctx, sigIdx) pair is grove's
// signal slot ctx * kSigIdxLimit + sigIdx. Puts land without the target's
// participation (grove's progress thread), in order per peer; a wait
// consumes the signals it counted. On GPU memory the calls refuse with a
// clear text and ncclCommQueryProperties says hostRmaSupport = 0.
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "comm_state.h"
#include "premul_sum.h"

namespace grove::nccl {

bool findWindow(ncclWindow_t win, Registration* out) {
  if (win == nullptr) return false;
  std::lock_guard<std::mutex> lock(detail::stateMutex());
  for (auto& [comm, state] : detail::states()) {
    auto it = state.registrations.find(win);
    if (it != state.registrations.end() && it->second->window) {
      *out = *it->second;
      return true;
    }
  }
  return false;
}

bool findPeerWindow(uint64_t hash, int rank, int order, Registration* out) {
  if (order < 0) return false;
  std::lock_guard<std::mutex> lock(detail::stateMutex());
  for (auto& [comm, state] : detail::states()) {
    if (state.hash != hash || !state.initAll) continue;
    for (auto& [handle, reg] : state.registrations)
      if (reg->window && reg->rank == rank && reg->order == order) {
        *out = *reg;
        return true;
      }
  }
  return false;
}

bool hostMemory(groveComm_t comm) {
  int dev = 0;
  return groveCommCuDevice(comm, &dev) == groveSuccess && dev < 0;
}

}  // namespace grove::nccl

using namespace grove::nccl;

namespace {

const char kNoMultimem[] =
    "grove's libnccl.so.2 has no multimem (NVLink SHARP) or CFT memory; use the host collectives";
const char kNoOneSided[] =
    "one-sided put/signal on GPU memory is not supported by grove's NCCL library yet "
    "(ncclCommQueryProperties reports hostRmaSupport = 0); use ncclSend/ncclRecv";

// NCCL's (ctx, sigIdx) as one of grove's signal slots.
constexpr int kSigIdxLimit = 256;
constexpr int kCtxLimit = GROVE_MAX_SIGNALS / kSigIdxLimit;

ncclResult_t signalSlot(const char* fn, int sigIdx, int ctx, int* slot) {
  if (sigIdx < 0 || sigIdx >= kSigIdxLimit || ctx < 0 || ctx >= kCtxLimit)
    return refuse(ncclInvalidArgument, fn,
                  "sigIdx " + std::to_string(sigIdx) + " / ctx " + std::to_string(ctx) +
                      " out of range (sigIdx in [0," + std::to_string(kSigIdxLimit) +
                      "), ctx in [0," + std::to_string(kCtxLimit) + "))");
  *slot = ctx * kSigIdxLimit + sigIdx;
  return ncclSuccess;
}

// Rank `peer`'s window at `offset`: this rank's own, or a peer's of the
// same window in this process. *outPtr is NULL when the peer is outside the
// LSA team (NCCL's answer for a peer that is not load/store accessible).
ncclResult_t windowPointer(const char* fn, ncclWindow_t window, size_t offset, int peer,
                           void** outPtr) {
  if (outPtr == nullptr) return refuse(ncclInvalidArgument, fn, "outPtr is NULL");
  *outPtr = nullptr;
  Registration w;
  if (!findWindow(window, &w))
    return refuse(ncclInvalidArgument, fn, "window is not a registered window");
  const ncclTeam_t lsa = lsaTeamOf(w.comm);
  const int first = w.rank - lsa.rank;  // the team's ranks are first .. first + nRanks - 1
  if (peer < first || peer >= first + lsa.nRanks) return ncclSuccess;
  Registration target = w;
  // The registration is collective, but the peer's thread notes its
  // window's order just after its own call returns: give it a moment.
  bool found = peer == w.rank;
  for (int tries = 0; !found && tries < 1000; ++tries) {
    found = findPeerWindow(commHash(w.comm), peer, w.order, &target);
    if (!found) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!found)
    return refuse(ncclInvalidUsage, fn,
                  "rank " + std::to_string(peer) +
                      " has not registered this window (yet): ncclCommWindowRegister is "
                      "collective");
  if (offset >= target.size && !(offset == 0 && target.size == 0))
    return refuse(ncclInvalidArgument, fn,
                  "offset " + std::to_string(offset) + " is outside rank " + std::to_string(peer) +
                      "'s window (" + std::to_string(target.size) + " bytes)");
  *outPtr = static_cast<char*>(target.buff) + offset;
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags) {
  return call("ncclCommWindowRegister", [&] {
    const char* fn = "ncclCommWindowRegister";
    if (win != nullptr) *win = nullptr;
    if (ncclResult_t r = takesWork(fn, toGrove(comm)); r != ncclSuccess) return r;
    // What is refused from here on is refused on this rank alone: grove
    // counts it as a registration call all the same (one with a NULL handle
    // pointer, which it counts, then refuses), so that this rank's next
    // registration fails instead of pairing with the others' pending one.
    auto refusedHere = [&](ncclResult_t r) {
      if (hostMemory(toGrove(comm))) (void)groveWindowRegister(toGrove(comm), nullptr, 0, nullptr);
      return r;
    };
    if (win == nullptr) return refusedHere(refuse(ncclInvalidArgument, fn, "win is NULL"));
    // Strict ordering, GIN-only and CFT-counted ask nothing of a library
    // without one-sided transfers, GIN or CFT.
    const int known = NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING | NCCL_WIN_GIN_ONLY |
                      NCCL_WIN_CFT_COUNTED;
    if ((winFlags & ~known) != 0)
      return refusedHere(
          refuse(ncclInvalidArgument, fn, "unknown winFlags " + std::to_string(winFlags)));
    if ((winFlags & NCCL_WIN_COLL_SYMMETRIC) != 0 &&
        reinterpret_cast<uintptr_t>(buff) % NCCL_WIN_REQUIRED_ALIGNMENT != 0)
      return refusedHere(
          refuse(ncclInvalidArgument, fn, "a symmetric window must be aligned to 4096 bytes"));
    Registration* reg = nullptr;
    if (ncclResult_t r = registerBuffer(fn, toGrove(comm), buff, size, true, &reg);
        r != ncclSuccess)
      return refusedHere(r);
    if (hostMemory(toGrove(comm))) {
      // Collective, as NCCL's: grove's handle names the peers' windows of this call.
      int id = -1;
      if (groveResult_t g = groveWindowRegister(toGrove(comm), buff, size, &id);
          g != groveSuccess) {
        deregisterBuffer(fn, toGrove(comm), true, reg);
        return toNccl(g);
      }
      withState(toGrove(comm), [&](CommState& st) {
        reg->oneSided = id;
        reg->order = st.oneSidedWindows++;
      });
    }
    *win = reinterpret_cast<ncclWindow_t>(reg);
    return ncclSuccess;
  });
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return call("ncclCommWindowDeregister", [&] {
    const char* fn = "ncclCommWindowDeregister";
    Registration w;
    if (findWindow(win, &w) && w.comm == toGrove(comm) && w.oneSided >= 0)
      if (groveResult_t g = groveWindowDeregister(toGrove(comm), w.oneSided); g != groveSuccess)
        return toNccl(g);
    return deregisterBuffer(fn, toGrove(comm), true, win);
  });
}

ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  return call("ncclWinGetUserPtr", [&] {
    const char* fn = "ncclWinGetUserPtr";
    if (outUserPtr == nullptr) return refuse(ncclInvalidArgument, fn, "outUserPtr is NULL");
    Registration w;
    if (!findWindow(win, &w) || w.comm != toGrove(comm))
      return refuse(ncclInvalidArgument, fn, "win is not a window of this communicator");
    *outUserPtr = w.buff;
    return ncclSuccess;
  });
}

ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr) {
  return call("ncclGetPeerDevicePointer", [&] {
    const char* fn = "ncclGetPeerDevicePointer";
    Registration w;
    int n = 0;
    if (findWindow(window, &w) && groveCommCount(w.comm, &n) == groveSuccess &&
        (peer < 0 || peer >= n))
      return refuse(ncclInvalidArgument, fn,
                    "peer " + std::to_string(peer) + " out of range [0," + std::to_string(n) + ")");
    return windowPointer(fn, window, offset, peer, outPtr);
  });
}

ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                     void** outPtr) {
  return call("ncclGetLsaDevicePointer", [&] {
    const char* fn = "ncclGetLsaDevicePointer";
    Registration w;
    if (!findWindow(window, &w))
      return refuse(ncclInvalidArgument, fn, "window is not a registered window");
    const ncclTeam_t lsa = lsaTeamOf(w.comm);
    if (lsaRank < 0 || lsaRank >= lsa.nRanks)
      return refuse(ncclInvalidArgument, fn,
                    "LSA rank " + std::to_string(lsaRank) + " out of range [0," +
                        std::to_string(lsa.nRanks) +
                        "): the LSA team is every rank when all live in this process on host "
                        "memory, else this rank alone");
    return windowPointer(fn, window, offset, w.rank - lsa.rank + lsaRank, outPtr);
  });
}

ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t, size_t, void**) {
  return refuse(ncclInvalidUsage, "ncclGetLsaMultimemDevicePointer", kNoMultimem);
}

ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t, size_t, ncclMultimemHandle_t, void**) {
  return refuse(ncclInvalidUsage, "ncclGetMultimemDevicePointer", kNoMultimem);
}

ncclResult_t ncclGetMultimemDeviceLeInfo(ncclWindow_t, size_t, ncclCftLeId*, size_t*) {
  return refuse(ncclInvalidUsage, "ncclGetMultimemDeviceLeInfo", kNoMultimem);
}

ncclResult_t ncclGetCftDeviceLeInfo(ncclWindow_t, size_t, int, ncclTeam_t, ncclCftLeId*, size_t*) {
  return refuse(ncclInvalidUsage, "ncclGetCftDeviceLeInfo", kNoMultimem);
}

ncclResult_t ncclGetPeerDeviceLeInfo(ncclWindow_t, size_t, int, ncclCftLeId*, size_t*) {
  return refuse(ncclInvalidUsage, "ncclGetPeerDeviceLeInfo", kNoMultimem);
}

ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  return queued("ncclPutSignal", comm, [&] {
    const char* fn = "ncclPutSignal";
    if (ncclResult_t r = takesWork(fn, toGrove(comm)); r != ncclSuccess) return r;
    if (flags != 0) return refuse(ncclInvalidArgument, fn, "flags must be 0");
    const size_t elem =
        datatype == ncclFloat8e4m3 || datatype == ncclFloat8e5m2 ? 1 : arithmeticBytes(datatype);
    if (elem == 0)
      return refuse(ncclInvalidArgument, fn, "bad datatype " + std::to_string(datatype));
    if (count > SIZE_MAX / elem) return refuse(ncclInvalidArgument, fn, "count overflows");
    int slot = 0;
    if (ncclResult_t r = signalSlot(fn, sigIdx, ctx, &slot); r != ncclSuccess) return r;
    Registration w;
    if (!findWindow(peerWin, &w) || w.comm != toGrove(comm))
      return refuse(ncclInvalidArgument, fn, "peerWin is not a window of this communicator");
    if (w.oneSided < 0) return refuse(ncclInvalidUsage, fn, kNoOneSided);
    return toNccl(grovePutSignal(localbuff, count * elem, peer, w.oneSided, peerWinOffset, slot,
                                 toGrove(comm), reinterpret_cast<groveStream_t>(stream)));
  });
}

ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream) {
  return queued("ncclSignal", comm, [&] {
    const char* fn = "ncclSignal";
    if (ncclResult_t r = takesWork(fn, toGrove(comm)); r != ncclSuccess) return r;
    if (flags != 0) return refuse(ncclInvalidArgument, fn, "flags must be 0");
    int slot = 0;
    if (ncclResult_t r = signalSlot(fn, sigIdx, ctx, &slot); r != ncclSuccess) return r;
    if (!hostMemory(toGrove(comm))) return refuse(ncclInvalidUsage, fn, kNoOneSided);
    return toNccl(grovePutSignal(nullptr, 0, peer, -1, 0, slot, toGrove(comm),
                                 reinterpret_cast<groveStream_t>(stream)));
  });
}

ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                            cudaStream_t stream) {
  return queued("ncclWaitSignal", comm, [&] {
    const char* fn = "ncclWaitSignal";
    if (ncclResult_t r = takesWork(fn, toGrove(comm)); r != ncclSuccess) return r;
    if (nDesc < 0 || (nDesc > 0 && signalDescs == nullptr))
      return refuse(ncclInvalidArgument, fn, "nDesc < 0, or signalDescs is NULL");
    if (!hostMemory(toGrove(comm))) return refuse(ncclInvalidUsage, fn, kNoOneSided);
    std::vector<groveSignalWait_t> waits;
    for (int i = 0; i < nDesc; ++i) {
      int slot = 0;
      const ncclWaitSignalDesc_t& d = signalDescs[i];
      if (ncclResult_t r = signalSlot(fn, d.sigIdx, d.ctx, &slot); r != ncclSuccess) return r;
      waits.push_back({d.peer, slot, d.opCnt});
    }
    return toNccl(groveWaitSignal(waits.data(), nDesc, toGrove(comm),
                                  reinterpret_cast<groveStream_t>(stream)));
  });
}

}  // extern "C"

GROVE_NCCL_PNAME(CommWindowRegister);
GROVE_NCCL_PNAME(CommWindowDeregister);
GROVE_NCCL_PNAME(WinGetUserPtr);
GROVE_NCCL_PNAME(GetPeerDevicePointer);
GROVE_NCCL_PNAME(GetLsaDevicePointer);
GROVE_NCCL_PNAME(GetLsaMultimemDevicePointer);
GROVE_NCCL_PNAME(GetMultimemDevicePointer);
GROVE_NCCL_PNAME(GetMultimemDeviceLeInfo);
GROVE_NCCL_PNAME(GetCftDeviceLeInfo);
GROVE_NCCL_PNAME(GetPeerDeviceLeInfo);
GROVE_NCCL_PNAME(PutSignal);
GROVE_NCCL_PNAME(Signal);
GROVE_NCCL_PNAME(WaitSignal);
