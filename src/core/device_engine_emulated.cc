// The emulated device engine (device_engine.h): device programs run on host
// threads (exec/device/emulate.h) over host memory, before launch() returns.
#include <algorithm>
#include <cstring>
#include <deque>

#include "base/error.h"
#include "core/device_engine.h"
#include "core/host_program.h"
#include "exec/device/emulate.h"

namespace grove::core {
namespace {

class EmulatedEngine : public DeviceEngine {
 public:
  explicit EmulatedEngine(double timeoutSec) {
    ctl_.timeoutNs = timeoutSec > 0 ? static_cast<uint64_t>(timeoutSec * 1e9) : 0;
  }
  const char* name() const override { return "emulated"; }
  bool asynchronous() const override { return false; }

  exec::dev::DevProgramView install(const exec::dev::DevProgram& program,
                                    const DeviceRingTables& rings, bool oneOff) override {
    if (oneOff)
      oneOff_.clear();  // the last one-off's launch has completed (launches are synchronous)
    auto p = hostProgram(program, rings);
    exec::dev::DevProgramView view = p->view;
    (oneOff ? oneOff_ : kept_).push_back(std::move(p));
    return view;
  }

  uint8_t* scratch(size_t bytes) override {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }
  size_t scratchBytes() const override { return scratch_.size(); }
  void releaseScratch() override { std::vector<uint8_t>().swap(scratch_); }

  void launch(const std::vector<exec::dev::DevCall>& calls, void* /*stream*/) override {
    exec::dev::runEmulated(calls.data(), calls.size(), ctl_);
  }
  void copy(void* dst, const void* src, size_t bytes, void* /*stream*/) override {
    std::memmove(dst, src, bytes);
  }
  const exec::dev::DevControl& control() const override { return ctl_; }
  void abort() override { std::atomic_ref<uint32_t>(ctl_.abortFlag).store(1); }
  bool drain(double) override { return true; }

 private:
  exec::dev::DevControl ctl_;
  std::vector<std::unique_ptr<HostProgram>> kept_, oneOff_;
  std::vector<uint8_t> scratch_;
};

}  // namespace

std::unique_ptr<DeviceEngine> makeEmulatedEngine(double timeoutSec) {
  return std::make_unique<EmulatedEngine>(timeoutSec);
}

}  // namespace grove::core
