#include "transports/proxy/device_proxy.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "base/idle_backoff.h"
#include "base/log.h"

#include "grove_build_info.h"

#if GROVE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace grove::transport {

using transport::DevRing;

struct DeviceProxy::Pump {
  transport::LinkKey key;
  transport::SendHalf* send = nullptr;  // exactly one of send / recv
  transport::RecvHalf* recv = nullptr;
  uint8_t* host = nullptr;  // control block + data, as this thread sees them
  uint64_t capacity = 0;
  uint64_t pos = 0;     // bytes moved so far (the proxy's own counter)
  bool dead = false;    // closed: no more pumping
  bool pinned = false;  // cudaHostAlloc'ed (else aligned_alloc)

  uint64_t* word(size_t offset) const { return reinterpret_cast<uint64_t*>(host + offset); }
  uint64_t loadWord(size_t offset) const {
    return std::atomic_ref<uint64_t>(*word(offset)).load(std::memory_order_acquire);
  }
  void storeWord(size_t offset, uint64_t v) const {
    std::atomic_ref<uint64_t>(*word(offset)).store(v, std::memory_order_release);
  }
  bool closed() const {
    auto* c = reinterpret_cast<uint32_t*>(host + transport::kRingClosedOffset);
    return std::atomic_ref<uint32_t>(*c).load(std::memory_order_acquire) != 0;
  }
  void close() const {
    auto* c = reinterpret_cast<uint32_t*>(host + transport::kRingClosedOffset);
    std::atomic_ref<uint32_t>(*c).store(1, std::memory_order_release);
  }
  uint8_t* data() const { return host + transport::kRingControlBytes; }
};

DeviceProxy::DeviceProxy(int rank, bool emulate, const WaitContext& wait)
    : rank_(rank), emulate_(emulate), wait_(wait) {
#if !GROVE_HAVE_CUDA
  if (!emulate_)
    throwInvalidArgument(
        "device proxy: this build has no CUDA, so only the emulation mode (plain host memory) is "
        "available");
#endif
  thread_ = std::thread([this] { loop(); });
}

DeviceProxy::~DeviceProxy() {
  // Let the thread push out what the device already wrote, within the timeout.
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration<double>(wait_.timeoutSec > 0 ? wait_.timeoutSec : 30.0);
  while (!drained() && std::chrono::steady_clock::now() < deadline &&
         !(wait_.abortFlag != nullptr && wait_.abortFlag->load(std::memory_order_acquire)))
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  for (auto& p : pumps_) {
    p->close();
#if GROVE_HAVE_CUDA
    if (p->pinned) {
      (void)cudaFreeHost(p->host);
      continue;
    }
#endif
    std::free(p->host);
  }
}

std::string DeviceProxy::error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

size_t DeviceProxy::ringCount() const {
  std::lock_guard<std::mutex> lk(mu_);
  return pumps_.size();
}

DevRing DeviceProxy::add(std::unique_ptr<Pump> p, uint64_t capacity) {
  if (capacity == 0 || capacity % transport::kRingCapacityAlign != 0)
    throwInvalidArgument("device proxy: ring capacity " + std::to_string(capacity) +
                         " is not a positive multiple of " +
                         std::to_string(transport::kRingCapacityAlign));
  const size_t bytes = (transport::ringBytes(capacity) + 4095) / 4096 * 4096;
  uint8_t* dev = nullptr;
  if (emulate_) {
    p->host = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
    if (p->host == nullptr) throwSystemError("device proxy: allocating a ring", ENOMEM);
    std::memset(p->host, 0, bytes);
    dev = p->host;
  } else {
#if GROVE_HAVE_CUDA
    void* h = nullptr;
    cudaError_t err = cudaHostAlloc(&h, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
    if (err == cudaSuccess) {
      p->host = static_cast<uint8_t*>(h);
      p->pinned = true;
      std::memset(p->host, 0, bytes);
      void* d = nullptr;
      err = cudaHostGetDevicePointer(&d, h, 0);
      dev = static_cast<uint8_t*>(d);
      if (err != cudaSuccess) (void)cudaFreeHost(h);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(groveUnhandledCudaError,
                  std::string("device proxy: pinned ring memory: ") + cudaGetErrorString(err));
    }
#endif
  }
  p->capacity = capacity;
  DevRing ring = transport::ringAt(dev, capacity);
  std::lock_guard<std::mutex> lk(mu_);
  pumps_.push_back(std::move(p));
  return ring;
}

DevRing DeviceProxy::addSend(const transport::LinkKey& key, uint64_t capacity,
                             transport::SendHalf& half) {
  auto p = std::make_unique<Pump>();
  p->key = key;
  p->send = &half;
  return add(std::move(p), capacity);
}

DevRing DeviceProxy::addRecv(const transport::LinkKey& key, uint64_t capacity,
                             transport::RecvHalf& half) {
  auto p = std::make_unique<Pump>();
  p->key = key;
  p->recv = &half;
  return add(std::move(p), capacity);
}

bool DeviceProxy::drained() const {
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& p : pumps_)
    if (p->send != nullptr && !p->dead && p->pos != p->loadWord(transport::kRingHeadOffset))
      return false;
  return true;
}

