// Group calls (groveGroupStart / groveGroupEnd).
//
// Between the outermost start and its end, calls are recorded per thread
// instead of run. At the end:
//   1. deferred communicator inits and splits run, all at once on their own
//      threads (so one thread can create or split several ranks, as with
//      NCCL);
//   2. the recorded operations are split per communicator, in order of first
//      use; each communicator's one-sided puts run first, then its
//      collectives in call order, then all its sends and receives as one
//      concurrent program, and last its one-sided waits;
//   3. communicators run concurrently: on their host streams if given, else
//      on helper threads (one thread may drive several ranks of one job).
//      A CUDA communicator's share becomes one device launch on its stream.
// The first error is rethrown from groupEnd. A call refused while the group
// was open (groupRefused) fails the whole group before anything runs. What a group recorded is held
// (heldByOpenGroup) from the record to the end of its groupEnd.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/comm.h"
#include "core/host_stream.h"
#include "ir/schedule.h"

namespace grove::core {

/// A recorded operation.
struct GroupOp {
  Comm* comm = nullptr;
  HostStream* stream = nullptr;  ///< null = blocking (host communicators)
  void* deviceStream = nullptr;  ///< cudaStream_t of a CUDA communicator's operation
  bool isP2P = false;
  plan::CollArgs args;  ///< collectives
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  P2PCall p2p;  ///< sends and receives
  /// A one-sided put or wait (set: this op is one): at the end, a
  /// communicator's puts run before its other operations and its waits
  /// after them, so a wait never holds back what a peer waits for.
  std::function<void()> oneSided;
  bool oneSidedWait = false;
};

/// True between the outermost groveGroupStart and its groveGroupEnd on this thread.
bool groupActive();
/// Opens a (possibly nested) group.
void groupStart();
/// Closes a group; the outermost one runs what was recorded. Throws the first error.
void groupEnd();
/// What this thread's open group holds so far (Comms, HostStreams and the
/// handles of deferred inits; empty outside a group): the C API gives a
/// failed groupEnd's text to the communicators among them.
std::vector<const void*> groupHeld();
/// Records an operation in the open group.
void groupRecord(GroupOp op);
/// A call that would have been recorded in the open group was refused
/// (`comm`: its communicator, if it has one; held until the end, so that
/// its last error gets the group's). As with NCCL, the group's end then runs
/// none of the group's calls and fails with the first such refusal; the
/// deferred inits fail their handles, and the communicators stay as they
/// were (as after a refused call outside a group).
void groupRefused(groveResult_t code, const std::string& text, Comm* comm);
/// A deferred communicator init, run at the group's end with `cancelled`
/// false; true when the end could not start it beside the others (no
/// thread): it must then make nothing and record the failure in its handle.
using GroupInit = std::function<void(bool cancelled)>;
/// Records a deferred communicator init (run at the outermost end, beside
/// the group's other inits) of the object `handle` names; `also` (a split's
/// parent) is held as well. Null objects are not held.
void groupRecordInit(GroupInit init, const void* handle, const void* also = nullptr);
/// True while an open group (of any thread) holds `object`: a Comm or
/// HostStream one of its operations uses, or a handle whose init it
/// deferred. Such an object must not be destroyed before the group ends
/// (destroy and abort refuse it), or groupEnd would use freed memory.
bool heldByOpenGroup(const void* object);

/// submit()'s stream half: runs `work` as `ticket` on the stream's thread.
void enqueueTicket(Comm& comm, HostStream& stream, uint64_t ticket, std::function<void()> work);

/// Runs one operation now or queues it on its stream, keeping the comm's issue order.
template <typename Fn>
void submit(Comm& comm, HostStream* stream, Fn&& work) {
  if (stream == nullptr) {
    comm.sequencer().runNow(work);  // no std::function (and no allocation) on this path
    return;
  }
  comm.sequencer().issueAndQueue([&](uint64_t ticket) {
    enqueueTicket(comm, *stream, ticket, std::function<void()>(std::forward<Fn>(work)));
  });
}

}  // namespace grove::core
