// Rma's one-sided path (core/rma.h): ranks as threads of one process whose
// peers are reached through a transport's OneSided (here an in-process
// stand-in that writes by address and queues signals per rank). Puts land
// in the peers' windows, signals alone reach them, every put goes through
// the transport (none through byte links, which these ranks do not have),
// and deregistration drops the registrations.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/wait.h"
#include "core/rma.h"

namespace grove::core {
namespace {

using transport::OneSided;

// What every rank's stand-in shares: the signals queued for each rank.
struct Fabric {
  explicit Fabric(int n) : signals(static_cast<size_t>(n)) {}
  std::mutex mu;
  std::vector<std::deque<uint32_t>> signals;
  std::atomic<int> puts{0};
  std::atomic<int> releases{0};
  std::atomic<int> unexposes{0};
  std::atomic<bool> failWrites{false};  ///< done() reports every write failed
};

class FakeOneSided final : public OneSided {
 public:
  FakeOneSided(Fabric& f, int rank) : f_(f), rank_(rank) {}
  Remote expose(void* base, size_t bytes) override {
    Remote r;
    r.addr = reinterpret_cast<uint64_t>(base);
    r.key = 0x6b6579;
    r.bytes = bytes;
    r.rank = rank_;
    return r;
  }
  uint64_t put(const void* src, size_t n, const Remote& dst, uint64_t offset,
               uint32_t signal) override {
    if (offset > dst.bytes || n > dst.bytes - offset || dst.key != 0x6b6579)
      throwInvalidArgument("fake put outside its region");
    if (n > 0) std::memcpy(reinterpret_cast<uint8_t*>(dst.addr) + offset, src, n);
    std::lock_guard<std::mutex> lock(f_.mu);
    f_.signals[static_cast<size_t>(dst.rank)].push_back(signal);
    ++f_.puts;
    return ++next_;
  }
  bool done(uint64_t) override {
    if (f_.failWrites) throw Error(groveRemoteError, "fake write failed: the peer is gone");
    return true;
  }
  bool takeSignal(uint32_t* signal) override {
    std::lock_guard<std::mutex> lock(f_.mu);
    auto& q = f_.signals[static_cast<size_t>(rank_)];
    if (q.empty()) return false;
    *signal = q.front();
    q.pop_front();
    return true;
  }
  bool flush() override { return true; }
  void unexpose(const Remote&) override { ++f_.unexposes; }
  void release(void*) override { ++f_.releases; }
  size_t registrations() const override { return 0; }
  size_t registrationHits() const override { return 0; }

