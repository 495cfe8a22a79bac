#include "base/wait.h"

#include <sched.h>
#include <time.h>

#include <cstdio>

#include "base/config.h"
#include "base/error.h"

namespace grove {
namespace {
uint32_t spinRounds() {
  static const uint32_t rounds = [] {
    int64_t us = config::getInt("GROVE_SPIN_US");
    // About 20 pause rounds of ~50 ns per microsecond; checked every 64 rounds.
    return static_cast<uint32_t>(us < 0 ? 0 : us * 20);
  }();
  return rounds;
}
}  // namespace

Waiter::Waiter(const WaitContext& ctx, const char* what)
    : ctx_(ctx), what_(what), start_(std::chrono::steady_clock::now()), lastProgress_(start_),
      spinLimit_(spinRounds()) {}

void Waiter::checkAbort() const {
  if (ctx_.abortFlag != nullptr && ctx_.abortFlag->load(std::memory_order_acquire)) {
    std::string why = ctx_.abortReason != nullptr ? *ctx_.abortReason : "communicator aborted";
    throw Error(groveRemoteError, why);
  }
}

void Waiter::progressed() {
  rounds_ = 0;
  lastProgress_ = std::chrono::steady_clock::now();
}

void Waiter::wait() {
  ++rounds_;
  if (rounds_ < spinLimit_) {
    cpuRelax();
    if ((rounds_ & 63) != 0) return;
    checkAbort();
    return;
  }
  checkAbort();
  uint32_t past = rounds_ - spinLimit_;
  if (past < 16) {
    sched_yield();
  } else {
    // Naps grow from 20 us to 1 ms: a peer that is slow to arrive costs little CPU.
    long ns = 20000L * static_cast<long>(past < 66 ? past - 15 : 50);
    timespec ts{0, ns};
    nanosleep(&ts, nullptr);
  }
  if ((past & 15) == 0) {
    auto now = std::chrono::steady_clock::now();
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
