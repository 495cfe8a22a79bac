// cuda_path.cc - CudaComms and CudaWork (cuda_path.h says how they work).
#include "cuda_path.h"

#if GROVE_TORCH_CUDA_PATH

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <ATen/core/jit_type.h>

#include <algorithm>
#include <thread>

namespace grove::pytorch {

namespace {

const c10::impl::DeviceGuardImplInterface& cudaImpl() {
  return *c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
}

const char* const kLaneKeys[kNumCudaLanes] = {"grove/cuda/collective", "grove/cuda/upward",
                                              "grove/cuda/downward"};
const char* const kLaneNames[kNumCudaLanes] = {
    "the CUDA communicator", "the CUDA send/recv communicator (lower to higher rank)",
    "the CUDA send/recv communicator (higher to lower rank)"};

}  // namespace

CudaComms::CudaComms(c10::intrusive_ptr<::c10d::Store> store, int rank, int size,
                     std::chrono::milliseconds commTimeout,
                     std::function<void(const std::string&)> abortGroup)
    : store_(std::move(store)),
      rank_(rank),
      size_(size),
      commTimeout_(commTimeout),
      abortGroup_(std::move(abortGroup)) {}

CudaComms::~CudaComms() {
  std::deque<InFlight> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& lane : inFlight_)
      for (auto& f : lane) left.push_back(std::move(f));
    for (auto& lane : inFlight_) lane.clear();
  }
  // The GPU may still read or write the tensors the jobs hold; after an
  // abort the kernels have returned (grove ends them), so this ends too.
  for (auto& f : left) {
    try {
      f.done->synchronize();
    } catch (...) {}
  }
  left.clear();
  for (auto& c : comms_)
    if (c) c->destroy();
}

void CudaComms::bind(const c10::Device& device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (device_) {
    TORCH_CHECK(*device_ == device, "grove: this process group works on ", *device_,
                " (bound by its first CUDA operation); got a tensor on ", device,
                ". Use one CUDA device per process and group, as with NCCL");
    return;
  }
  TORCH_CHECK(abortedBefore_.empty(), "grove: the process group was aborted: ", abortedBefore_);
  TORCH_CHECK(!bindFailed_,
              "grove: joining the group's CUDA communicators failed before; the "
              "group cannot carry CUDA tensors");
  TORCH_CHECK(device.has_index(), "grove: a CUDA tensor without a device index");
  bindFailed_ = true;  // until every lane is joined
  groveConfig_t config = GROVE_CONFIG_INITIALIZER;
  config.deviceKind = groveDeviceCuda;
  config.device = device.index();
  config.timeoutMs = timeoutMsOf(commTimeout_);
  config.commName = "torch-cuda";
  for (int lane = 0; lane < kNumCudaLanes; ++lane) {
    groveComm_t comm = joinGroup(store_, kLaneKeys[lane], rank_, size_, config, kLaneNames[lane]);
    comms_[lane] = std::make_shared<SharedComm>(comm);
    std::weak_ptr<CudaComms> self = weak_from_this();
    comms_[lane]->setAbortHook([self](const std::string& why) {
      if (auto s = self.lock()) {
        s->abort(why);
        if (s->abortGroup_) s->abortGroup_(why);
      }
    });
    streams_[lane] = cudaImpl().getStreamFromGlobalPool(device, /*isHighPriority=*/false);
  }
  device_ = device;
  openPointToPoint();
  bindFailed_ = false;
}

// A group per point-to-point lane in which every rank sends to and receives
// from every peer that lane links it with, big enough to open all the
// channels grove cuts a send/recv into (one per 512 KiB, at most 16, at most
// 64 / (2 (n - 1)) per op: architecture.md, P2PSplit), so no later send or
// recv opens a ring and waits for its peer there.
void CudaComms::openPointToPoint() {
  if (size_ < 2) return;
  const int64_t perPeer =
      std::max<int64_t>(512 << 10, std::min<int64_t>(8 << 20, (int64_t{64} << 20) / (size_ - 1)) /
                                       (512 << 10) * (512 << 10));
  at::Tensor out =
      at::zeros({(size_ - 1) * perPeer}, at::TensorOptions().dtype(at::kByte).device(*device_));
  at::Tensor in = at::empty_like(out);
  for (int lane = kUpwardLane; lane <= kDownwardLane; ++lane) {
    c10::StreamGuard onLane(*streams_[lane]);
    Exec x{comms_[lane].get(), streams_[lane]->native_handle()};
    x.check(groveGroupStart(), "opening the point-to-point rings");
    groveResult_t first = groveSuccess;
    int k = 0;
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      // upward lane: sends to higher ranks, receives from lower ones
      const bool sends = (lane == kUpwardLane) == (peer > rank_);
      auto* slot = static_cast<uint8_t*>(sends ? out.data_ptr() : in.data_ptr()) + k++ * perPeer;
      groveResult_t r = sends ? groveSend(slot, perPeer, groveUint8, peer, x.comm(), x.stream)
                              : groveRecv(slot, perPeer, groveUint8, peer, x.comm(), x.stream);
      if (first == groveSuccess) first = r;
    }
    groveResult_t end = groveGroupEnd();
    x.check(first, "opening the point-to-point rings");
    x.check(end, "opening the point-to-point rings");
    streams_[lane]->synchronize();
  }
}

std::optional<c10::Device> CudaComms::device() const {
  std::lock_guard<std::mutex> lock(mu_);
  return device_;
}

void CudaComms::abort(const std::string& why) {
  std::shared_ptr<SharedComm> comms[kNumCudaLanes];
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!device_ && abortedBefore_.empty()) abortedBefore_ = why.empty() ? "aborted" : why;
    for (int lane = 0; lane < kNumCudaLanes; ++lane) comms[lane] = comms_[lane];
  }
  for (auto& c : comms)
    if (c) c->abort(why);
}