 private:
  Fabric& f_;
  int rank_;
  uint64_t next_ = 0;
};

void onRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> t;
  for (int r = 0; r < n; ++r) t.emplace_back(fn, r);
  for (auto& x : t) x.join();
}

// n ranks over the stand-in (a 10 s timeout), each with one window of
// `bytes` registered as the core does it: expose, exchange, add.
struct Ranks {
  Ranks(int n, size_t bytes)
      : fabric(n),
        wait(WaitContext::of(abort, 10)),
        win(static_cast<size_t>(n), std::vector<uint8_t>(bytes, 0)) {
    for (int r = 0; r < n; ++r) {
      os.push_back(std::make_unique<FakeOneSided>(fabric, r));
      rma.push_back(std::make_unique<Rma>(r, n, std::vector<transport::SendHalf*>(n, nullptr),
                                          std::vector<transport::RecvHalf*>(n, nullptr), wait,
                                          os.back().get(), std::vector<bool>(n, true)));
    }
    for (int r = 0; r < n; ++r) {
      remotes.push_back(rma[r]->expose(win[r].data(), bytes));
      signals.push_back(rma[r]->signalTarget());
    }
    for (int r = 0; r < n; ++r)
      rma[r]->addWindow(win[r].data(), std::vector<uint64_t>(n, bytes), remotes, signals);
  }
  Fabric fabric;
  AbortSignal abort;
  WaitContext wait;
  std::vector<std::vector<uint8_t>> win;  // (outlive the ranks, and so do their stand-ins)
  std::vector<std::unique_ptr<FakeOneSided>> os;
  std::vector<std::unique_ptr<Rma>> rma;
  std::vector<OneSided::Remote> remotes, signals;
};

TEST(RmaOneSided, PutsAndSignalsGoThroughTheTransport) {
  constexpr int n = 3;
  constexpr size_t kBytes = 100000;
  Ranks ranks(n, kBytes);
  Fabric& fabric = ranks.fabric;
  auto& rma = ranks.rma;
  auto& win = ranks.win;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(ranks.remotes[r].bytes, kBytes);
    EXPECT_NE(ranks.signals[r].addr, 0u);
  }
  onRanks(n, [&](int r) {
    std::vector<uint8_t> src(kBytes - 16);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(r * 7 + i);
    const int next = (r + 1) % n, after = (r + 2) % n;
    rma[r]->put(next, 0, 16, src.data(), src.size(), 3);
    rma[r]->put(after, Rma::kNoWindow, 0, nullptr, 0, 9);
    rma[r]->put(r, 0, 0, src.data(), 8, 1);  // to itself: a copy, no transport
    const int prev = (r + n - 1) % n, before = (r + n - 2) % n;
    rma[r]->waitSignals({{prev, 3, 1}, {before, 9, 1}, {r, 1, 1}});
    size_t bad = 0;
    for (size_t i = 0; i < src.size(); ++i)
      bad += win[r][16 + i] != static_cast<uint8_t>(prev * 7 + i);
    EXPECT_EQ(bad, 0u) << "rank " << r;
    EXPECT_EQ(rma[r]->oneSidedPuts(), 2u);
    EXPECT_THROW(rma[r]->put(next, 0, kBytes - 4, src.data(), 8, 0), Error);  // out of bounds
  });
  EXPECT_EQ(fabric.puts.load(), 2 * n);
  // Each data put's source registration is dropped once it is done (the
  // caller may free the source); a signal alone registers nothing.
  EXPECT_EQ(fabric.releases.load(), n);
  for (int r = 0; r < n; ++r) {
    std::vector<uint64_t> fromEach(n, 0);
    fromEach[(r + n - 1) % n] = 1;   // the put
    fromEach[(r + n - 2) % n] += 1;  // the signal alone
    fromEach[r] = 1;                 // its own copy
    rma[r]->drainFrom(fromEach);
    rma[r]->removeWindow(0);
  }
  EXPECT_EQ(fabric.releases.load(), 2 * n);  // each window's registration dropped
  EXPECT_EQ(fabric.unexposes.load(), n);     // and its exposure ended
  rma.clear();
  EXPECT_EQ(fabric.releases.load(), 3 * n);  // and the signal targets'
  EXPECT_EQ(fabric.unexposes.load(), 2 * n);
}

// A put whose write fails drops its source's registration as a done one
// does: the caller may free the source once the put returned, and a cached
// registration would outlive its pages (the next buffer at that address
// would be read from the old ones on a NIC that pins them).
TEST(RmaOneSided, AFailedPutDropsItsSourceRegistration) {
  Ranks ranks(2, 4096);
  Fabric& fabric = ranks.fabric;
  Rma& rank0 = *ranks.rma[0];
  std::vector<uint8_t> src(64, 7);
  fabric.failWrites = true;
  const int before = fabric.releases.load();
  EXPECT_THROW(rank0.put(1, 0, 0, src.data(), src.size(), 0), Error);
  EXPECT_EQ(fabric.releases.load(), before + 1);
  // A signal alone registered nothing, and drops nothing when it fails.
  EXPECT_THROW(rank0.put(1, Rma::kNoWindow, 0, nullptr, 0, 2), Error);
  EXPECT_EQ(fabric.releases.load(), before + 1);
}

}  // namespace
}  // namespace grove::core
