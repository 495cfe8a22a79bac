// Comm::memory, suspend and resume: what a communicator's memory is, and
// giving back the part that can be made again.
//
// How it works: a communicator holds two kinds of memory for its calls.
// Rings (device communicators: the receiving end of each device ring makes
// its memory) are shared with a peer that may write into them at any time,
// so they live as long as the communicator. Scratch (the device engine's,
// and the host executor's staging) belongs to this rank alone and is grown
// on demand by each call, so it can be given back between calls. suspend()
// waits for this rank's queued work (and, on a device communicator, for
// every enqueued launch), frees the scratch, and marks the communicator so
// that every call fails with a clear error until resume(); the next call
// after resume() grows the scratch again. Nothing is asked of the other
// ranks: a peer that calls a collective meanwhile waits for this rank, as
// it would for a rank that is merely late, until its timeout.
#include <string>
#include <vector>

#include "base/error.h"
#include "core/comm.h"
#include "core/device_path.h"

namespace grove::core {

Comm::Memory Comm::memory() const {
  Memory m;
  m.suspended = suspended_.load();
  if (device_) {
    m.releasable = device_->scratchBytes();
    m.persistent = device_->ringBytes();
  }
  return m;
}

void Comm::suspend() {
  checkUsable();
  if (const char* left = drainWork())
    throw Error(groveInvalidUsage,
                std::string(left) + " did not finish within GROVE_TIMEOUT; not suspended");
  suspended_.store(true, std::memory_order_release);
  if (device_) device_->releaseScratch();
  std::vector<uint8_t>().swap(scratchStore_);
}

void Comm::resume() {
  if (!suspended_.exchange(false)) throw Error(groveInvalidUsage, "communicator is not suspended");
}

}  // namespace grove::core
