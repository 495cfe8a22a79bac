// cuda_path.h - CUDA tensors: the group's grove CUDA communicators, their
// streams, and the Work of a stream-ordered operation.
//
// How it works (ProcessGroupNCCL's semantics, through torch's
// device-generic c10 interfaces -- c10::Stream, c10::Event, stream guards --
// so the extension needs neither CUDA headers nor libc10_cuda and builds
// against any torch, CPU-only ones included):
// - The group's first CUDA operation binds it to that tensor's device and
//   joins three grove CUDA communicators of the whole group there, each with
//   its own stream from torch's pool: one for collectives, one for
//   point-to-point messages from a lower to a higher rank, one for the other
//   direction, so that sends and receives posted in both directions at once
//   do not queue behind each other. Joining is collective, as NCCL's lazy
//   init is: every rank's first CUDA operation must be reached.
// - An operation: an event recorded on the caller's current stream is waited
//   for on the grove stream; the job (staging copies and grove calls) is
//   queued on the grove stream (torch's kernels through a stream guard,
//   grove's through its stream argument); an event recorded after it is what
//   the Work waits on. The host does not wait.
// - Work.wait() and synchronize() make the caller's current stream wait for
//   that event (a barrier's wait() also blocks the host, as NCCL's does);
//   is_completed() queries it; the future is completed at once on the grove
//   stream, so torch orders its callbacks (DDP's comm hooks) after the
//   operation.
// - Tensors stay alive until the GPU is done with them: the job, which holds
//   every tensor the operation touches, is kept with its event and released
//   once the event has completed (looked at on each operation and each
//   wait/query, per lane, and waited for at shutdown). Buffers the job
//   allocates belong to the grove stream. One lane issues one operation at a
//   time (DDP calls from autograd threads), so every rank's grove calls on a
//   communicator come in one order.
// - Point-to-point rings are opened when the group binds (every rank is
//   there): a grove send/recv link opens lazily on its first use, blocking
//   until the peer reaches the same communicator, and a rank's first send
//   upward waiting for a peer whose first send goes downward would never
//   end.
// - Errors: grove's calls fail at once on bad use. A dead peer, a timeout (the
//   communicator's: the group's plus a margin) or a device error end the
//   kernels and leave the communicator in an error state, which the next
//   operation, wait() and is_completed() read: they abort every communicator
//   of the group and raise.
#pragma once

#include "comm.h"
#include "compat.h"

#include <functional>

namespace grove::pytorch {
/// A job: an operation's grove calls and the tensor work around them, run
/// on the host worker (Exec without a stream) or queued on a CUDA stream.
using Job = std::function<void(const Exec&)>;

/// The CUDA communicators of a group: collectives, point-to-point from a
/// lower to a higher rank, and from a higher to a lower one.
enum CudaLane : int { kCollectiveLane = 0, kUpwardLane = 1, kDownwardLane = 2, kNumCudaLanes = 3 };
}  // namespace grove::pytorch

#if GROVE_TORCH_CUDA_PATH
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <ATen/core/ivalue.h>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace grove::pytorch {

/// The group's CUDA side: communicators, streams and work in flight.
class CudaComms : public std::enable_shared_from_this<CudaComms> {
 public:
  /// What run() needs to know of an operation.
  struct Op {
    ::c10d::OpType type;                ///< torch's kind of operation
    const char* name;                   ///< for messages ("allreduce")
    const char* profilingTitle;         ///< what the profiler records
    std::vector<at::Tensor> outputs;    ///< result() and the future's value
    std::vector<at::Tensor> inputs;     ///< what the profiler records
    std::chrono::milliseconds timeout;  ///< a host-blocking wait's limit
    CudaLane lane = kCollectiveLane;    ///< which communicator
    bool blocksHost = false;            ///< wait() also waits on the host (barrier)
  };

  /// store: the group's (rendezvous); abortGroup: aborts the whole group
  /// (host side too) with a reason, called once on the first failure.
  CudaComms(c10::intrusive_ptr<::c10d::Store> store, int rank, int size,
            std::chrono::milliseconds commTimeout,
            std::function<void(const std::string&)> abortGroup);
  /// Waits for the work in flight, then leaves the communicators.
  ~CudaComms();

  /// Binds the group to `device` and joins the communicators (collective;
  /// the first call only). Throws for a second device.
  void bind(const c10::Device& device);
  /// The bound device, if any.
  std::optional<c10::Device> device() const;
  /// Queues op's job on its lane's stream after the caller's current
  /// stream's work; returns its Work.
  c10::intrusive_ptr<::c10d::Work> run(int rank, Op op, Job job);
  /// Throws (after aborting the group) if a communicator is in an error state.
  void checkHealthy();
  /// Aborts every CUDA communicator (idempotent); before bind(), makes
  /// bind() refuse.
  void abort(const std::string& why);
  /// Releases the jobs (and tensors) whose GPU work has completed.
  void reap();

 private:
  /// A job whose GPU work may still run, and the event that says when not.
  struct InFlight {
    std::shared_ptr<c10::Event> done;
    Job job;  ///< holds the tensors alive
  };
  /// Opens every point-to-point ring the lanes' sends and receives can use
  /// (one group of sends and receives per lane, over every pair).
  void openPointToPoint();

  c10::intrusive_ptr<::c10d::Store> store_;
  int rank_, size_;
  std::chrono::milliseconds commTimeout_;
  std::function<void(const std::string&)> abortGroup_;
  std::mutex issue_[kNumCudaLanes];                   ///< one operation at a time per lane
  mutable std::mutex mu_;                             ///< guards what follows
  std::optional<c10::Device> device_;                 ///< set by bind()
  std::string abortedBefore_;                         ///< abort() before bind(): why
  bool bindFailed_ = false;                           ///< a bind() threw: refuse the next
  std::shared_ptr<SharedComm> comms_[kNumCudaLanes];  ///< joined by bind()
  std::optional<c10::Stream> streams_[kNumCudaLanes];
  std::deque<InFlight> inFlight_[kNumCudaLanes];  ///< per lane, in issue order
};

/// The Work of one CUDA operation (see the top of this file).
class CudaWork : public ::c10d::Work {
 public:
  CudaWork(int rank, const CudaComms::Op& op, c10::Device device, std::shared_ptr<c10::Event> done,
           std::shared_ptr<CudaComms> comms, c10::intrusive_ptr<c10::ivalue::Future> future);

  /// True once the GPU finished the operation (or the group failed).
  bool isCompleted() override;
  /// The caller's current stream waits for the operation; a barrier's also
  /// blocks the host, at most `timeout` (the op's when kNoTimeout), after
  /// which the group is aborted and this throws. Throws the group's error.
  bool wait(std::chrono::milliseconds timeout) override;
  /// The caller's current stream waits for the operation.
  void synchronize() override;
  /// As synchronize() (torch's base would wait for the future, which is
  /// completed at once). No `override`: older torch has no such member.
  void blockCurrentStream();
  /// The output tensors.
  std::vector<at::Tensor> result() override { return outputs_; }
  /// Completed at once, its CUDA events recorded on the grove stream.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  /// Aborts the group's communicators.
  void abort() override;

 private:
  const char* name_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  bool blocksHost_;
  c10::Device device_;
  std::shared_ptr<c10::Event> done_;
  std::shared_ptr<CudaComms> comms_;  ///< the group's
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace grove::pytorch

#endif  // GROVE_TORCH_CUDA_PATH
