// The transport conformance suite: every transport in the registry
// (transports/registry.h), opened the way a communicator opens it, must
// move bytes alike. Ranks are threads of this process; each test runs once
// per registered transport (as Gloo's transport tests do). A transport that
// cannot work on this host (the network transport without libfabric) is
// skipped, saying why.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "transports/registry.h"
#include "unit/harness/run_threads.h"
#include "unit/harness/thread_ranks.h"

namespace grove::transport {
namespace {

/// n thread-ranks of one host with the transport `name`, opened and made
/// as the core does (open before the "bootstrap", make after).
struct Job {
  Job(const std::string& name, int n, size_t bufferBytes, double timeout = 20) : signals(n) {
    int slot = -1;
    for (size_t i = 0; i < registry().size(); ++i)
      if (name == registry()[i].name) slot = static_cast<int>(i);
    if (slot < 0) throw std::runtime_error("no transport " + name);
    const TransportEntry& e = registry()[slot];
    OpenArgs args;
    args.named = true;
    std::vector<std::unique_ptr<Endpoint>> endpoints;
    std::vector<PeerInfo> peers(n);
    char host[64] = "conformance";
    for (int r = 0; r < n; ++r) {
      peers[r].rank = r;
      peers[r].pid = static_cast<int32_t>(getpid());
      peers[r].hostHash = 0x600d;
      std::memcpy(peers[r].hostName, host, sizeof(host));
      try {
        endpoints.push_back(e.open(args));
      } catch (const Error& err) {
        unavailable = err.what();
        return;
      }
      if (!endpoints.back()) {
        unavailable = name + " cannot work on this host";
        return;
      }
      peers[r].addresses[slot] = endpoints.back()->address();
    }
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b && !e.canConnect({peers[a], peers[a].addresses[slot]},
                                    {peers[b], peers[b].addresses[slot]}))
          throw std::runtime_error(name + ": rank " + std::to_string(a) + " cannot reach " +
                                   std::to_string(b));
    const std::string jobId = harness::newJobId() + "-conf";
    for (int r = 0; r < n; ++r) {
      Context ctx;
      ctx.rank = r;
      ctx.nranks = n;
      ctx.jobId = jobId;
      ctx.secret = 0xc0ffee;
      ctx.peers = peers;
      ctx.bufferBytes = bufferBytes;
      ctx.wait = WaitContext::of(signals[r], timeout);
      transports.push_back(e.make(contextForSlot(ctx, slot), std::move(endpoints[r])));
    }
  }
  std::string unavailable;
  std::vector<AbortSignal> signals;
  std::vector<std::unique_ptr<Transport>> transports;
};

uint8_t pattern(int src, int channel, uint64_t i) {
  return static_cast<uint8_t>(i * 131 + src * 17 + channel * 7 + (i >> 12));
}

struct Halves {
  std::vector<std::unique_ptr<SendHalf>> sends;
  std::vector<std::unique_ptr<RecvHalf>> recvs;
};

Halves open(Transport& t, const std::vector<LinkKey>& s, const std::vector<LinkKey>& r) {
  Halves h;
  t.establish(s, r, h.sends, h.recvs);
  EXPECT_EQ(h.sends.size(), s.size());
  EXPECT_EQ(h.recvs.size(), r.size());
  return h;
}

/// Sends `total` bytes on every send half while receiving as much on every
/// receive half (recvs[i] from peers[i], channels[i]), in pieces of at most
/// `piece`; checks every byte.
void pump(Halves& h, int me, const std::vector<LinkKey>& sendKeys,
          const std::vector<LinkKey>& recvKeys, uint64_t total, size_t piece,
          const WaitContext& wc) {
  std::vector<uint64_t> sent(h.sends.size(), 0), got(h.recvs.size(), 0);
  Waiter waiter(wc, "conformance pump");
  for (;;) {
    bool moved = false, done = true;
    for (size_t i = 0; i < h.sends.size(); ++i) {
      if (sent[i] < total) {
        void* p;
        const size_t room = h.sends[i]->reserve(&p);
        const size_t n = std::min<uint64_t>({room, total - sent[i], piece});
        for (size_t k = 0; k < n; ++k)
          static_cast<uint8_t*>(p)[k] = pattern(me, sendKeys[i].channel, sent[i] + k);
        if (n > 0) h.sends[i]->commit(n);
        sent[i] += n;
        moved |= n > 0;
      }
      done &= sent[i] == total && h.sends[i]->flush();
    }
    for (size_t i = 0; i < h.recvs.size(); ++i) {
      const void* q;
      const size_t avail = got[i] < total ? h.recvs[i]->peek(&q) : 0;
      for (size_t k = 0; k < avail; ++k)
        ASSERT_EQ(static_cast<const uint8_t*>(q)[k],
                  pattern(recvKeys[i].peer, recvKeys[i].channel, got[i] + k))
            << "byte " << got[i] + k << " from rank " << recvKeys[i].peer;
      if (avail > 0) h.recvs[i]->consume(avail);
      got[i] += avail;
      moved |= avail > 0;
      done &= got[i] == total;
      ASSERT_LE(got[i], total);
    }
    if (done) return;
    if (moved)
      waiter.progressed();
    else
      waiter.wait();
  }
}

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Job> job(int n, size_t buffer, double timeout = 20) {
    auto j = std::make_unique<Job>(GetParam(), n, buffer, timeout);
    return j;
  }
};

