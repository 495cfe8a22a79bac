// Concurrent: runs the shares of a group's end all at once, or none.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace grove::core {

// Runs n pieces of work at once, the first on the calling thread: the
// shares of one group's end, which may wait for each other (one thread may
// drive several ranks of one job), so they either all run at once or none
// does. Every thread is started before any work begins, each held at a gate;
// when one cannot be started, the gate cancels them all: cancel(i) runs for
// every piece instead (what it throws is dropped) and run() returns false.
// What it needs is allocated at construction, so a caller that takes
// tickets between construction and run() has nothing left that can throw
// before each ticket runs or is cancelled.
class Concurrent {
 public:
  /// `threadLimit`: at most that many threads are started (tests of the
  /// cancelled path; a real limit is the system's).
  explicit Concurrent(size_t n, size_t threadLimit = SIZE_MAX)
      : errors_(n), threadLimit_(threadLimit) {
    threads_.reserve(n);
  }

  /// True if every piece ran (the first error of work(i) is rethrown);
  /// false if they were all cancelled.
  template <typename Work, typename Cancel>
  bool run(const Work& work, const Cancel& cancel) {
    const size_t n = errors_.size();
    auto cancelOne = [&](size_t i) {
      try {
        cancel(i);
      } catch (...) {  // the caller fails the call: run() returns false
      }
    };
    auto piece = [&](size_t i) {
      if (!waitForGate()) return cancelOne(i);
      try {
        work(i);
      } catch (...) {
        errors_[i] = std::current_exception();
      }
    };
    size_t started = 1;
    for (; started < n; ++started) {
      if (threads_.size() >= threadLimit_) break;
      try {
        threads_.emplace_back(piece, started);
      } catch (...) {  // no thread (std::system_error) or no memory for one
        break;
      }
    }
    openGate(started == std::max<size_t>(n, 1));
    if (n > 0) piece(0);
    for (size_t i = started; i < n; ++i) cancelOne(i);  // never started
    for (auto& t : threads_) t.join();
    if (started < n) return false;
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
    return true;
  }

 private:
  bool waitForGate() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return gate_ != Gate::kClosed; });
    return gate_ == Gate::kOpen;
  }
  void openGate(bool open) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      gate_ = open ? Gate::kOpen : Gate::kCancelled;
    }
    cv_.notify_all();
  }

  enum class Gate { kClosed, kOpen, kCancelled };
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
  size_t threadLimit_;
  std::mutex mu_;
  std::condition_variable cv_;
  Gate gate_ = Gate::kClosed;
};

}  // namespace grove::core
