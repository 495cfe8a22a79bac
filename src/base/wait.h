// Waiting without burning a core: spin briefly, then yield, then sleep with
// growing naps; every wait has a deadline that turns into an error, and
// watches an abort flag that another thread (or a failed peer) can raise.
//
// Usage:
//   Waiter w(ctx, "waiting for rank 3 to send");
//   while (!ready()) w.wait();          // throws on timeout or abort
//   ... and call w.progressed() whenever something moved, so the timeout
//   counts time without progress, not total time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

struct pollfd;

namespace grove {

/// A one-shot alarm raised when a communicator must stop (local abort, a
/// dead peer, an abort from another rank). The first raise wins the reason.
class AbortSignal {
 public:
  /// Raises the signal with `why`; later raises keep the first reason.
  void raise(const std::string& why) {
    if (claimed_.exchange(true)) return;
    reason_ = why;
    raised_.store(true, std::memory_order_release);
  }
  bool raised() const { return raised_.load(std::memory_order_acquire); }
  /// Waits up to `seconds` (in 1 ms naps) for the signal; true if it is raised.
  bool waitRaised(double seconds) const;
  /// Why it was raised (empty until raised() is true).
  const std::string& reason() const { return reason_; }
  std::atomic<bool>* flag() { return &raised_; }
  const std::string* reasonPtr() const { return &reason_; }

 private:
  std::atomic<bool> raised_{false};
  std::atomic<bool> claimed_{false};
  std::string reason_;
};

/// A check that a wait blocked for a while runs now and then (every
/// kProbeEvery, once the wait has made no progress for kProbeAfter): the
/// communicator's look at its peers on this host, which throws when one of
/// them is known to be in another call (core/call_board.h).
class WaitProbe {
 public:
  virtual ~WaitProbe() = default;
  /// Throws grove::Error to end the wait; returns if nothing is known to be wrong.
  virtual void probe() const = 0;
};

/// Shared by everything that waits on behalf of one communicator.
struct WaitContext {
  std::atomic<bool>* abortFlag = nullptr;    ///< raised when the comm is aborted or a peer failed
  const std::string* abortReason = nullptr;  ///< why (read only after abortFlag is seen true)
  double timeoutSec = 30.0;                  ///< time without progress before failing
  int spinUs = -1;  ///< busy-wait this long before yielding; -1 = GROVE_SPIN_US
  /// Where a blocked wait notes the peers it waits on (the hang doctor's
  /// reports, core/hang_doctor.h); null: not noted.
  std::atomic<int64_t>* blockedOn = nullptr;
  /// Run by a wait blocked for a while (null: none).
  const WaitProbe* probe = nullptr;

  /// Notes that a wait is blocked on receiving from `recvPeer` and/or sending
  /// to `sendPeer` (-1: none). One relaxed store; call only when blocked.
  void noteBlockedOn(int recvPeer, int sendPeer) const {
    if (blockedOn != nullptr)
      blockedOn->store(
          (static_cast<int64_t>(recvPeer + 1) << 32) | static_cast<uint32_t>(sendPeer + 1),
          std::memory_order_relaxed);
  }
  /// The receive peer of a noted word (-1: none).
  static int blockedRecvPeer(int64_t word) { return static_cast<int>(word >> 32) - 1; }
  /// The send peer of a noted word (-1: none).
  static int blockedSendPeer(int64_t word) { return static_cast<int>(word & 0xffffffff) - 1; }

  /// Context that watches `signal` and fails after `timeout` seconds idle.
  static WaitContext of(AbortSignal& signal, double timeout) {
    WaitContext c;
    c.abortFlag = signal.flag();
    c.abortReason = signal.reasonPtr();
    c.timeoutSec = timeout;
    return c;
  }
};

/// The process-wide default spin time (GROVE_SPIN_US).
int defaultSpinUs();

/// One wait loop's backoff state. The spin stage is bounded in time, not in
/// calls, because a caller's pass between calls may itself cost system calls.
class Waiter {
 public:
  /// `what` names the wait in the timeout error message.
  Waiter(const WaitContext& ctx, const char* what);
  /// Backs off once (spin, yield or sleep); throws grove::Error(RemoteError)
  /// on timeout, or the abort error if the flag is raised.
  void wait() { wait(nullptr, 0, false); }
  /// As wait(), but past the spin and yield stages it sleeps in poll() on
  /// `fds` (sockets the caller waits for), so it wakes as soon as one is
  /// ready. When `fdsCoverAll` is true, nothing else can make progress, and
  /// the poll may block for long (still checking the timeout and the abort
  /// flag); when false, it naps no longer than a plain wait() would. (A young
  /// wait yields even on sockets: with more ranks than cores, waking from
  /// poll costs far more per message than yielding.)
  void wait(struct pollfd* fds, size_t nfds, bool fdsCoverAll);
  /// Resets the backoff and the timeout clock after progress.
  void progressed();
  /// Throws if the abort flag is raised (cheap; call in hot loops).
  void checkAbort() const;
  /// The context this waiter watches.
  const WaitContext& context() const { return ctx_; }

 private:
  const WaitContext& ctx_;
  const char* what_;
  std::chrono::steady_clock::time_point lastProgress_{};  // zero: set at the next wait
  std::chrono::steady_clock::time_point lastProbe_{};     // when the probe last ran
  uint32_t rounds_ = 0;                                   // backoff rounds past the spin stage
  uint32_t calls_ = 0;                                    // wait() calls since the last progress
  bool spinning_ = true;                                  // still in the spin stage
  bool yielding_ = true;                                  // still in the yield stage (then naps)
  /// How long a wait yields before it naps.
  static constexpr std::chrono::microseconds kYieldFor{1000};
  /// How long the spin stage spins without yielding at all.
  static constexpr std::chrono::microseconds kSpinAloneFor{2};
  /// How long a wait goes without progress before it runs the probe.
  static constexpr std::chrono::milliseconds kProbeAfter{2};
  /// How often a blocked wait runs the probe after that.
  static constexpr std::chrono::milliseconds kProbeEvery{10};
  std::chrono::nanoseconds spin_;
};

/// The steady clock in nanoseconds (for sums of durations and deadlines).
inline uint64_t monotonicNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

/// Cheap CPU pause for spin loops.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace grove
