// In-process API tests of CUDA communicators on the emulated device
// (GROVE_DEVICE_EMULATION=1: the device executor's interpreter on host
// threads, buffers in host memory): groups of collectives as one launch,
// collectives mixed with sends and receives, the device index, abort while a
// launch waits, and the clear error without a device. Ranks are threads.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "mp_api_util.h"
#include "mp_spawn.h"

namespace {

using mpapi::onRanks;
using mptest::now;

// Sets (or clears) the emulation variable for this test.
struct Emulation {
  explicit Emulation(bool on) { setenv("GROVE_DEVICE_EMULATION", on ? "1" : "0", 1); }
  ~Emulation() { unsetenv("GROVE_DEVICE_EMULATION"); }
};

// n CUDA communicators (deviceKind cuda, or as given), one per thread;
// destroyed at the end.
struct DeviceComms {
  std::vector<groveComm_t> c;
  explicit DeviceComms(int n, int timeoutMs = 30000, groveDeviceKind_t kind = groveDeviceCuda)
      : c(n, nullptr) {
    groveUniqueId id;
    EXPECT_EQ(groveGetUniqueId(&id), groveSuccess);
    std::vector<groveResult_t> res(n, groveInternalError);
    onRanks(n, [&](int r) {
      groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
      cfg.deviceKind = kind;
      cfg.timeoutMs = timeoutMs;
      res[r] = groveCommInitRankConfig(&c[r], n, id, r, &cfg);
    });
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(res[r], groveSuccess) << "rank " << r << ": " << groveGetLastError(nullptr);
  }
  ~DeviceComms() {
    onRanks(static_cast<int>(c.size()), [&](int r) {
      if (c[r] != nullptr) groveCommDestroy(c[r]);
    });
  }
  groveComm_t operator[](int r) const { return c[r]; }
};

TEST(MpApiDevice, EmulatedCommHasNoCudaDevice) {
  Emulation on(true);
  DeviceComms comms(2);
  for (int r = 0; r < 2; ++r) {
    int dev = 7;
    ASSERT_EQ(groveCommCuDevice(comms[r], &dev), groveSuccess);
    EXPECT_EQ(dev, -1) << "an emulated device is host memory";
  }
}

// GROVE_CHECK=calls covers the collectives of a group on a CUDA
// communicator too (one launch): ranks whose grouped all-reduces differ in
// count fail at once, naming the mismatch, before any byte moves (before,
// a group's launch skipped the check).
TEST(MpApiDevice, CheckedCallsCoverAGroupsCollectives) {
  Emulation on(true);
  setenv("GROVE_CHECK", "calls", 1);
  {
    DeviceComms comms(2, 20000);
    std::vector<groveResult_t> got(2, groveSuccess);
    std::vector<std::string> text(2);
    const double start = now();
    onRanks(2, [&](int r) {
      std::vector<float> buf(1024, 1.f);
      groveGroupStart();
      groveAllReduce(buf.data(), buf.data(), 1024, groveFloat32, groveSum, comms[r], nullptr);
      groveAllReduce(buf.data(), buf.data(), r == 0 ? 1024 : 512, groveFloat32, groveSum, comms[r],
                     nullptr);
      got[r] = groveGroupEnd();
      text[r] = groveGetLastError(nullptr);
    });
    EXPECT_LT(now() - start, 10.0) << "a rank waited for the timeout";
    for (int r = 0; r < 2; ++r) {
      EXPECT_NE(got[r], groveSuccess) << "rank " << r;
      EXPECT_NE(text[r].find("do not match"), std::string::npos) << text[r];
    }
  }
  unsetenv("GROVE_CHECK");
}

// Three collectives recorded in one group (one device launch); every
// result must be exact.
TEST(MpApiDevice, GroupOfCollectives) {
  Emulation on(true);
  constexpr int kRanks = 3;
  constexpr size_t kCount = 70001;
  DeviceComms comms(kRanks);
  onRanks(kRanks, [&](int r) {
    std::vector<int32_t> a(kCount, r + 1), aOut(kCount, -1);
    std::vector<float> b(kCount, 2.0f * r), bOut(kCount, -1);
    std::vector<int32_t> c(kCount, r == 1 ? 42 : -5);
    ASSERT_EQ(groveGroupStart(), groveSuccess);
    EXPECT_EQ(
        groveAllReduce(a.data(), aOut.data(), kCount, groveInt32, groveSum, comms[r], nullptr),
        groveSuccess);
    EXPECT_EQ(
        groveAllReduce(b.data(), bOut.data(), kCount, groveFloat32, groveMax, comms[r], nullptr),
        groveSuccess);
    EXPECT_EQ(groveBroadcast(c.data(), c.data(), kCount, groveInt32, 1, comms[r], nullptr),
              groveSuccess);
    ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(comms[r]);
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(aOut[i], kRanks * (kRanks + 1) / 2) << "rank " << r << " index " << i;
      ASSERT_EQ(bOut[i], 2.0f * (kRanks - 1)) << "rank " << r << " index " << i;
      ASSERT_EQ(c[i], 42) << "rank " << r << " index " << i;
    }
  });
}

