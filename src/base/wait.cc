#include "base/wait.h"

#include <poll.h>
#include <sched.h>
#include <time.h>

#include <cstdio>

#include "base/config.h"
#include "base/error.h"

namespace grove {

bool AbortSignal::waitRaised(double seconds) const {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!raised()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    timespec ts{0, 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  return true;
}

int defaultSpinUs() {
  static const int us = [] {
    int64_t v = config::getInt("GROVE_SPIN_US");
    return static_cast<int>(v < 0 ? 0 : v);
  }();
  return us;
}

Waiter::Waiter(const WaitContext& ctx, const char* what)
    : ctx_(ctx),
      what_(what),
      spin_(std::chrono::microseconds(ctx.spinUs >= 0 ? ctx.spinUs : defaultSpinUs())) {
  spinning_ = spin_.count() > 0;
}

void Waiter::checkAbort() const {
  if (ctx_.abortFlag != nullptr && ctx_.abortFlag->load(std::memory_order_acquire)) {
    std::string why = ctx_.abortReason != nullptr ? *ctx_.abortReason : "communicator aborted";
    throw Error(groveRemoteError, why);
  }
}

void Waiter::progressed() {
  rounds_ = 0;
  calls_ = 0;
  spinning_ = spin_.count() > 0;
  yielding_ = true;
  lastProgress_ = {};  // read at the next wait: a call that never waits reads no clock
}

void Waiter::wait(pollfd* fds, size_t nfds, bool fdsCoverAll) {
  // The idle time counts from the first wait after progress (the pass in
  // between is short), so progress and construction need no clock read.
  if (lastProgress_ == std::chrono::steady_clock::time_point{})
    lastProgress_ = std::chrono::steady_clock::now();
  if (spinning_) {
    cpuRelax();
    if ((++calls_ & 15) != 0) return;
    checkAbort();
    const auto idle = std::chrono::steady_clock::now() - lastProgress_;
    if (idle < spin_) {
      // Past the first microseconds the spin also yields now and then: when
      // another thread holds the CPU the peer needs, a pure spin would keep
      // the peer off it for the whole spin on every message.
      if (idle > kSpinAloneFor) sched_yield();
      return;
    }
    spinning_ = false;
  }
  checkAbort();
  uint32_t past = rounds_++;
  if (yielding_) {
    // Yield while the wait is young: the peer we wait for may need this CPU
    // (more ranks than cores), and a yielding rank sees its data at once.
    // Sockets wait here too before any blocking poll: a rank asleep in
    // poll() must be woken and scheduled again, which with more ranks than
    // cores costs tens of microseconds per message; a yielding rank takes
    // the CPU back within one round of the runnable ranks.
    if (nfds > 0) {
      timespec ts{0, 0};
      ppoll(fds, nfds, &ts, nullptr);
    }
    sched_yield();
    if ((past & 15) == 15 && std::chrono::steady_clock::now() - lastProgress_ > kYieldFor) {
      yielding_ = false;
      rounds_ = 0;
    }
  } else if (nfds > 0 && fdsCoverAll) {
    // Only sockets can wake us: block in poll (100 ms slices keep abort and timeout checks alive).
    timespec ts{0, 100 * 1000 * 1000};
    ppoll(fds, nfds, &ts, nullptr);
    past = 0;  // check the clock every slice
  } else {
    // Then naps grow from 20 us to 200 us: a slow peer costs little CPU, and
    // a peer that arrives during a nap waits at most one short nap.
    long ns = 20000L * static_cast<long>(past < 10 ? past + 1 : 10);
    timespec ts{0, ns};
    if (nfds > 0)
      ppoll(fds, nfds, &ts, nullptr);
    else
      nanosleep(&ts, nullptr);
  }
  if ((past & 15) == 0) {
    auto now = std::chrono::steady_clock::now();
    if (ctx_.probe != nullptr && now - lastProgress_ > kProbeAfter &&
        now - lastProbe_ > kProbeEvery) {
      lastProbe_ = now;
      ctx_.probe->probe();
    }
    double idle = std::chrono::duration<double>(now - lastProgress_).count();
    if (ctx_.timeoutSec > 0 && idle > ctx_.timeoutSec) {
      char msg[512];
      snprintf(msg, sizeof(msg), "timed out after %.1f s without progress while %s (GROVE_TIMEOUT)",
               idle, what_);
      throw Error(groveRemoteError, msg);
    }
  }
}

}  // namespace grove