void CudaComms::checkHealthy() {
  std::shared_ptr<SharedComm> comms[kNumCudaLanes];
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int lane = 0; lane < kNumCudaLanes; ++lane) comms[lane] = comms_[lane];
  }
  for (int lane = 0; lane < kNumCudaLanes; ++lane) {
    const auto& c = comms[lane];
    if (!c) continue;
    if (c->aborted())
      TORCH_CHECK(false, "grove: the process group was aborted: ", c->abortReason());
    groveResult_t state = groveSuccess;
    groveResult_t r = groveCommGetAsyncError(c->get(), &state);
    if (r == groveSuccess && (state == groveSuccess || state == groveInProgress)) continue;
    std::string why = std::string(kLaneNames[lane]) +
                      " failed: " + groveGetErrorString(r == groveSuccess ? state : r);
    std::string detail = groveGetLastError(c->get());
    if (!detail.empty()) why += " (" + detail + ")";
    c->abort(why);
    TORCH_CHECK(false, "grove: ", why,
                "; the process group was aborted (every rank's pending and "
                "later operations on it fail)");
  }
}

void CudaComms::reap() {
  std::vector<InFlight> done;  // released after the lock: a tensor's end may take the GIL
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& lane : inFlight_) {  // one stream per lane: its events complete in order
      while (!lane.empty() && lane.front().done->query()) {
        done.push_back(std::move(lane.front()));
        lane.pop_front();
      }
    }
  }
}

c10::intrusive_ptr<::c10d::Work> CudaComms::run(int rank, Op op, Job job) {
  checkHealthy();
  reap();
  const auto& impl = cudaImpl();
  std::shared_ptr<SharedComm> comm;
  std::optional<c10::Stream> laneStream;
  std::optional<c10::Device> bound;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(device_, "grove: internal error: CUDA operation before bind()");
    bound = device_;
    comm = comms_[op.lane];
    laneStream = streams_[op.lane];
  }
  const c10::Device device = *bound;
  const c10::Stream stream = *laneStream;
  std::lock_guard<std::mutex> issuing(issue_[op.lane]);
  // After the work already queued on the caller's stream.
  c10::Event ready(c10::DeviceType::CUDA);
  ready.record(impl.getStream(device));
  ready.block(stream);
  auto done = std::make_shared<c10::Event>(c10::DeviceType::CUDA);
  auto future = c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()), std::vector<c10::Device>{device});
  std::exception_ptr failed;
  {
    c10::StreamGuard onGroveStream(stream);
    try {
      job(Exec{comm.get(), stream.native_handle()});
    } catch (...) {
      failed = std::current_exception();
    }
    done->record(stream);
    if (!failed) future->markCompleted(c10::IValue(op.outputs));
  }
  {
    // Kept even when the job failed half way: what it queued may still
    // read or write its tensors.
    std::lock_guard<std::mutex> lock(mu_);
    inFlight_[op.lane].push_back(InFlight{done, std::move(job)});
  }
  if (failed) {
    // The other ranks may wait for the rest of this operation: end it.
    std::string why = std::string(op.name) + " failed on rank " + std::to_string(rank);
    try {
      std::rethrow_exception(failed);
    } catch (const std::exception& e) {
      why += ": " + std::string(e.what());
    } catch (...) {}
    comm->abort(why);
    std::rethrow_exception(failed);
  }
  return c10::make_intrusive<CudaWork>(rank, op, device, done, shared_from_this(), future);
}

CudaWork::CudaWork(int rank, const CudaComms::Op& op, c10::Device device,
                   std::shared_ptr<c10::Event> done, std::shared_ptr<CudaComms> comms,
                   c10::intrusive_ptr<c10::ivalue::Future> future)
    : ::c10d::Work(
          rank, op.type, op.profilingTitle,
          std::optional<std::vector<at::Tensor>>(op.inputs.empty() ? op.outputs : op.inputs)),
      name_(op.name),
      outputs_(op.outputs),
      timeout_(op.timeout),
      blocksHost_(op.blocksHost),
      device_(device),
      done_(std::move(done)),
      comms_(std::move(comms)),
      future_(std::move(future)) {}

bool CudaWork::isCompleted() {
  try {
    comms_->checkHealthy();
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!exception_) exception_ = std::current_exception();
    return true;
  }
  const bool done = done_->query();
  if (done) comms_->reap();
  return done;
}

void CudaWork::synchronize() {
  comms_->checkHealthy();
  done_->block(cudaImpl().getStream(device_));
}

void CudaWork::blockCurrentStream() { synchronize(); }

bool CudaWork::wait(std::chrono::milliseconds timeout) {
  comms_->checkHealthy();
  if (blocksHost_) {
    const auto limit = timeout == kNoTimeout ? timeout_ : timeout;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    auto pause = std::chrono::microseconds(20);
    while (!done_->query()) {
      comms_->checkHealthy();
      if (std::chrono::steady_clock::now() >= deadline) {
        std::string why = std::string(name_) + ": Timed out after " +
                          std::to_string(limit.count()) + " ms (the operation's timeout)";
        comms_->abort(why);
        TORCH_CHECK(false, "grove: ", why,
                    "; the communicator was aborted (every rank's pending "
                    "and later operations on this process group fail)");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(2000));
    }
    comms_->checkHealthy();
    comms_->reap();
  }
  done_->block(cudaImpl().getStream(device_));
  return true;
}

void CudaWork::abort() { comms_->abort(std::string(name_) + ": Work.abort() was called"); }

}  // namespace grove::pytorch

#endif  // GROVE_TORCH_CUDA_PATH