#define SKIP_IF_UNAVAILABLE(j) \
  if (!(j)->unavailable.empty()) GTEST_SKIP() << (j)->unavailable

// Every size from one byte to several buffers, both ways at once: the
// rings wrap many times and pieces straddle the wrap.
TEST_P(Conformance, SizesAndWrapAround) {
  for (uint64_t total : {uint64_t{1}, uint64_t{4095}, uint64_t{65536 + 17}, uint64_t{5u << 20}}) {
    auto j = job(2, 64 << 10);
    SKIP_IF_UNAVAILABLE(j);
    harness::runThreads(2, [&](int me) {
      const int peer = 1 - me;
      std::vector<LinkKey> s = {{peer, 0}}, r = {{peer, 0}};
      Halves h = open(*j->transports[me], s, r);
      pump(h, me, s, r, total, 20000,
           j->transports.size() ? WaitContext::of(j->signals[me], 20) : WaitContext{});
    });
  }
}

// Many channels to several peers at once; every channel its own stream.
TEST_P(Conformance, ManyChannelsManyPeers) {
  const int n = 3, channels = 8;
  auto j = job(n, 32 << 10);
  SKIP_IF_UNAVAILABLE(j);
  harness::runThreads(n, [&](int me) {
    std::vector<LinkKey> s, r;
    for (int p = 0; p < n; ++p)
      for (int c = 0; c < channels && p != me; ++c) {
        s.push_back({p, c});
        r.push_back({p, c});
      }
    Halves h = open(*j->transports[me], s, r);
    pump(h, me, s, r, 300000, 7000, WaitContext::of(j->signals[me], 20));
  });
}

// Links opened over several calls, the peer asking in another order.
TEST_P(Conformance, LinksOpenedLaterAndOutOfOrder) {
  auto j = job(2, 16 << 10);
  SKIP_IF_UNAVAILABLE(j);
  harness::runThreads(2, [&](int me) {
    const int peer = 1 - me;
    for (int c : {3, 1}) {
      std::vector<LinkKey> s = {{peer, c}}, r = {{peer, c}};
      Halves h = open(*j->transports[me], s, r);
      pump(h, me, s, r, 100000, 4096, WaitContext::of(j->signals[me], 20));
    }
  });
}

// A link asked for twice, or to a rank out of range, is refused.
TEST_P(Conformance, BadLinksAreRefused) {
  auto j = job(2, 16 << 10);
  SKIP_IF_UNAVAILABLE(j);
  Halves h;
  EXPECT_THROW(j->transports[0]->establish({{1, 0}, {1, 0}}, {}, h.sends, h.recvs), Error);
  EXPECT_FALSE(j->transports[0]->canConnect(7));
}

// A peer that never opens its end: the opening side fails within its
// timeout instead of waiting forever (transports that never wait to open,
// like loopback, fail on the first read instead: tested by the close test).
TEST_P(Conformance, TimeoutWhenThePeerNeverComes) {
  if (GetParam() == "loopback") GTEST_SKIP() << "loopback opens without waiting for the peer";
  auto j = job(2, 16 << 10, 1.0);
  SKIP_IF_UNAVAILABLE(j);
  Halves h;
  const auto start = std::chrono::steady_clock::now();
  try {
    j->transports[0]->establish({{1, 0}}, {{1, 0}}, h.sends, h.recvs);
    // Some transports (socket) open a send link without the peer: then reading waits.
    const void* q;
    Waiter w(WaitContext::of(j->signals[0], 1.0), "conformance read");
    for (;;) {
      if (h.recvs.empty() || h.recvs[0]->peek(&q) > 0) break;
      w.wait();
    }
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveRemoteError) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
}

