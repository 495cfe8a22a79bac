// The objects behind the C handles, and the boundary between C and C++.
//
// Every live communicator handle is registered, and every entry point checks
// the registry before it touches a handle. Destroying or aborting one
// unregisters it and puts its emptied shell in quarantine: the last 1024
// retired handles stay allocated, so the allocator cannot give a new
// communicator the address of one of them, and a later call with such a
// handle gets a clear "destroyed" error -- it can never alias a later
// communicator. Any other unknown pointer is "not a grove communicator";
// freed memory is never touched. Memory stays flat (1024 shells at most)
// however many communicators come and go.
// apiCall() runs
// the C++ body of an entry point and turns grove::Error (and any other
// exception) into a result code plus the text groveGetLastError returns.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"
#include "core/comm.h"
#include "core/group.h"
#include "core/host_stream.h"
#include "grove/grove.h"

/// Exported entry point of the C API (libgrove.so hides everything else).
#define GROVE_API extern "C" __attribute__((visibility("default")))

/// Life stages of a communicator handle.
enum class CommState { kInitializing, kReady, kFailed };

struct groveComm {
  std::mutex mu;
  std::atomic<CommState> state{CommState::kInitializing};
  /// Shared with the work queued on host streams, which may outlive the handle.
  std::shared_ptr<grove::core::Comm> impl;
  int rank = -1;
  int nranks = 0;
  /// A split recorded in an open group: rank and nranks are known only
  /// once the group ends and the handle is ready (set before it is shared).
  bool placeAtGroupEnd = false;
  groveResult_t initError = groveSuccess;
  std::string initErrorText;
  std::mutex joinMu;                   ///< serialises joining initThread
  std::thread initThread;              ///< non-blocking init
  std::atomic<bool> initJoined{true};  ///< false from starting initThread until it is joined
  grove::core::InitCancel initCancel;  ///< groveCommAbort ends a pending init through it
  std::string lastError;
};

struct groveHostStream {
  grove::core::HostStream impl;
};

namespace grove::capi {

/// Registers a new handle (freed by destroy or abort).
groveComm* newCommHandle(int rank, int nranks);
/// True if h is a live handle made by newCommHandle.
bool knownComm(const groveComm* h);
/// Throws unless h is a live handle: groveInvalidUsage "destroyed" for a
/// handle destroyed or aborted lately, groveInvalidArgument otherwise.
void checkKnownComm(const groveComm* h);
/// Unregisters h and remembers it as destroyed; false if it was not live.
/// The caller then owns h and hands it to quarantineComm when done with it.
bool unregisterComm(const groveComm* h);
/// Takes a retired handle (never delete one): it stays allocated while
/// remembered as destroyed, so no later handle gets its address; the
/// oldest beyond 1024 is freed.
void quarantineComm(groveComm* h);
/// Starts h's non-blocking init on its own thread.
void startInitThread(groveComm* h, std::function<void()> init);
/// A new handle for rank `rank` of `nranks` whose Comm inits from `id`:
/// recorded for the open group's end, on a thread of its own (non-blocking
/// configuration), or now (blocking; a failure is in the handle's state).
groveComm* initComm(int rank, int nranks, const core::UniqueIdData& id,
                    const core::CommOptions& opts);
/// After initComm (outside a group): throws groveInProgress for a
/// non-blocking init, a blocking one's failure.
void endInit(groveComm* h, const core::CommOptions& opts);
/// Waits for h's non-blocking init thread, if it has one that was not joined yet.
void joinInitThread(groveComm* h);
/// The ready Comm of h; waits for a pending init; throws a clear error for a
/// null, unknown, failed or destroyed handle.
core::Comm& usableComm(groveComm* h);
/// h itself, checked as usableComm does but without waiting for its init:
/// what the handle knows (rank, nranks) is there from the start.
groveComm& handleOf(groveComm* h);
/// handleOf(h) where its rank and size are known: at once for a
/// communicator being initialised, once its group ended for a split in one.
groveComm& placeOf(groveComm* h);

/// Throws groveInvalidArgument "<what> <value> out of range [0,nranks)"
/// unless 0 <= value < nranks (a root or a peer).
void checkRank(int value, int nranks, const char* what);

/// Registers / unregisters / checks host streams.
void addStream(groveHostStream* s);
void removeStream(groveHostStream* s);
bool knownStream(const groveHostStream* s);
/// The host stream a collective's stream argument names (null = blocking);
/// throws if it is not a live groveHostStream_t.
core::HostStream* hostStreamOf(groveStream_t stream);

/// Records the last error of this thread (and of comm, if given).
void setLastError(groveComm* comm, const std::string& text);
/// Gives this thread's last error text to every live communicator that is,
/// or whose implementation is, among `held` (core::groupHeld()).
void setLastErrorOfHeld(const std::vector<const void*>& held);
/// Runs an entry point's body; returns its result code.
template <typename Fn>
groveResult_t apiCall(const char* fn, groveComm* comm, Fn&& body) {
  try {
    body();
    return groveSuccess;
  } catch (const Error& e) {
    if (e.code() != groveInProgress) setLastError(comm, std::string(fn) + ": " + e.what());
    return e.code();
  } catch (const std::bad_alloc&) {
    setLastError(comm, std::string(fn) + ": out of memory");
    return groveSystemError;
  } catch (const std::exception& e) {
    setLastError(comm, std::string(fn) + ": internal error: " + e.what());
    return groveInternalError;
  } catch (...) {
    setLastError(comm, std::string(fn) + ": unknown internal error");
    return groveInternalError;
  }
}

/// The Comm behind h if h is a live, initialised handle; else null.
core::Comm* commIfReady(groveComm* h);
/// This thread's last error text (groveGetLastError(NULL)).
const std::string& threadLastError();

/// apiCall() for an entry point whose call an open group records (a
/// collective, a send or receive, a put or wait, an init or split): its
/// refusal while a group is open fails the whole group (core::groupRefused).
template <typename Fn>
groveResult_t recordingCall(const char* fn, groveComm* comm, Fn&& body) {
  const groveResult_t r = apiCall(fn, comm, std::forward<Fn>(body));
  if (r != groveSuccess && r != groveInProgress && core::groupActive())
    core::groupRefused(r, threadLastError(), commIfReady(comm));
  return r;
}

}  // namespace grove::capi
