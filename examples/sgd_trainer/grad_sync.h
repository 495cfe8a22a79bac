// Data-parallel gradient synchronisation as DDP does it, over grove's C API.
//
// How it works: the gradient buffer is cut into buckets (bucket_plan.h).
// During backward the model reports each finished layer (layerDone); every
// bucket whose lowest layer is now done is all-reduced in place with
// groveAvg on a grove host stream. The call returns at once and the stream's
// worker thread runs the reductions in issue order while this thread goes on
// differentiating the earlier layers -- communication overlaps compute.
// finish() then waits for the last bucket. With overlap off, every bucket is
// issued only after backward (the naive order), for comparison.
//
// Averaging: each rank's gradients are the mean over its B/N samples, so the
// average over ranks is the mean over the global batch B -- the gradient a
// single process would compute on the whole batch.
//
// Timing, honestly measured: a watcher thread synchronises the stream after
// each issue and stamps when the reductions issued so far have finished. The
// time communication was in flight is the union of [issue, done] over the
// buckets; the exposed time is how long finish() waited after backward had
// ended. exposed < in-flight means the overlap hid part of the communication.
#pragma once

#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "grove/grove.h"
#include "sgd_trainer/bucket_plan.h"

namespace grove::examples {

/// A failed grove call or wait of the trainer (the message says which).
class TrainerError : public std::runtime_error {
 public:
  /// An error with its message.
  explicit TrainerError(const std::string& what) : std::runtime_error(what) {}
};

/// Throws TrainerError naming `what` and the library's text unless r is groveSuccess.
void checkGrove(groveResult_t r, groveComm_t comm, const std::string& what);

/// Seconds on a monotonic clock.
double nowSec();

/// Communication times of one step, in seconds.
struct SyncTimes {
  double exposed = 0;   ///< waited for reductions after backward ended
  double inFlight = 0;  ///< some bucket's reduction was issued and not yet finished
};

/// Reduces a gradient buffer bucket by bucket on a host stream.
class GradSync {
 public:
  /// grads (the model's gradient buffer) must outlive this object.
  GradSync(groveComm_t comm, float* grads, std::vector<Bucket> buckets, bool overlap,
           double timeoutSec);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  /// Starts a step: no bucket issued yet.
  void beginStep();
  /// Layer `layer`'s gradients are final (called last layer first).
  void layerDone(int layer);
  /// Issues what is left, waits for every bucket, returns this step's times.
  SyncTimes finish();
  /// The buckets.
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  void issue(size_t k);
  void watcherLoop();

  groveComm_t comm_;
  float* grads_;
  std::vector<Bucket> buckets_;
  bool overlap_;
  double timeoutSec_;
  groveHostStream_t stream_ = nullptr;

  std::mutex mu_;
  std::condition_variable cv_;
  size_t issued_ = 0, confirmed_ = 0;  // buckets issued / known finished this step
  std::vector<double> issueAt_, doneAt_;
  groveResult_t error_ = groveSuccess;
  std::string errorText_;
  bool stop_ = false;
  std::thread watcher_;
};

}  // namespace grove::examples