// A sender that closes after sending: the receiver reads every byte, then
// gets groveRemoteError (the peer is gone), never a hang.
TEST_P(Conformance, CloseAfterSendingThenError) {
  auto j = job(2, 16 << 10, 5.0);
  SKIP_IF_UNAVAILABLE(j);
  Halves h0, h1;
  harness::runThreads(2, [&](int me) {
    if (me == 0)
      h0 = open(*j->transports[0], {{1, 0}}, {});
    else
      h1 = open(*j->transports[1], {}, {{0, 0}});
  });
  const uint64_t total = 40000;
  uint64_t sent = 0;
  WaitContext wc = WaitContext::of(j->signals[0], 5);
  uint64_t got = 0;
  const void* q;
  Waiter w(wc, "close test");
  while (sent < total || !h0.sends[0]->flush()) {
    void* p;
    const size_t n = std::min<uint64_t>(h0.sends[0]->reserve(&p), total - sent);
    for (size_t k = 0; k < n; ++k) static_cast<uint8_t*>(p)[k] = pattern(0, 0, sent + k);
    if (n > 0) h0.sends[0]->commit(n);
    sent += n;
    const size_t a = h1.recvs[0]->peek(&q);  // the reader makes room
    got += a;
    if (a > 0) h1.recvs[0]->consume(a);
    w.wait();
  }
  h0.sends.clear();  // close
  bool failed = false;
  try {
    Waiter w2(WaitContext::of(j->signals[1], 5), "reading until the close");
    while (got <= total) {
      const size_t a = h1.recvs[0]->peek(&q);
      got += a;
      if (a > 0)
        h1.recvs[0]->consume(a);
      else
        w2.wait();
    }
  } catch (const Error& e) {
    failed = true;
    EXPECT_EQ(e.code(), groveRemoteError) << e.what();
  }
  EXPECT_TRUE(failed);
  EXPECT_EQ(got, total);
}

std::vector<std::string> registered() {
  std::vector<std::string> names;
  for (const TransportEntry& e : registry())
    if (e.has(kByteStreams)) names.push_back(e.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Registry, Conformance, ::testing::ValuesIn(registered()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The registry itself: names unique, byte rows first (their index is their
// address slot), each kind by priority, every row able to make what it
// provides, traits sane.
TEST(TransportRegistry, RowsAreConsistent) {
  const auto& rows = registry();
  size_t bytes = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const TransportEntry& e = rows[i];
    EXPECT_EQ(findTransport(e.name), &e);
    if (e.has(kByteStreams)) {
      EXPECT_EQ(bytes, i) << e.name << ": a byte row after a device row";
      ++bytes;
      EXPECT_TRUE(e.canConnect && e.open && e.make) << e.name;
      EXPECT_EQ(e.has(kSlots), e.traits.slotLinks) << e.name;
    } else {
      EXPECT_TRUE(e.has(kDeviceRings)) << e.name << " provides nothing a communicator uses";
      EXPECT_TRUE(static_cast<bool>(e.makeDevice)) << e.name;
      EXPECT_TRUE(e.traits.deviceRings) << e.name;
    }
    if (i > 0 && rows[i - 1].has(kByteStreams) == e.has(kByteStreams)) {
      EXPECT_GE(rows[i - 1].priority, e.priority) << e.name;
    }
    EXPECT_GT(e.traits.latencyUs, 0) << e.name;
    EXPECT_GT(e.traits.stepOverheadUs, 0) << e.name;
  }
  EXPECT_GE(bytes, 3u);
  EXPECT_LE(bytes, static_cast<size_t>(kMaxTransports));
  EXPECT_NE(findTransport("SHM"), nullptr);
  EXPECT_EQ(findTransport("carrier-pigeon"), nullptr);
  EXPECT_NE(transportNames().find("socket"), std::string::npos);
  EXPECT_EQ(transportNames(kDeviceRings).find("socket"), std::string::npos);
  EXPECT_NE(transportNames(kDeviceRings).find("host_staged"), std::string::npos);
  EXPECT_NE(transportNames(kDeviceRings).find("proxy"), std::string::npos);
  ASSERT_NE(firstProviding(kSlots), nullptr);
  EXPECT_STREQ(firstProviding(kSlots)->name, "shm");
  EXPECT_EQ(describeProvides(kByteStreams | kSlots), "byte streams, slots");
}

}  // namespace
}  // namespace grove::transport