// A collective and a ring of sends/receives in one group.
TEST(MpApiDevice, GroupMixesCollectivesAndSendRecv) {
  Emulation on(true);
  constexpr int kRanks = 4;
  constexpr size_t kCount = 5000;
  DeviceComms comms(kRanks);
  onRanks(kRanks, [&](int r) {
    std::vector<int64_t> in(kCount, r), out(kCount, -1);
    std::vector<int64_t> toNext(kCount, 100 + r), fromPrev(kCount, -1);
    ASSERT_EQ(groveGroupStart(), groveSuccess);
    groveAllReduce(in.data(), out.data(), kCount, groveInt64, groveSum, comms[r], nullptr);
    groveSend(toNext.data(), kCount, groveInt64, (r + 1) % kRanks, comms[r], nullptr);
    groveRecv(fromPrev.data(), kCount, groveInt64, (r + kRanks - 1) % kRanks, comms[r], nullptr);
    ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(comms[r]);
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(out[i], kRanks * (kRanks - 1) / 2);
      ASSERT_EQ(fromPrev[i], 100 + (r + kRanks - 1) % kRanks);
    }
  });
}

// A group whose sends to self do not pair with its receives from self is
// refused at its end before any of its work starts, on the device as on the
// host: rank 0's all-reduce, recorded first, is never begun (it would wait
// for rank 1 until the timeout), and the communicator still works.
TEST(MpApiDevice, UnpairedSendToSelfRefusesTheWholeGroupFirst) {
  Emulation on(true);
  for (groveDeviceKind_t kind : {groveDeviceCuda, groveDeviceHost}) {
    SCOPED_TRACE(kind == groveDeviceCuda ? "device" : "host");
    DeviceComms comms(2, /*timeoutMs=*/4000, kind);
    std::vector<float> a(256, 1.0f), b(256, 0.0f);
    const double t0 = now();
    ASSERT_EQ(groveGroupStart(), groveSuccess);
    groveAllReduce(a.data(), b.data(), a.size(), groveFloat32, groveSum, comms[0], nullptr);
    groveSend(a.data(), 8, groveFloat32, 0, comms[0], nullptr);
    groveSend(a.data(), 8, groveFloat32, 0, comms[0], nullptr);
    groveRecv(b.data(), 8, groveFloat32, 0, comms[0], nullptr);
    EXPECT_EQ(groveGroupEnd(), groveInvalidUsage) << groveGetLastError(comms[0]);
    EXPECT_LT(now() - t0, 2.0) << "the group's all-reduce ran before the refusal";
    EXPECT_NE(std::string(groveGetLastError(nullptr)).find("2 sends to self and 1 receives"),
              std::string::npos)
        << groveGetLastError(nullptr);
    groveResult_t async = groveInternalError;
    EXPECT_EQ(groveCommGetAsyncError(comms[0], &async), groveSuccess);
    EXPECT_EQ(async, groveSuccess) << groveGetLastError(comms[0]);
    onRanks(2, [&](int r) {
      std::vector<float> in(1000, r + 1.0f), out(1000, 0.0f), self(1000, -1.0f);
      ASSERT_EQ(groveGroupStart(), groveSuccess);
      groveAllReduce(in.data(), out.data(), in.size(), groveFloat32, groveSum, comms[r], nullptr);
      groveSend(in.data(), in.size(), groveFloat32, r, comms[r], nullptr);
      groveRecv(self.data(), self.size(), groveFloat32, r, comms[r], nullptr);
      ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(comms[r]);
      for (size_t i = 0; i < in.size(); ++i) {
        ASSERT_EQ(out[i], 3.0f);
        ASSERT_EQ(self[i], r + 1.0f);
      }
    });
  }
}

