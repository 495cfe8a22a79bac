// Windows: ncclCommWindowRegister/Deregister, ncclWinGetUserPtr, the window
// pointer queries of the device API's host side, and the one-sided calls.
//
// How it works: a window is a registration (comm_state.h) that remembers
// its communicator, rank and user buffer, since NCCL's window queries take
// the window alone. grove maps no peer's memory into this process: each
// rank is its own load/store ("LSA") team (device_api.cc), so a pointer
// query answers for this rank's own window (peer == own rank, LSA rank 0)
// and refuses every other peer with a clear text, as NCCL refuses a peer
// outside the LSA team. Multimem and CFT handles do not exist here.
//
// One-sided put/signal (ncclPutSignal, ncclSignal, ncclWaitSignal) are
// not implemented yet: they refuse with ncclInvalidUsage, and
// ncclCommQueryProperties says hostRmaSupport = false, the answer NCCL
// gives on hardware without RMA.
#include <cstdint>
#include <string>

#include "comm_state.h"

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

}  // namespace grove::nccl

using namespace grove::nccl;

namespace {

const char kNoMultimem[] =
    "grove's libnccl.so.2 has no multimem (NVLink SHARP) or CFT memory; use the host collectives";
const char kNoOneSided[] =
    "one-sided put/signal is not supported by grove's NCCL library yet "
    "(ncclCommQueryProperties reports hostRmaSupport = 0); use ncclSend/ncclRecv";

// This rank's window at `offset`, after checking both.
ncclResult_t ownPointer(const char* fn, ncclWindow_t window, size_t offset, void** outPtr, int peer,
                        bool lsa) {
  if (outPtr == nullptr) return refuse(ncclInvalidArgument, fn, "outPtr is NULL");
  Registration w;
  if (!findWindow(window, &w))
    return refuse(ncclInvalidArgument, fn, "window is not a registered window");
  if (offset >= w.size && !(offset == 0 && w.size == 0))
    return refuse(ncclInvalidArgument, fn,
                  "offset " + std::to_string(offset) + " is outside the window (" +
                      std::to_string(w.size) + " bytes)");
  const bool self = lsa ? peer == 0 : peer == w.rank;
  if (!self)
    return refuse(ncclInvalidUsage, fn,
                  std::string(lsa ? "LSA rank " : "rank ") + std::to_string(peer) +
                      "'s window memory is not mapped into this process: grove maps no peer "
                      "memory (each rank is its own LSA team); use collectives or send/recv");
  *outPtr = static_cast<char*>(w.buff) + offset;
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags) {
  return call("ncclCommWindowRegister", [&] {
    const char* fn = "ncclCommWindowRegister";
    if (win == nullptr) return refuse(ncclInvalidArgument, fn, "win is NULL");
    *win = nullptr;
    // Strict ordering, GIN-only and CFT-counted ask nothing of a library
    // without one-sided transfers, GIN or CFT.
    const int known = NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING | NCCL_WIN_GIN_ONLY |
                      NCCL_WIN_CFT_COUNTED;
    if ((winFlags & ~known) != 0)
      return refuse(ncclInvalidArgument, fn, "unknown winFlags " + std::to_string(winFlags));
    if ((winFlags & NCCL_WIN_COLL_SYMMETRIC) != 0 &&
        reinterpret_cast<uintptr_t>(buff) % NCCL_WIN_REQUIRED_ALIGNMENT != 0)
      return refuse(ncclInvalidArgument, fn, "a symmetric window must be aligned to 4096 bytes");
    Registration* reg = nullptr;
    const ncclResult_t r = registerBuffer(fn, toGrove(comm), buff, size, true, &reg);
    *win = reinterpret_cast<ncclWindow_t>(reg);
    return r;
  });
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return call("ncclCommWindowDeregister", [&] {
    return deregisterBuffer("ncclCommWindowDeregister", toGrove(comm), true, win);
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
    return ownPointer("ncclGetPeerDevicePointer", window, offset, outPtr, peer, false);
  });
}

ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                     void** outPtr) {
  return call("ncclGetLsaDevicePointer", [&] {
    return ownPointer("ncclGetLsaDevicePointer", window, offset, outPtr, lsaRank, true);
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

ncclResult_t ncclPutSignal(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int,
                           unsigned int, ncclComm_t, cudaStream_t) {
  return refuse(ncclInvalidUsage, "ncclPutSignal", kNoOneSided);
}

ncclResult_t ncclSignal(int, int, int, unsigned int, ncclComm_t, cudaStream_t) {
  return refuse(ncclInvalidUsage, "ncclSignal", kNoOneSided);
}

ncclResult_t ncclWaitSignal(int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t) {
  return refuse(ncclInvalidUsage, "ncclWaitSignal", kNoOneSided);
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
