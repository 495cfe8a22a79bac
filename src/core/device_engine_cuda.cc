// The CUDA device engine (device_engine.h): launches device programs with
// the CUDA executor (exec/cuda/cuda_executor.h) on the caller's stream.
//
// How it works: installed programs are uploaded once to device memory. A
// launch first makes its stream wait for the communicator's previous launch
// (an event), so launches of one communicator never overlap even when the
// caller alternates streams -- two overlapping launches would interleave
// bytes on shared rings -- and records the event after it. One-off uploads
// (send/recv groups) are kept until the event of the launch that used them
// has completed. Scratch grows by waiting for every launch in flight, then
// reallocating.
#include <chrono>
#include <deque>
#include <thread>

#include "algorithms/select/selector.h"
#include "base/error.h"
#include "core/device_engine.h"

#include "grove_build_info.h"

#if GROVE_HAVE_CUDA
#include "exec/cuda/cuda_executor.h"
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace grove::core {

#if GROVE_HAVE_CUDA
namespace {

namespace cu = exec::cuda;

class CudaEngine : public DeviceEngine {
 public:
  CudaEngine(int device, double timeoutSec) : device_(device) {
    timeoutNs_ = timeoutSec > 0 ? static_cast<uint64_t>(timeoutSec * 1e9) : 0;
    ctl_.reset(timeoutNs_);
  }
  ~CudaEngine() override {
    if (!drain(5.0)) {  // a launch still waits: stop it before its memory goes
      ctl_.abort();
      drain(5.0);
    }
  }
  const char* name() const override { return "cuda"; }
  bool asynchronous() const override { return true; }
  // One thread block copies a few tens of GB/s: a long local copy (the
  // root's own output, an all-gather's own block) gets blocks as the
  // selector gives ring channels.
  exec::dev::LowerOptions lowerOptions() const override {
    return {plan::kGpuBytesPerChannel, plan::kGpuMaxChannels};
  }

  exec::dev::DevProgramView install(const exec::dev::DevProgram& program,
                                    const DeviceRingTables& rings, bool oneOff) override {
    auto up = std::make_unique<cu::ProgramUpload>(program, rings.sends, rings.recvs);
    exec::dev::DevProgramView view = up->view();
    if (oneOff)
      pendingOneOff_.push_back(std::move(up));
    else
      kept_.push_back(std::move(up));
    return view;
  }

  uint8_t* scratch(size_t bytes) override {
    return cu::growScratch(scratch_, bytes, [this] { return drain(timeoutSec()); });
  }
  size_t scratchBytes() const override { return scratch_.size(); }
  void releaseScratch() override { scratch_ = cu::DeviceBuffer(); }

  void launch(const std::vector<exec::dev::DevCall>& calls, void* stream) override {
    cu::setDevice(device_);  // the caller's thread may have another device current
    releaseFinished();
    if (launched_) last_.waitOn(stream);
    cu::LaunchOptions opt;
    opt.barrier = ctl_.barrier();
    cu::launchCalls(calls.data(), calls.size(), ctl_.device(), stream, opt);
    last_.record(stream);
    launched_ = true;
    // The one-offs just used are freed once this launch is known complete.
    while (!pendingOneOff_.empty()) {
      retired_.push_back({std::move(pendingOneOff_.front()), events_.take()});
      retired_.back().done->record(stream);
      pendingOneOff_.pop_front();
    }
  }

  void copy(void* dst, const void* src, size_t bytes, void* stream) override {
    cu::setDevice(device_);
    cu::memcpyAsync(dst, src, bytes, stream);
  }

  const exec::dev::DevControl& control() const override { return *ctl_.host(); }
  void abort() override { ctl_.abort(); }

  bool drain(double timeoutSec) override {
    if (!launched_) return true;
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(timeoutSec > 0 ? timeoutSec : 1e9);
    while (!last_.done()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    releaseFinished();
    return true;
  }

 private:
  struct Retired {
    std::unique_ptr<cu::ProgramUpload> upload;
    std::unique_ptr<cu::Event> done;
  };
  void releaseFinished() {
    while (!retired_.empty() && retired_.front().done->done()) {
      events_.give(std::move(retired_.front().done));
      retired_.pop_front();
    }
  }
  double timeoutSec() const { return timeoutNs_ > 0 ? timeoutNs_ * 1e-9 : 1e9; }

  int device_;
  uint64_t timeoutNs_ = 0;
  cu::MappedControl ctl_;
  cu::Event last_;
  bool launched_ = false;
  cu::DeviceBuffer scratch_;
  std::vector<std::unique_ptr<cu::ProgramUpload>> kept_;
  std::deque<std::unique_ptr<cu::ProgramUpload>> pendingOneOff_;
  std::deque<Retired> retired_;
  cu::EventPool events_;  // reused, never destroyed while the engine runs
};

}  // namespace

std::unique_ptr<DeviceEngine> makeCudaEngine(int device, double timeoutSec) {
  return std::make_unique<CudaEngine>(device, timeoutSec);
}

bool cudaEngineBuilt() { return true; }

int resolveCudaDevice(int requested) {
  const int count = kernels::cuda::deviceCount();
  if (count == 0)
    throw Error(groveInvalidUsage,
                "a CUDA communicator needs a CUDA device and none is visible (set "
                "GROVE_DEVICE_EMULATION=1 to emulate one on host memory)");
  const int device = requested >= 0 ? requested : cu::currentDevice();
  if (device >= count)
    throwInvalidArgument("CUDA device " + std::to_string(device) + " does not exist (" +
                         std::to_string(count) + " visible)");
  cu::setDevice(device);
  return device;
}

#else

namespace {
[[noreturn]] void throwNoCudaBuild() {
  throw Error(groveInvalidUsage,
              "this build of grove has no CUDA support (configure with GROVE_WITH_CUDA=ON and "
              "the CUDA toolkit); set GROVE_DEVICE_EMULATION=1 to emulate a device on host memory");
}
}  // namespace

std::unique_ptr<DeviceEngine> makeCudaEngine(int, double) { throwNoCudaBuild(); }

bool cudaEngineBuilt() { return false; }

int resolveCudaDevice(int) { throwNoCudaBuild(); }

#endif

}  // namespace grove::core
