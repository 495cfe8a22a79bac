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
//
// The counters are atomics, so the common case -- a blocking call with
// nothing queued ahead of it -- takes one atomic increment and two loads and
// no lock. Only a ticket that must wait takes the mutex: it registers as a
// waiter and sleeps on the condition variable; a finisher that sees a
// registered waiter takes the mutex to wake it. Both sides use sequentially
// consistent order (the finisher stores `finished` then loads `waiters`; a
// waiter increments `waiters` then loads `finished`), so at least one of
// them sees the other and no wake-up is lost.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace grove::core {

class Sequencer {
 public:
  /// Takes the next ticket (call at issue time, on the issuing thread).
  uint64_t issue() { return issued_.fetch_add(1) + 1; }
  /// Takes the next ticket and hands it to `queue` (which puts its work on
  /// a host stream) under one lock: two threads queuing on one stream
  /// queue their tickets in ticket order, or the stream's worker would
  /// wait on a later ticket while the earlier one waited behind it. When
  /// `queue` throws (out of memory), the ticket is run here as a no-op
  /// before the error goes on: a ticket never run would stop every later
  /// call of the communicator. It waits for the earlier tickets without the
  /// lock (they may need it to be queued: a group's end that took a ticket
  /// of another communicator and now queues on this one).
  template <typename Queue>
  void issueAndQueue(Queue&& queue) {
    std::unique_lock<std::mutex> lock(queueMu_);
    const uint64_t ticket = issue();
    try {
      queue(ticket);
    } catch (...) {
      lock.unlock();
      run(ticket, [] {});
      throw;
    }
  }
  /// Runs fn when every earlier ticket has finished.
  template <typename Fn>
  void run(uint64_t ticket, Fn&& fn) {
    waitUntil([&] { return finished_.load() + 1 == ticket; });
    finishAfter(ticket, fn);
  }
  /// issue() then run() on this thread.
  template <typename Fn>
  void runNow(Fn&& fn) {
    run(issue(), fn);
  }
  /// Waits until every issued ticket has finished.
  void drain() {
    waitUntil([&] { return finished_.load() == issued_.load(); });
  }
  /// Waits until every issued ticket has finished, or `seconds` passed; true if drained.
  bool drainFor(double seconds) {
    auto done = [&] { return finished_.load() == issued_.load(); };
    if (done()) return true;
    std::unique_lock<std::mutex> lock(mu_);
    Waiting w(this);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), done);
  }

 private:
  /// Counts a sleeping waiter for as long as it exists.
  struct Waiting {
    explicit Waiting(Sequencer* s) : s(s) { s->waiters_.fetch_add(1); }
    ~Waiting() { s->waiters_.fetch_sub(1); }
    Sequencer* s;
  };

  template <typename Pred>
  void waitUntil(Pred ready) {
    if (ready()) return;
    std::unique_lock<std::mutex> lock(mu_);
    Waiting w(this);
    cv_.wait(lock, ready);
  }

  /// Runs fn as `ticket`, then marks the ticket finished (also when fn throws).
  template <typename Fn>
  void finishAfter(uint64_t ticket, Fn& fn) {
    struct Done {
      Sequencer* s;
      uint64_t t;
      ~Done() {
        s->finished_.store(t);
        if (s->waiters_.load() == 0) return;
        std::lock_guard<std::mutex> lock(s->mu_);
        s->cv_.notify_all();
      }
    } done{this, ticket};
    fn();
  }

  std::mutex mu_;
  std::mutex queueMu_;  ///< issueAndQueue
  std::condition_variable cv_;
  std::atomic<uint64_t> issued_{0};
  std::atomic<uint64_t> finished_{0};
  std::atomic<int> waiters_{0};
};

}  // namespace grove::core
