#include "transports/cuda_p2p/cuda_p2p_transport.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>

#include "base/error.h"
#include "base/log.h"

namespace grove::transport {

struct CudaP2PTransport::Held {
  uint8_t* base = nullptr;  // ring memory as this process addresses it
  bool owned = false;       // cudaMalloc'ed here (receiver)
  bool ipcOpened = false;   // mapped with cudaIpcOpenMemHandle
  int device = -1;          // device current when it was made
};

namespace {

[[noreturn]] void throwCuda(const std::string& what, cudaError_t err) {
  (void)cudaGetLastError();  // clear a sticky-free error so later calls start clean
  throw Error(groveUnhandledCudaError,
              "cuda_p2p transport: " + what + ": " + cudaGetErrorString(err));
}

void check(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) throwCuda(what, err);
}

// Makes `device` current for its lifetime, then restores the caller's device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) {
      (void)cudaGetLastError();
      prev_ = -1;
    }
    if (device != prev_)
      check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  }
  ~DeviceGuard() {
    if (prev_ >= 0) (void)cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

int deviceCount(std::string* why) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) *why = std::string("no usable CUDA device (") + cudaGetErrorString(err) + ")";
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device";
  return n;
}

bool canAccess(int from, int to) {
  int ok = 0;
  if (cudaDeviceCanAccessPeer(&ok, from, to) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return ok != 0;
}

}  // namespace

bool fillCudaIdentity(DevicePeer& peer, int device) {
  peer.cudaDevice = -1;
  std::memset(peer.pciBusId, 0, sizeof(peer.pciBusId));
  if (device < 0 || device >= deviceCount(nullptr)) return false;
  char bus[sizeof(peer.pciBusId)] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus) - 1, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  peer.cudaDevice = device;
  std::memcpy(peer.pciBusId, bus, sizeof(bus));
  return true;
}

CudaP2PTransport::CudaP2PTransport(DeviceContext ctx) : ctx_(std::move(ctx)) {
  checkDeviceContext(ctx_, "cuda_p2p transport");
  device_ = ctx_.peers[ctx_.rank].cudaDevice;
  peerDevice_.assign(ctx_.nranks, -1);
  const int n = deviceCount(&reason_);
  if (n == 0) return;
  if (device_ < 0 || device_ >= n) {
    reason_ = "rank " + std::to_string(ctx_.rank) + " names CUDA device " +
              std::to_string(device_) + " but this process sees " + std::to_string(n);
    return;
  }
  available_ = true;
  const DevicePeer& self = ctx_.peers[ctx_.rank];
  for (int p = 0; p < ctx_.nranks; ++p) {
    const DevicePeer& peer = ctx_.peers[p];
    if (peer.hostHash != self.hostHash || peer.cudaDevice < 0) continue;
    if (peer.pciBusId[0] != '\0') {
      char bus[sizeof(peer.pciBusId) + 1] = {};
      std::memcpy(bus, peer.pciBusId, sizeof(peer.pciBusId));
      int d = -1;
      if (cudaDeviceGetByPCIBusId(&d, bus) == cudaSuccess)
        peerDevice_[p] = d;
      else
        (void)cudaGetLastError();  // a GPU this process cannot see
    } else if (peer.pid == self.pid && peer.cudaDevice < n) {
      peerDevice_[p] = peer.cudaDevice;  // same process: same numbering
    }
  }
}

CudaP2PTransport::~CudaP2PTransport() {
  cudaStream_t stream = nullptr;
  const bool haveStream =
      available_ && cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess;
  const uint32_t one = 1;
  for (auto& h : held_) {
    if (h->owned || h->ipcOpened) {  // a raw same-process mapping is its owner's to close
      if (haveStream)
        (void)cudaMemcpyAsync(h->base + kRingClosedOffset, &one, sizeof(one),
                              cudaMemcpyHostToDevice, stream);
      if (haveStream) (void)cudaStreamSynchronize(stream);
    }
    if (h->ipcOpened) (void)cudaIpcCloseMemHandle(h->base);
    if (h->owned) (void)cudaFree(h->base);
  }
  if (haveStream) (void)cudaStreamDestroy(stream);
  (void)cudaGetLastError();
  held_.clear();
}

void CudaP2PTransport::requireAvailable(const char* what) const {
  if (!available_)
    throw Error(groveUnhandledCudaError, std::string("cuda_p2p transport: cannot ") + what +
                                             " on rank " + std::to_string(ctx_.rank) + ": " +
                                             reason_);
}

