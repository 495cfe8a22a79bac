// C entry points of one-sided access: windows, puts with a signal, waits
// for signals (core/comm_rma.cc, core/rma.h).
//
// Every argument is checked here, before the call is queued, so a bad one
// is refused with a clear text and leaves the communicator usable: peer and
// signal ranges, a window the peer registered, and a put that fits it.
// Puts and waits keep the communicator's issue order (blocking, on a host
// stream, or recorded in a group, where puts run before and waits after
// the group's other operations).
#include <array>
#include <climits>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "capi/handles.h"
#include "core/group.h"

using grove::capi::apiCall;
using grove::capi::checkRank;
using grove::capi::recordingCall;
namespace core = grove::core;

namespace {

void checkSignal(int signal) {
  if (signal < 0 || signal >= GROVE_MAX_SIGNALS)
    grove::throwInvalidArgument("signal " + std::to_string(signal) + " out of range [0," +
                                std::to_string(GROVE_MAX_SIGNALS) + ")");
}

void refuseInGroup(const char* what) {
  if (core::groupActive())
    throw grove::Error(
        groveInvalidUsage,
        std::string(what) + " cannot be called inside a group (call groveGroupEnd first)");
}

// Window handles. The communicator numbers its windows in registration
// order (the same number on every rank, which puts carry to the target);
// the caller gets a handle of its own instead: unique in the process and
// never reused, so another communicator's handle, or a deregistered
// window's, is refused rather than naming a window it does not mean.
class WindowHandles {
 public:
  /// A new handle of c's, naming no window until set(): made before the
  /// registration, so that nothing can fail after it succeeded everywhere.
  int reserve(core::Comm& c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (next_ == INT_MAX)
      throw grove::Error(groveSystemError,
                         "window handles exhausted (2^31 registrations in this process)");
    for (auto it = windows_.begin(); it != windows_.end();)  // windows of destroyed communicators
      it = it->second.comm.expired() ? windows_.erase(it) : std::next(it);
    windows_.emplace(next_, Entry{c.weak_from_this(), -1});
    return next_++;
  }
  void set(int handle, int id) {
    std::lock_guard<std::mutex> lock(mu_);
    windows_.at(handle).id = id;  // reserved: present
  }
  /// c's id of the window `handle` names; -1 if it names none of c's.
  int idOf(const core::Comm& c, int handle) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = windows_.find(handle);
    if (it == windows_.end() || it->second.comm.lock().get() != &c) return -1;
    return it->second.id;
  }
  void drop(int handle) {
    std::lock_guard<std::mutex> lock(mu_);
    windows_.erase(handle);
  }

 private:
  struct Entry {
    std::weak_ptr<core::Comm> comm;
    int id;
  };
  mutable std::mutex mu_;
  int next_ = 1;
  std::unordered_map<int, Entry> windows_;
};

WindowHandles& windowHandles() {
  static auto* h = new WindowHandles();  // never destroyed: calls may come during teardown
  return *h;
}

// c's id of the window `handle` names, and rank `peer`'s bytes of it when
// `bytes` is given; or a clear refusal (a window deregistered by another
// thread meanwhile included).
int windowIdOf(const core::Comm& c, int handle, int peer = -1, uint64_t* bytes = nullptr) {
  const int id = windowHandles().idOf(c, handle);
  if (id < 0 || (bytes != nullptr && !c.windowBytes(id, peer, bytes)))
    grove::throwInvalidArgument("window " + std::to_string(handle) +
                                " is not a registered window of this communicator");
  return id;
}

// Runs a one-sided operation in issue order: recorded in the open group, on
// the stream, or now.
void submitOneSided(groveComm_t comm, groveStream_t stream, bool isWait,
                    std::function<void()> work) {
  core::Comm& c = grove::capi::usableComm(comm);
  core::HostStream* hs = c.isDevice() ? nullptr : grove::capi::hostStreamOf(stream);
  if (core::groupActive()) {
    core::GroupOp op;
    op.comm = &c;
    op.stream = hs;
    op.deviceStream = c.isDevice() ? stream : nullptr;
    op.oneSided = std::move(work);
    op.oneSidedWait = isWait;
    core::groupRecord(std::move(op));
    return;
  }
  core::submit(c, hs, std::move(work));
}

}  // namespace

