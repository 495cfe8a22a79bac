// The stream-tape device engines (device_engine.h): a launch becomes a tape
// of stream operations (exec/device/stream_tape.h) instead of a persistent
// kernel -- for ranks of several processes sharing one GPU without MPS,
// whose kernels only take turns on it (a waiting kernel would hold its time
// slice while the kernel it waits for cannot run).
//
// How it works: installed programs stay in host memory (the tape builder
// reads them there); a launch builds the tape, with pointers bound to the
// call's buffers and the rings, and hands it to a runner: on a GPU the lane
// streams of exec/cuda/stream_exec.h (enqueued after the caller's stream,
// which then waits for them; launches of one communicator ordered by an
// event as in the kernel engine), in the emulation exec/device/
// stream_emulate.h's host threads before returning.
//
// Failures: a GPU stream wait sees no abort flag and no deadline, so the
// engine watches instead. poll() (the device path's watcher, every 10 ms)
// fails the launches with kDevTimedOut once the oldest unfinished launch has
// made no progress for GROVE_TIMEOUT since it became the oldest; abort()
// (and that timeout) writes a value past every awaited one into each
// counter the tapes wait on, so the streams drain and drain() returns.
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "core/device_engine.h"
#include "core/host_program.h"
#include "exec/device/stream_emulate.h"
#include "exec/device/stream_tape.h"

#include "grove_build_info.h"

#if GROVE_HAVE_CUDA
#include "exec/cuda/cuda_executor.h"
#include "exec/cuda/stream_exec.h"
#endif

namespace grove::core {
namespace {

// Past every value a tape may wait for (the cyclic compare of a stream wait
// sees it as reached).
constexpr uint64_t kReleaseDistance = 1ull << 62;

class TapeEngineBase : public DeviceEngine {
 public:
  explicit TapeEngineBase(double timeoutSec) {
    ctl_.timeoutNs = timeoutSec > 0 ? static_cast<uint64_t>(timeoutSec * 1e9) : 0;
  }
  exec::dev::DevProgramView install(const exec::dev::DevProgram& program,
                                    const DeviceRingTables& rings, bool oneOff) override {
    // A tape holds bound pointers, not the program: a one-off is not needed
    // after the launch that built its tape.
    if (oneOff) oneOff_.clear();
    auto p = hostProgram(program, rings);
    exec::dev::DevProgramView view = p->view;
    (oneOff ? oneOff_ : kept_).push_back(std::move(p));
    return view;
  }
  const exec::dev::DevControl& control() const override { return ctl_; }

 protected:
  // Claims the launch status (first failure wins).
  void fail(uint32_t status) {
    uint32_t expected = exec::dev::kDevOk;
    std::atomic_ref<uint32_t>(ctl_.status).compare_exchange_strong(expected, status);
  }

  exec::dev::DevControl ctl_;
  exec::dev::TapeBuilder builder_;
  exec::dev::LaunchTape tape_;
  std::vector<std::unique_ptr<HostProgram>> kept_, oneOff_;
};

// Tapes run on host threads over host memory (GROVE_DEVICE_EMULATION).
class EmulatedTapeEngine : public TapeEngineBase {
 public:
  using TapeEngineBase::TapeEngineBase;
  const char* name() const override { return "emulated-stream"; }
  bool asynchronous() const override { return false; }
  uint8_t* scratch(size_t bytes) override {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }
  void launch(const std::vector<exec::dev::DevCall>& calls, void*) override {
    builder_.build(calls.data(), calls.size(), tape_);
    exec::dev::runTapeEmulated(tape_, ctl_);
  }
  void copy(void* dst, const void* src, size_t bytes, void*) override {
    std::memmove(dst, src, bytes);
  }
  void abort() override { std::atomic_ref<uint32_t>(ctl_.abortFlag).store(1); }
  bool drain(double) override { return true; }

 private:
  std::vector<uint8_t> scratch_;
};

#if GROVE_HAVE_CUDA

namespace cu = exec::cuda;

// Tapes enqueued on CUDA streams.
class CudaTapeEngine : public TapeEngineBase {
 public:
  CudaTapeEngine(int device, double timeoutSec)
      : TapeEngineBase(timeoutSec), device_(device), streams_(device) {}
  ~CudaTapeEngine() override {
    if (!drain(5.0)) {
      abort();
      drain(5.0);
    }
  }
  const char* name() const override { return "cuda-stream"; }
  bool asynchronous() const override { return true; }

