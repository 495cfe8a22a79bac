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

/// A buffer registration: ncclCommRegister's handle, or an ncclWindow_t.
struct Registration {
  void* buff;
  size_t size;
};

struct CommState {
  bool finalized = false;
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

/// True if comm was finalized (collectives on it are refused).
bool finalized(groveComm_t comm);

}  // namespace grove::nccl
