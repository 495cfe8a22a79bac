#include "core/device_path.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "base/log.h"

namespace grove::core {
namespace {

// How often the watcher looks at the control block and the abort signal: a
// device failure reaches the communicator, and an abort the device, within this.
constexpr auto kWatchPeriod = std::chrono::milliseconds(10);

uint32_t loadWord(const uint32_t& w) {
  return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(w)).load(std::memory_order_acquire);
}

const char* statusText(uint32_t s) {
  switch (s) {
    case exec::dev::kDevOk: return "ok";
    case exec::dev::kDevAborted: return "aborted";
    case exec::dev::kDevTimedOut: return "timed out waiting for a peer";
    case exec::dev::kDevPeerClosed: return "a peer closed its connection";
    case exec::dev::kDevBadStep: return "hit a step it cannot run";
  }
  return "failed";
}

}  // namespace

DevicePath::DevicePath(int nranks, std::unique_ptr<DeviceEngine> engine,
                       std::unique_ptr<DeviceConnections> links, AbortSignal& abort,
                       DeviceFailureFn onFailure)
    : nranks_(nranks),
      engine_(std::move(engine)),
      links_(std::move(links)),
      abort_(abort),
      onFailure_(std::move(onFailure)) {
  watcher_ = std::thread([this] { watch(); });
}

