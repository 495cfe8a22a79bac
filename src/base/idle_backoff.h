// IdleBackoff: how a polling thread (a proxy or progress thread that pumps
// links) waits when a pass moved nothing, without spinning a core: 64
// pauses, then 200 yields, then naps that grow by 20 us per idle pass from
// 20 us up to a cap. Any progress starts it over.
#pragma once

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "base/wait.h"

namespace grove {

class IdleBackoff {
 public:
  /// Naps grow up to `maxNapUs` (20 us steps; at least 20 us).
  explicit IdleBackoff(uint32_t maxNapUs) : maxSteps_(maxNapUs > 20 ? (maxNapUs - 20) / 20 : 0) {}
  /// Something moved: the next idle pass spins again.
  void progressed() { idle_ = 0; }
  /// Nothing moved on this pass: pause, yield or nap.
  void idle() {
    if (idle_ < kPauses) {
      ++idle_;
      cpuRelax();
    } else if (idle_ < kPauses + kYields) {
      ++idle_;
      sched_yield();
    } else {
      const uint32_t extra = std::min<uint32_t>(idle_++ - (kPauses + kYields), maxSteps_);
      std::this_thread::sleep_for(std::chrono::microseconds(20 + extra * 20));
    }
  }

 private:
  static constexpr uint32_t kPauses = 64;
  static constexpr uint32_t kYields = 200;
  uint32_t maxSteps_;
  uint32_t idle_ = 0;
};

}  // namespace grove
