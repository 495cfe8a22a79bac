// Elastic communicators through the public API, ranks as threads of this
// process (the multi-process cases with kill -9 are in mp_elastic_test.cc):
//   - bad shrink, grow and revoke arguments are refused with a clear error
//     and leave the communicator working;
//   - a default-mode shrink of a failed (revoked) communicator is refused,
//     an abort-mode one works;
//   - 50 cycles of shrink (default mode, the excluded rank idle) and grow
//     back (the excluded rank joins as a new rank) keep every all-reduce
//     exact and leave no descriptor, thread or /dev/shm name behind.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <future>
#include <string>
#include <thread>
#include <vector>

#include "grove/grove.h"
#include "mp_api_util.h"
#include "mp_spawn.h"

using mpapi::Comms;
using mpapi::lastErrorNames;
using mpapi::onRanks;

namespace {

// All-reduce (sum of rank + 1) on each comms[r] by its own thread; true if exact.
bool allReduceExact(const std::vector<groveComm_t>& comms) {
  const int n = static_cast<int>(comms.size());
  std::vector<int> good(n, 0);
  onRanks(n, [&](int r) {
    std::vector<float> in(4096, static_cast<float>(r + 1)), out(in.size(), -1.f);
    groveResult_t res =
        groveAllReduce(in.data(), out.data(), in.size(), groveFloat32, groveSum, comms[r], nullptr);
    EXPECT_EQ(res, groveSuccess) << "rank " << r << ": " << groveGetLastError(comms[r]);
    good[r] = res == groveSuccess;
    for (float v : out) good[r] = good[r] && v == static_cast<float>(n * (n + 1) / 2);
  });
  for (int g : good)
    if (!g) return false;
  return true;
}

}  // namespace