void DeviceProxy::fail(Pump& p, const std::string& why) {
  p.dead = true;
  p.close();
  if (error_.empty()) {
    error_ = why;
    GROVE_WARN(log::kP2p, "rank %d: device proxy stops the ring %s rank %d channel %d: %s", rank_,
               p.send ? "to" : "from", p.key.peer, p.key.channel, why.c_str());
  }
}

// Moves what can move now on one link; true if any byte moved.
bool DeviceProxy::pumpOnce(Pump& p) {
  const uint64_t cap = p.capacity;
  bool moved = false;
  if (p.send != nullptr) {
    const uint64_t head = p.loadWord(transport::kRingHeadOffset);
    while (p.pos < head) {
      void* dst = nullptr;
      const size_t room = p.send->reserve(&dst);
      if (room == 0) break;
      const uint64_t off = p.pos % cap;
      const size_t n = static_cast<size_t>(std::min<uint64_t>({head - p.pos, room, cap - off}));
      std::memcpy(dst, p.data() + off, n);
      p.send->commit(n);
      p.pos += n;
      p.storeWord(transport::kRingTailOffset, p.pos);
      moved = true;
    }
    p.send->flush();
  } else {
    for (;;) {
      const void* src = nullptr;
      const size_t avail = p.recv->peek(&src);
      if (avail == 0) break;
      const uint64_t room = cap - (p.pos - p.loadWord(transport::kRingTailOffset));
      if (room == 0) break;
      const uint64_t off = p.pos % cap;
      const size_t n = static_cast<size_t>(std::min<uint64_t>({avail, room, cap - off}));
      std::memcpy(p.data() + off, src, n);
      p.recv->consume(n);
      p.pos += n;
      p.storeWord(transport::kRingHeadOffset, p.pos);
      moved = true;
    }
  }
  return moved;
}

void DeviceProxy::loop() {
  IdleBackoff backoff(200);  // naps of up to 200 us
  while (!stop_.load(std::memory_order_acquire)) {
    bool moved = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      const bool aborted =
          wait_.abortFlag != nullptr && wait_.abortFlag->load(std::memory_order_acquire);
      for (auto& p : pumps_) {
        if (p->dead) continue;
        if (aborted) {
          fail(*p, wait_.abortReason != nullptr && !wait_.abortReason->empty() ? *wait_.abortReason
                                                                               : "aborted");
          continue;
        }
        if (p->closed()) {  // the device side went away
          p->dead = true;
          continue;
        }
        try {
          moved = pumpOnce(*p) || moved;
        } catch (const std::exception& e) {
          fail(*p, e.what());
        }
      }
    }
    if (moved)
      backoff.progressed();
    else
      backoff.idle();
  }
}

ProxyTransport::ProxyTransport(DeviceContext ctx, bool emulate, const WaitContext& wait)
    : ctx_(std::move(ctx)), emulate_(emulate), wait_(wait) {
  checkDeviceContext(ctx_, "proxy transport");
}

bool ProxyTransport::canConnect(int peer) const {
  if (peer < 0 || peer >= ctx_.nranks || peer == ctx_.rank) return false;
  return ctx_.peers[peer].hostHash != ctx_.peers[ctx_.rank].hostHash;
}

void ProxyTransport::check(const LinkKey& key, const char* what) const {
  if (!canConnect(key.peer))
    throwInvalidArgument("proxy transport: rank " + std::to_string(ctx_.rank) + " cannot " + what +
                         " rank " + std::to_string(key.peer) + " (not a rank on another host)");
}

DevRing ProxyTransport::createRecv(const LinkKey& key, uint64_t, RingExport&) {
  throwInternalError("proxy transport: rings to rank " + std::to_string(key.peer) +
                     " are bridged, not exported");
}

DevRing ProxyTransport::openSend(const LinkKey& key, const RingExport&) {
  throwInternalError("proxy transport: rings to rank " + std::to_string(key.peer) +
                     " are bridged, not exported");
}

DeviceProxy& ProxyTransport::proxy() {
  if (!proxy_) proxy_ = std::make_unique<DeviceProxy>(ctx_.rank, emulate_, wait_);
  return *proxy_;
}

DevRing ProxyTransport::bridgeSend(const LinkKey& key, uint64_t capacity, SendHalf& host) {
  check(key, "send to");
  return proxy().addSend(key, capacity, host);
}

DevRing ProxyTransport::bridgeRecv(const LinkKey& key, uint64_t capacity, RecvHalf& host) {
  check(key, "receive from");
  return proxy().addRecv(key, capacity, host);
}

}  // namespace grove::transport