bool CudaP2PTransport::canConnect(int peer) const {
  if (!available_ || peer < 0 || peer >= ctx_.nranks || peer == ctx_.rank) return false;
  if (ctx_.peers[peer].hostHash != ctx_.peers[ctx_.rank].hostHash) return false;
  const int pd = peerDevice_[peer];
  if (pd < 0) return false;
  // Both directions, so that both ends of a link make the same choice.
  return pd == device_ || (canAccess(device_, pd) && canAccess(pd, device_));
}

namespace {

// Zeroes a new ring on a stream of its own and waits for that stream alone:
// cudaMemset and cudaDeviceSynchronize would wait for every kernel on the
// GPU, such as a peer rank's kernel (same process) waiting for this thread.
void zeroRing(void* base, size_t bytes) {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  cudaError_t err = cudaMemsetAsync(base, 0, bytes, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  (void)cudaStreamDestroy(s);
  check(err, "zeroing a ring");
}

}  // namespace

DevRing CudaP2PTransport::createRecv(const LinkKey& key, uint64_t capacity, RingExport& out) {
  requireAvailable("create a ring");
  if (!canConnect(key.peer))
    throwInvalidArgument("cuda_p2p transport: rank " + std::to_string(key.peer) +
                         " cannot reach this rank's GPU memory");
  if (capacity == 0 || capacity % kRingCapacityAlign != 0)
    throwInvalidArgument("cuda_p2p transport: ring capacity " + std::to_string(capacity) +
                         " is not a positive multiple of " + std::to_string(kRingCapacityAlign));
  DeviceGuard guard(device_);
  auto held = std::make_unique<Held>();
  held->device = device_;
  void* p = nullptr;
  check(cudaMalloc(&p, ringBytes(capacity)),
        "cudaMalloc of a " + std::to_string(ringBytes(capacity)) + "-byte ring");
  held->base = static_cast<uint8_t*>(p);
  held->owned = true;
  Held* raw = held.get();
  held_.push_back(std::move(held));  // freed by the destructor even if a call below throws
  zeroRing(raw->base, ringBytes(capacity));
  cudaIpcMemHandle_t handle;
  check(cudaIpcGetMemHandle(&handle, raw->base), "cudaIpcGetMemHandle");
  static_assert(sizeof(handle) == kIpcHandleBytes, "IPC handle size");

  out = makeRingExport(RingKind::kCudaIpc, key, ctx_, capacity, raw->base);
  std::memcpy(out.ipcHandle, &handle, sizeof(handle));
  GROVE_TRACE(log::kP2p, "cuda_p2p: ring from rank %d channel %d on device %d (%llu bytes)",
              key.peer, key.channel, device_, static_cast<unsigned long long>(capacity));
  return ringAt(raw->base, capacity);
}

DevRing CudaP2PTransport::openSend(const LinkKey& key, const RingExport& in) {
  requireAvailable("open a ring");
  checkRingExport(in, key, RingKind::kCudaIpc, "cuda_p2p transport");
  if (!canConnect(key.peer) || in.hostHash != ctx_.peers[ctx_.rank].hostHash)
    throwInvalidArgument("cuda_p2p transport: this rank's GPU cannot reach the memory of rank " +
                         std::to_string(key.peer));
  DeviceGuard guard(device_);
  auto held = std::make_unique<Held>();
  held->device = device_;
  if (in.ownerPid == static_cast<int32_t>(getpid())) {
    // A rank of this process: the raw address is valid here (one address space).
    const int pd = peerDevice_[key.peer];
    if (pd != device_) {
      cudaError_t err = cudaDeviceEnablePeerAccess(pd, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();
      else
        check(err, "cudaDeviceEnablePeerAccess(" + std::to_string(pd) + ")");
    }
    held->base = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(in.rawPtr));
  } else {
    cudaIpcMemHandle_t handle;
    std::memcpy(&handle, in.ipcHandle, sizeof(handle));
    void* p = nullptr;
    check(cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess),
          "cudaIpcOpenMemHandle of the ring of rank " + std::to_string(key.peer));
    held->base = static_cast<uint8_t*>(p);
    held->ipcOpened = true;
  }
  DevRing ring = ringAt(held->base, in.capacity);
  held_.push_back(std::move(held));
  return ring;
}

}  // namespace grove::transport
