// DevicePath: the part of a CUDA communicator that runs collectives on
// device buffers (issue order, stream semantics, groups, errors).
//
// How it works: a call arrives with its plan::Program (from the
// communicator's cache). The first time a program is seen it is lowered to
// the device form (exec/device/dev_program.h), the rings it needs are opened
// (DeviceConnections: a collective exchange on first use), and it is
// installed in the engine (uploaded to the GPU, or kept for the emulation).
// A launch binds each program to the call's buffers (input, output, the
// communicator's scratch, send/recv buffers) and hands every call of a group
// to the engine at once: on a GPU, one kernel runs them in order on the
// caller's stream and the call returns at once.
//
// One rank: a program without a peer is local copies only (input to output;
// nothing when in place). Such a launch runs no kernel: each copy goes to the
// engine's copy on the caller's stream (cudaMemcpyAsync on a GPU, so the
// driver's copy at the copy limit instead of the interpreter's thread
// blocks), and an in-place call enqueues nothing at all.
//
// Errors: a launch that fails on the device (timeout, abort, a peer's ring
// closed) writes the shared DevControl. A watcher thread polls it (and the
// communicator's abort signal, raised when another rank failed or the user
// aborted) every 10 ms: a device failure is reported to the
// communicator (error state, other ranks told), and an abort signal raises
// the device abort flag so waiting kernels return instead of hanging.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/wait.h"
#include "core/device_connections.h"
#include "core/device_engine.h"
#include "ir/schedule.h"

namespace grove::core {

/// One operation of a device launch.
struct DeviceOp {
  std::shared_ptr<const plan::Program> program;  ///< cached (kept) or one-off
  bool oneOff = false;                           ///< built for this call only (send/recv groups)
  groveDataType_t dtype = groveFloat32;
  groveRedOp_t op = groveSum;
  const void* input = nullptr;
  void* output = nullptr;
  std::vector<void*> extra;  ///< Buf::kExtra buffers
};

/// Reports a device failure to the communicator (code, text).
using DeviceFailureFn = std::function<void(groveResult_t, const std::string&)>;

class DevicePath {
 public:
  /// `links` opens the rings; `abort` is the communicator's signal (watched);
  /// `onFailure` is called once, from the watcher, for a device failure.
  DevicePath(int nranks, std::unique_ptr<DeviceEngine> engine,
             std::unique_ptr<DeviceConnections> links, AbortSignal& abort,
             DeviceFailureFn onFailure);
  ~DevicePath();
  DevicePath(const DevicePath&) = delete;
  DevicePath& operator=(const DevicePath&) = delete;

  /// Prepares and launches `ops` as one launch on `stream` (CUDA: enqueued;
  /// emulated: run). Throws grove::Error for a failure seen now (including
  /// an earlier launch's device failure, and a failed emulated run).
  void launch(const std::vector<DeviceOp>& ops, void* stream);
  /// Raises the device abort flag.
  void abort();
  /// Waits for every launch to finish; false on timeout.
  bool drain(double timeoutSec) { return engine_->drain(timeoutSec); }
  /// Scratch memory the engine holds now (bytes), and gives back (call
  /// only once drained).
  size_t scratchBytes() const { return engine_->scratchBytes(); }
  void releaseScratch() { engine_->releaseScratch(); }
  /// Data bytes of the rings this rank has opened (the receiving end makes
  /// a ring's memory; sending rings are mapped from the peer).
  uint64_t ringBytes() const { return links_->ringCapacity() * links_->recvCount(); }
  /// "cuda over cuda_p2p" style summary for logs.
  std::string summary() const;
  /// Engine name ("cuda", "emulated").
  const char* engineName() const { return engine_->name(); }

  /// What the launches so far became: engine launches (a kernel, or a
  /// stream tape), and one-rank calls run as plain copies (copies enqueued,
  /// in-place calls that needed none); and where the host's time went per
  /// launch, summed (steady clock): choosing algorithms and programs (the
  /// communicator reports it, noteSelect), looking up and binding installed
  /// programs, and the engine's enqueue (or copies). A program's first use
  /// (lowering, opening its rings -- collective, so it waits for the peers --
  /// and installing it) is counted apart. The destructor logs the averages
  /// (INFO, INIT).
  struct Stats {
    uint64_t kernelLaunches = 0;
    uint64_t copies = 0;
    uint64_t noOps = 0;
    uint64_t launches = 0;
    uint64_t selectNs = 0;
    uint64_t prepareNs = 0;
    uint64_t enqueueNs = 0;
    uint64_t installs = 0;
    uint64_t installNs = 0;
  };
  Stats stats() const { return stats_; }
  /// Adds the communicator's time choosing the programs of one launch.
  void noteSelect(uint64_t ns) { stats_.selectNs += ns; }

 private:
  struct Installed {
    std::shared_ptr<const plan::Program> program;  // keeps the cache key alive
    exec::dev::DevProgramView view;
    uint32_t nSlots = 3;
  };
  const Installed& prepare(const DeviceOp& op);
  bool runAsCopies(const std::vector<DeviceOp>& ops, void* stream);
  void checkStatus();
  void watch();
  std::string describeFailure(const exec::dev::DevControl& c) const;
  void awaitCause(uint32_t status) const;

  int nranks_;
  std::unique_ptr<DeviceEngine> engine_;
  std::unique_ptr<DeviceConnections> links_;
  AbortSignal& abort_;
  DeviceFailureFn onFailure_;
  std::map<const plan::Program*, Installed> installed_;
  Installed oneOff_;
  std::vector<exec::dev::DevCall> calls_;
  Stats stats_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> reported_{false};
  std::atomic<int> inLaunch_{0};  // threads inside launch() (the destructor waits for them)
  std::thread watcher_;
};

}  // namespace grove::core
