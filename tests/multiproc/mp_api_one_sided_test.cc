// In-process API tests of one-sided access (groveWindowRegister,
// grovePutSignal, groveWaitSignal): ranks are threads on shared memory.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mp_api_util.h"

namespace {

using mpapi::Comms;
using mpapi::lastErrorNames;
using mpapi::onRanks;

uint8_t patternByte(int rank, size_t i) { return static_cast<uint8_t>(rank * 31 + i * 7 + 1); }

// Every rank puts into the next one's window (sizes differ per rank), and
// signals the one after that alone; each checks what landed. A put larger
// than a link's buffer streams through it while its target only waits.
TEST(MpApiOneSided, PutsAndSignalsLandInPeersWindows) {
  const int n = 4;
  Comms comms(n);
  ASSERT_TRUE(comms.ok());
  const size_t big = (3u << 20) + 123;  // past a 1 MiB link buffer
  std::vector<std::vector<uint8_t>> win(n), src(n);
  std::vector<int> ids(n, -7);
  onRanks(n, [&](int r) {
    win[r].assign(big + 64 * r, 0);
    ASSERT_EQ(groveWindowRegister(comms[r], win[r].data(), win[r].size(), &ids[r]), groveSuccess)
        << groveGetLastError(comms[r]);
    src[r].resize(big);
    for (size_t i = 0; i < big; ++i) src[r][i] = patternByte(r, i);
    const int next = (r + 1) % n, after = (r + 2) % n;
    ASSERT_EQ(grovePutSignal(src[r].data(), big, next, ids[r], 64 * next, 3, comms[r], nullptr),
              groveSuccess)
        << groveGetLastError(comms[r]);
    ASSERT_EQ(grovePutSignal(nullptr, 0, after, ids[r], 0, 7, comms[r], nullptr), groveSuccess)
        << groveGetLastError(comms[r]);
    const int prev = (r + n - 1) % n, before = (r + n - 2) % n;
    groveSignalWait_t waits[2] = {{prev, 3, 1}, {before, 7, 1}};
    ASSERT_EQ(groveWaitSignal(waits, 2, comms[r], nullptr), groveSuccess)
        << groveGetLastError(comms[r]);
    size_t bad = 0;
    for (size_t i = 0; i < big; ++i) bad += win[r][64 * r + i] != patternByte(prev, i);
    for (size_t i = 0; i < static_cast<size_t>(64 * r); ++i) bad += win[r][i] != 0;
    EXPECT_EQ(bad, 0u) << "rank " << r;
  });
  for (int r = 0; r < n; ++r)  // each rank's own handle, never -1 (a signal alone)
    for (int q = 0; q < r; ++q) EXPECT_NE(ids[r], ids[q]);
  for (int r = 0; r < n; ++r) EXPECT_GT(ids[r], 0);
  onRanks(n, [&](int r) {
    EXPECT_EQ(groveWindowDeregister(comms[r], ids[r]), groveSuccess) << groveGetLastError(comms[r]);
  });
}

// A put completes while its target is busy elsewhere (no call into grove),
// puts from one rank land in order, and a wait consumes what it counted.
TEST(MpApiOneSided, TargetNeedNotTakePartAndPutsLandInOrder) {
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  std::vector<uint32_t> win0(4, 0), win1(1 << 20, 0);
  int id0 = -1, id1 = -1;
  onRanks(2, [&](int r) {
    std::vector<uint32_t>& w = r == 0 ? win0 : win1;
    ASSERT_EQ(groveWindowRegister(comms[r], w.data(), w.size() * 4, r == 0 ? &id0 : &id1),
              groveSuccess);
  });
  std::atomic<bool> putsDone{false};
  onRanks(2, [&](int r) {
    if (r == 0) {
      // 4 MiB into rank 1, which is asleep: the put must not wait for it.
      std::vector<uint32_t> data(win1.size());
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint32_t>(i * 3);
      ASSERT_EQ(grovePutSignal(data.data(), data.size() * 4, 1, id0, 0, 0, comms[0], nullptr),
                groveSuccess)
          << groveGetLastError(comms[0]);
      data.assign(data.size(), 0);  // the source may be reused once the put returned
      for (uint32_t v = 1; v <= 100; ++v)
        ASSERT_EQ(grovePutSignal(&v, 4, 1, id0, 0, 1, comms[0], nullptr), groveSuccess);
      putsDone = true;
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    while (!putsDone && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_TRUE(putsDone.load()) << "puts into an idle rank did not complete";
    groveSignalWait_t big{0, 0, 1}, order{0, 1, 100};
    ASSERT_EQ(groveWaitSignal(&big, 1, comms[1], nullptr), groveSuccess);
    ASSERT_EQ(groveWaitSignal(&order, 1, comms[1], nullptr), groveSuccess)
        << groveGetLastError(comms[1]);
    EXPECT_EQ(win1[0], 100u);  // the last of the ordered puts
    size_t bad = 0;
    for (size_t i = 1; i < win1.size(); ++i) bad += win1[i] != static_cast<uint32_t>(i * 3);
    EXPECT_EQ(bad, 0u);
  });
  // The 101 signals were consumed: one more wait has nothing to take, until
  // a signal arrives on a host stream.
  groveHostStream_t s = nullptr;
  ASSERT_EQ(groveHostStreamCreate(&s), groveSuccess);
  groveSignalWait_t one{0, 1, 1};
  ASSERT_EQ(groveWaitSignal(&one, 1, comms[1], s), groveSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(groveHostStreamQuery(s), groveInProgress);
  ASSERT_EQ(grovePutSignal(nullptr, 0, 1, id0, 0, 1, comms[0], nullptr), groveSuccess);
  EXPECT_EQ(groveHostStreamSynchronize(s), groveSuccess);
  EXPECT_EQ(groveHostStreamDestroy(s), groveSuccess);
  onRanks(2, [&](int r) {
    EXPECT_EQ(groveWindowDeregister(comms[r], r == 0 ? id0 : id1), groveSuccess);
  });
}

// In a group a rank's waits run after its sends: the wait below would
// deadlock if it ran before the send its peer's put waits behind.
TEST(MpApiOneSided, GroupRunsWaitsAfterTheGroupsOtherWork) {
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  std::vector<int> win0(16, 0), win1(16, 0);
  int ids[2] = {-1, -1};  // each rank's handle
  onRanks(2, [&](int r) {
    ASSERT_EQ(groveWindowRegister(comms[r], r == 0 ? win0.data() : win1.data(), 64, &ids[r]),
              groveSuccess);
  });
  onRanks(2, [&](int r) {
    int v = 42, got = 0;
    if (r == 0) {
      groveSignalWait_t w{1, 5, 1};
      ASSERT_EQ(groveGroupStart(), groveSuccess);
      ASSERT_EQ(groveWaitSignal(&w, 1, comms[0], nullptr), groveSuccess);
      ASSERT_EQ(groveSend(&v, 1, groveInt32, 1, comms[0], nullptr), groveSuccess);
      ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(comms[0]);
      EXPECT_EQ(win0[2], 43);
    } else {
      ASSERT_EQ(groveRecv(&got, 1, groveInt32, 0, comms[1], nullptr), groveSuccess);
      got += 1;
      ASSERT_EQ(grovePutSignal(&got, 4, 0, ids[1], 8, 5, comms[1], nullptr), groveSuccess);
    }
  });
  onRanks(2, [&](int r) { EXPECT_EQ(groveWindowDeregister(comms[r], ids[r]), groveSuccess); });
}

// Bad arguments are refused with a clear text and leave the communicator
// usable; without a window nothing one-sided runs.
TEST(MpApiOneSided, BadArgumentsAreRefusedAndLoseNothing) {
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  int x = 5;
  EXPECT_EQ(grovePutSignal(&x, 4, 1, 0, 0, 0, comms[0], nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "not a registered window"));
  std::vector<char> w0(100), w1(200);
  int id = -1, id1 = -1;  // rank 0's handle, rank 1's
  onRanks(2, [&](int r) {
    ASSERT_EQ(groveWindowRegister(comms[r], r == 0 ? w0.data() : w1.data(), r == 0 ? 100 : 200,
                                  r == 0 ? &id : &id1),
              groveSuccess);
  });
  EXPECT_EQ(grovePutSignal(&x, 4, 0, id1, 97, 0, comms[1], nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "does not fit rank 0's window"));
  // A handle is its rank's: rank 0's names no window of rank 1.
  EXPECT_EQ(grovePutSignal(&x, 4, 0, id, 0, 0, comms[1], nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "not a registered window of this communicator"));
  EXPECT_EQ(grovePutSignal(&x, 4, 1, id, 196, 0, comms[0], nullptr), groveSuccess);  // 200 there
  EXPECT_EQ(grovePutSignal(&x, 4, 2, id, 0, 0, comms[0], nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "peer 2 out of range"));
  EXPECT_EQ(grovePutSignal(&x, 4, 1, id, 0, GROVE_MAX_SIGNALS, comms[0], nullptr),
            groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "signal 1024 out of range"));
  EXPECT_EQ(grovePutSignal(nullptr, 4, 1, id, 0, 0, comms[0], nullptr), groveInvalidArgument);
  groveSignalWait_t bad{1, 0, -1};
  EXPECT_EQ(groveWaitSignal(&bad, 1, comms[0], nullptr), groveInvalidArgument);
  EXPECT_EQ(groveWaitSignal(nullptr, 1, comms[0], nullptr), groveInvalidArgument);
  EXPECT_EQ(groveWaitSignal(nullptr, 0, comms[0], nullptr), groveSuccess);
  EXPECT_EQ(groveWindowRegister(comms[0], w0.data(), 100, nullptr), groveInvalidArgument);
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  int unused = -1;
  EXPECT_EQ(groveWindowRegister(comms[0], w0.data(), 100, &unused), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(nullptr, "inside a group"));
  ASSERT_EQ(groveGroupEnd(), groveSuccess);
  groveSignalWait_t good{0, 0, 1};
  EXPECT_EQ(groveWaitSignal(&good, 1, comms[1], nullptr), groveSuccess);
  EXPECT_EQ(std::memcmp(w1.data() + 196, &x, 4), 0);
  EXPECT_TRUE(mpapi::allReduceWorks(comms));  // nothing refused poisoned the communicators
  onRanks(2, [&](int r) {
    EXPECT_EQ(groveWindowDeregister(comms[r], r == 0 ? id : id1), groveSuccess);
  });
  EXPECT_EQ(grovePutSignal(&x, 4, 1, id, 0, 0, comms[0], nullptr), groveInvalidArgument);
  EXPECT_EQ(groveWindowDeregister(comms[0], id), groveInvalidArgument);
}

// A registration refused on one rank (before any exchange) is not made on
// the others: when that rank goes on to register its next window, the two
// calls must not pair up (rank 0's second window with rank 1's first).
// Both fail at once with a text that says so.
TEST(MpApiOneSided, ACallRefusedOnOneRankDoesNotPairWithTheNext) {
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  std::vector<char> first(64), second(64), theirs(64);
  std::vector<groveResult_t> got(2, groveSuccess);
  std::vector<std::string> text(2);
  onRanks(2, [&](int r) {
    int id = -1;
    if (r == 0) {
      EXPECT_EQ(groveWindowRegister(comms[0], first.data(), 64, nullptr), groveInvalidArgument);
      got[0] = groveWindowRegister(comms[0], second.data(), 64, &id);
    } else {
      got[1] = groveWindowRegister(comms[1], theirs.data(), 64, &id);
    }
    text[r] = groveGetLastError(comms[r]);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(got[r], groveInvalidUsage) << "rank " << r << ": " << text[r];
    EXPECT_NE(text[r].find("every rank must make the same calls"), std::string::npos) << text[r];
  }
}

// A suspended rank's refused registration is its own state, not a call the
// others make: once it resumes, the ranks register together as usual.
TEST(MpApiOneSided, ARefusalWhileSuspendedIsNotACall) {
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  std::vector<char> w0(64), w1(64);
  int ids[2] = {-1, -1};
  ASSERT_EQ(groveCommSuspend(comms[0]), groveSuccess);
  EXPECT_EQ(groveWindowRegister(comms[0], w0.data(), 64, &ids[0]), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(comms[0], "suspended"));
  ASSERT_EQ(groveCommResume(comms[0]), groveSuccess);
  onRanks(2, [&](int r) {
    EXPECT_EQ(groveWindowRegister(comms[r], r == 0 ? w0.data() : w1.data(), 64, &ids[r]),
              groveSuccess)
        << groveGetLastError(comms[r]);
  });
  onRanks(2, [&](int r) { EXPECT_EQ(groveWindowDeregister(comms[r], ids[r]), groveSuccess); });
}

// A window handle names its communicator's window only: another
// communicator's handle (whose window is that communicator's first too) is
// refused, and nothing lands in either window.
TEST(MpApiOneSided, AnotherCommunicatorsHandleIsRefused) {
  Comms a(2), b(2);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<std::vector<int>> winA(2, std::vector<int>(8, 0)), winB = winA;
  int idA[2] = {-1, -1}, idB[2] = {-1, -1};
  onRanks(2, [&](int r) {
    ASSERT_EQ(groveWindowRegister(a[r], winA[r].data(), 32, &idA[r]), groveSuccess);
    ASSERT_EQ(groveWindowRegister(b[r], winB[r].data(), 32, &idB[r]), groveSuccess);
  });
  EXPECT_NE(idA[0], idB[0]);
  int x = 77;
  EXPECT_EQ(grovePutSignal(&x, 4, 1, idA[0], 0, 0, b[0], nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "not a registered window of this communicator"));
  EXPECT_EQ(groveWindowDeregister(b[0], idA[0]), groveInvalidArgument);
  // The right handle still works, on both.
  ASSERT_EQ(grovePutSignal(&x, 4, 1, idB[0], 4, 0, b[0], nullptr), groveSuccess);
  groveSignalWait_t w{0, 0, 1};
  ASSERT_EQ(groveWaitSignal(&w, 1, b[1], nullptr), groveSuccess);
  EXPECT_EQ(winB[1][1], 77);
  EXPECT_EQ(winA[1], std::vector<int>(8, 0));
  onRanks(2, [&](int r) {
    EXPECT_EQ(groveWindowDeregister(a[r], idA[r]), groveSuccess);
    EXPECT_EQ(groveWindowDeregister(b[r], idB[r]), groveSuccess);
  });
}

// Over the net transport (libfabric; its tcp provider here) puts are the
// transport's own one-sided writes with a signal, not bytes on a link: the
// same calls land the same bytes, large and small, signals alone included.
TEST(MpApiOneSided, OverTheNetTransportsOneSidedWrites) {
  const char* before = std::getenv("GROVE_TRANSPORT");
  const std::string saved = before ? before : "";
  setenv("GROVE_TRANSPORT", "net", 1);
  std::vector<groveComm_t> c(3, nullptr);
  const groveResult_t init = groveCommInitAll(c.data(), 3, nullptr);
  const std::string why = groveGetLastError(nullptr);
  if (before)
    setenv("GROVE_TRANSPORT", saved.c_str(), 1);
  else
    unsetenv("GROVE_TRANSPORT");
  if (init != groveSuccess) GTEST_SKIP() << "no net transport on this host: " << why;
  const int n = 3;
  const size_t big = (2u << 20) + 77;
  std::vector<std::vector<uint8_t>> win(n, std::vector<uint8_t>(big + 64, 0));
  std::vector<int> ids(n, -1);
  onRanks(n, [&](int r) {
    ASSERT_EQ(groveWindowRegister(c[r], win[r].data(), win[r].size(), &ids[r]), groveSuccess)
        << groveGetLastError(c[r]);
    std::vector<uint8_t> src(big);
    for (size_t i = 0; i < big; ++i) src[i] = patternByte(r, i);
    const int next = (r + 1) % n;
    ASSERT_EQ(grovePutSignal(src.data(), big, next, ids[r], 64, 2, c[r], nullptr), groveSuccess)
        << groveGetLastError(c[r]);
    src.assign(big, 0);  // reusable once the put returned
    for (uint32_t v = 1; v <= 50; ++v)
      ASSERT_EQ(grovePutSignal(&v, 4, next, ids[r], 0, 4, c[r], nullptr), groveSuccess);
    ASSERT_EQ(grovePutSignal(nullptr, 0, next, ids[r], 0, 6, c[r], nullptr), groveSuccess);
    const int prev = (r + n - 1) % n;
    groveSignalWait_t waits[3] = {{prev, 2, 1}, {prev, 4, 50}, {prev, 6, 1}};
    ASSERT_EQ(groveWaitSignal(waits, 3, c[r], nullptr), groveSuccess) << groveGetLastError(c[r]);
    size_t bad = 0;
    for (size_t i = 0; i < big; ++i) bad += win[r][64 + i] != patternByte(prev, i);
    EXPECT_EQ(bad, 0u) << "rank " << r;
    uint32_t last = 0;
    std::memcpy(&last, win[r].data(), 4);
    EXPECT_EQ(last, 50u) << "rank " << r;
  });
  onRanks(n, [&](int r) {
    EXPECT_EQ(groveWindowDeregister(c[r], ids[r]), groveSuccess) << groveGetLastError(c[r]);
    EXPECT_EQ(groveCommDestroy(c[r]), groveSuccess);
  });
}

// A wait for a peer that goes away fails with an error, not a hang.
TEST(MpApiOneSided, AWaitForAnAbortedPeerFails) {
  std::vector<groveComm_t> c(2, nullptr);
  ASSERT_EQ(groveCommInitAll(c.data(), 2, nullptr), groveSuccess);
  std::vector<char> w0(64), w1(64);
  onRanks(2, [&](int r) {
    int id = -1;
    ASSERT_EQ(groveWindowRegister(c[r], r == 0 ? w0.data() : w1.data(), 64, &id), groveSuccess);
  });
  groveResult_t waited = groveSuccess;
  double seconds = 0;
  onRanks(2, [&](int r) {
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      EXPECT_EQ(groveCommAbort(c[0]), groveSuccess);
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    groveSignalWait_t w{0, 0, 1};
    waited = groveWaitSignal(&w, 1, c[1], nullptr);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  EXPECT_EQ(waited, groveRemoteError) << groveGetLastError(c[1]);
  EXPECT_LT(seconds, 15.0) << "the wait ran into the timeout instead of seeing the abort";
  EXPECT_EQ(groveCommAbort(c[1]), groveSuccess);
}

}  // namespace