  uint8_t* scratch(size_t bytes) override {
    if (scratch_.size() >= bytes) return scratch_.get();
    if (!drain(timeoutSec()))
      throw Error(groveRemoteError, "timed out waiting for device launches before growing scratch");
    scratch_ = cu::DeviceBuffer(bytes);
    return scratch_.get();
  }

  void launch(const std::vector<exec::dev::DevCall>& calls, void* stream) override {
    cu::setDevice(device_);
    std::lock_guard<std::mutex> lock(mu_);
    builder_.build(calls.data(), calls.size(), tape_);
    if (pending_.empty()) {
      oldestSince_ = std::chrono::steady_clock::now();
    } else {
      last_.waitOn(stream);
    }
    streams_.enqueue(tape_, stream);
    last_.record(stream);
    pending_.push_back(takeEvent());
    pending_.back()->record(stream);
  }

  void copy(void* dst, const void* src, size_t bytes, void* stream) override {
    cu::setDevice(device_);
    cu::memcpyAsync(dst, src, bytes, stream);
  }

  void abort() override {
    std::atomic_ref<uint32_t>(ctl_.abortFlag).store(1);
    fail(exec::dev::kDevAborted);
    releaseWaits();
  }

  // The watcher's look: retire finished launches, time out a stuck one.
  void poll() override {
    std::lock_guard<std::mutex> lock(mu_);
    retireFinished();
    if (pending_.empty() || ctl_.timeoutNs == 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - oldestSince_ < std::chrono::nanoseconds(ctl_.timeoutNs)) return;
    fail(exec::dev::kDevTimedOut);
    releaseWaitsLocked();
  }

  bool drain(double timeoutSec) override {
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(timeoutSec > 0 ? timeoutSec : 1e9);
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        retireFinished();
        if (pending_.empty()) return true;
      }
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

 private:
  // Drops the finished launches; a new oldest launch starts its clock.
  void retireFinished() {
    bool moved = false;
    while (!pending_.empty() && pending_.front()->done()) {
      spare_.push_back(std::move(pending_.front()));
      pending_.pop_front();
      moved = true;
    }
    if (moved) oldestSince_ = std::chrono::steady_clock::now();
  }
  void releaseWaits() {
    std::lock_guard<std::mutex> lock(mu_);
    releaseWaitsLocked();
  }
  void releaseWaitsLocked() {
    std::vector<std::pair<uint64_t*, uint64_t>> words;
    for (const auto& [word, value] : builder_.awaitedValues())
      words.push_back({word, value + kReleaseDistance});
    streams_.release(words);
  }
  std::unique_ptr<cu::Event> takeEvent() {
    if (spare_.empty()) return std::make_unique<cu::Event>();
    std::unique_ptr<cu::Event> e = std::move(spare_.back());
    spare_.pop_back();
    return e;
  }
  double timeoutSec() const { return ctl_.timeoutNs > 0 ? ctl_.timeoutNs * 1e-9 : 1e9; }

  int device_;
  cu::TapeStreams streams_;
  cu::DeviceBuffer scratch_;
  cu::Event last_;
  std::mutex mu_;
  std::deque<std::unique_ptr<cu::Event>> pending_;  // one per launch not known finished
  std::vector<std::unique_ptr<cu::Event>> spare_;
  std::chrono::steady_clock::time_point oldestSince_;  // when pending_.front() became the oldest
};

#endif

}  // namespace

std::unique_ptr<DeviceEngine> makeStreamEngine(int device, double timeoutSec) {
  if (device < 0) return std::make_unique<EmulatedTapeEngine>(timeoutSec);
#if GROVE_HAVE_CUDA
  return std::make_unique<CudaTapeEngine>(device, timeoutSec);
#else
  throw Error(groveInvalidUsage, "this build of grove has no CUDA support: no stream engine");
#endif
}

}  // namespace grove::core