DevicePath::~DevicePath() {
  if (stats_.launches > 0) {
    const double n = static_cast<double>(stats_.launches);
    GROVE_INFO(log::kInit,
               "device path: %llu launches (%llu engine launches, %llu copies, %llu no-ops) on %s; "
               "host time per launch: select %.2f us, prepare %.2f us, enqueue %.2f us; "
               "%llu first uses of a program took %.1f us each",
               static_cast<unsigned long long>(stats_.launches),
               static_cast<unsigned long long>(stats_.kernelLaunches),
               static_cast<unsigned long long>(stats_.copies),
               static_cast<unsigned long long>(stats_.noOps), engine_->name(),
               stats_.selectNs / n * 1e-3, stats_.prepareNs / n * 1e-3, stats_.enqueueNs / n * 1e-3,
               static_cast<unsigned long long>(stats_.installs),
               stats_.installs == 0 ? 0.0 : stats_.installNs * 1e-3 / stats_.installs);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  bool drained = engine_->drain(5.0);
  if (!drained) {
    engine_->abort();
    drained = engine_->drain(5.0);
  }
  // A launch that another thread is still inside (an abort from a second
  // thread while a stream tape's enqueue blocks) must leave first; draining
  // keeps releasing what it waits for.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (inLaunch_.load() > 0 && std::chrono::steady_clock::now() < end)
    drained = engine_->drain(0.05);
  if (!drained || inLaunch_.load() > 0) {
    // Operations still on the device point at the rings and the engine's
    // memory: freeing them could make the device write freed memory. Leak
    // them instead (a failure path; the process is usually about to end).
    GROVE_WARN(log::kColl,
               "device launches did not finish 10 s after an abort; their rings and buffers "
               "are left allocated");
    (void)links_.release();
    (void)engine_.release();
    return;
  }
  // Rings close before the engine's programs go: a launch still waiting sees them closed.
  links_.reset();
  engine_.reset();
}

std::string DevicePath::summary() const {
  return std::string(engine_->name()) + " over " + links_->summary();
}

// A peer's ring closing (or a wait timing out) is usually the echo of a
// failure elsewhere -- a rank died, another rank gave up -- which the
// bootstrap reports moments later; wait briefly for it, so the error names
// the cause rather than the symptom.
void DevicePath::awaitCause(uint32_t status) const {
  if (status != exec::dev::kDevPeerClosed && status != exec::dev::kDevTimedOut) return;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (!abort_.raised() && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

std::string DevicePath::describeFailure(const exec::dev::DevControl& c) const {
  const uint32_t s = loadWord(c.status);
  awaitCause(s);
  const std::string where = c.failedCall == exec::dev::kDevUnknownPosition
                                ? std::string()
                                : "call " + std::to_string(c.failedCall) + ", phase " +
                                      std::to_string(c.failedPhase) + ", lane " +
                                      std::to_string(c.failedLane) + ", step " +
                                      std::to_string(c.failedStep) + ", ";
  std::string text =
      std::string("device launch ") + statusText(s) + " (" + where + engine_->name() + " engine)";
  if (abort_.raised()) text += ": " + abort_.reason();
  const std::string transport = links_->transportError();
  if (!transport.empty()) text += "; " + transport;
  return text;
}

// Throws the device failure recorded so far, if any.
void DevicePath::checkStatus() {
  const exec::dev::DevControl& c = engine_->control();
  const uint32_t s = loadWord(c.status);
  if (s == exec::dev::kDevOk) return;
  const groveResult_t code = s == exec::dev::kDevBadStep ? groveInternalError : groveRemoteError;
  throw Error(code, describeFailure(c));
}

// Polls the control block and the abort signal until stopped.
void DevicePath::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  bool abortSent = false;
  while (!stop_) {
    cv_.wait_for(lock, kWatchPeriod);
    if (!abortSent && abort_.raised()) {
      engine_->abort();
      abortSent = true;
    }
    engine_->poll();
    const exec::dev::DevControl& c = engine_->control();
    const uint32_t s = loadWord(c.status);
    if (s != exec::dev::kDevOk && !reported_.exchange(true)) {
      const std::string text = describeFailure(c);
      const groveResult_t code =
          s == exec::dev::kDevBadStep ? groveInternalError : groveRemoteError;
      lock.unlock();
      if (onFailure_) onFailure_(code, text);
      lock.lock();
    }
  }
}

void DevicePath::abort() { engine_->abort(); }

const DevicePath::Installed& DevicePath::prepare(const DeviceOp& op) {
  if (!op.oneOff) {
    auto it = installed_.find(op.program.get());
    if (it != installed_.end()) return it->second;
  }
  const uint64_t t0 = monotonicNs();
  exec::dev::DevProgram lowered = exec::dev::lowerProgram(*op.program, {}, engine_->lowerOptions());
  DeviceRingTables rings = links_->ensure(lowered);
  Installed inst;
  inst.program = op.program;
  inst.view = engine_->install(lowered, rings, op.oneOff);
  inst.nSlots = lowered.nSlots;
  ++stats_.installs;
  stats_.installNs += monotonicNs() - t0;
  if (op.oneOff) {
    oneOff_ = std::move(inst);
    return oneOff_;
  }
  return installed_.emplace(op.program.get(), std::move(inst)).first->second;
}

// The one-rank path (file comment of device_path.h): true if every op of the
// launch is local copies from its input or output to its output, which it
// then enqueues; false (nothing done) otherwise.
bool DevicePath::runAsCopies(const std::vector<DeviceOp>& ops, void* stream) {
  if (nranks_ != 1) return false;
  for (const DeviceOp& op : ops)
    for (const plan::Phase& phase : op.program->phases)
      for (const plan::Lane& lane : phase.lanes)
        for (const plan::Step& s : lane.steps)
          if (s.kind != plan::StepKind::kCopy || s.dst.buf != plan::Buf::kOutput ||
              (s.src.buf != plan::Buf::kInput && s.src.buf != plan::Buf::kOutput))
            return false;
  for (const DeviceOp& op : ops) {
    bool copied = false;
    for (const plan::Phase& phase : op.program->phases)
      for (const plan::Lane& lane : phase.lanes)
        for (const plan::Step& s : lane.steps) {
          const uint8_t* base = static_cast<const uint8_t*>(
              s.src.buf == plan::Buf::kInput ? op.input : static_cast<const void*>(op.output));
          const uint8_t* src = base + s.src.offset;
          uint8_t* dst = static_cast<uint8_t*>(op.output) + s.dst.offset;
          if (s.bytes == 0 || src == dst) continue;
          engine_->copy(dst, src, s.bytes, stream);
          ++stats_.copies;
          copied = true;
        }
    if (!copied) ++stats_.noOps;
  }
  return true;
}

void DevicePath::launch(const std::vector<DeviceOp>& ops, void* stream) {
  struct InLaunch {
    std::atomic<int>& n;
    explicit InLaunch(std::atomic<int>& c) : n(c) { ++n; }
    ~InLaunch() { --n; }
  } inLaunch(inLaunch_);
  checkStatus();
  if (ops.empty()) return;
  ++stats_.launches;
  const uint64_t t0 = monotonicNs();
  if (runAsCopies(ops, stream)) {
    stats_.enqueueNs += monotonicNs() - t0;
    return;
  }
  const uint64_t installedBefore = stats_.installNs;
  uint64_t scratchBytes = 0;
  for (const DeviceOp& op : ops) scratchBytes = std::max(scratchBytes, op.program->scratchBytes);
  // Lower, open and install first: opening rings is collective and may wait.
  std::vector<const Installed*> prepared;
  prepared.reserve(ops.size());
  for (const DeviceOp& op : ops) prepared.push_back(&prepare(op));
  uint8_t* scratch = engine_->scratch(scratchBytes);
  calls_.clear();
  for (size_t i = 0; i < ops.size(); ++i) {
    const DeviceOp& op = ops[i];
    if (op.extra.size() + exec::dev::kSlotExtra0 > exec::dev::kMaxSlots)
      throwInvalidUsage("a device send/recv group has " + std::to_string(op.extra.size()) +
                        " buffers; at most " +
                        std::to_string(exec::dev::kMaxSlots - exec::dev::kSlotExtra0) +
                        " per communicator and group");
    exec::dev::DevCall call;
    call.program = prepared[i]->view;
    call.reduce = {static_cast<int32_t>(op.dtype), static_cast<int32_t>(op.op), nranks_};
    call.bufs[exec::dev::kSlotInput] = static_cast<uint8_t*>(const_cast<void*>(op.input));
    call.bufs[exec::dev::kSlotOutput] = static_cast<uint8_t*>(op.output);
    call.bufs[exec::dev::kSlotScratch] = scratch;
    for (size_t k = 0; k < op.extra.size(); ++k)
      call.bufs[exec::dev::kSlotExtra0 + k] = static_cast<uint8_t*>(op.extra[k]);
    calls_.push_back(call);
  }
  const uint64_t t1 = monotonicNs();
  stats_.prepareNs += t1 - t0 - (stats_.installNs - installedBefore);
  engine_->launch(calls_, stream);
  stats_.enqueueNs += monotonicNs() - t1;
  ++stats_.kernelLaunches;
  if (!engine_->asynchronous()) checkStatus();
}

}  // namespace grove::core
