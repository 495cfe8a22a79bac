// Socket transport over link addresses: every rank listens on the wildcard
// address and publishes 127.0.0.1; Context::routes names, per peer, a local
// address to bind and a remote one to connect to, all in 127/8 (on lo, so no
// privileges needed). getsockname/getpeername on both ends must show those
// addresses, and bytes must still flow.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "base/error.h"
#include "base/socket.h"
#include "transports/socket/socket_transport.h"
#include "unit/harness/run_threads.h"

namespace grove::transport {
namespace {

constexpr int kRanks = 3;

// 127.0.(10 + from).(10 + to): the address rank `from` has on its link to `to`.
std::string linkAddr(int from, int to) {
  return "127.0." + std::to_string(10 + from) + "." + std::to_string(10 + to);
}

sockaddr_storage ip(const std::string& text) { return net::resolveAddress(text, 0); }

std::string hostOf(int fd, bool peer) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if ((peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
            : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len)) != 0)
    return "?";
  return net::formatHost(a);
}

struct LinkJob {
  // withLocal: routes name a local address too; else only the remote one.
  explicit LinkJob(bool withLocal) : signals(kRanks) {
    std::vector<std::unique_ptr<SocketListener>> listeners;
    for (int r = 0; r < kRanks; ++r)
      listeners.push_back(std::make_unique<SocketListener>(ip("0.0.0.0"), ip("127.0.0.1")));
    std::vector<PeerInfo> peers(kRanks);
    std::vector<Address> addrs;
    for (int r = 0; r < kRanks; ++r) {
      peers[r].rank = r;
      addrs.push_back(packSocketAddress(listeners[r]->address()));
      EXPECT_EQ(net::formatHost(listeners[r]->address()), "127.0.0.1");
      EXPECT_TRUE(net::addressIsAny(listeners[r]->boundAddress()));
      EXPECT_EQ(net::addressPort(listeners[r]->address()),
                net::addressPort(listeners[r]->boundAddress()));
    }
    for (int r = 0; r < kRanks; ++r) {
      Context ctx;
      ctx.rank = r;
      ctx.nranks = kRanks;
      ctx.secret = 42;
      ctx.peers = peers;
      ctx.addresses = addrs;
      ctx.bufferBytes = 1 << 16;
      ctx.wait = WaitContext::of(signals[r], 20);
      ctx.routes.resize(kRanks);
      for (int p = 0; p < kRanks; ++p) {
        if (p == r) continue;
        if (withLocal) ctx.routes[p].local = ip(linkAddr(r, p));
        ctx.routes[p].remote = ip(linkAddr(p, r));
      }
      transports.push_back(std::make_unique<SocketTransport>(ctx, std::move(listeners[r])));
    }
  }
  std::vector<AbortSignal> signals;
  std::vector<std::unique_ptr<SocketTransport>> transports;
};

void runRanks(const std::function<void(int)>& fn) { harness::runThreads(kRanks, fn); }

// Every rank sends one byte to every other and checks the addresses of each connection.
void exchange(LinkJob& job, bool withLocal) {
  runRanks([&](int r) {
    std::vector<LinkKey> keys;
    for (int p = 0; p < kRanks; ++p)
      if (p != r) keys.push_back({p, 0});
    std::vector<std::unique_ptr<SendHalf>> sends;
    std::vector<std::unique_ptr<RecvHalf>> recvs;
    job.transports[r]->establish(keys, keys, sends, recvs);
    for (size_t i = 0; i < keys.size(); ++i) {
      const int p = keys[i].peer;
      const int sfd = sends[i]->pollFd(), rfd = recvs[i]->pollFd();
      EXPECT_EQ(hostOf(sfd, true), linkAddr(p, r)) << r << " -> " << p;
      EXPECT_EQ(hostOf(rfd, false), linkAddr(r, p)) << r << " <- " << p;
      if (withLocal) {
        EXPECT_EQ(hostOf(sfd, false), linkAddr(r, p)) << r << " -> " << p;
        EXPECT_EQ(hostOf(rfd, true), linkAddr(p, r)) << r << " <- " << p;
      }
      void* out = nullptr;
      ASSERT_GT(sends[i]->reserve(&out), 0u);
      *static_cast<uint8_t*>(out) = static_cast<uint8_t>(10 * r + p);
      sends[i]->commit(1);
      while (!sends[i]->flush()) std::this_thread::yield();
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      const void* in = nullptr;
      for (int spins = 0; recvs[i]->peek(&in) == 0; ++spins) {
        ASSERT_LT(spins, 200000) << "no byte from " << keys[i].peer;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      EXPECT_EQ(*static_cast<const uint8_t*>(in), 10 * keys[i].peer + r);
      recvs[i]->consume(1);
    }
  });
}

TEST(SocketLinkAddresses, BindsAndConnectsToTheLinkAddresses) {
  LinkJob job(/*withLocal=*/true);
  exchange(job, true);
}

TEST(SocketLinkAddresses, RemoteOnlyConnectsToTheLinkAddress) {
  LinkJob job(/*withLocal=*/false);
  exchange(job, false);
}

TEST(SocketLinkAddresses, RoutesMustCoverEveryRank) {
  AbortSignal signal;
  Context ctx;
  ctx.rank = 0;
  ctx.nranks = 2;
  ctx.peers.resize(2);
  ctx.addresses.resize(2);
  ctx.wait = WaitContext::of(signal, 5);
  ctx.routes.resize(1);
  auto listener = std::make_unique<SocketListener>(ip("127.0.0.1"));
  try {
    SocketTransport t(ctx, std::move(listener));
    ADD_FAILURE() << "a route list of the wrong size was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 peer routes for 2 ranks"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace grove::transport
