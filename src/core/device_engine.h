// DeviceEngine: where a CUDA communicator's device programs run -- on the
// GPU through the CUDA executor (exec/cuda/), or on host threads through the
// host emulation of the same interpreter (exec/device/emulate.h), which lets
// the whole device path (lowering, ring exchange, launches, groups, errors)
// run and be tested on machines without a GPU (GROVE_DEVICE_EMULATION).
//
// How it works: the device path (device_path.h) lowers a program, opens its
// rings, and installs it here once; a launch binds installed programs to the
// call's buffers (DevCall) and hands them over. The CUDA engine enqueues
// them on the caller's stream and returns (NCCL semantics), ordering its
// launches across streams with an event; the emulated engine runs them
// before returning. Both report failures through one DevControl, which the
// device path watches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/device_connections.h"
#include "exec/device/dev_program.h"

namespace grove::core {

/// The executor behind a CUDA communicator.
class DeviceEngine {
 public:
  virtual ~DeviceEngine() = default;
  /// "cuda" or "emulated".
  virtual const char* name() const = 0;
  /// True when launch() returns before the calls have run (CUDA).
  virtual bool asynchronous() const = 0;
  /// How programs are lowered for this engine (none cut by default).
  virtual exec::dev::LowerOptions lowerOptions() const { return {}; }
  /// Makes a lowered program runnable with its ring tables; the view stays
  /// valid until the engine is destroyed. `oneOff` programs (built for one
  /// call) are released once the next launch that uses them has completed.
  virtual exec::dev::DevProgramView install(const exec::dev::DevProgram& program,
                                            const DeviceRingTables& rings, bool oneOff) = 0;
  /// Scratch memory of at least `bytes` for the next launch (device memory,
  /// or host memory when emulated); may wait for launches in flight.
  virtual uint8_t* scratch(size_t bytes) = 0;
  /// Bytes of scratch memory held now.
  virtual size_t scratchBytes() const = 0;
  /// Gives the scratch memory back; the next scratch() allocates anew. Call
  /// only once drained: no launch may still use it.
  virtual void releaseScratch() = 0;
  /// Runs (emulated) or enqueues on `stream` (CUDA) the calls, in order.
  virtual void launch(const std::vector<exec::dev::DevCall>& calls, void* stream) = 0;
  /// Runs (emulated: memmove) or enqueues on `stream` (CUDA: cudaMemcpyAsync)
  /// one copy between the caller's buffers; no kernel, no ring, no scratch.
  virtual void copy(void* dst, const void* src, size_t bytes, void* stream) = 0;
  /// The shared control block (host view): status, failed position, abort flag.
  virtual const exec::dev::DevControl& control() const = 0;
  /// Raises the abort flag: running and later launches stop at their next wait.
  virtual void abort() = 0;
  /// Waits until every launch so far has completed; false if `timeoutSec`
  /// passed first.
  virtual bool drain(double timeoutSec) = 0;
  /// The device path's watcher calls this before each look at control():
  /// an engine whose device cannot check its own deadline does it here.
  virtual void poll() {}
};

/// The host emulation: buffers are host memory; launches run before returning.
std::unique_ptr<DeviceEngine> makeEmulatedEngine(double timeoutSec);

/// The stream-tape engine (exec/device/stream_tape.h): launches become
/// stream operations, never a waiting kernel. `device` < 0: the host
/// emulation; otherwise the CUDA device (current on the calling thread).
/// Throws grove::Error(groveInvalidUsage) where the device cannot run tapes.
std::unique_ptr<DeviceEngine> makeStreamEngine(int device, double timeoutSec);

/// The CUDA executor on `device` (already the calling thread's current
/// device). Throws grove::Error(groveInvalidUsage) in a build without CUDA.
std::unique_ptr<DeviceEngine> makeCudaEngine(int device, double timeoutSec);

/// True when this build has the CUDA executor.
bool cudaEngineBuilt();

/// The CUDA device a communicator uses: `requested` (>= 0) or the calling
/// thread's current device; made current. Throws grove::Error
/// (groveInvalidUsage) without a CUDA build or a visible device, and
/// (groveInvalidArgument) for a device index out of range.
int resolveCudaDevice(int requested);

}  // namespace grove::core
