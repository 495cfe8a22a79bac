// work.h - Work objects and the in-order worker that completes them.
//
// How it works: every collective of a process group becomes one Job (a
// function that makes blocking grove calls and copies results out) paired
// with a GroveWork. OpQueue runs the jobs one at a time, in issue order, on
// its own thread, so calls return to Python at once and the caller's compute
// overlaps the communication. grove's host streams give the same asynchrony
// but report completion per stream, not per call; torch needs each Work to
// finish (and fail) on its own, so the queue makes blocking calls and
// completes each Work as its job returns: first its future (whose
// callbacks, e.g. DDP's, run on the worker thread), then the Work (wait()
// returns, isCompleted() is true), so a completed Work's future is complete.
//
// Timeouts: Work::wait() waits at most the op's timeout (the process group's
// unless the call gave one); when it runs out the communicator is aborted, so
// the running job and every later one fail on all ranks instead of hanging.
#pragma once

#include "comm.h"
#include "compat.h"

#include <ATen/core/ivalue.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace grove::pytorch {

/// The Work of one grove operation: completed by OpQueue's thread.
class GroveWork : public ::c10d::Work {
 public:
  /// outputs: the tensors result() and the future give back; timeout: how
  /// long wait() may block before it aborts comm.
  /// profilingTitle: what torch's profiler records for the operation (e.g.
  /// "grove:all_reduce", a string that outlives the Work), with the shapes
  /// of `inputs`.
  GroveWork(int rank, ::c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
            std::chrono::milliseconds timeout, std::shared_ptr<SharedComm> comm,
            const char* profilingTitle, const std::vector<at::Tensor>& inputs);

  /// Blocks until the job finished (at most `timeout`, the op's when
  /// kNoTimeout) and its future's callbacks ran; rethrows the job's error; aborts the communicator and
  /// throws ("... Timed out after N ms ...") when time runs out.
  bool wait(std::chrono::milliseconds timeout) override;
  /// The output tensors (valid once completed).
  std::vector<at::Tensor> result() override;
  /// A future completed with the output tensors, or with the job's error.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  /// Aborts the communicator (every rank's pending work fails).
  void abort() override;

  /// Completes the future (error null on success), then marks the Work done.
  void complete(std::exception_ptr error);
  /// The rank a receive took its message from (before complete()).
  void setSource(int rank) { source_.store(rank); }
  /// The source of a completed receive (recv from any source included).
  int sourceRank() const override;
  /// Waits at most `limit` for the operation to end, then for its future's
  /// callbacks, without aborting anything; true if the Work completed (its
  /// error, if any, is not thrown). The limit does not count the callbacks.
  bool completesWithin(std::chrono::milliseconds limit);
  /// The operation's name, for messages.
  const char* name() const { return name_; }

 private:
  const char* name_;                                ///< e.g. "allreduce" (a literal)
  std::vector<at::Tensor> outputs_;                 ///< what result() and the future give
  std::chrono::milliseconds timeout_;               ///< wait()'s limit by default
  std::shared_ptr<SharedComm> comm_;                ///< aborted when wait() runs out
  c10::intrusive_ptr<c10::ivalue::Future> future_;  ///< completed before the Work
  std::atomic<int> source_{-1};                     ///< a receive's source, once known
  bool ended_ = false;         ///< the operation ended (under mutex_): callbacks may run
  std::thread::id completer_;  ///< the thread running the future's callbacks
};

/// What the worker runs for one operation: its grove calls on the host.
using Task = std::function<void()>;

/// Runs a blocking wait (fn) so that other threads can make progress: the
/// Python module installs one that releases the GIL when the caller holds
/// it, because the worker may need the GIL to free tensors Python knows.
using BlockingScope = void (*)(const std::function<void()>& fn);
/// Installs the scope OpQueue::stop() waits in (default: runs fn as is).
void setBlockingScope(BlockingScope scope);
/// Runs fn in the installed scope.
void runBlocking(const std::function<void()>& fn);

/// Runs jobs in order on one thread and completes their Works.
class OpQueue {
 public:
  /// Starts the worker thread.
  OpQueue();
  /// Runs what is queued, then stops the thread.
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  /// Queues job; work completes when it returns (or fails with its error).
  void push(c10::intrusive_ptr<GroveWork> work, Task task);
  /// Runs what is queued and joins the thread; later pushes fail their Work.
  void stop();

 private:
  /// A queued operation.
  struct Entry {
    c10::intrusive_ptr<GroveWork> work;  ///< completed when job returns
    Task job;                            ///< the grove calls
  };
  /// What the worker shares with the queue (it may outlive the queue when
  /// the last reference to a group goes from the worker thread itself).
  struct State {
    std::mutex mu;               ///< guards queue and stopping
    std::condition_variable cv;  ///< wakes the worker
    std::deque<Entry> queue;     ///< operations not started yet, in issue order
    bool stopping = false;       ///< stop() was called
  };
  /// The worker thread's body.
  static void loop(std::shared_ptr<State> state);

  std::shared_ptr<State> state_;  ///< shared with the worker
  std::thread thread_;            ///< the worker
};

}  // namespace grove::pytorch
