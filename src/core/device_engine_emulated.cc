// The emulated device engine (device_engine.h): device programs run on host
// threads (exec/device/emulate.h) over host memory, before launch() returns.
#include <algorithm>
#include <cstring>
#include <deque>

#include "base/error.h"
#include "core/device_engine.h"
#include "exec/device/emulate.h"

namespace grove::core {
namespace {

// A lowered program's arrays in host memory, laid out for its view.
struct HostProgram {
  std::vector<exec::dev::DevPhase> phases;
  std::vector<exec::dev::DevLane> lanes;
  std::vector<exec::dev::DevStep> steps;
  std::vector<transport::DevRing> sends, recvs;
  exec::dev::DevProgramView view;
};

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
    auto p = std::make_unique<HostProgram>();
    p->phases = program.phases;
    p->lanes = program.lanes;
    p->steps = program.steps;
    p->sends = rings.sends;
    p->recvs = rings.recvs;
    p->view.phases = p->phases.data();
    p->view.lanes = p->lanes.data();
    p->view.steps = p->steps.data();
    p->view.sends = p->sends.data();
    p->view.recvs = p->recvs.data();
    p->view.nPhases = static_cast<uint32_t>(p->phases.size());
    p->view.maxLanes = program.maxLanes;
    exec::dev::DevProgramView view = p->view;
    (oneOff ? oneOff_ : kept_).push_back(std::move(p));
    return view;
  }

  uint8_t* scratch(size_t bytes) override {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }

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
