// Sequencer: keeps a communicator's operations in the order they were issued,
// whichever thread runs them (the caller for blocking calls, a host stream's
// worker for asynchronous ones). Every rank issues the same operations in the
// same order, so running them in issue order keeps the ranks' byte streams
// in step.
//
// How it works: issue() hands out increasing tickets; run(t, fn) waits until
// ticket t-1 has finished, runs fn, and marks t finished -- even when fn
// throws, so a failed operation never blocks the ones behind it (they see
// the communicator's error state and fail fast).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace grove::core {

class Sequencer {
 public:
  /// Takes the next ticket (call at issue time, on the issuing thread).
  uint64_t issue() {
    std::lock_guard<std::mutex> lock(mu_);
    return ++issued_;
  }
  /// Runs fn when every earlier ticket has finished.
  template <typename Fn>
  void run(uint64_t ticket, Fn&& fn) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return finished_ + 1 == ticket; });
    }
    finishAfter(ticket, fn);
  }
  /// issue() then run() on this thread, taking the lock once to do both.
  template <typename Fn>
  void runNow(Fn&& fn) {
    uint64_t ticket;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ticket = ++issued_;
      cv_.wait(lock, [&] { return finished_ + 1 == ticket; });
    }
    finishAfter(ticket, fn);
  }
  /// Waits until every issued ticket has finished.
  void drain() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return finished_ == issued_; });
  }
  /// Waits until every issued ticket has finished, or `seconds` passed; true if drained.
  bool drainFor(double seconds) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds),
                        [&] { return finished_ == issued_; });
  }

 private:
  /// Runs fn as `ticket`, then marks the ticket finished (also when fn throws).
  template <typename Fn>
  void finishAfter(uint64_t ticket, Fn& fn) {
    struct Done {
      Sequencer* s;
      uint64_t t;
      ~Done() {
        std::lock_guard<std::mutex> lock(s->mu_);
        s->finished_ = t;
        s->cv_.notify_all();
      }
    } done{this, ticket};
    fn();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t issued_ = 0;
  uint64_t finished_ = 0;
};

}  // namespace grove::core