TEST(MpApiElastic, BadArgumentsAreRefusedAndLeaveTheCommunicatorWorking) {
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  groveComm_t out = nullptr;
  int self = 0, range = 5, twice[2] = {1, 1};
  EXPECT_EQ(groveCommShrink(comms[0], &self, 1, &out, nullptr, GROVE_SHRINK_DEFAULT),
            groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(comms[0], "own exclude list"));
  EXPECT_EQ(groveCommShrink(comms[0], &range, 1, &out, nullptr, GROVE_SHRINK_DEFAULT),
            groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(comms[0], "out of range"));
  EXPECT_EQ(groveCommShrink(comms[0], twice, 2, &out, nullptr, GROVE_SHRINK_DEFAULT),
            groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(comms[0], "excluded twice"));
  EXPECT_EQ(groveCommShrink(comms[0], nullptr, 1, &out, nullptr, GROVE_SHRINK_DEFAULT),
            groveInvalidArgument);
  EXPECT_EQ(groveCommShrink(comms[0], nullptr, 0, nullptr, nullptr, GROVE_SHRINK_DEFAULT),
            groveInvalidArgument);
  EXPECT_EQ(groveCommShrink(comms[0], nullptr, 0, &out, nullptr, 0x8), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(comms[0], "unknown flags"));
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(groveCommRevoke(comms[0], 3), groveInvalidArgument);
  groveUniqueId id;
  EXPECT_EQ(groveCommGrow(comms[0], 1, nullptr, -1, &out, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(comms[0], "smaller than"));
  EXPECT_EQ(groveCommGrow(comms[0], 3, nullptr, 2, &out, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveCommGrow(nullptr, 3, nullptr, 2, &out, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveCommGetUniqueId(comms[0], nullptr), groveInvalidArgument);
  EXPECT_EQ(groveCommGetUniqueId(nullptr, &id), groveInvalidArgument);
  // Nobody passes the grow id: every rank is told, and nothing is made.
  onRanks(2, [&](int r) {
    groveComm_t g = nullptr;
    EXPECT_EQ(groveCommGrow(comms[r], 3, nullptr, -1, &g, nullptr), groveInvalidUsage)
        << groveGetLastError(comms[r]);
    EXPECT_EQ(g, nullptr);
    EXPECT_TRUE(lastErrorNames(comms[r], "no rank passed the grow id"));
  });
  EXPECT_TRUE(allReduceExact(comms.c)) << "a refused call broke the communicator";
}

TEST(MpApiElastic, OneThreadSplitsEveryRankInAGroup) {
  // NCCL's pattern for one thread driving several ranks: the splits run
  // at the group's end, together (each waits for the others').
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  groveComm_t kids[2] = {nullptr, nullptr};
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(groveCommSplit(comms[r], 7, 1 - r, &kids[r], nullptr), groveSuccess)
        << groveGetLastError(comms[r]);
  int n = -1;
  EXPECT_EQ(groveCommCount(kids[0], &n), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(kids[0], "once the group ends"));
  EXPECT_EQ(groveCommDestroy(comms[0]), groveInvalidUsage) << "a parent held by the group";
  ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(nullptr);
  ASSERT_NE(kids[0], nullptr);
  ASSERT_NE(kids[1], nullptr);
  int r0 = -1, r1 = -1;
  EXPECT_EQ(groveCommUserRank(kids[0], &r0), groveSuccess);
  EXPECT_EQ(groveCommUserRank(kids[1], &r1), groveSuccess);
  EXPECT_EQ(groveCommCount(kids[0], &n), groveSuccess);
  EXPECT_EQ(n, 2);
  EXPECT_EQ(r0, 1);  // ordered by key
  EXPECT_EQ(r1, 0);
  EXPECT_TRUE(allReduceExact({kids[1], kids[0]}));
  for (groveComm_t k : kids) EXPECT_EQ(groveCommDestroy(k), groveSuccess);
  // No color: nothing is made, and the group ends well.
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  for (int r = 0; r < 2; ++r) {
    kids[r] = reinterpret_cast<groveComm_t>(0x1);
    EXPECT_EQ(groveCommSplit(comms[r], GROVE_SPLIT_NOCOLOR, 0, &kids[r], nullptr), groveSuccess);
    EXPECT_EQ(kids[r], nullptr);
  }
  ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(nullptr);
  EXPECT_TRUE(allReduceExact(comms.c));
}

TEST(MpApiElastic, ASplitWhoseChildFailsLeavesTheParentWorking) {
  // The members ask for different channel counts: the child's settings
  // check fails on both, and the parent still works.
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  onRanks(2, [&](int r) {
    groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
    cfg.nChannels = r + 1;
    groveComm_t child = nullptr;
    EXPECT_NE(groveCommSplit(comms[r], 0, r, &child, &cfg), groveSuccess);
    EXPECT_EQ(child, nullptr);
    EXPECT_TRUE(lastErrorNames(comms[r], "GROVE_NCHANNELS")) << "rank " << r;
  });
  EXPECT_TRUE(allReduceExact(comms.c)) << "a failed child broke its parent";
}

TEST(MpApiElastic, AnIdleRankHearsOfARevokeThroughItsAsyncError) {
  // Ranks 0 and 1 make no call after rank 2 revokes: groveCommGetAsyncError
  // tells them (a health check polls it), not only their next call.
  Comms comms(3);
  ASSERT_TRUE(comms.ok());
  ASSERT_TRUE(allReduceExact(comms.c));
  ASSERT_EQ(groveCommRevoke(comms[2], GROVE_REVOKE_DEFAULT), groveSuccess)
      << groveGetLastError(comms[2]);
  for (int r = 0; r < 3; ++r) {
    groveResult_t state = groveSuccess;
    for (int i = 0; i < 2000 && state == groveSuccess; ++i) {
      ASSERT_EQ(groveCommGetAsyncError(comms[r], &state), groveSuccess);
      if (state == groveSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(state, groveRemoteError) << "rank " << r;
  }
}

TEST(MpApiElastic, ARevokedCommunicatorShrinksOnlyInAbortMode) {
  Comms comms(3);
  ASSERT_TRUE(comms.ok());
  ASSERT_TRUE(allReduceExact(comms.c));
  ASSERT_EQ(groveCommRevoke(comms[2], GROVE_REVOKE_DEFAULT), groveSuccess)
      << groveGetLastError(comms[2]);
  // Every rank hears of it (through the bootstrap root) and fails its calls.
  onRanks(3, [&](int r) {
    float a[4] = {1, 2, 3, 4};
    groveResult_t res = groveSuccess;
    for (int i = 0; i < 200 && res == groveSuccess; ++i) {
      res = groveAllReduce(a, a, 4, groveFloat32, groveSum, comms[r], nullptr);
      if (res == groveSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_NE(res, groveSuccess) << "rank " << r;
    EXPECT_NE(std::string(groveGetLastError(comms[r])).find("rank 2 revoked"), std::string::npos)
        << groveGetLastError(comms[r]);
  });
  groveComm_t out = nullptr;
  EXPECT_EQ(groveCommShrink(comms[0], nullptr, 0, &out, nullptr, GROVE_SHRINK_DEFAULT),
            groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(comms[0], "shrink it with the abort flag"));
  // Abort mode, rank 1 left out: ranks 0 and 2 form a working communicator.
  std::vector<groveComm_t> shrunk(3, nullptr);
  onRanks(3, [&](int r) {
    if (r == 1) return;
    const int excluded = 1;
    EXPECT_EQ(groveCommShrink(comms[r], &excluded, 1, &shrunk[r], nullptr, GROVE_SHRINK_ABORT),
              groveSuccess)
        << groveGetLastError(comms[r]);
  });
  ASSERT_NE(shrunk[0], nullptr);
  ASSERT_NE(shrunk[2], nullptr);
  int rank = -1;
  groveCommUserRank(shrunk[2], &rank);
  EXPECT_EQ(rank, 1);  // ranks keep their order
  EXPECT_TRUE(allReduceExact({shrunk[0], shrunk[2]}));
  uint64_t parent = 0, h0 = 0, h2 = 0;
  EXPECT_EQ(groveCommGetHash(comms[0], &parent), groveSuccess);
  EXPECT_EQ(groveCommGetHash(shrunk[0], &h0), groveSuccess);
  EXPECT_EQ(groveCommGetHash(shrunk[2], &h2), groveSuccess);
  EXPECT_EQ(h0, h2) << "every rank reads the same hash";
  EXPECT_NE(h0, parent) << "the shrunk communicator's hash is its own";
  onRanks(3, [&](int r) {
    if (shrunk[r] != nullptr) {
      EXPECT_EQ(groveCommDestroy(shrunk[r]), groveSuccess);
    }
  });
}

// GROVE_SHM_DIR set to a directory of this test's own for as long as it
// lives: set before any communicator exists (no thread reads the environment
// yet), unset after the last is destroyed, then the directory is removed.
struct OwnShmDir : mptest::ShmDir {
  OwnShmDir() : ShmDir("elastic-cycles") {
    if (!path().empty()) setenv("GROVE_SHM_DIR", path().c_str(), 1);
  }
  ~OwnShmDir() { unsetenv("GROVE_SHM_DIR"); }
};

TEST(MpApiElastic, FiftyShrinkGrowCyclesLeakNothing) {
  constexpr int kRanks = 4, kCycles = 50, kWarm = 3;
  const OwnShmDir shmDir;
  ASSERT_FALSE(shmDir.path().empty()) << "no directory for the test's segments";
  std::vector<groveComm_t> comms(kRanks, nullptr);
  ASSERT_EQ(groveCommInitAll(comms.data(), kRanks, nullptr), groveSuccess)
      << groveGetLastError(nullptr);
  int fdsWarm = 0, threadsWarm = 0;
  size_t shmWarm = 0;
  // Descriptors, threads and /dev/shm names with kRanks communicators alive
  // (and their grow id's root): the same at the start of a cycle and at the end.
  auto settle = [&] {
    const double until = mptest::now() + 10;
    while (mptest::now() < until &&
           (mpapi::threadCount() > threadsWarm || mpapi::openFds() > fdsWarm))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    if (cycle == kWarm) {
      threadsWarm = fdsWarm = 1 << 30;
      settle();
      fdsWarm = mpapi::openFds();
      threadsWarm = mpapi::threadCount();
      shmWarm = mptest::groveShmFiles(shmDir.path()).size();
    }
    const int out = cycle % kRanks;  // a different rank sits out each time
    std::vector<groveComm_t> shrunk(kRanks, nullptr), grown(kRanks, nullptr);
    std::promise<groveUniqueId> idMade;
    std::shared_future<groveUniqueId> growId = idMade.get_future().share();
    std::vector<int> failed(kRanks, 0);
    onRanks(kRanks, [&](int r) {
      if (r == out) {  // idle through the shrink, then joins the grow as a new rank
        const groveUniqueId id = growId.get();
        failed[r] =
            groveCommGrow(nullptr, kRanks, &id, kRanks - 1, &grown[r], nullptr) != groveSuccess;
        return;
      }
      if (groveCommShrink(comms[r], &out, 1, &shrunk[r], nullptr, GROVE_SHRINK_DEFAULT) !=
          groveSuccess) {
        failed[r] = 1;
        return;
      }
      int rank = -1;
      groveCommUserRank(shrunk[r], &rank);
      groveUniqueId id;
      if (rank == 0) {
        failed[r] = groveCommGetUniqueId(shrunk[r], &id) != groveSuccess;
        idMade.set_value(id);
      }
      failed[r] |= groveCommGrow(shrunk[r], kRanks, rank == 0 ? &id : nullptr, -1, &grown[r],
                                 nullptr) != groveSuccess;
    });
    for (int r = 0; r < kRanks; ++r)
      ASSERT_FALSE(failed[r]) << "cycle " << cycle << " rank " << r << ": "
                              << groveGetLastError(nullptr);
    // The grown communicator: the shrunk ranks in order, then the new one.
    std::vector<groveComm_t> byRank(kRanks, nullptr);
    for (int r = 0; r < kRanks; ++r) {
      int rank = -1;
      groveCommUserRank(grown[r], &rank);
      byRank[rank] = grown[r];
    }
    ASSERT_TRUE(allReduceExact(byRank)) << "cycle " << cycle;
    onRanks(kRanks, [&](int r) {
      if (shrunk[r] != nullptr) {
        EXPECT_EQ(groveCommDestroy(shrunk[r]), groveSuccess);
      }
      EXPECT_EQ(groveCommDestroy(comms[r]), groveSuccess);
    });
    comms = byRank;
  }
  settle();
  EXPECT_LE(mpapi::openFds(), fdsWarm) << "descriptors leaked over " << kCycles << " cycles";
  EXPECT_LE(mpapi::threadCount(), threadsWarm) << "threads leaked over " << kCycles << " cycles";
  EXPECT_LE(mptest::groveShmFiles(shmDir.path()).size(), shmWarm) << "/dev/shm names left behind";
  onRanks(kRanks, [&](int r) { EXPECT_EQ(groveCommDestroy(comms[r]), groveSuccess); });
}
