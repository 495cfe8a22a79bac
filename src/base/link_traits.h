// LinkTraits: what the algorithm selector and the cost model know of the
// links a transport makes. Each registered transport states its traits
// (transports/registry.h); the core hands the traits of the slowest
// transport a communicator uses to the selector and the simulator, which
// never ask which transport it is.
#pragma once

namespace grove {

struct LinkTraits {
  /// One small message, one way, end to end.
  double latencyUs = 1.0;
  /// The host-side cost every message (schedule step) pays on top of its
  /// bytes: system calls, wake-ups, completion polling.
  double stepOverheadUs = 2.0;
  /// One link, one direction; 0 = not known (the topology decides).
  double bandwidthGBs = 0.0;
  /// The ranks share memory (the selector's shared-memory rules).
  bool sharedMemory = true;
  /// The transport has slot links (transport.h), so eager collectives can run.
  bool slotLinks = false;
  /// The links are device rings that GPU kernels drive.
  bool deviceRings = false;

  /// Links whose every message pays a network round trip or system calls
  /// (the selector's latency rules for sockets, RDMA and the like).
  bool network() const { return !sharedMemory && !deviceRings; }

  /// Equal in every field (a field added above is compared too).
  bool operator==(const LinkTraits&) const = default;
};

}  // namespace grove
