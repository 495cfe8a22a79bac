// The network transport's one-sided primitives (transport.h, OneSided):
// expose, put with signal, completion, the registration cache, refusals.
// Two thread-ranks over libfabric's tcp provider; skipped where libfabric
// or a provider is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "transports/registry.h"
#include "unit/harness/thread_ranks.h"

namespace grove::transport {
namespace {

struct Pair {
  Pair() : signals(2) {
    const TransportEntry* e = findTransport("net");
    if (e == nullptr) {
      why = "no net transport in this build";
      return;
    }
    const int slot = static_cast<int>(e - registry().data());
    OpenArgs args;
    args.named = true;
    std::vector<std::unique_ptr<Endpoint>> eps;
    std::vector<PeerInfo> peers(2);
    for (int r = 0; r < 2; ++r) {
      peers[r].rank = r;
      peers[r].pid = static_cast<int32_t>(getpid());
      try {
        eps.push_back(e->open(args));
      } catch (const Error& err) {
        why = err.what();
        return;
      }
      if (!eps.back()) {
        why = "no libfabric provider here";
        return;
      }
      peers[r].addresses[slot] = eps.back()->address();
    }
    const std::string job = harness::newJobId() + "-put";
    for (int r = 0; r < 2; ++r) {
      Context ctx;
      ctx.rank = r;
      ctx.nranks = 2;
      ctx.jobId = job;
      ctx.secret = 7;
      ctx.peers = peers;
      ctx.wait = WaitContext::of(signals[r], 20);
      t.push_back(e->make(contextForSlot(ctx, slot), std::move(eps[r])));
    }
  }
  std::string why;
  std::vector<AbortSignal> signals;
  std::vector<std::unique_ptr<Transport>> t;
};

// Waits for ready(), progressing both ranks' transports meanwhile (with
// manual progress a put completes only while its target progresses too;
// the two ranks share this thread).
OneSided* gOther = nullptr;
template <typename F>
void until(F&& ready, AbortSignal& signal) {
  Waiter w(WaitContext::of(signal, 20), "one-sided test");
  while (!ready()) {
    if (gOther != nullptr) gOther->flush();
    w.wait();
  }
}

TEST(NetOneSided, PutsLandWithTheirSignalsInOrder) {
  Pair p;
  if (!p.why.empty()) GTEST_SKIP() << p.why;
  OneSided* a = p.t[0]->oneSided();
  OneSided* b = p.t[1]->oneSided();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  gOther = a;
  std::vector<uint8_t> region(1 << 20, 0);
  const OneSided::Remote r = a->expose(region.data(), region.size());
  EXPECT_EQ(r.rank, 0);
  std::vector<uint8_t> src(256 << 10);
  std::iota(src.begin(), src.end(), 3);
  const size_t before = b->registrations();
  for (uint32_t i = 0; i < 4; ++i) {
    uint64_t op = 0;
    until([&] { return (op = b->put(src.data(), src.size(), r, i * src.size(), i + 1)) != 0; },
          p.signals[1]);
    until([&] { return b->done(op); }, p.signals[1]);
  }
  // One registration of the source however often it is put from.
  EXPECT_EQ(b->registrations() - before, 1u);
  EXPECT_GE(b->registrationHits(), 3u);
  for (uint32_t i = 0; i < 4; ++i) {
    uint32_t sig = 0;
    until([&] { return a->takeSignal(&sig); }, p.signals[0]);
    EXPECT_EQ(sig, i + 1);
  }
  for (size_t i = 0; i < region.size(); ++i)
    ASSERT_EQ(region[i], src[i % src.size()]) << "byte " << i;
  until([&] { return b->flush(); }, p.signals[1]);
  uint32_t none;
  EXPECT_FALSE(a->takeSignal(&none));
  gOther = nullptr;
}

TEST(NetOneSided, OutOfRangePutsAndBadSignalsAreRefused) {
  Pair p;
  if (!p.why.empty()) GTEST_SKIP() << p.why;
  std::vector<uint8_t> region(4096), src(100);
  const OneSided::Remote r = p.t[0]->oneSided()->expose(region.data(), region.size());
  OneSided* b = p.t[1]->oneSided();
  gOther = p.t[0]->oneSided();
  EXPECT_THROW(b->put(src.data(), src.size(), r, 4000, 1), Error);
  EXPECT_THROW(b->put(src.data(), src.size(), r, ~0ull, 1), Error);
  EXPECT_THROW(b->put(src.data(), 10, r, 0, OneSided::kMaxSignal + 1), Error);
  OneSided::Remote stranger = r;
  stranger.rank = 9;
  EXPECT_THROW(b->put(src.data(), 10, stranger, 0, 1), Error);
  // A released source is registered afresh on its next use.
  uint64_t op = 0;
  until([&] { return (op = b->put(src.data(), src.size(), r, 0, 1)) != 0; }, p.signals[1]);
  until([&] { return b->done(op); }, p.signals[1]);
  const size_t made = b->registrations();
  b->release(src.data());
  until([&] { return (op = b->put(src.data(), src.size(), r, 0, 2)) != 0; }, p.signals[1]);
  until([&] { return b->done(op); }, p.signals[1]);
  EXPECT_EQ(b->registrations(), made + 1);
  gOther = nullptr;
}

// Overlapping uses of one buffer each keep the registration they got: a
// larger region at the same address, a region inside another, a put source
// larger than a region there, and a region taken out of the cache while
// another still uses its registration. Before, the cache closed or
// replaced a registration a peer still wrote with, and that peer's next
// put failed as if this rank were gone.
TEST(NetOneSided, OverlappingUsesKeepTheirRegistrations) {
  Pair p;
  if (!p.why.empty()) GTEST_SKIP() << p.why;
  OneSided* a = p.t[0]->oneSided();
  OneSided* b = p.t[1]->oneSided();
  gOther = a;
  std::vector<uint8_t> buf(64 << 10, 0);
  uint8_t* base = buf.data();
  uint32_t sig = 0;
  // Puts `n` bytes of value v into r at offset `off` and checks they land.
  auto putAndCheck = [&](const OneSided::Remote& r, uint8_t* at, size_t off, size_t n, uint8_t v,
                         const char* what) {
    std::vector<uint8_t> src(n, v);
    uint64_t op = 0;
    ASSERT_NO_THROW({
      until([&] { return (op = b->put(src.data(), n, r, off, v)) != 0; }, p.signals[1]);
      until([&] { return b->done(op); }, p.signals[1]);
      until([&] { return a->takeSignal(&sig); }, p.signals[0]);
    }) << what;
    EXPECT_EQ(sig, v) << what;
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += at[off + i] != v;
    EXPECT_EQ(bad, 0u) << what;
    b->release(src.data());
  };
  const OneSided::Remote small = a->expose(base, 4096);
  const OneSided::Remote large = a->expose(base, 8192);  // same address, larger
  putAndCheck(small, base, 0, 4096, 1, "the smaller region after a larger one at its address");
  putAndCheck(large, base, 4096, 4096, 2, "the larger region");
  const OneSided::Remote inner = a->expose(base + 1024, 1024);  // inside both
  // Done with the smaller region: ended and out of the cache, while the
  // larger and the inner one still use theirs.
  a->unexpose(small);
  a->release(base);
  putAndCheck(large, base, 0, 8192, 3, "the larger region after the smaller one ended");
  putAndCheck(inner, base + 1024, 0, 1024, 4, "the inner region after the smaller one ended");
  // A put from rank 0 whose source starts at the regions' address and is
  // larger than them registers a range of its own, leaving theirs alone.
  {
    std::vector<uint8_t> dst(16 << 10, 0);
    const OneSided::Remote there = b->expose(dst.data(), dst.size());
    gOther = b;
    std::fill(buf.begin(), buf.begin() + (16 << 10), uint8_t{5});
    uint64_t op = 0;
    until([&] { return (op = a->put(base, 16 << 10, there, 0, 5)) != 0; }, p.signals[0]);
    until([&] { return a->done(op); }, p.signals[0]);
    until([&] { return b->takeSignal(&sig); }, p.signals[1]);
    EXPECT_EQ(dst[(16 << 10) - 1], 5);
    b->unexpose(there);
    b->release(dst.data());
    gOther = a;
  }
  putAndCheck(large, base, 0, 8192, 6, "the larger region after a larger put from its address");
  putAndCheck(inner, base + 1024, 0, 1024, 7, "the inner region after that put");
  a->unexpose(large);
  a->release(base);
  putAndCheck(inner, base + 1024, 0, 1024, 8, "the inner region after the larger one ended");
  a->unexpose(inner);
  a->release(base + 1024);
  gOther = nullptr;
}

// Each exposed region holds its registration until it ends, and the last
// use of a registration out of the cache closes it: registering the same
// range afresh afterwards costs a new registration.
TEST(NetOneSided, ARegistrationClosesWithItsLastUse) {
  Pair p;
  if (!p.why.empty()) GTEST_SKIP() << p.why;
  OneSided* a = p.t[0]->oneSided();
  std::vector<uint8_t> buf(8192);
  const size_t before = a->registrations();
  const OneSided::Remote r1 = a->expose(buf.data(), buf.size());
  const OneSided::Remote r2 = a->expose(buf.data(), buf.size());  // a hit: the same one
  EXPECT_EQ(a->registrations(), before + 1);
  EXPECT_EQ(r1.key, r2.key);
  a->release(buf.data());  // out of the cache, still used twice
  const OneSided::Remote r3 = a->expose(buf.data(), buf.size());
  EXPECT_EQ(a->registrations(), before + 2);  // the dropped one serves no new use
  EXPECT_NE(r3.key, r1.key);
  a->unexpose(r1);
  a->unexpose(r2);
  a->unexpose(r3);
  a->release(buf.data());
}

// The RDMA providers' path: the same code, chosen by GROVE_NET_PROVIDER.
// This machine has no HCA, so libfabric offers no verbs (or efa) domain:
// asking for one must be a clear error naming it, never a silent fallback.
TEST(NetProvider, AnAbsentProviderIsAClearError) {
  const TransportEntry* e = findTransport("net");
  if (e == nullptr) GTEST_SKIP() << "no net transport in this build";
  for (const char* prov : {"verbs", "efa", "no-such-provider"}) {
    config::setOverride("GROVE_NET_PROVIDER", prov);
    OpenArgs args;
    try {
      auto ep = e->open(args);
      // A machine with that provider: it opened, and says which NICs.
      if (ep) {
        EXPECT_GT(ep->address().size, 0u);
      }
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), groveInvalidUsage) << err.what();
      EXPECT_NE(std::string(err.what()).find(prov), std::string::npos) << err.what();
    }
    config::setOverride("GROVE_NET_PROVIDER", std::nullopt);
  }
}

TEST(NetOneSided, OtherTransportsHaveNone) {
  for (const TransportEntry& e : registry())
    if (std::string(e.name) == "loopback") {
      Context ctx;
      ctx.nranks = 1;
      ctx.jobId = harness::newJobId();
      ctx.peers.resize(1);
      auto t = e.make(contextForSlot(ctx, static_cast<int>(&e - registry().data())), nullptr);
      EXPECT_EQ(t->oneSided(), nullptr);
    }
}

}  // namespace
}  // namespace grove::transport
