// HostStream: an asynchronous, in-order queue of host work with its own
// worker thread -- the host-memory counterpart of a CUDA stream. Collectives
// called with a host stream are queued here and return at once; the worker
// runs them one after another. The first error is kept and returned by the
// next synchronize() or query().
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "grove/grove.h"

namespace grove::core {

class HostStream {
 public:
  HostStream();
  ~HostStream();  ///< drains the queue, then stops the worker
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  /// Queues work. Exceptions it throws become the stream's error.
  void enqueue(std::function<void()> work);
  /// Waits for all queued work; returns and clears the first error (with its text).
  groveResult_t synchronize(std::string* message);
  /// groveInProgress while work is queued or running, else as synchronize() without waiting.
  groveResult_t query(std::string* message);

 private:
  void workerLoop();
  groveResult_t takeError(std::string* message);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool running_ = false;  // the worker is executing an item
  bool stop_ = false;
  groveResult_t error_ = groveSuccess;
  std::string errorText_;
  std::thread worker_;
};

}  // namespace grove::core
