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
// run for GROVE_TIMEOUT since it started and became the oldest (work queued
// before it on the caller's stream does not count), or an enqueue has been
// stuck as long; abort() (and that timeout) writes a value past every awaited
// one into each counter the tapes wait on, again every 100 ms while launches
// remain (a live peer's post may lower one), so the streams drain and
// drain() returns. The released streams run their remaining operations on
// whatever the rings hold: after a failure the call's results are undefined,
// as after an abort in NCCL, and the communicator stays failed.
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/wait.h"
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
  size_t scratchBytes() const override { return scratch_.size(); }
  void releaseScratch() override { std::vector<uint8_t>().swap(scratch_); }
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
//
// Locks: mu_ guards the builder, the tape, the pending launches and the
// enqueue. An enqueue can block (a stream's queue is full behind a wait that
// does not pass), so abort() and the watcher never take mu_: they release
// waits from a snapshot of the awaited counters (releaseMu_) that launch()
// publishes before it enqueues anything, and poll() only try-locks.
class CudaTapeEngine : public TapeEngineBase {
 public:
  CudaTapeEngine(int device, double timeoutSec)
      : TapeEngineBase(timeoutSec), device_(device), streams_(device) {
    // The host cannot tell where a stream stopped (written once, here).
    ctl_.failedCall = ctl_.failedPhase = ctl_.failedLane = ctl_.failedStep =
        exec::dev::kDevUnknownPosition;
  }
  ~CudaTapeEngine() override {
    if (!drain(5.0)) {
      abort();
      drain(5.0);
    }
  }
  const char* name() const override { return "cuda-stream"; }
  bool asynchronous() const override { return true; }

  uint8_t* scratch(size_t bytes) override {
    return cu::growScratch(scratch_, bytes, [this] { return drain(timeoutSec()); });
  }
  size_t scratchBytes() const override { return scratch_.size(); }
  void releaseScratch() override { scratch_ = cu::DeviceBuffer(); }

