// The host emulation of the device interpreter: runs lowered programs
// (dev_program.h) with dev_lane.h's runLane on CPU threads over DevRings in
// host memory, so the whole device protocol -- pieces, counters, the wire
// rule, fan-out and fan-in, waits, abort, timeout and closed rings -- is
// tested without a GPU, and transports can emulate device links.
//
// How it works: runEmulated runs the calls in order and each call's phases
// in order; a phase runs every lane at once, one std::thread per lane (the
// caller's thread runs lane 0), each lane a team of one thread (HostCtx).
// All lanes of a phase are joined before the next phase starts, as the GPU
// kernel's grid barrier does. Once ctl.status is set (a lane failed, or
// another rank's launch shares the DevControl) no further phase starts.
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "base/wait.h"
#include "exec/device/dev_program.h"

namespace grove::exec::dev {

/// Runs calls[0..n) one after another with the emulated device; the outcome
/// (kDevOk or the first failure and where) lands in ctl. ctl.timeoutNs == 0
/// means GROVE_TIMEOUT here (a host wait always has a deadline). Throws
/// grove::Error(groveInvalidArgument) for a call with an invalid data type
/// or reduction op.
void runEmulated(const DevCall* calls, size_t n, DevControl& ctl);

/// The emulation's team context (dev_context.h's Ctx): a team of one CPU
/// thread. Loads and stores go through std::atomic_ref; waits spin a little,
/// then yield, then take short naps (machines running more ranks than cores).
class HostCtx {
 public:
  /// This thread's index in the team (always 0).
  uint32_t tid() const { return 0; }
  /// The team's size (always 1).
  uint32_t size() const { return 1; }
  /// Team barrier: nothing to wait for.
  void sync() {}
  /// Team broadcast from thread 0: the value itself.
  uint64_t share(uint64_t v) { return v; }
  /// Acquire load of a counter another thread writes.
  uint64_t loadAcquire(const uint64_t* p) {
    return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_acquire);
  }
  /// Relaxed load of a flag.
  uint32_t loadFlag(const uint32_t* p) {
    return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_relaxed);
  }
  /// Release store of a counter.
  void storeRelease(uint64_t* p, uint64_t v) {
    std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_release);
  }
  /// Data stores are published by the release store that follows.
  void fenceRelease() { std::atomic_thread_fence(std::memory_order_release); }
  /// Sets *status from 0 to value; true if this call set it.
  bool claimStatus(uint32_t* status, uint32_t value) {
    uint32_t expected = 0;
    return std::atomic_ref<uint32_t>(*status).compare_exchange_strong(expected, value,
                                                                      std::memory_order_acq_rel);
  }
  /// Monotonic clock in ns.
  uint64_t nowNs() { return monotonicNs(); }
  /// Backs off after `spins` consecutive empty polls: pause, then yield, then naps.
  void pause(uint32_t spins) {
    if (spins < kSpinPolls) {
      cpuRelax();
    } else if (spins < kSpinPolls + kYieldPolls) {
      sched_yield();
    } else {
      const uint32_t extra = spins - kSpinPolls - kYieldPolls;
      std::this_thread::sleep_for(std::chrono::microseconds(extra < 9 ? 20 + extra * 20 : 200));
    }
  }
  /// memcpy (the interpreter never hands it overlapping ranges).
  void copy(void* dst, const void* src, uint64_t bytes);
  /// dst (and dst2) = srcs[0] op srcs[1] op ... folded left with the CPU
  /// kernels, rounding after every operation as the host executor does.
  void reduce(const DevReduce& r, void* dst, void* dst2, const void* const* srcs, int nsrc,
              uint64_t count, bool final);

 private:
  static constexpr uint32_t kSpinPolls = 64;    ///< polls that only pause the CPU
  static constexpr uint32_t kYieldPolls = 200;  ///< then polls that yield the CPU
};

/// Owns zeroed, 64-byte-aligned host memory for DevRings (tests, and
/// transports emulating device links). The sender's and receiver's handles
/// of a ring are the same DevRing (one address space). Not thread-safe;
/// rings live as long as the arena.
class HostRingArena {
 public:
  HostRingArena() = default;
  HostRingArena(const HostRingArena&) = delete;
  HostRingArena& operator=(const HostRingArena&) = delete;
  ~HostRingArena();

  /// A new ring of `capacity` bytes (a positive multiple of
  /// transport::kRingCapacityAlign, else grove::Error(groveInvalidArgument)),
  /// its counters and closed word zero.
  DevRing add(uint64_t capacity);
  /// Number of rings made so far.
  size_t size() const { return blocks_.size(); }

 private:
  std::vector<void*> blocks_;
};

}  // namespace grove::exec::dev
