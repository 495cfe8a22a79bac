// DeviceConnections with 2, 3 and 4 ranks as threads, host_staged emulated
// (plain shared host memory): ensure() opens, for programs from the
// builders, rings whose two ends are the same memory; the exports travel on
// the control channel; and the lowered programs, run by the device
// emulation (runEmulated) on those rings, give the CPU reference's results
// -- the device path end to end without a GPU; the same through the
// network proxy for ranks on (pretended) other hosts. Also the errors: a
// peer no transport reaches, a link to self, a bad capacity, a failing
// proxied half.
#include "core/device_connections.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "algorithms/builders/builders.h"
#include "base/error.h"
#include "base/socket.h"
#include "core/bootstrap.h"
#include "core/connections.h"
#include "exec/device/emulate.h"
#include "transports/proxy/device_proxy.h"
#include "transports/socket/socket_transport.h"
#include "unit/harness/run_threads.h"
#include "unit/harness/thread_ranks.h"

namespace grove::core {
namespace {

using exec::dev::DevProgram;
using transport::DevRing;
using transport::LinkKey;

// A barrier for rank threads that gives up on abort or after a minute.
class Rendezvous {
 public:
  explicit Rendezvous(int n) : n_(n) {}
  void arrive(const WaitContext& w) {
    std::unique_lock<std::mutex> lk(mu_);
    const int gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (gen_ == gen) {
      cv_.wait_for(lk, std::chrono::milliseconds(10));
      if (w.abortFlag != nullptr && w.abortFlag->load()) throwRemoteError("rendezvous: aborted");
      if (std::chrono::steady_clock::now() > deadline) throwRemoteError("rendezvous: timed out");
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, count_ = 0, gen_ = 0;
};

// hostOf(r): which (pretended) host rank r is on; empty: all on this one.
using HostOf = std::function<int(int)>;

transport::DeviceContext deviceContext(const std::string& job, int rank, int nranks,
                                       const HostOf& hostOf = {}) {
  transport::DeviceContext c;
  c.rank = rank;
  c.nranks = nranks;
  c.jobId = job;
  for (int r = 0; r < nranks; ++r) {
    c.peers.push_back(localDevicePeer(r, -1));
    if (hostOf) c.peers.back().hostHash += static_cast<uint64_t>(hostOf(r));
  }
  return c;
}

constexpr size_t kBuffer = 16 << 10;
constexpr uint64_t kChunk = 4 << 10;

plan::CollArgs argsFor(plan::Coll coll, uint64_t count, int rank, int nranks, int root = 0) {
  plan::CollArgs a;
  a.coll = coll;
  a.count = count;
  a.dtype = groveFloat32;
  a.op = groveSum;
  a.rank = rank;
  a.nranks = nranks;
  a.root = root;
  return a;
}

// The builders' programs the tests open rings for.
std::vector<plan::Program> programsFor(int rank, int n) {
  plan::PlanParams two{2, kChunk}, one{1, kChunk};
  using plan::Coll;
  return {plan::buildRingAllReduce(argsFor(Coll::kAllReduce, 5000, rank, n), two),
          plan::buildChainBroadcast(argsFor(Coll::kBroadcast, 3000, rank, n, n - 1), one),
          plan::buildRingAllGather(argsFor(Coll::kAllGather, 1000, rank, n), one),
          plan::buildDirectAllReduce(argsFor(Coll::kAllReduce, 100, rank, n), one),
          plan::buildAlltoAll(argsFor(Coll::kAlltoAll, 64, rank, n), one)};
}

// Runs body(rank thread, its DeviceConnections) on n thread ranks (loopback
// host links), emulated host_staged rings; all ranks meet before teardown.
void onRanks(int n, const std::function<void(harness::ThreadRank&, DeviceConnections&)>& body,
             const HostOf& hostOf = {}) {
  const std::string job = harness::newJobId() + "-dev";
  Rendezvous end(n);
  harness::ThreadRanksOptions opts;
  opts.timeoutSec = 30;
  harness::runOnThreadRanks(n, opts, [&](harness::ThreadRank& tr) {
    HostLinks links = [&tr](const plan::Program& p) -> exec::LinkTable& {
      tr.establishFor(p);
      return tr.links();
    };
    DeviceLinkOptions o;
    o.emulate = true;
    o.ringCapacity = deviceRingCapacity(kBuffer, kChunk);
    DeviceConnections dc(deviceContext(job, tr.rank(), n, hostOf), links, tr.wait(), o);
    body(tr, dc);
    end.arrive(tr.wait());  // no rank closes its rings while a peer still uses them
  });
}

uint64_t marker(int from, int to, const LinkKey& k) {
  return (uint64_t(from) << 48) | (uint64_t(to) << 32) | (uint64_t(k.channel) << 16) | k.route;
}

class DeviceConnectionsN : public ::testing::TestWithParam<int> {};

TEST_P(DeviceConnectionsN, BothEndsOfEveryLinkShareOneRing) {
  const int n = GetParam();
  Rendezvous mid(n);
  onRanks(n, [&](harness::ThreadRank& tr, DeviceConnections& dc) {
    const int me = tr.rank();
    EXPECT_EQ(dc.summary(), "host_staged (emulated)");
    std::vector<std::pair<DevProgram, DeviceRingTables>> opened;
    for (const plan::Program& p : programsFor(me, n)) {
      DevProgram d = exec::dev::lowerProgram(p);
      DeviceRingTables t = dc.ensure(d);
      ASSERT_EQ(t.sends.size(), d.sendKeys.size());
      ASSERT_EQ(t.recvs.size(), d.recvKeys.size());
      opened.emplace_back(std::move(d), t);
    }
    // Opening again costs nothing and gives the same rings.
    const size_t sends = dc.sendCount(), recvs = dc.recvCount();
    DeviceRingTables again = dc.ensure(opened[0].first);
    EXPECT_EQ(dc.sendCount(), sends);
    EXPECT_EQ(dc.recvCount(), recvs);
    for (size_t i = 0; i < again.sends.size(); ++i)
      EXPECT_EQ(again.sends[i].data, opened[0].second.sends[i].data);
    // The exports used the control channel, never a collective's.
    for (const auto& [d, t] : opened)
      for (const LinkKey& k : d.sendKeys)
        EXPECT_TRUE(tr.links().hasRecv({k.peer, kDeviceControlChannel, 0}));
    // Every sender marks its rings; every receiver finds its peer's mark.
    for (const auto& [d, t] : opened)
      for (size_t i = 0; i < d.sendKeys.size(); ++i) {
        EXPECT_EQ(t.sends[i].capacity, dc.ringCapacity());
        const uint64_t m = marker(me, d.sendKeys[i].peer, d.sendKeys[i]);
        std::memcpy(t.sends[i].data + 8, &m, sizeof(m));
        std::memcpy(t.sends[i].data + dc.ringCapacity() - 8, &m, sizeof(m));
      }
    mid.arrive(tr.wait());
    for (const auto& [d, t] : opened)
      for (size_t i = 0; i < d.recvKeys.size(); ++i) {
        const LinkKey& k = d.recvKeys[i];
        uint64_t a = 0, b = 0;
        std::memcpy(&a, t.recvs[i].data + 8, sizeof(a));
        std::memcpy(&b, t.recvs[i].data + dc.ringCapacity() - 8, sizeof(b));
        EXPECT_EQ(a, marker(k.peer, me, k))
            << "rank " << me << " from " << k.peer << " ch " << k.channel;
        EXPECT_EQ(b, marker(k.peer, me, k));
      }
  });
}

// Binds a lowered program to its rings and buffers and runs it emulated.
void runDevice(const DevProgram& d, const DeviceRingTables& t, const void* in, void* out,
               std::vector<uint8_t>& scratch, int nranks) {
  exec::dev::DevCall call;
  call.program.phases = d.phases.data();
  call.program.lanes = d.lanes.data();
  call.program.steps = d.steps.data();
  call.program.sends = t.sends.data();
  call.program.recvs = t.recvs.data();
  call.program.nPhases = static_cast<uint32_t>(d.phases.size());
  call.program.maxLanes = d.maxLanes;
  call.reduce = {groveFloat32, groveSum, nranks};
  scratch.assign(d.scratchBytes + 64, 0);
  call.bufs[exec::dev::kSlotInput] = static_cast<uint8_t*>(const_cast<void*>(in));
  call.bufs[exec::dev::kSlotOutput] = static_cast<uint8_t*>(out);
  call.bufs[exec::dev::kSlotScratch] = scratch.data();
  exec::dev::DevControl ctl;
  ctl.timeoutNs = 30'000'000'000ull;
  exec::dev::runEmulated(&call, 1, ctl);
  ASSERT_EQ(ctl.status, exec::dev::kDevOk) << "phase " << ctl.failedPhase << " lane "
                                           << ctl.failedLane << " step " << ctl.failedStep << "\n"
                                           << exec::dev::describe(d);
}

float valueOf(int rank, uint64_t i) { return static_cast<float>(rank * 1000 + int(i % 251)); }

// All-reduce, all-gather and broadcast, one after another over the same
// rings (the counters carry on across launches), against the CPU reference.
void runCollectives(int me, int n, DeviceConnections& dc, int rounds) {
  const uint64_t count = 9000;  // 36 KB: several chunks and ring wraps
  std::vector<float> in(count), out(count * n);
  std::vector<uint8_t> scratch;
  for (uint64_t i = 0; i < count; ++i) in[i] = valueOf(me, i);
  for (int round = 0; round < rounds; ++round) {
    using plan::Coll;
    DevProgram ar = exec::dev::lowerProgram(
        plan::buildRingAllReduce(argsFor(Coll::kAllReduce, count, me, n), {2, kChunk}));
    runDevice(ar, dc.ensure(ar), in.data(), out.data(), scratch, n);
    for (uint64_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += valueOf(r, i);
      ASSERT_EQ(out[i], want) << "all-reduce, rank " << me << " element " << i;
    }
    DevProgram ag = exec::dev::lowerProgram(
        plan::buildRingAllGather(argsFor(Coll::kAllGather, count, me, n), {1, kChunk}));
    runDevice(ag, dc.ensure(ag), in.data(), out.data(), scratch, n);
    for (int r = 0; r < n; ++r)
      for (uint64_t i = 0; i < count; ++i)
        ASSERT_EQ(out[r * count + i], valueOf(r, i)) << "all-gather, rank " << me << " block " << r;
    const int root = (round + 1) % n;
    DevProgram bc = exec::dev::lowerProgram(
        plan::buildChainBroadcast(argsFor(Coll::kBroadcast, count, me, n, root), {1, kChunk}));
    std::fill(out.begin(), out.end(), -1.0f);
    runDevice(bc, dc.ensure(bc), in.data(), out.data(), scratch, n);
    for (uint64_t i = 0; i < count; ++i)
      ASSERT_EQ(out[i], valueOf(root, i)) << "broadcast from " << root << ", rank " << me;
  }
}

TEST_P(DeviceConnectionsN, LoweredProgramsRunOnTheRingsEmulated) {
  onRanks(GetParam(), [](harness::ThreadRank& tr, DeviceConnections& dc) {
    runCollectives(tr.rank(), tr.nranks(), dc, 2);
  });
}

// Every rank on a host of its own: every link goes through the network
// proxy (local rings pumped over the loopback host links).
TEST_P(DeviceConnectionsN, ProxiedRanksOnSeparateHosts) {
  onRanks(
      GetParam(),
      [](harness::ThreadRank& tr, DeviceConnections& dc) {
        EXPECT_EQ(dc.summary(), "proxy (emulated)");
        runCollectives(tr.rank(), tr.nranks(), dc, 2);
        EXPECT_EQ(dc.transportError(), "");
        const int next = (tr.rank() + 1) % tr.nranks();  // the rings' successor
        EXPECT_TRUE(tr.links().hasSend({next, kDeviceProxyChannelBase + 0, 0}));
        EXPECT_TRUE(tr.links().hasSend({next, kDeviceProxyChannelBase + 1, 0}));
      },
      [](int r) { return r + 1; });
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceConnectionsN, ::testing::Values(2, 3, 4));

// Two hosts of two ranks: host_staged inside a host, the proxy between them.
TEST(DeviceConnections, MixedHostStagedAndProxy) {
  onRanks(
      4,
      [](harness::ThreadRank& tr, DeviceConnections& dc) {
        EXPECT_EQ(dc.summary(), "host_staged+proxy (emulated)");
        const int buddy = tr.rank() ^ 1;
        EXPECT_STREQ(dc.transportName(buddy), "host_staged");
        EXPECT_STREQ(dc.transportName((tr.rank() + 2) % 4), "proxy");
        runCollectives(tr.rank(), tr.nranks(), dc, 1);
      },
      [](int r) { return r / 2; });
}

// Ranks on (pretended) separate hosts with the communicator's own TCP links:
// the proxy pumps the rings through real socket halves (flush, partial writes).
TEST(DeviceConnections, ProxyOverTheCommunicatorsSocketLinks) {
  const int n = 3;
  const std::string job = harness::newJobId() + "-devsock";
  std::vector<std::vector<OpenedTransport>> opened(n);
  std::vector<transport::PeerInfo> peers(n);
  for (int r = 0; r < n; ++r) {
    peers[r] = localPeerInfo(r);
    peers[r].hostHash += static_cast<uint64_t>(r) + 1;  // every rank a host of its own
    opened[r] = openTransports("socket", {}, &peers[r]);
  }
  AbortSignal abort;
  Rendezvous end(n);
  harness::runThreads(n, [&](int rank) {
    transport::Context ctx;
    ctx.rank = rank;
    ctx.nranks = n;
    ctx.jobId = job;
    ctx.secret = 0x5eed;
    ctx.peers = peers;
    ctx.bufferBytes = 8 << 10;  // smaller than a ring: the proxy waits on the socket too
    ctx.wait = WaitContext::of(abort, 30);
    Connections conns(ctx, std::move(opened[rank]), "socket");
    ASSERT_EQ(conns.summary(), "socket");
    HostLinks links = [&conns](const plan::Program& p) -> exec::LinkTable& {
      return conns.ensure(p);
    };
    DeviceLinkOptions o{true, deviceRingCapacity(kBuffer, kChunk)};
    DeviceConnections dc(deviceContext(job, rank, n, [](int r) { return r + 1; }), links, ctx.wait,
                         o);
    EXPECT_EQ(dc.summary(), "proxy (emulated)");
    runCollectives(rank, n, dc, 1);
    EXPECT_EQ(dc.transportError(), "");
    end.arrive(ctx.wait);
  });
}

// A host half that fails: the proxy closes the ring (the device program
// then fails instead of waiting) and reports why.
// The ring's closed word once it is set, or after 30 s.
uint32_t closedWithin30s(const DevRing& r) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::atomic_ref<uint32_t>(*r.closed).load() == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return std::atomic_ref<uint32_t>(*r.closed).load();
}

TEST(DeviceProxy, AFailingHostHalfClosesItsRing) {
  using transport::DeviceProxy;
  struct BrokenHalf : transport::SendHalf {
    size_t reserve(void**) override { throwRemoteError("peer went away"); }
    void commit(size_t) override {}
  } broken;
  AbortSignal abort;
  DeviceProxy proxy(0, true, WaitContext::of(abort, 5));
  DevRing r = proxy.addSend({1, 0, 0}, 1024, broken);
  std::atomic_ref<uint64_t>(*r.head).store(16,
                                           std::memory_order_release);  // the device wrote 16 bytes
  EXPECT_EQ(closedWithin30s(r), 1u);
  EXPECT_NE(proxy.error().find("peer went away"), std::string::npos) << proxy.error();
}

// An abort closes every proxied ring.
TEST(DeviceProxy, AbortClosesTheRings) {
  using transport::DeviceProxy;
  struct IdleHalf : transport::RecvHalf {
    size_t peek(const void**) override { return 0; }
    void consume(size_t) override {}
  } idle;
  AbortSignal abort;
  DeviceProxy proxy(0, true, WaitContext::of(abort, 5));
  DevRing r = proxy.addRecv({1, 0, 0}, 1024, idle);
  EXPECT_EQ(proxy.ringCount(), 1u);
  abort.raise("test abort");
  EXPECT_EQ(closedWithin30s(r), 1u);
  EXPECT_NE(proxy.error().find("test abort"), std::string::npos) << proxy.error();
}

// The communicator's own host links (Connections over shared memory) carry the exchange.
TEST(DeviceConnections, ExchangeOverTheCommunicatorsShmLinks) {
  const int n = 3;
  const std::string job = harness::newJobId() + "-devshm";
  AbortSignal abort;
  Rendezvous end(n);
  harness::runThreads(n, [&](int rank) {
    transport::Context ctx;
    ctx.rank = rank;
    ctx.nranks = n;
    ctx.jobId = job;
    for (int r = 0; r < n; ++r) ctx.peers.push_back(localPeerInfo(r));
    ctx.bufferBytes = 64 << 10;
    ctx.wait = WaitContext::of(abort, 30);
    Connections conns(ctx, openTransports("shm", {}, &ctx.peers[rank]), "shm");
    HostLinks links = [&conns](const plan::Program& p) -> exec::LinkTable& {
      return conns.ensure(p);
    };
    DeviceLinkOptions o{true, deviceRingCapacity(kBuffer, kChunk)};
    DeviceConnections dc(deviceContext(job, rank, n), links, ctx.wait, o);
    const uint64_t count = 4000;
    std::vector<float> in(count), out(count);
    std::vector<uint8_t> scratch;
    for (uint64_t i = 0; i < count; ++i) in[i] = valueOf(rank, i);
    DevProgram ar = exec::dev::lowerProgram(
        plan::buildRingAllReduce(argsFor(plan::Coll::kAllReduce, count, rank, n), {2, kChunk}));
    runDevice(ar, dc.ensure(ar), in.data(), out.data(), scratch, n);
    for (uint64_t i = 0; i < count; ++i)
      ASSERT_EQ(out[i], valueOf(0, i) + valueOf(1, i) + valueOf(2, i)) << "rank " << rank;
    end.arrive(ctx.wait);
  });
}

TEST(DeviceConnections, BadInputGetsClearErrors) {
  const std::string job = harness::newJobId() + "-deverr";
  AbortSignal abort;
  const WaitContext wait = WaitContext::of(abort, 5);
  HostLinks noLinks = [](const plan::Program&) -> exec::LinkTable& {
    throwInternalError("no exchange expected");
  };
  // A peer of this host that no transport reaches.
  std::vector<std::unique_ptr<transport::DeviceTransport>> none;
  try {
    DeviceConnections dc(deviceContext(job, 0, 2), noLinks, wait, DeviceLinkOptions{true, 4096},
                         std::move(none));
    ADD_FAILURE() << "accepted a peer no transport reaches";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("no device transport"), std::string::npos) << e.what();
  }
  // A peer on another host goes through the proxy.
  DeviceConnections split(deviceContext(job, 0, 3, [](int r) { return r == 2 ? 1 : 0; }), noLinks,
                          wait, DeviceLinkOptions{true, 4096});
  EXPECT_STREQ(split.transportName(1), "host_staged");
  EXPECT_STREQ(split.transportName(2), "proxy");
  EXPECT_EQ(split.summary(), "host_staged+proxy (emulated)");
  EXPECT_THROW(
      DeviceConnections(deviceContext(job, 0, 2), noLinks, wait, DeviceLinkOptions{true, 1000}),
      Error);
  EXPECT_THROW(
      DeviceConnections(deviceContext(job, 0, 2), nullptr, wait, DeviceLinkOptions{true, 4096}),
      Error);
  DeviceConnections dc(deviceContext(job, 0, 2), noLinks, wait, DeviceLinkOptions{true, 4096});
  EXPECT_STREQ(dc.transportName(1), "host_staged");
  EXPECT_STREQ(dc.transportName(0), "");
  DevProgram self;
  self.sendKeys.push_back({0, 0, 0});
  EXPECT_THROW(dc.ensure(self), Error);
  DevProgram outOfRange;
  outOfRange.recvKeys.push_back({5, 0, 0});
  EXPECT_THROW(dc.ensure(outOfRange), Error);
  EXPECT_EQ(dc.ensure(DevProgram{}).sends.size(), 0u);
  EXPECT_EQ(deviceRingCapacity(1000, 4096), 4160u);
  EXPECT_EQ(deviceRingCapacity(1 << 20, 4096), uint64_t(1) << 20);
  EXPECT_EQ(deviceRingCapacity(100000, 512), 100032u);
}

}  // namespace
}  // namespace grove::core
