// C entry points for a communicator's memory: how much it holds, and
// suspending it to give the scratch back (core/comm_memory.cc).
#include "capi/handles.h"
#include "core/group.h"

using grove::capi::apiCall;

GROVE_API groveResult_t groveCommMemory(groveComm_t comm, groveCommMemory_t* memory) {
  return apiCall("groveCommMemory", comm, [&] {
    if (memory == nullptr) grove::throwInvalidArgument("memory is NULL");
    const grove::core::Comm::Memory m = grove::capi::usableComm(comm).memory();
    memory->releasable = m.releasable;
    memory->persistent = m.persistent;
    memory->suspended = m.suspended ? 1 : 0;
  });
}

GROVE_API groveResult_t groveCommSuspend(groveComm_t comm) {
  return apiCall("groveCommSuspend", comm, [&] {
    grove::core::Comm& c = grove::capi::usableComm(comm);
    if (grove::core::groupActive())
      throw grove::Error(groveInvalidUsage,
                         "cannot suspend inside a group (call groveGroupEnd first)");
    c.suspend();
  });
}

GROVE_API groveResult_t groveCommResume(groveComm_t comm) {
  return apiCall("groveCommResume", comm, [&] { grove::capi::usableComm(comm).resume(); });
}
