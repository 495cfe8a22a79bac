// Tests of the shared-memory slot links (transports/shm/shm_slots.h): thread
// ranks in one process, and a forked process for the dead-peer case.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/wait.h"
#include "transports/shm/shm_slots.h"
#include "transports/shm/shm_transport.h"
#include "unit/harness/run_threads.h"
#include "unit/harness/shm_ranks.h"

namespace grove::transport {
namespace {

using harness::shmContext;
using harness::uniqueJob;

/// One rank's slot links with every other rank (by peer index; null for itself).
struct SlotRank {
  std::unique_ptr<ShmTransport> transport;
  std::vector<std::unique_ptr<SlotSender>> to;
  std::vector<std::unique_ptr<SlotReceiver>> from;
};

std::vector<SlotRank> slotMesh(int n, size_t maxBytes, int slots, const std::string& job,
                               const WaitContext& wc) {
  std::vector<SlotRank> ranks(n);
  for (int r = 0; r < n; ++r)
    ranks[r].transport = std::make_unique<ShmTransport>(shmContext(r, n, job, 4096, wc));
  harness::runThreads(n, [&](int r) {
    std::vector<int> peers;
    for (int k = 1; k < n; ++k) peers.push_back((r + k) % n);  // a different order on every rank
    std::vector<std::unique_ptr<SlotSender>> s;
    std::vector<std::unique_ptr<SlotReceiver>> q;
    ASSERT_TRUE(ranks[r].transport->establishSlots(peers, maxBytes, slots, s, q));
    ranks[r].to.resize(n);
    ranks[r].from.resize(n);
    for (size_t i = 0; i < peers.size(); ++i) {
      ranks[r].to[peers[i]] = std::move(s[i]);
      ranks[r].from[peers[i]] = std::move(q[i]);
    }
  });
  return ranks;
}

uint8_t pattern(int src, uint64_t msg, size_t i) {
  return static_cast<uint8_t>(src * 31 + msg * 7 + i * 13 + (i >> 8));
}

class ShmSlotsTest : public harness::ShmFixture {};

TEST_F(ShmSlotsTest, MessagesArriveInOrderWhole) {
  const std::string job = uniqueJob("slots");
  auto ranks = slotMesh(2, 1000, 4, job, wc_);
  EXPECT_EQ(harness::leftovers(dir_, job), 0) << "names must go once both sides are mapped";
  EXPECT_EQ(ranks[0].to[1]->maxBytes(), shm::slotStrideFor(1000) - shm::kSlotPayloadOffset);
  constexpr int kMessages = 500;  // many times round the 4 slots
  harness::runThreads(2, [&](int r) {
    Waiter w(wc_, "slot test");
    if (r == 0) {
      for (uint64_t m = 0; m < kMessages; ++m) {
        void* p;
        while ((p = ranks[0].to[1]->acquire()) == nullptr) w.wait();
        const size_t n = m * 37 % 1001;  // 0 .. 1000 bytes
        for (size_t i = 0; i < n; ++i) static_cast<uint8_t*>(p)[i] = pattern(0, m, i);
        ranks[0].to[1]->post(n);
      }
      return;
    }
    for (uint64_t m = 0; m < kMessages; ++m) {
      size_t n = 0;
      const void* p;
      while ((p = ranks[1].from[0]->poll(&n)) == nullptr) w.wait();
      ASSERT_EQ(n, m * 37 % 1001) << "message " << m;
      size_t again = 0;
      EXPECT_EQ(ranks[1].from[0]->poll(&again), p) << "poll shows the same message until release";
      size_t wrong = 0;
      for (size_t i = 0; i < n; ++i) wrong += static_cast<const uint8_t*>(p)[i] != pattern(0, m, i);
      ASSERT_EQ(wrong, 0u) << "message " << m;
      ranks[1].from[0]->release();
    }
  });
}

TEST_F(ShmSlotsTest, SenderWaitsForFreeSlots) {
  auto ranks = slotMesh(2, 64, 3, uniqueJob("credit"), wc_);
  SlotSender& s = *ranks[0].to[1];
  SlotReceiver& q = *ranks[1].from[0];
  for (int m = 0; m < 3; ++m) {
    void* p = s.acquire();
    ASSERT_NE(p, nullptr) << m;
    std::memset(p, m, 8);
    s.post(8);
  }
  EXPECT_EQ(s.acquire(), nullptr) << "three messages unreleased fill three slots";
  size_t n = 0;
  const void* p = q.poll(&n);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(static_cast<const uint8_t*>(p)[0], 0);
  EXPECT_EQ(s.acquire(), nullptr) << "a message read but not released keeps its slot";
  q.release();
  EXPECT_NE(s.acquire(), nullptr) << "released: its slot is free again";
}

TEST_F(ShmSlotsTest, FiveRanksFullMeshEstablishAtOnceAndCrossTalk) {
  const std::string job = uniqueJob("mesh");
  constexpr int kRanks = 5;
  auto ranks = slotMesh(kRanks, 48, 8, job, wc_);
  EXPECT_EQ(harness::leftovers(dir_, job), 0);
  harness::runThreads(kRanks, [&](int r) {
    Waiter w(wc_, "cross talk");
    for (uint64_t round = 0; round < 100; ++round) {
      for (int p = 0; p < kRanks; ++p) {
        if (p == r) continue;
        void* slot;
        while ((slot = ranks[r].to[p]->acquire()) == nullptr) w.wait();
        uint64_t v = round * 1000 + r * 10 + p;
        std::memcpy(slot, &v, sizeof v);
        ranks[r].to[p]->post(sizeof v);
      }
      for (int p = 0; p < kRanks; ++p) {
        if (p == r) continue;
        size_t n = 0;
        const void* msg;
        while ((msg = ranks[r].from[p]->poll(&n)) == nullptr) w.wait();
        uint64_t v = 0;
        ASSERT_EQ(n, sizeof v);
        std::memcpy(&v, msg, sizeof v);
        ASSERT_EQ(v, round * 1000 + p * 10 + r);
        ranks[r].from[p]->release();
      }
    }
  });
  ranks.clear();
  EXPECT_EQ(harness::leftovers(dir_, job), 0);
}

TEST_F(ShmSlotsTest, BadGeometryIsRefused) {
  ShmTransport t(shmContext(0, 2, uniqueJob("geom"), 4096, wc_));
  std::vector<std::unique_ptr<SlotSender>> s;
  std::vector<std::unique_ptr<SlotReceiver>> q;
  EXPECT_THROW(t.establishSlots({1}, 64, 0, s, q), Error);
  EXPECT_THROW(t.establishSlots({1}, 0, 4, s, q), Error);
  EXPECT_THROW(t.establishSlots({0}, 64, 4, s, q), Error) << "no slot link to itself";
  EXPECT_THROW(t.establishSlots({2}, 64, 4, s, q), Error) << "no such rank";
}

TEST_F(ShmSlotsTest, ReceiverReadsWhatAClosedSenderLeftThenGetsAnError) {
  auto ranks = slotMesh(2, 64, 4, uniqueJob("closed"), wc_);
  void* p = ranks[0].to[1]->acquire();
  ASSERT_NE(p, nullptr);
  std::memset(p, 9, 10);
  ranks[0].to[1]->post(10);
  ranks[0].to.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  size_t n = 0;
  const void* msg = ranks[1].from[0]->poll(&n);
  ASSERT_NE(msg, nullptr) << "the message posted before closing is still there";
  EXPECT_EQ(n, 10u);
  ranks[1].from[0]->release();
  Waiter w(wc_, "waiting on a closed sender");
  try {
    while (ranks[1].from[0]->poll(&n) == nullptr) w.wait();
    FAIL() << "a message appeared from a closed sender";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveRemoteError);
    EXPECT_NE(std::string(e.what()).find("closed its end"), std::string::npos) << e.what();
  }
}

TEST_F(ShmSlotsTest, KilledPeerEndsAcquireAndPollWithRemoteError) {
  const std::string job = uniqueJob("kill");
  const pid_t parent = getpid();
  auto open = [&](int rank, std::vector<int> pids, SlotRank& sr) {
    sr.transport = std::make_unique<ShmTransport>(shmContext(rank, 2, job, 4096, wc_, pids));
    std::vector<std::unique_ptr<SlotSender>> s;
    std::vector<std::unique_ptr<SlotReceiver>> q;
    sr.transport->establishSlots({1 - rank}, 64, 2, s, q);
    sr.to = std::move(s);
    sr.from = std::move(q);
  };
  const pid_t child = harness::forkChild([&] {
    SlotRank sr;
    open(1, {parent, getpid()}, sr);
    pause();  // until killed
    return 0;
  });
  ASSERT_GT(child, 0);
  SlotRank sr;
  open(0, {parent, child}, sr);
  kill(child, SIGKILL);
  auto expectDeath = [&](const std::function<bool()>& tryOnce, const char* what) {
    const auto start = std::chrono::steady_clock::now();
    Waiter w(wc_, what);
    try {
      while (!tryOnce()) w.wait();
      FAIL() << what << " went on with a dead peer";
    } catch (const Error& e) {
      const double sec =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EXPECT_EQ(e.code(), groveRemoteError) << what;
      EXPECT_NE(std::string(e.what()).find("died"), std::string::npos) << e.what();
      EXPECT_LT(sec, 2.0) << what;
    }
  };
  size_t n = 0;
  expectDeath([&] { return sr.from[0]->poll(&n) != nullptr; }, "poll");
  expectDeath(
      [&] {  // two slots fill; the third message waits for a dead reader
        void* p = sr.to[0]->acquire();
        if (p != nullptr) sr.to[0]->post(1);
        return false;
      },
      "acquire");
  EXPECT_EQ(harness::waitExit(child), 128 + SIGKILL);
}

}  // namespace
}  // namespace grove::transport
