// The host-side RAII pieces of the CUDA executor (cuda_executor.h): program
// uploads, mapped control blocks, device buffers, streams, events and
// pointer queries. The kernels and launchCalls live in executor_kernel.cu.
#include "exec/cuda/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <utility>

#include "base/error.h"
#include "exec/cuda/cuda_check.h"

namespace grove::exec::cuda {

namespace detail {

void check(int err, const char* what) {
  if (err == cudaSuccess) return;
  const auto e = static_cast<cudaError_t>(err);
  (void)cudaGetLastError();  // leave a non-sticky error behind for nobody
  throw Error(groveUnhandledCudaError,
              std::string("exec::cuda: ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace detail

namespace {

/// Rounds n up to a multiple of 16.
size_t align16(size_t n) { return (n + 15) & ~size_t{15}; }

/// A device's stream and memory pool for the executor's own memory.
struct Housekeeping {
  cudaStream_t stream = nullptr;
  cudaMemPool_t pool = nullptr;
};
std::mutex gHousekeepingMu;
Housekeeping gHousekeeping[kMaxDevices];

/// The process's non-blocking stream and private memory pool for the
/// executor's allocations on `device` (made on first use, kept for the
/// process's life). The pool keeps freed memory for reuse instead of
/// handing it back to the driver, which could wait for the whole device.
const Housekeeping& housekeeping(int device) {
  if (device < 0 || device >= kMaxDevices)
    throwInvalidArgument("exec::cuda: device " + std::to_string(device) + " out of range");
  std::lock_guard<std::mutex> lock(gHousekeepingMu);
  Housekeeping& h = gHousekeeping[device];
  if (h.stream == nullptr) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    detail::check(cudaMemPoolCreate(&h.pool, &props), "cudaMemPoolCreate");
    uint64_t keep = UINT64_MAX;
    detail::check(cudaMemPoolSetAttribute(h.pool, cudaMemPoolAttrReleaseThreshold, &keep),
                  "cudaMemPoolSetAttribute(release threshold)");
    int prev = 0;
    detail::check(cudaGetDevice(&prev), "cudaGetDevice");
    if (prev != device) detail::check(cudaSetDevice(device), "cudaSetDevice");
    const cudaError_t err = cudaStreamCreateWithFlags(&h.stream, cudaStreamNonBlocking);
    if (prev != device) (void)cudaSetDevice(prev);
    detail::check(err, "cudaStreamCreateWithFlags(housekeeping)");
  }
  return h;
}

/// Allocates `bytes` on the current device (stream-ordered) and fills them
/// from `host`, or with zeros when host is null; returns once done.
void* allocFilled(size_t bytes, const void* host, int* device, const char* what) {
  detail::check(cudaGetDevice(device), "cudaGetDevice");
  const Housekeeping& h = housekeeping(*device);
  cudaStream_t s = h.stream;
  void* p = nullptr;
  detail::check(cudaMallocFromPoolAsync(&p, bytes, h.pool, s), what);
  cudaError_t err = host != nullptr ? cudaMemcpyAsync(p, host, bytes, cudaMemcpyHostToDevice, s)
                                    : cudaMemsetAsync(p, 0, bytes, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  if (err != cudaSuccess) {
    (void)cudaFreeAsync(p, s);
    detail::check(err, what);
  }
  return p;
}

/// Frees memory of allocFilled without waiting for the device.
void freeAsync(void* p, int device) {
  if (p == nullptr) return;
  (void)cudaFreeAsync(p, housekeeping(device).stream);
}

}  // namespace

// ------------------------------------------------------------------ ProgramUpload

ProgramUpload::ProgramUpload(const DevProgram& program, const std::vector<DevRing>& sends,
                             const std::vector<DevRing>& recvs) {
  if (sends.size() != program.sendKeys.size() || recvs.size() != program.recvKeys.size()) {
    throwInvalidArgument("exec::cuda::ProgramUpload: ring tables (" + std::to_string(sends.size()) +
                         " sends, " + std::to_string(recvs.size()) +
                         " receives) do not match the program's links (" +
                         std::to_string(program.sendKeys.size()) + ", " +
                         std::to_string(program.recvKeys.size()) + ")");
  }
  const size_t oPhases = 0;
  const size_t oLanes = align16(oPhases + program.phases.size() * sizeof(dev::DevPhase));
  const size_t oSteps = align16(oLanes + program.lanes.size() * sizeof(dev::DevLane));
  const size_t oSends = align16(oSteps + program.steps.size() * sizeof(dev::DevStep));
  const size_t oRecvs = align16(oSends + sends.size() * sizeof(DevRing));
  bytes_ = std::max<size_t>(16, align16(oRecvs + recvs.size() * sizeof(DevRing)));
  std::vector<uint8_t> host(bytes_, 0);
  auto put = [&](size_t off, const void* src, size_t n) {
    if (n != 0) std::memcpy(host.data() + off, src, n);
  };
  put(oPhases, program.phases.data(), program.phases.size() * sizeof(dev::DevPhase));
  put(oLanes, program.lanes.data(), program.lanes.size() * sizeof(dev::DevLane));
  put(oSteps, program.steps.data(), program.steps.size() * sizeof(dev::DevStep));
  put(oSends, sends.data(), sends.size() * sizeof(DevRing));
  put(oRecvs, recvs.data(), recvs.size() * sizeof(DevRing));
  // Waits for the copy: launches on other streams do not wait for this one.
  mem_ = allocFilled(bytes_, host.data(), &device_, "uploading a program");
  auto* base = static_cast<uint8_t*>(mem_);
  view_.phases = reinterpret_cast<const dev::DevPhase*>(base + oPhases);
  view_.lanes = reinterpret_cast<const dev::DevLane*>(base + oLanes);
  view_.steps = reinterpret_cast<const dev::DevStep*>(base + oSteps);
  view_.sends = reinterpret_cast<const DevRing*>(base + oSends);
  view_.recvs = reinterpret_cast<const DevRing*>(base + oRecvs);
  view_.nPhases = static_cast<uint32_t>(program.phases.size());
  view_.maxLanes = program.maxLanes;
}

ProgramUpload::~ProgramUpload() { freeAsync(mem_, device_); }

// ------------------------------------------------------------------ MappedControl

MappedControl::MappedControl() {
  void* h = nullptr;
  detail::check(cudaHostAlloc(&h, sizeof(DevControl), cudaHostAllocMapped),
                "cudaHostAlloc(control block)");
  host_ = new (h) DevControl();
  void* d = nullptr;
  void* b = nullptr;
  cudaError_t err = cudaHostGetDevicePointer(&d, h, 0);
  if (err == cudaSuccess) err = cudaMalloc(&b, sizeof(uint64_t));
  if (err == cudaSuccess) err = cudaMemsetAsync(b, 0, sizeof(uint64_t), nullptr);
  if (err == cudaSuccess) err = cudaStreamSynchronize(nullptr);
  if (err != cudaSuccess) {
    cudaFree(b);
    cudaFreeHost(h);
    detail::check(err, "mapping the control block");
  }
  device_ = static_cast<DevControl*>(d);
  barrier_ = static_cast<uint64_t*>(b);
}

MappedControl::~MappedControl() {
  cudaFree(barrier_);
  cudaFreeHost(host_);
}

void MappedControl::reset(uint64_t timeoutNs) {
  DevControl* c = host_;
  std::atomic_ref<uint32_t>(c->abortFlag).store(0, std::memory_order_relaxed);
  std::atomic_ref<uint32_t>(c->status).store(0, std::memory_order_relaxed);
  c->failedCall = c->failedPhase = c->failedLane = c->failedStep = 0;
  c->timeoutNs = timeoutNs;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void MappedControl::abort() {
  std::atomic_ref<uint32_t>(host_->abortFlag).store(1, std::memory_order_seq_cst);
}

uint32_t MappedControl::status() const {
  return std::atomic_ref<uint32_t>(host_->status).load(std::memory_order_acquire);
}

// ------------------------------------------------------------------ DeviceBuffer

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  // Zeroed before returning: launches on other streams do not wait for this one.
  ptr_ = static_cast<uint8_t*>(allocFilled(bytes, nullptr, &device_, "allocating a device buffer"));
}

DeviceBuffer::~DeviceBuffer() { freeAsync(ptr_, device_); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      device_(other.device_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    freeAsync(ptr_, device_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
  }
  return *this;
}

// ------------------------------------------------------------------ Stream, Event

Stream::Stream() {
  cudaStream_t s = nullptr;
  detail::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_ = s;
}

Stream::~Stream() { cudaStreamDestroy(static_cast<cudaStream_t>(stream_)); }

Event::Event() {
  cudaEvent_t e = nullptr;
  detail::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  event_ = e;
}

Event::~Event() { cudaEventDestroy(static_cast<cudaEvent_t>(event_)); }

void Event::record(void* stream) {
  detail::check(
      cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)),
      "cudaEventRecord");
}

void Event::waitOn(void* stream) {
  detail::check(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event_), 0),
      "cudaStreamWaitEvent");
}

std::unique_ptr<Event> EventPool::take() {
  if (spare_.empty()) return std::make_unique<Event>();
  std::unique_ptr<Event> e = std::move(spare_.back());
  spare_.pop_back();
  return e;
}

uint8_t* growScratch(DeviceBuffer& buf, size_t bytes, const std::function<bool()>& drained) {
  if (buf.size() >= bytes) return buf.get();
  if (!drained())
    throw Error(groveRemoteError, "timed out waiting for device launches before growing scratch");
  buf = DeviceBuffer(bytes);
  return buf.get();
}

bool Event::done() {
  const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (err == cudaErrorNotReady) return false;
  detail::check(err, "cudaEventQuery");
  return true;
}

// ------------------------------------------------------------------ queries

bool isDevicePointer(const void* p) {
  if (p == nullptr) return false;
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, p);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
      err == cudaErrorInvalidValue) {
    (void)cudaGetLastError();  // no device memory can exist / plain host memory
    return false;
  }
  detail::check(err, "cudaPointerGetAttributes");
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

int currentDevice() {
  int d = 0;
  detail::check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

void setDevice(int device) {
  detail::check(cudaSetDevice(device), ("cudaSetDevice(" + std::to_string(device) + ")").c_str());
}

void synchronizeStream(void* stream) {
  detail::check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

void memcpyAsync(void* dst, const void* src, size_t bytes, void* stream) {
  detail::check(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
      "cudaMemcpyAsync");
}

bool streamDone(void* stream) {
  const cudaError_t err = cudaStreamQuery(static_cast<cudaStream_t>(stream));
  if (err == cudaErrorNotReady) return false;
  detail::check(err, "cudaStreamQuery");
  return true;
}

}  // namespace grove::exec::cuda
