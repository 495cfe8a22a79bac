// DeviceProxy: device rings to ranks on other hosts, pumped over the host
// transports by a proxy thread (a GPU cannot drive a TCP socket itself).
//
// How it works: each proxied link has a ring in this rank's own pinned host
// memory (cudaHostAlloc, mapped; plain host memory in the emulation), so
// the local device program sees an ordinary DevRing. For a sending link the
// device writes into the ring and one proxy thread drains it into the host
// link's SendHalf (reserve, copy, commit, flush) and raises the ring's tail;
// for a receiving link the thread moves what the RecvHalf shows (peek, copy,
// consume) into the ring and raises its head. Bytes are copied one for one,
// so the device's stream positions (and its 16-byte step padding) are the
// same at both ends. The thread pumps every link in turn; when nothing
// moves it backs off (pause, yield, then naps of at most 200 us), never
// spinning a core.
//
// Failures: a host half that throws (peer gone) or a raised abort flag sets
// the closed word of the affected rings, so the device program fails with
// kDevPeerClosed instead of waiting; the first error is kept (error()).
// Destruction first lets the thread drain what the device already wrote
// (bounded by the wait timeout), then stops it, sets every closed word and
// frees the rings.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/wait.h"
#include "transports/device_ring.h"
#include "transports/device_transport.h"
#include "transports/transport.h"

namespace grove::transport {

/// Pumps proxied device rings to and from host transport halves on one thread.
class DeviceProxy {
 public:
  /// `emulate`: rings in plain host memory (no CUDA); else pinned mapped
  /// memory (CUDA builds only: grove::Error(groveInvalidArgument) otherwise).
  /// `wait` gives the abort flag and the drain timeout.
  DeviceProxy(int rank, bool emulate, const WaitContext& wait);
  /// Drains, stops the thread, closes and frees every ring (see the file comment).
  ~DeviceProxy();
  DeviceProxy(const DeviceProxy&) = delete;
  DeviceProxy& operator=(const DeviceProxy&) = delete;

  /// A ring of `capacity` bytes the device sends on; its bytes go out through
  /// `half`, which must outlive this proxy. Returns the device's handle.
  transport::DevRing addSend(const transport::LinkKey& key, uint64_t capacity,
                             transport::SendHalf& half);
  /// A ring of `capacity` bytes the device receives on, filled from `half`.
  transport::DevRing addRecv(const transport::LinkKey& key, uint64_t capacity,
                             transport::RecvHalf& half);
  /// The first failure of the proxy thread ("" while none).
  std::string error() const;
  /// Proxied rings.
  size_t ringCount() const;

 private:
  struct Pump;
  transport::DevRing add(std::unique_ptr<Pump> pump, uint64_t capacity);
  void loop();
  bool pumpOnce(Pump& p);
  void fail(Pump& p, const std::string& why);
  bool drained() const;

  int rank_;
  bool emulate_;
  WaitContext wait_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Pump>> pumps_;  // guarded by mu_
  std::string error_;                         // guarded by mu_
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// The proxy as a device transport (the registry's "proxy" row): reaches
/// every rank on another host, bridging its rings to the communicator's
/// host links (device_transport.h). The pumping thread starts with the
/// first link.
class ProxyTransport final : public DeviceTransport {
 public:
  /// `emulate` and `wait` as for DeviceProxy.
  ProxyTransport(DeviceContext ctx, bool emulate, const WaitContext& wait);
  const char* name() const override { return "proxy"; }
  /// True for a rank on another host.
  bool canConnect(int peer) const override;
  /// Throws grove::Error(groveInternalError): proxied rings are not exported.
  DevRing createRecv(const LinkKey& key, uint64_t capacity, RingExport& out) override;
  /// Throws grove::Error(groveInternalError): proxied rings are not exported.
  DevRing openSend(const LinkKey& key, const RingExport& in) override;
  bool bridged() const override { return true; }
  DevRing bridgeSend(const LinkKey& key, uint64_t capacity, SendHalf& host) override;
  DevRing bridgeRecv(const LinkKey& key, uint64_t capacity, RecvHalf& host) override;
  std::string error() const override { return proxy_ ? proxy_->error() : std::string(); }

 private:
  DeviceProxy& proxy();
  void check(const LinkKey& key, const char* what) const;

  DeviceContext ctx_;
  bool emulate_;
  WaitContext wait_;
  std::unique_ptr<DeviceProxy> proxy_;
};

}  // namespace grove::transport
