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
#include <string>

namespace grove {

/// Shared by everything that waits on behalf of one communicator.
struct WaitContext {
  std::atomic<bool>* abortFlag = nullptr;  ///< raised when the comm is aborted or a peer failed
  const std::string* abortReason = nullptr;///< why (read only after abortFlag is seen true)
  double timeoutSec = 30.0;                ///< time without progress before failing
};

/// One wait loop's backoff state.
class Waiter {
 public:
  /// `what` names the wait in the timeout error message.
  Waiter(const WaitContext& ctx, const char* what);
  /// Backs off once (spin, yield or sleep); throws grove::Error(RemoteError)
  /// on timeout, or the abort error if the flag is raised.
  void wait();
  /// Resets the backoff and the timeout clock after progress.
  void progressed();
  /// Throws if the abort flag is raised (cheap; call in hot loops).
  void checkAbort() const;

 private:
  const WaitContext& ctx_;
  const char* what_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point lastProgress_;
  uint32_t rounds_ = 0;
  uint32_t spinLimit_;
};

/// Cheap CPU pause for spin loops.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace grove
