// SocketJob: n thread-ranks of one process, each with a listener on
// 127.0.0.1 and a SocketTransport that knows every rank's address, for the
// tests that drive the socket transport (or the executor over it) directly.
// Each rank waits on a signal of its own. Header-only.
#pragma once

#include <memory>
#include <vector>

#include "base/socket.h"
#include "transports/socket/socket_transport.h"

namespace grove::harness {

/// The link key every SocketJob's ranks share.
constexpr uint64_t kSocketJobSecret = 0xfeedbeefcafe1234ull;

struct SocketJob {
  explicit SocketJob(int n, size_t bufferBytes = 64 << 10, double timeout = 20) : signals(n) {
    std::vector<std::unique_ptr<transport::SocketListener>> listeners;
    for (int r = 0; r < n; ++r)
      listeners.push_back(
          std::make_unique<transport::SocketListener>(net::resolveAddress("127.0.0.1:0")));
    peers.resize(n);
    for (int r = 0; r < n; ++r) {
      peers[r].rank = r;
      addrs.push_back(transport::packSocketAddress(listeners[r]->address()));
    }
    for (int r = 0; r < n; ++r) {
      transport::Context ctx;
      ctx.rank = r;
      ctx.nranks = n;
      ctx.secret = kSocketJobSecret;
      ctx.peers = peers;
      ctx.addresses = addrs;
      ctx.bufferBytes = bufferBytes;
      ctx.wait = WaitContext::of(signals[r], timeout);
      transports.push_back(
          std::make_unique<transport::SocketTransport>(ctx, std::move(listeners[r])));
    }
  }
  std::vector<transport::PeerInfo> peers;
  std::vector<transport::Address> addrs;
  std::vector<AbortSignal> signals;
  std::vector<std::unique_ptr<transport::SocketTransport>> transports;
};

}  // namespace grove::harness