GROVE_API groveResult_t groveWindowRegister(groveComm_t comm, void* buff, size_t bytes,
                                            int* window) {
  return apiCall("groveWindowRegister", comm, [&] {
    core::Comm& c = grove::capi::usableComm(comm);
    c.countWindowCall();  // refused calls too: the registration compares the counts
    if (window == nullptr) grove::throwInvalidArgument("window is NULL");
    *window = -1;
    if (buff == nullptr && bytes > 0) grove::throwInvalidArgument("buff is NULL");
    refuseInGroup("groveWindowRegister");
    const int handle = windowHandles().reserve(c);
    try {
      core::submit(c, nullptr, [&] { windowHandles().set(handle, c.windowRegister(buff, bytes)); });
    } catch (...) {
      windowHandles().drop(handle);
      throw;
    }
    *window = handle;
  });
}

GROVE_API groveResult_t groveWindowDeregister(groveComm_t comm, int window) {
  return apiCall("groveWindowDeregister", comm, [&] {
    refuseInGroup("groveWindowDeregister");
    core::Comm& c = grove::capi::usableComm(comm);
    const int id = windowIdOf(c, window);
    core::submit(c, nullptr, [&] { c.windowDeregister(id); });
    windowHandles().drop(window);
  });
}

GROVE_API groveResult_t grovePutSignal(const void* src, size_t bytes, int peer, int window,
                                       size_t offset, int signal, groveComm_t comm,
                                       groveStream_t stream) {
  return recordingCall("grovePutSignal", comm, [&] {
    core::Comm& c = grove::capi::usableComm(comm);
    checkRank(peer, c.nranks(), "peer");
    checkSignal(signal);
    if (src == nullptr && bytes > 0) grove::throwInvalidArgument("src is NULL");
    uint64_t limit = 0;
    int id = -1;
    if (window == -1 && bytes == 0) {  // a signal alone
      if (!c.windowBytes(-1, peer, &limit))
        throw grove::Error(groveInvalidUsage,
                           "a signal needs one-sided access: register a window first");
    } else {
      id = windowIdOf(c, window, peer, &limit);
    }
    if (offset > limit || bytes > limit - offset)
      grove::throwInvalidArgument("a put of " + std::to_string(bytes) + " bytes at offset " +
                                  std::to_string(offset) + " does not fit rank " +
                                  std::to_string(peer) + "'s window " + std::to_string(window) +
                                  " (" + std::to_string(limit) + " bytes)");
    core::Comm* cm = &c;
    submitOneSided(comm, stream, false, [cm, src, bytes, peer, id, offset, signal] {
      cm->putSignal(peer, id, offset, src, bytes, signal);
    });
  });
}

GROVE_API groveResult_t groveWaitSignal(const groveSignalWait_t* waits, int nwaits,
                                        groveComm_t comm, groveStream_t stream) {
  return recordingCall("groveWaitSignal", comm, [&] {
    core::Comm& c = grove::capi::usableComm(comm);
    if (nwaits < 0) grove::throwInvalidArgument("nwaits " + std::to_string(nwaits) + " < 0");
    if (waits == nullptr && nwaits > 0) grove::throwInvalidArgument("waits is NULL");
    std::vector<std::array<int, 3>> list;
    for (int i = 0; i < nwaits; ++i) {
      checkRank(waits[i].peer, c.nranks(), "peer");
      checkSignal(waits[i].signal);
      if (waits[i].count < 0)
        grove::throwInvalidArgument("waits[" + std::to_string(i) + "].count " +
                                    std::to_string(waits[i].count) + " < 0");
      list.push_back({waits[i].peer, waits[i].signal, waits[i].count});
    }
    if (list.empty()) return;
    core::Comm* cm = &c;
    submitOneSided(comm, stream, true, [cm, list] { cm->waitSignals(list); });
  });
}
