#include "transports/host_staged/host_staged_transport.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "base/shm_segment.h"
#include "transports/shm/shm_transport.h"

#include "grove_build_info.h"

#if GROVE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace grove::transport {

struct HostStagedTransport::Held {
  ShmSegment seg;
  uint8_t* devBase = nullptr;  // what the DevRing points into (device or host pointer)
  bool registered = false;     // cudaHostRegister'ed
  bool owner = false;          // this side created the segment (receiver)
};

namespace {

#if GROVE_HAVE_CUDA
[[noreturn]] void throwCuda(const std::string& what, cudaError_t err) {
  throw Error(groveUnhandledCudaError,
              "host_staged: " + what + ": " + cudaGetErrorString(err) +
                  " (pinned host rings need a CUDA device; the emulation mode needs none)");
}

// Registers the mapping with CUDA and returns the device pointer to it.
uint8_t* registerMapping(uint8_t* base, size_t bytes) {
  cudaError_t err =
      cudaHostRegister(base, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throwCuda("cudaHostRegister of " + std::to_string(bytes) + " bytes", err);
  }
  void* dev = nullptr;
  err = cudaHostGetDevicePointer(&dev, base, 0);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    (void)cudaHostUnregister(base);
    throwCuda("cudaHostGetDevicePointer", err);
  }
  return static_cast<uint8_t*>(dev);
}
#endif

}  // namespace

HostStagedTransport::HostStagedTransport(DeviceContext ctx, bool emulate)
    : ctx_(std::move(ctx)), emulate_(emulate) {
  checkDeviceContext(ctx_, "host_staged transport");
#if !GROVE_HAVE_CUDA
  if (!emulate_)
    throwInvalidArgument(
        "host_staged transport: this build has no CUDA, so only the emulation mode (plain host "
        "memory) is available");
#endif
  dir_ = config::getString("GROVE_SHM_DIR");
  if (dir_.empty()) dir_ = "/dev/shm";
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

HostStagedTransport::~HostStagedTransport() {
  for (auto& h : held_) {
    // The host mapping is valid on both sides until the unmap below.
    auto* closed = reinterpret_cast<uint32_t*>(h->seg.base() + kRingClosedOffset);
    std::atomic_ref<uint32_t>(*closed).store(1, std::memory_order_release);
#if GROVE_HAVE_CUDA
    if (h->registered) (void)cudaHostUnregister(h->seg.base());
#endif
    if (h->owner) h->seg.unlink();  // the sender never came: remove the name
  }
  held_.clear();  // unmaps
}

bool HostStagedTransport::canConnect(int peer) const {
  if (peer < 0 || peer >= ctx_.nranks || peer == ctx_.rank) return false;
  return ctx_.peers[peer].hostHash == ctx_.peers[ctx_.rank].hostHash;
}

std::string HostStagedTransport::segmentName(const std::string& jobId, int src, int dst,
                                             int channel, uint32_t route) {
  return ShmTransport::segmentName(jobId, src, dst, channel) + "-dev" + std::to_string(route);
}

DevRing HostStagedTransport::adopt(std::unique_ptr<Held> held, uint64_t capacity) {
  held->devBase = held->seg.base();
#if GROVE_HAVE_CUDA
  if (!emulate_) {
    try {
      held->devBase = registerMapping(held->seg.base(), ringBytes(capacity));
    } catch (...) {
      if (held->owner) held->seg.unlink();  // no sender will ever come for it
      throw;
    }
    held->registered = true;
  }
#endif
  DevRing ring = ringAt(held->devBase, capacity);
  held_.push_back(std::move(held));
  return ring;
}

DevRing HostStagedTransport::createRecv(const LinkKey& key, uint64_t capacity, RingExport& out) {
  if (!canConnect(key.peer))
    throwInvalidArgument("host_staged transport: cannot receive from rank " +
                         std::to_string(key.peer) + " on rank " + std::to_string(ctx_.rank) +
                         " (not another rank on this host)");
  if (capacity == 0 || capacity % kRingCapacityAlign != 0)
    throwInvalidArgument("host_staged transport: ring capacity " + std::to_string(capacity) +
                         " is not a positive multiple of " + std::to_string(kRingCapacityAlign));
  const std::string name = segmentName(ctx_.jobId, key.peer, ctx_.rank, key.channel, key.route);
  if (name.size() >= kExportNameBytes)
    throwInternalError("host_staged transport: segment name too long: " + name);
  auto held = std::make_unique<Held>();
  bool replaced = false;
  held->seg = ShmSegment::create(dir_ + "/" + name, ringBytes(capacity), &replaced);
  if (replaced)
    GROVE_WARN(log::kShm, "replaced stale device ring segment %s (left by a job that crashed?)",
               name.c_str());
  held->owner = true;
  try {
    held->seg.map(ringBytes(capacity));  // zero-filled by create()
    held->seg.closeFd();
  } catch (...) {
    held->seg.unlink();
    throw;
  }

  out = makeRingExport(emulate_ ? RingKind::kHostEmulated : RingKind::kHostStaged, key, ctx_,
                       capacity, held->seg.base());
  std::memcpy(out.shmName, name.c_str(), name.size() + 1);
  GROVE_TRACE(log::kShm, "host_staged: created ring %s (%llu bytes)", name.c_str(),
              static_cast<unsigned long long>(capacity));
  return adopt(std::move(held), capacity);
}

DevRing HostStagedTransport::openSend(const LinkKey& key, const RingExport& in) {
  const char* who = "host_staged transport";
  if (!canConnect(key.peer))
    throwInvalidArgument("host_staged transport: cannot send to rank " + std::to_string(key.peer) +
                         " from rank " + std::to_string(ctx_.rank) +
                         " (not another rank on this host)");
  checkRingExport(in, key, emulate_ ? RingKind::kHostEmulated : RingKind::kHostStaged, who);
  const DevicePeer& peer = ctx_.peers[key.peer];
  if (in.hostHash != peer.hostHash || (peer.pid != 0 && in.ownerPid != peer.pid))
    throwInternalError("host_staged transport: the ring of rank " + std::to_string(key.peer) +
                       " was made by another process or host than that rank's");
  if (::strnlen(in.shmName, kExportNameBytes) == kExportNameBytes || in.shmName[0] == '\0' ||
      std::strchr(in.shmName, '/') != nullptr)
    throwInternalError("host_staged transport: bad segment name from rank " +
                       std::to_string(key.peer));
  const std::string path = dir_ + "/" + in.shmName;
  auto held = std::make_unique<Held>();
  held->seg = ShmSegment::tryOpen(path);
  if (!held->seg.valid())
    throwRemoteError("host_staged transport: the ring " + path + " of rank " +
                     std::to_string(key.peer) + " is gone (did that rank fail or close?)");
  if (held->seg.fileSize() < ringBytes(in.capacity))
    throwInternalError("host_staged transport: the ring " + path + " is smaller than its " +
                       std::to_string(in.capacity) + "-byte capacity");
  held->seg.map(ringBytes(in.capacity));
  held->seg.closeFd();
  held->seg.unlink();  // both sides hold a mapping now; a later crash leaks nothing
  GROVE_TRACE(log::kShm, "host_staged: opened ring %s", path.c_str());
  return adopt(std::move(held), in.capacity);
}

}  // namespace grove::transport
