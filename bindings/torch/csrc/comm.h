// comm.h - a grove communicator as the torch backend uses it.
//
// SharedComm owns one groveComm_t. The backend and every Work it hands out
// hold it by shared_ptr, so a Work that times out after its process group is
// gone can still ask for an abort safely. Calls are made by the backend's
// single worker thread; abort() may come from any thread (a waiter that ran
// out of time) and makes the worker's current and later calls fail.
#pragma once

#include <grove/grove.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace grove::pytorch {

/// Owns one grove communicator; thread-safe abort and destroy.
class SharedComm {
 public:
  /// Takes ownership of comm (made by groveCommInitRank*).
  explicit SharedComm(groveComm_t comm);
  /// Destroys the communicator if nobody did.
  ~SharedComm();
  SharedComm(const SharedComm&) = delete;
  SharedComm& operator=(const SharedComm&) = delete;

  /// The handle for grove calls; null once destroyed.
  groveComm_t get() const { return comm_; }
  /// Stops the communicator at once on every rank (first call wins), then
  /// runs the abort hook (the group's point-to-point links go with it).
  void abort(const std::string& why);
  /// Called once by abort(), after the communicator was aborted.
  void setAbortHook(std::function<void(const std::string&)> hook);
  /// Leaves gracefully (after the worker drained); no-op after abort.
  void destroy();
  /// True once abort() ran.
  bool aborted() const { return aborted_.load(); }
  /// Why abort() ran; empty otherwise.
  std::string abortReason() const;
  /// Throws a std::runtime_error naming `what` and grove's error text when
  /// result is not groveSuccess.
  void check(groveResult_t result, const char* what) const;

 private:
  groveComm_t comm_;                  ///< the handle (after abort grove refuses it: "destroyed")
  mutable std::mutex mu_;             ///< orders abort and destroy
  std::atomic<bool> aborted_{false};  ///< abort() ran
  bool destroyed_ = false;            ///< abort() or destroy() ran (under mu_)
  std::string abortReason_;           ///< why abort() ran (under mu_)
  std::function<void(const std::string&)> abortHook_;  ///< under mu_
};

/// Where a job's grove calls go: the communicator and the stream argument
/// (null on the host path, where calls block; the group's grove stream, a
/// cudaStream_t, on the CUDA path, where they are queued on it).
struct Exec {
  const SharedComm* shared;  ///< the communicator (check() adds its abort reason)
  groveStream_t stream;      ///< the stream argument of every call

  /// The handle to pass to grove.
  groveComm_t comm() const { return shared->get(); }
  /// Throws when a call failed (see SharedComm::check).
  void check(groveResult_t result, const char* what) const { shared->check(result, what); }
};

/// Joins a grove communicator of `size` ranks: rank 0 makes the unique id
/// and publishes it in store under key, the others read it (waiting up to the
/// store's timeout). Throws naming `what` on failure.
groveComm_t joinGroup(const c10::intrusive_ptr<::c10d::Store>& store, const std::string& key,
                      int rank, int size, const groveConfig_t& config, const std::string& what);

/// The error of a failed grove call: "grove: <what> failed: <result text>
/// (<grove's last error on comm>)".
std::runtime_error groveFailure(const std::string& what, groveComm_t comm, groveResult_t result);

/// grove data type of a tensor's dtype; throws a clear error for the rest.
/// `reducing` refuses bool (only copies and max/min make sense for it).
groveDataType_t groveTypeOf(const at::Tensor& tensor, const char* op);

/// grove reduction of a c10d ReduceOp (and of bool data, where max/min are
/// or/and); throws for the ops grove does not have.
groveRedOp_t groveOpOf(const ::c10d::ReduceOp& op, const at::Tensor& tensor, const char* what);

/// Checks that a tensor can be used: dense, on the CPU or a CUDA device,
/// with a dtype grove knows.
void checkTensor(const at::Tensor& tensor, const char* op);

/// Milliseconds as grove's int timeout field, clamped to its range (>= 1).
int timeoutMsOf(std::chrono::milliseconds timeout);

}  // namespace grove::pytorch