  void launch(const std::vector<exec::dev::DevCall>& calls, void* stream) override {
    cu::setDevice(device_);
    std::lock_guard<std::mutex> lock(mu_);
    builder_.build(calls.data(), calls.size(), tape_);  // throws before any counter moves
    publishAwaited();
    if (failed()) releaseWaits();  // an abort since the device path's check: these waits too
    Pending p{events_.take(), events_.take(), 0};
    enqueueSince_.store(monotonicNs());
    try {
      if (!pending_.empty()) last_.waitOn(stream);
      p.start->record(stream);
      streams_.enqueue(tape_, stream);
      last_.record(stream);
      p.done->record(stream);
    } catch (...) {
      // The counters moved but not every operation went out: this rank and
      // its peers no longer agree on the rings. Fail, let the waits go, and
      // keep what did go out tracked, so nothing it uses is freed under it.
      enqueueSince_.store(0);
      fail(exec::dev::kDevBadStep);
      releaseWaits();
      streams_.joinLanes(stream);
      try {
        p.done->record(stream);
      } catch (...) {  // a sticky error: drain() will say it never finishes
      }
      pending_.push_back(std::move(p));
      pendingCount_.store(pending_.size());
      throw;
    }
    enqueueSince_.store(0);
    pending_.push_back(std::move(p));
    pendingCount_.store(pending_.size());
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

  // The watcher's look (every 10 ms): retire finished launches; time out a
  // launch that started and has not finished for GROVE_TIMEOUT since it
  // became the oldest, or an enqueue stuck as long; after a failure, release
  // the waits again now and then (a live peer's post may have lowered a
  // counter below the release).
  void poll() override {
    try {
      cu::setDevice(device_);
      const uint64_t now = monotonicNs();
      if (failed() && busy() && now - lastRelease_.load() > kReleaseEveryNs) releaseWaits();
      std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
      if (!lock.owns_lock()) {
        const uint64_t since = enqueueSince_.load();
        if (since != 0 && ctl_.timeoutNs > 0 && now - since > ctl_.timeoutNs && !failed())
          timeOut();
        return;
      }
      retireFinished();
      if (pending_.empty() || ctl_.timeoutNs == 0) return;
      Pending& oldest = pending_.front();
      if (oldest.startedAt == 0) {
        if (!oldest.start->done()) return;  // work queued before it still runs
        oldest.startedAt = now;
      }
      if (now - oldest.startedAt > ctl_.timeoutNs && !failed()) timeOut();
    } catch (const std::exception& e) {
      // A sticky CUDA error: nothing on this device completes any more.
      if (!failed()) GROVE_WARN(log::kColl, "stream tapes: %s", e.what());
      fail(exec::dev::kDevAborted);
    }
  }

  bool drain(double timeoutSec) override {
    const uint64_t limit = static_cast<uint64_t>((timeoutSec > 0 ? timeoutSec : 1e9) * 1e9);
    const uint64_t start = monotonicNs();
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
        if (lock.owns_lock()) {
          try {
            retireFinished();
          } catch (const std::exception&) {
            return false;  // a sticky CUDA error: it will never finish
          }
          if (pending_.empty() && streams_.releasesDone()) return true;
        }
      }
      const uint64_t now = monotonicNs();
      if (failed() && busy() && now - lastRelease_.load() > kReleaseEveryNs) releaseWaits();
      if (now - start > limit) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

 private:
  // How often a failed engine writes its releases again.
  static constexpr uint64_t kReleaseEveryNs = 100'000'000;

  struct Pending {
    std::unique_ptr<cu::Event> start;  // recorded before the launch's first operation
    std::unique_ptr<cu::Event> done;   // recorded after its last
    uint64_t startedAt;                // when the watcher saw it started as the oldest; 0: not yet
  };

  // Launches out, or one being enqueued.
  bool busy() const { return pendingCount_.load() > 0 || enqueueSince_.load() != 0; }
  bool failed() const {
    return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(ctl_.status)).load() !=
           exec::dev::kDevOk;
  }
  void timeOut() {
    fail(exec::dev::kDevTimedOut);
    releaseWaits();
  }
  // Drops the finished launches; the next one's clock restarts.
  void retireFinished() {
    while (!pending_.empty() && pending_.front().done->done()) {
      events_.give(std::move(pending_.front().start));
      events_.give(std::move(pending_.front().done));
      pending_.pop_front();
      if (!pending_.empty()) pending_.front().startedAt = 0;
    }
    pendingCount_.store(pending_.size());
  }
  void publishAwaited() {
    std::vector<std::pair<uint64_t*, uint64_t>> words = builder_.awaitedValues();
    for (auto& w : words) w.second += kReleaseDistance;
    std::lock_guard<std::mutex> lock(releaseMu_);
    release_ = std::move(words);
  }
  // Writes the releases (at most one batch queued at a time; a busy
  // release stream leaves it to the next 100 ms look).
  void releaseWaits() {
    std::lock_guard<std::mutex> lock(releaseMu_);
    lastRelease_.store(monotonicNs());
    (void)streams_.release(release_);
  }
  double timeoutSec() const { return ctl_.timeoutNs > 0 ? ctl_.timeoutNs * 1e-9 : 1e9; }

  int device_;
  cu::TapeStreams streams_;
  cu::DeviceBuffer scratch_;
  cu::Event last_;
  std::mutex mu_;
  std::deque<Pending> pending_;  // launches not known finished, oldest first
  cu::EventPool events_;
  std::atomic<uint64_t> enqueueSince_{0};  // when a running enqueue began; 0: none
  std::atomic<size_t> pendingCount_{0};    // pending_.size(), for the lock-free looks
  std::mutex releaseMu_;
  std::vector<std::pair<uint64_t*, uint64_t>> release_;  // (counter, release value)
  std::atomic<uint64_t> lastRelease_{0};
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