// Rank 0 calls an all-reduce the others never join; aborting its
// communicator from another thread makes the waiting launch return.
TEST(MpApiDevice, AbortWhileALaunchWaits) {
  Emulation on(true);
  DeviceComms comms(2, /*timeoutMs=*/60000);
  std::vector<float> in(1 << 16, 1.0f), out(1 << 16, 0.0f);
  groveResult_t res = groveSuccess;
  double returnedAt = 0;
  std::thread caller([&] {
    res =
        groveAllReduce(in.data(), out.data(), in.size(), groveFloat32, groveSum, comms[0], nullptr);
    returnedAt = now();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double abortedAt = now();
  EXPECT_EQ(groveCommAbort(comms[0]), groveSuccess);
  caller.join();
  EXPECT_NE(res, groveSuccess) << "an all-reduce nobody joined cannot succeed";
  EXPECT_LT(returnedAt - abortedAt, 10.0) << "the waiting launch did not return after the abort";
  comms.c[0] = nullptr;  // aborted: already released
}

// Without a device (and without emulation) a CUDA communicator is refused
// with a clear error that names the way out.
TEST(MpApiDevice, NoDeviceIsAClearError) {
  Emulation off(false);
  groveUniqueId id;
  ASSERT_EQ(groveGetUniqueId(&id), groveSuccess);
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  cfg.deviceKind = groveDeviceCuda;
  groveComm_t comm = nullptr;
  groveResult_t r = groveCommInitRankConfig(&comm, 1, id, 0, &cfg);
  if (r == groveSuccess) {
    groveCommDestroy(comm);
    GTEST_SKIP() << "a CUDA device is present: nothing to refuse";
  }
  EXPECT_EQ(r, groveInvalidUsage);
  const std::string text = groveGetLastError(nullptr);
  EXPECT_NE(text.find("GROVE_DEVICE_EMULATION"), std::string::npos) << text;
}

// Device rings carry no call tags; each launch is checked against the call
// board instead (Comm::beginDeviceCalls, the default GROVE_CHECK=tags).
// Two ranks whose all-reduces differ -- in op, in count, in data type --
// both fail at once, one naming the mismatch and the other through the
// abort, instead of returning different sums as success (an op mismatch
// did) or one rank succeeding while the other waited for the timeout (a
// count mismatch did).
TEST(MpApiDevice, MismatchedCollectivesFailOnEveryRank) {
  Emulation on(true);
  constexpr size_t kCount = 4096;
  enum Mismatch { kOp, kCount_, kType };
  for (Mismatch m : {kOp, kCount_, kType}) {
    DeviceComms comms(2, 20000);
    std::vector<groveResult_t> got(2, groveSuccess);
    std::vector<std::string> text(2);
    const double start = now();
    onRanks(2, [&](int r) {
      std::vector<float> buf(kCount, 1.f + r);
      const groveRedOp_t op = m == kOp && r == 1 ? groveMax : groveSum;
      const size_t count = m == kCount_ && r == 1 ? kCount / 2 : kCount;
      const groveDataType_t type = m == kType && r == 1 ? groveInt32 : groveFloat32;
      got[r] = groveAllReduce(buf.data(), buf.data(), count, type, op, comms[r], nullptr);
      text[r] = groveGetLastError(comms[r]);
    });
    EXPECT_LT(now() - start, 10.0) << "mismatch " << m << ": a rank waited for the timeout";
    int named = 0;
    for (int r = 0; r < 2; ++r) {
      EXPECT_NE(got[r], groveSuccess) << "mismatch " << m << ", rank " << r;
      EXPECT_NE(text[r].find("call mismatch"), std::string::npos) << text[r];
      named += got[r] == groveInvalidUsage;
    }
    EXPECT_GE(named, 1) << "one rank at least sees the mismatch itself";
  }
}

// A group's collectives are numbered one by one: a rank that groups two
// all-reduces into one launch and a rank that calls them one after the
// other agree, and both get exact sums; a group whose second collective
// differs fails on both ranks.
TEST(MpApiDevice, GroupsNumberTheirCollectivesOneByOne) {
  Emulation on(true);
  constexpr size_t kCount = 3000;
  for (bool mismatch : {false, true}) {
    DeviceComms comms(2, 20000);
    std::vector<groveResult_t> got(2, groveSuccess);
    std::vector<std::vector<int32_t>> a(2), b(2);
    onRanks(2, [&](int r) {
      a[r].assign(kCount, r + 1);
      b[r].assign(kCount, 10 * (r + 1));
      const groveRedOp_t second = mismatch && r == 1 ? groveMax : groveSum;
      if (r == 0) {
        groveGroupStart();
        groveAllReduce(a[r].data(), a[r].data(), kCount, groveInt32, groveSum, comms[r], nullptr);
        groveAllReduce(b[r].data(), b[r].data(), kCount, groveInt32, second, comms[r], nullptr);
        got[r] = groveGroupEnd();
      } else {
        got[r] = groveAllReduce(a[r].data(), a[r].data(), kCount, groveInt32, groveSum, comms[r],
                                nullptr);
        if (got[r] == groveSuccess)
          got[r] = groveAllReduce(b[r].data(), b[r].data(), kCount, groveInt32, second, comms[r],
                                  nullptr);
      }
    });
    for (int r = 0; r < 2; ++r) {
      if (mismatch) {
        EXPECT_NE(got[r], groveSuccess) << "rank " << r;
        EXPECT_NE(std::string(groveGetLastError(comms[r])).find("call mismatch"), std::string::npos)
            << groveGetLastError(comms[r]);
        continue;
      }
      ASSERT_EQ(got[r], groveSuccess) << "rank " << r << ": " << groveGetLastError(comms[r]);
      for (size_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(a[r][i], 3) << "rank " << r << " index " << i;
        ASSERT_EQ(b[r][i], 30) << "rank " << r << " index " << i;
      }
    }
  }
}

// Two ranks that both claim the root of a broadcast only send: the rank
// that launches later fails at once, naming the mismatch; the other may
// have returned (its own buffer is the root's), but its next call fails.
// A group of 40 collectives whose first differs fails on both ranks too:
// the board remembers more than a group's worth of numbers.
TEST(MpApiDevice, RootMismatchesAndLongGroupsFailEveryRank) {
  Emulation on(true);
  constexpr size_t kCount = 1024;
  for (bool longGroup : {false, true}) {
    DeviceComms comms(2, 20000);
    std::vector<groveResult_t> first(2, groveSuccess), next(2, groveSuccess);
    std::vector<std::string> text(2);
    const double start = now();
    onRanks(2, [&](int r) {
      std::vector<float> buf(kCount, 1.f + r);
      if (!longGroup) {
        first[r] =
            groveBroadcast(buf.data(), buf.data(), kCount, groveFloat32, r, comms[r], nullptr);
      } else {
        groveGroupStart();
        for (int k = 0; k < 40; ++k)
          groveAllReduce(buf.data(), buf.data(), kCount, groveFloat32,
                         k == 0 && r == 1 ? groveMax : groveSum, comms[r], nullptr);
        first[r] = groveGroupEnd();
      }
      text[r] = groveGetLastError(comms[r]);
      next[r] =
          groveAllReduce(buf.data(), buf.data(), kCount, groveFloat32, groveSum, comms[r], nullptr);
    });
    EXPECT_LT(now() - start, 10.0) << "a rank waited for the timeout";
    int named = 0;
    for (int r = 0; r < 2; ++r) {
      if (longGroup) {
        EXPECT_NE(first[r], groveSuccess) << "rank " << r;
      }
      if (first[r] != groveSuccess) {
        EXPECT_NE(text[r].find("call mismatch"), std::string::npos) << text[r];
      }
      named += first[r] == groveInvalidUsage;
      EXPECT_NE(next[r], groveSuccess) << "rank " << r << ": the communicator failed";
    }
    EXPECT_GE(named, 1) << (longGroup ? "group" : "broadcast");
  }
}

// A receive that differs from the send it pairs with (smaller, larger, or
// of another data type) fails instead of returning the send's first bytes
// as success (smaller) or waiting for the timeout (larger): the launch
// that finds the other rank's note on the call board fails at once, and
// the abort ends the other rank's call (a sender already past its send
// fails at its next call).
TEST(MpApiDevice, SendRecvMismatchesFailOnBothRanks) {
  Emulation on(true);
  constexpr size_t kCount = 4096;
  enum Mismatch { kSmaller, kLarger, kType };
  for (Mismatch m : {kSmaller, kLarger, kType}) {
    DeviceComms comms(2, 20000);
    std::vector<groveResult_t> p2p(2, groveSuccess), next(2, groveSuccess);
    std::vector<std::string> text(2);
    const double start = now();
    onRanks(2, [&](int r) {
      std::vector<int32_t> buf(2 * kCount, r == 0 ? 7 : -1);
      if (r == 0) {
        p2p[r] = groveSend(buf.data(), kCount, groveInt32, 1, comms[r], nullptr);
      } else {
        const size_t count = m == kSmaller ? kCount / 2 : m == kLarger ? 2 * kCount : kCount;
        p2p[r] = groveRecv(buf.data(), count, m == kType ? groveFloat32 : groveInt32, 0, comms[r],
                           nullptr);
      }
      text[r] = groveGetLastError(comms[r]);
      std::vector<float> x(16, 1);
      next[r] = groveAllReduce(x.data(), x.data(), 16, groveFloat32, groveSum, comms[r], nullptr);
      if (text[r].empty()) text[r] = groveGetLastError(comms[r]);
    });
    EXPECT_LT(now() - start, 10.0) << "mismatch " << m << ": a rank waited for the timeout";
    EXPECT_NE(p2p[1], groveSuccess) << "mismatch " << m << ": the receive returned success";
    EXPECT_TRUE(p2p[0] != groveSuccess || next[0] != groveSuccess)
        << "mismatch " << m << ": the sender never learned of it";
    const std::string want = m == kType ? "call mismatch" : "send/recv size mismatch";
    EXPECT_TRUE(text[0].find(want) != std::string::npos || text[1].find(want) != std::string::npos)
        << "mismatch " << m << ": " << text[0] << " | " << text[1];
  }
}

// Sends and receives pair one by one in call order, whatever groups each
// side makes: two sends in one group meet two receives in two calls, with
// exact data, for more pairs than a call board page remembers (its notes
// wrap around without a false mismatch).
TEST(MpApiDevice, SendsPairWithReceivesOneByOneAcrossGroups) {
  Emulation on(true);
  constexpr size_t kA = 1000, kB = 3000;
  constexpr int kRounds = 600;  // 1,200 sends, past the 1,024 notes a page keeps
  DeviceComms comms(2);
  onRanks(2, [&](int r) {
    std::vector<int32_t> a(kA), b(kB);
    for (int round = 0; round < kRounds; ++round) {
      if (r == 0) {
        std::fill(a.begin(), a.end(), round);
        std::fill(b.begin(), b.end(), -round);
        ASSERT_EQ(groveGroupStart(), groveSuccess);
        groveSend(a.data(), kA, groveInt32, 1, comms[r], nullptr);
        groveSend(b.data(), kB, groveInt32, 1, comms[r], nullptr);
        ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(comms[r]);
      } else {
        ASSERT_EQ(groveRecv(a.data(), kA, groveInt32, 0, comms[r], nullptr), groveSuccess)
            << groveGetLastError(comms[r]);
        ASSERT_EQ(groveRecv(b.data(), kB, groveInt32, 0, comms[r], nullptr), groveSuccess)
            << groveGetLastError(comms[r]);
        ASSERT_EQ(a.front(), round);
        ASSERT_EQ(a.back(), round);
        ASSERT_EQ(b.front(), -round);
        ASSERT_EQ(b.back(), -round);
      }
    }
  });
}

}  // namespace
