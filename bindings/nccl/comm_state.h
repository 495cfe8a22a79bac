// What the shim remembers per communicator beyond grove's own state:
// whether it was finalized, its PreMulSum ops, its registrations and the
// scratch buffers of PreMulSum calls still in flight. One table, keyed by
// grove's handle, behind one mutex; entries go with destroy and abort.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "shim.h"

namespace grove::nccl {

/// An op of ncclRedOpCreatePreMulSum: sum of scalar * input. The scalar is
/// the op's datatype; a host-immediate one is copied at creation, a device
/// one is read when the call runs.
struct PreMulSumOp {
  ncclDataType_t type;
  bool immediate;
  unsigned char value[8];  ///< the scalar, if immediate
  const void* where;       ///< the scalar's address, if not
};

/// A buffer registration: ncclCommRegister's handle, or an ncclWindow_t
/// (which NCCL's window queries take without their communicator).
struct Registration {
  void* buff;
  size_t size;
  groveComm_t comm = nullptr;
  int rank = -1;
  bool window = false;
  int oneSided = -1;  ///< a window's handle in grove's one-sided access (-1: none, GPU memory)
  int order = -1;     ///< with oneSided: the k-th such window of comm (the same k on every rank)
};

struct CommState {
  bool finalized = false;
  bool suspended = false;          ///< between ncclCommSuspend and ncclCommResume
  uint64_t hash = 0;               ///< ncclCommQueryProperties's commHash: the same on every rank
  bool initAll = false;            ///< made by ncclCommInitAll: every rank is in this process
  uint64_t splits = 0;             ///< ncclCommSplit calls on this communicator so far
  int oneSidedWindows = 0;         ///< windows registered with grove's one-sided access so far
  bool growIdOutstanding = false;  ///< ncclCommGetUniqueId gave an id no grow consumed yet
  int nextOp = ncclNumOps;
  std::map<int, PreMulSumOp> ops;
  std::map<const void*, std::unique_ptr<Registration>> registrations;  ///< by handle
  std::vector<std::unique_ptr<unsigned char[]>> scratch;  ///< PreMulSum inputs in flight
};

/// Runs f(state) under the table's lock; makes the entry on first use.
template <typename F>
auto withState(groveComm_t comm, F f) -> decltype(f(std::declval<CommState&>()));

namespace detail {
std::mutex& stateMutex();
std::map<groveComm_t, CommState>& states();
}  // namespace detail

template <typename F>
auto withState(groveComm_t comm, F f) -> decltype(f(std::declval<CommState&>())) {
  std::lock_guard<std::mutex> lock(detail::stateMutex());
  return f(detail::states()[comm]);
}

/// ncclSuccess while comm takes new work; else refuses it (ncclInvalidUsage,
/// naming `fn`): after ncclCommFinalize, and between ncclCommSuspend and
/// ncclCommResume. Every call that starts work or makes something from the
/// communicator asks (collectives, put/signal/wait, windows, registrations,
/// PreMulSum ops, split, shrink, grow and its id); destroy, abort, revoke,
/// resume and the queries do not.
ncclResult_t takesWork(const char* fn, groveComm_t comm);

/// Registers [buff, buff + size) with comm (memory.cc) as a buffer or a
/// window; *out is the handle.
ncclResult_t registerBuffer(const char* fn, groveComm_t comm, void* buff, size_t size, bool window,
                            Registration** out);
/// Drops the registration `handle` of comm; refuses one comm does not have
/// (or one of the other kind).
ncclResult_t deregisterBuffer(const char* fn, groveComm_t comm, bool window, const void* handle);

/// Keeps a deregistered (or forgotten) registration allocated, among the
/// last 4,096: its address, which is its handle, is not handed out again,
/// so a stale handle is refused instead of naming a later registration.
void retireRegistration(std::unique_ptr<Registration> reg);

/// A copy of window `win` of any communicator; false if no communicator has it.
bool findWindow(ncclWindow_t win, Registration* out);

/// True when comm's buffers are host memory (a host communicator or the
/// emulated device).
bool hostMemory(groveComm_t comm);

/// This rank's load/store ("LSA") team (device_api.cc): every rank of the
/// communicator when it was made by ncclCommInitAll on host memory (all of
/// them live in this process, so a peer's window is an address here);
/// otherwise this rank alone.
ncclTeam_t lsaTeamOf(groveComm_t comm);

/// The window of rank `rank` of the communicator `hash` in this process
/// whose order (Registration::order) is `order`; false if this process has none.
bool findPeerWindow(uint64_t hash, int rank, int order, Registration* out);

/// The communicator's hash, the same on every rank of it: made from the
/// unique id at init, from the parent's and the color at split.
uint64_t commHash(groveComm_t comm);
void setCommHash(groveComm_t comm, uint64_t hash);
/// FNV-1a over bytes, continuing from h.
uint64_t hashBytes(const void* data, size_t n, uint64_t h = 1469598103934665603ull);

}  // namespace grove::nccl
