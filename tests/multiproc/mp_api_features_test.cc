// In-process API tests of the features around the collectives: host streams,
// groups (several sends/recvs; one thread driving several ranks), split,
// groveCommInitAll, non-blocking init, and abort. Ranks are threads.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "mp_api_util.h"
#include "mp_spawn.h"

namespace {

using mpapi::Comms;
using mpapi::onRanks;
using mptest::now;

TEST(MpApi, InitAllRanksAndDevice) {
  Comms comms(3);
  ASSERT_TRUE(comms.ok());
  for (int r = 0; r < 3; ++r) {
    int n = 0, rank = -1, dev = 7;
    EXPECT_EQ(groveCommCount(comms[r], &n), groveSuccess);
    EXPECT_EQ(groveCommUserRank(comms[r], &rank), groveSuccess);
    EXPECT_EQ(groveCommCuDevice(comms[r], &dev), groveSuccess);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(dev, -1) << "a host communicator has no CUDA device";
    groveResult_t async = groveInternalError;
    EXPECT_EQ(groveCommGetAsyncError(comms[r], &async), groveSuccess);
    EXPECT_EQ(async, groveSuccess);
  }
  EXPECT_TRUE(mpapi::allReduceWorks(comms, 100000));
}

TEST(MpApi, HostStreamAsyncAllReduces) {
  constexpr int kRanks = 3, kCalls = 8;
  constexpr size_t kCount = 200000;
  Comms comms(kRanks);
  ASSERT_TRUE(comms.ok());
  onRanks(kRanks, [&](int r) {
    groveHostStream_t s = nullptr;
    ASSERT_EQ(groveHostStreamCreate(&s), groveSuccess);
    std::vector<std::vector<int32_t>> in(kCalls), out(kCalls);
    for (int k = 0; k < kCalls; ++k) {
      in[k].assign(kCount, (r + 1) * (k + 1));
      out[k].assign(kCount, -1);
      // In place for odd k.
      int32_t* dst = (k % 2) ? in[k].data() : out[k].data();
      ASSERT_EQ(groveAllReduce(in[k].data(), dst, kCount, groveInt32, groveSum, comms[r], s),
                groveSuccess)
          << groveGetLastError(comms[r]);
    }
    groveResult_t q = groveHostStreamQuery(s);
    EXPECT_TRUE(q == groveInProgress || q == groveSuccess) << q;
    EXPECT_EQ(groveHostStreamSynchronize(s), groveSuccess) << groveGetLastError(nullptr);
    EXPECT_EQ(groveHostStreamQuery(s), groveSuccess);
    for (int k = 0; k < kCalls; ++k) {
      const std::vector<int32_t>& res = (k % 2) ? in[k] : out[k];
      int32_t want = (k + 1) * kRanks * (kRanks + 1) / 2;
      EXPECT_EQ(res.front(), want) << "rank " << r << " call " << k;
      EXPECT_EQ(res.back(), want) << "rank " << r << " call " << k;
    }
    // Work after a synchronize keeps going, and destroy drains the queue.
    std::vector<int64_t> one(5, r), all(5, -1);
    ASSERT_EQ(groveAllReduce(one.data(), all.data(), 5, groveInt64, groveMax, comms[r], s),
              groveSuccess);
    EXPECT_EQ(groveHostStreamDestroy(s), groveSuccess);
    EXPECT_EQ(all[4], kRanks - 1);
  });
}

TEST(MpApi, HostStreamMixedWithBlockingCallsKeepsOrder) {
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  onRanks(2, [&](int r) {
    groveHostStream_t s = nullptr;
    ASSERT_EQ(groveHostStreamCreate(&s), groveSuccess);
    std::vector<float> x(50000, 1.f);
    for (int k = 0; k < 4; ++k)
      ASSERT_EQ(groveAllReduce(x.data(), x.data(), x.size(), groveFloat32, groveSum, comms[r], s),
                groveSuccess);
    // A blocking call on the same communicator runs after the queued ones.
    std::vector<float> y(10, static_cast<float>(r)), z(10);
    ASSERT_EQ(groveAllReduce(y.data(), z.data(), 10, groveFloat32, groveSum, comms[r], nullptr),
              groveSuccess)
        << groveGetLastError(comms[r]);
    EXPECT_EQ(z[0], 1.f);
    EXPECT_EQ(groveHostStreamSynchronize(s), groveSuccess);
    EXPECT_EQ(x[0], 16.f);
    EXPECT_EQ(groveHostStreamDestroy(s), groveSuccess);
  });
}

TEST(MpApi, GroupOfSendsAndRecvs) {
  constexpr int kRanks = 4;
  constexpr size_t kCount = 30000;
  Comms comms(kRanks);
  ASSERT_TRUE(comms.ok());
  onRanks(kRanks, [&](int r) {
    std::vector<std::vector<double>> sendb(kRanks), recvb(kRanks);
    ASSERT_EQ(groveGroupStart(), groveSuccess);
    for (int p = 0; p < kRanks; ++p) {
      sendb[p].assign(kCount, r * 100 + p);
      recvb[p].assign(kCount, -1);
      // Receives first on even ranks, sends first on odd ones: a group must not care.
      if (r % 2 == 0) {
        ASSERT_EQ(groveRecv(recvb[p].data(), kCount, groveFloat64, p, comms[r], nullptr),
                  groveSuccess);
        ASSERT_EQ(groveSend(sendb[p].data(), kCount, groveFloat64, p, comms[r], nullptr),
                  groveSuccess);
      } else {
        ASSERT_EQ(groveSend(sendb[p].data(), kCount, groveFloat64, p, comms[r], nullptr),
                  groveSuccess);
        ASSERT_EQ(groveRecv(recvb[p].data(), kCount, groveFloat64, p, comms[r], nullptr),
                  groveSuccess);
      }
    }
    ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(nullptr);
    for (int p = 0; p < kRanks; ++p) {
      EXPECT_EQ(recvb[p].front(), p * 100 + r) << "rank " << r << " from " << p;
      EXPECT_EQ(recvb[p].back(), p * 100 + r) << "rank " << r << " from " << p;
    }
  });
}

TEST(MpApi, NestedGroupsAndTwoMessagesToOnePeerMatchInOrder) {
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  onRanks(2, [&](int r) {
    int peer = 1 - r;
    std::vector<int32_t> a(1000, 10 + r), b(3000, 20 + r), ra(1000, -1), rb(3000, -1);
    ASSERT_EQ(groveGroupStart(), groveSuccess);
    ASSERT_EQ(groveGroupStart(), groveSuccess);
    ASSERT_EQ(groveSend(a.data(), a.size(), groveInt32, peer, comms[r], nullptr), groveSuccess);
    ASSERT_EQ(groveRecv(ra.data(), ra.size(), groveInt32, peer, comms[r], nullptr), groveSuccess);
    ASSERT_EQ(groveGroupEnd(), groveSuccess);  // inner end: nothing runs yet
    ASSERT_EQ(groveSend(b.data(), b.size(), groveInt32, peer, comms[r], nullptr), groveSuccess);
    ASSERT_EQ(groveRecv(rb.data(), rb.size(), groveInt32, peer, comms[r], nullptr), groveSuccess);
    ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(nullptr);
    EXPECT_EQ(ra.back(), 10 + peer);
    EXPECT_EQ(rb.back(), 20 + peer);
  });
}

TEST(MpApi, OneThreadDrivesAllRanksInAGroup) {
  constexpr int kRanks = 4;
  constexpr size_t kCount = 100000;
  Comms comms(kRanks);
  ASSERT_TRUE(comms.ok());
  std::vector<std::vector<float>> in(kRanks), out(kRanks), bc(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    in[r].assign(kCount, static_cast<float>(r + 1));
    out[r].assign(kCount, -1.f);
    bc[r].assign(kCount, r == 2 ? 42.f : 0.f);
  }
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(groveAllReduce(in[r].data(), out[r].data(), kCount, groveFloat32, groveSum, comms[r],
                             nullptr),
              groveSuccess);
    ASSERT_EQ(
        groveBroadcast(bc[r].data(), bc[r].data(), kCount, groveFloat32, 2, comms[r], nullptr),
        groveSuccess);
  }
  ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(out[r].front(), 10.f) << r;
    EXPECT_EQ(out[r].back(), 10.f) << r;
    EXPECT_EQ(bc[r].back(), 42.f) << r;
  }
}

TEST(MpApi, OneThreadInitsAllRanksInAGroup) {
  constexpr int kRanks = 3;
  groveUniqueId id;
  ASSERT_EQ(groveGetUniqueId(&id), groveSuccess);
  std::vector<groveComm_t> c(kRanks, nullptr);
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(groveCommInitRank(&c[r], kRanks, id, r), groveSuccess) << groveGetLastError(nullptr);
  ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(nullptr);
  std::vector<int32_t> v(kRanks);
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  for (int r = 0; r < kRanks; ++r) {
    v[r] = r + 5;
    ASSERT_EQ(groveAllReduce(&v[r], &v[r], 1, groveInt32, groveMin, c[r], nullptr), groveSuccess);
  }
  ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(v[r], 5);
  onRanks(kRanks, [&](int r) { EXPECT_EQ(groveCommDestroy(c[r]), groveSuccess); });
}

TEST(MpApi, SplitEvenOddWithKeyOrderThenCollectives) {
  constexpr int kRanks = 4;
  Comms comms(kRanks);
  ASSERT_TRUE(comms.ok());
  std::vector<groveComm_t> child(kRanks, nullptr);
  onRanks(kRanks, [&](int r) {
    // color = parity; key = -rank, so the highest parent rank comes first.
    ASSERT_EQ(groveCommSplit(comms[r], r % 2, -r, &child[r], nullptr), groveSuccess)
        << groveGetLastError(comms[r]);
    ASSERT_NE(child[r], nullptr);
    int n = 0, me = -1;
    EXPECT_EQ(groveCommCount(child[r], &n), groveSuccess);
    EXPECT_EQ(groveCommUserRank(child[r], &me), groveSuccess);
    EXPECT_EQ(n, 2);
    EXPECT_EQ(me, r >= 2 ? 0 : 1) << "parent rank " << r;
    // The children work: sum of parent ranks of the same parity; gather in child-rank order.
    int64_t x = r, sum = -1;
    ASSERT_EQ(groveAllReduce(&x, &sum, 1, groveInt64, groveSum, child[r], nullptr), groveSuccess)
        << groveGetLastError(child[r]);
    EXPECT_EQ(sum, r % 2 == 0 ? 2 : 4);
    int32_t mine = r, both[2] = {-1, -1};
    ASSERT_EQ(groveAllGather(&mine, both, 1, groveInt32, child[r], nullptr), groveSuccess);
    EXPECT_EQ(both[0], r % 2 == 0 ? 2 : 3);
    EXPECT_EQ(both[1], r % 2 == 0 ? 0 : 1);
  });
  // The parent still works while the children exist.
  EXPECT_TRUE(mpapi::allReduceWorks(comms));
  onRanks(kRanks, [&](int r) { EXPECT_EQ(groveCommDestroy(child[r]), groveSuccess); });
}

TEST(MpApi, SplitNoColorGivesNull) {
  constexpr int kRanks = 4;
  Comms comms(kRanks);
  ASSERT_TRUE(comms.ok());
  std::vector<groveComm_t> child(kRanks, reinterpret_cast<groveComm_t>(0x1));
  onRanks(kRanks, [&](int r) {
    int color = r == 1 ? GROVE_SPLIT_NOCOLOR : 7;
    ASSERT_EQ(groveCommSplit(comms[r], color, 0, &child[r], nullptr), groveSuccess)
        << groveGetLastError(comms[r]);
    if (r == 1) {
      EXPECT_EQ(child[r], nullptr);
      return;
    }
    ASSERT_NE(child[r], nullptr);
    int n = 0, me = -1;
    EXPECT_EQ(groveCommCount(child[r], &n), groveSuccess);
    EXPECT_EQ(groveCommUserRank(child[r], &me), groveSuccess);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(me, r == 0 ? 0 : r - 1);  // same key: parent order
    float v = 1.f, out = 0;
    ASSERT_EQ(groveAllReduce(&v, &out, 1, groveFloat32, groveSum, child[r], nullptr), groveSuccess);
    EXPECT_EQ(out, 3.f);
    std::vector<uint8_t> b(5000, r == 3 ? 9 : 0);
    ASSERT_EQ(groveBroadcast(b.data(), b.data(), b.size(), groveUint8, 2, child[r], nullptr),
              groveSuccess);
    EXPECT_EQ(b.back(), 9);
    EXPECT_EQ(groveCommDestroy(child[r]), groveSuccess);
  });
}

TEST(MpApi, NonBlockingInit) {
  constexpr int kRanks = 3;
  groveUniqueId id;
  ASSERT_EQ(groveGetUniqueId(&id), groveSuccess);
  std::vector<groveComm_t> c(kRanks, nullptr);
  onRanks(kRanks, [&](int r) {
    groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    groveResult_t res = groveCommInitRankConfig(&c[r], kRanks, id, r, &cfg);
    ASSERT_TRUE(res == groveInProgress || res == groveSuccess)
        << res << ": " << groveGetLastError(nullptr);
    ASSERT_NE(c[r], nullptr);
    groveResult_t state = groveInProgress;
    double deadline = now() + 30;
    while (now() < deadline) {
      ASSERT_EQ(groveCommGetAsyncError(c[r], &state), groveSuccess) << groveGetLastError(nullptr);
      if (state != groveInProgress) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(state, groveSuccess) << groveGetLastError(c[r]);
    int32_t x = 1, s = 0;
    ASSERT_EQ(groveAllReduce(&x, &s, 1, groveInt32, groveSum, c[r], nullptr), groveSuccess);
    EXPECT_EQ(s, kRanks);
    EXPECT_EQ(groveCommDestroy(c[r]), groveSuccess);
  });
}

TEST(MpApi, NonBlockingInitCallsWaitForInit) {
  // A collective issued before the non-blocking init finished still works.
  constexpr int kRanks = 2;
  groveUniqueId id;
  ASSERT_EQ(groveGetUniqueId(&id), groveSuccess);
  onRanks(kRanks, [&](int r) {
    groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    groveComm_t c = nullptr;
    groveResult_t res = groveCommInitRankConfig(&c, kRanks, id, r, &cfg);
    ASSERT_TRUE(res == groveInProgress || res == groveSuccess) << groveGetLastError(nullptr);
    int32_t x = r + 1, s = 0;
    res = groveAllReduce(&x, &s, 1, groveInt32, groveSum, c, nullptr);
    ASSERT_TRUE(res == groveSuccess || res == groveInProgress) << groveGetLastError(c);
    groveResult_t state = groveInProgress;
    double deadline = now() + 30;
    while (now() < deadline && state == groveInProgress) {
      ASSERT_EQ(groveCommGetAsyncError(c, &state), groveSuccess);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(state, groveSuccess);
    if (res == groveSuccess) {
      EXPECT_EQ(s, 3);
    }
    EXPECT_EQ(groveCommDestroy(c), groveSuccess);
  });
}

TEST(MpApi, AbortFailsThePeersPendingCallQuickly) {
  constexpr int kRanks = 3;
  groveUniqueId id;
  ASSERT_EQ(groveGetUniqueId(&id), groveSuccess);
  std::vector<groveComm_t> c(kRanks, nullptr);
  onRanks(kRanks, [&](int r) {
    groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
    cfg.timeoutMs = 25000;  // so only the abort can end the wait quickly
    ASSERT_EQ(groveCommInitRankConfig(&c[r], kRanks, id, r, &cfg), groveSuccess)
        << groveGetLastError(nullptr);
  });
  ASSERT_TRUE(c[0] && c[1] && c[2]);
  std::vector<double> took(kRanks, -1);
  std::vector<groveResult_t> got(kRanks, groveSuccess);
  std::atomic<double> abortAt{0};
  onRanks(kRanks, [&](int r) {
    if (r == 0) {
      // Rank 0 never joins the all-reduce; it aborts instead.
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      abortAt = now();
      EXPECT_EQ(groveCommAbort(c[0]), groveSuccess) << groveGetLastError(nullptr);
      return;
    }
    std::vector<float> v(4096, 1.f);
    got[r] = groveAllReduce(v.data(), v.data(), v.size(), groveFloat32, groveSum, c[r], nullptr);
    took[r] = now() - abortAt.load();
  });
  for (int r = 1; r < kRanks; ++r) {
    EXPECT_NE(got[r], groveSuccess) << "rank " << r;
    EXPECT_NE(got[r], groveInProgress) << "rank " << r;
    EXPECT_LT(took[r], 5.0) << "rank " << r << " waited " << took[r] << " s after the abort";
    EXPECT_STRNE(groveGetLastError(c[r]), "") << "rank " << r;
    printf("rank %d: %s after %.2f s: %s\n", r, groveGetErrorString(got[r]), took[r],
           groveGetLastError(c[r]));
    // Future calls fail too, at once.
    double t0 = now();
    int32_t x = 0;
    EXPECT_NE(groveAllReduce(&x, &x, 1, groveInt32, groveSum, c[r], nullptr), groveSuccess);
    EXPECT_LT(now() - t0, 5.0);
    groveResult_t async = groveSuccess;
    EXPECT_EQ(groveCommGetAsyncError(c[r], &async), groveSuccess);
    EXPECT_EQ(async, groveRemoteError) << "rank " << r << ": async error after a peer's abort";
    EXPECT_NE(std::string(groveGetLastError(c[r])).find("rank 0 called groveCommAbort"),
              std::string::npos)
        << groveGetLastError(c[r]);
    EXPECT_EQ(groveCommAbort(c[r]), groveSuccess);
  }
  float y = 0;
  EXPECT_EQ(groveAllReduce(&y, &y, 1, groveFloat32, groveSum, c[0], nullptr), groveInvalidUsage);
}

// A peer's abort reaches a rank that makes no call: its async error turns
// to groveRemoteError, with a text that names the rank that aborted.
TEST(MpApi, AbortReachesAPeerThatMakesNoCall) {
  mpapi::Comms c(2);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(groveCommAbort(c[0]), groveSuccess);
  c.c[0] = nullptr;
  groveResult_t async = groveSuccess;
  const double deadline = now() + 10;
  while (async == groveSuccess && now() < deadline) {
    ASSERT_EQ(groveCommGetAsyncError(c[1], &async), groveSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(async, groveRemoteError);
  EXPECT_NE(std::string(groveGetLastError(c[1])).find("rank 0 called groveCommAbort"),
            std::string::npos)
      << groveGetLastError(c[1]);
  EXPECT_EQ(groveCommAbort(c[1]), groveSuccess);
  c.c[1] = nullptr;
}

// Ranks made by groveCommInitRankConfig on threads with one config.
std::vector<groveComm_t> initWithConfig(int n, const groveConfig_t& base) {
  groveUniqueId id;
  EXPECT_EQ(groveGetUniqueId(&id), groveSuccess);
  std::vector<groveComm_t> c(n, nullptr);
  onRanks(n, [&](int r) {
    groveConfig_t cfg = base;
    EXPECT_EQ(groveCommInitRankConfig(&c[r], n, id, r, &cfg), groveSuccess)
        << groveGetLastError(nullptr);
  });
  return c;
}

TEST(MpApi, ConfigTransportSocketAndChannels) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = (1 << 20) + 5;
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  cfg.transport = "socket";
  cfg.nChannels = 3;
  cfg.commName = "mp-api-socket";
  auto c = initWithConfig(kRanks, cfg);
  ASSERT_TRUE(c[0] && c[1] && c[2]);
  onRanks(kRanks, [&](int r) {
    std::vector<float> v(kCount, static_cast<float>(r + 1));
    ASSERT_EQ(groveAllReduce(v.data(), v.data(), kCount, groveFloat32, groveMax, c[r], nullptr),
              groveSuccess)
        << groveGetLastError(c[r]);
    EXPECT_EQ(v.front(), 3.f);
    EXPECT_EQ(v.back(), 3.f);
    EXPECT_EQ(groveCommDestroy(c[r]), groveSuccess);
  });
}

TEST(MpApi, ConfigTimeoutIsHonoured) {
  constexpr int kRanks = 2;
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  cfg.timeoutMs = 1000;
  auto c = initWithConfig(kRanks, cfg);
  ASSERT_TRUE(c[0] && c[1]);
  double took = 0;
  groveResult_t got = groveSuccess;
  onRanks(kRanks, [&](int r) {
    if (r == 1) {  // never joins; gives up after rank 0 has timed out
      std::this_thread::sleep_for(std::chrono::milliseconds(4000));
      return;
    }
    double t0 = now();
    float x = 1;
    got = groveAllReduce(&x, &x, 1, groveFloat32, groveSum, c[0], nullptr);
    took = now() - t0;
  });
  EXPECT_EQ(got, groveRemoteError) << groveGetLastError(c[0]);
  EXPECT_GT(took, 0.9);
  EXPECT_LT(took, 3.5) << "timeoutMs = 1000 but the call waited " << took << " s";
  std::string text = groveGetLastError(c[0]);
  EXPECT_NE(text.find("timed out"), std::string::npos) << text;
  EXPECT_EQ(groveCommAbort(c[0]), groveSuccess);
  EXPECT_EQ(groveCommAbort(c[1]), groveSuccess);
}

TEST(MpApi, DestroyWaitsForQueuedWork) {
  constexpr int kRanks = 2;
  constexpr size_t kCount = 1 << 20;
  Comms comms(kRanks);
  ASSERT_TRUE(comms.ok());
  onRanks(kRanks, [&](int r) {
    groveHostStream_t s = nullptr;
    ASSERT_EQ(groveHostStreamCreate(&s), groveSuccess);
    std::vector<std::vector<double>> v(4, std::vector<double>(kCount, r + 1.0));
    for (auto& b : v)
      ASSERT_EQ(groveAllReduce(b.data(), b.data(), kCount, groveFloat64, groveSum, comms[r], s),
                groveSuccess);
    // Destroy without a synchronize: it must wait for the queued all-reduces.
    EXPECT_EQ(groveCommDestroy(comms[r]), groveSuccess) << groveGetLastError(nullptr);
    comms.c[r] = nullptr;
    EXPECT_EQ(groveHostStreamSynchronize(s), groveSuccess) << groveGetLastError(nullptr);
    for (auto& b : v) EXPECT_EQ(b.back(), 3.0) << "rank " << r;
    EXPECT_EQ(groveHostStreamDestroy(s), groveSuccess);
  });
}

// Regression: over the socket transport, an all-gather whose byte count is
// not a multiple of 4 followed by a >= 1 MiB all-gather of a 4-byte type
// left the second one stuck (bytes short on a link) until the timeout.
TEST(MpApi, SocketOddBytesThenLargeAllGather) {
  constexpr int kRanks = 3;
  constexpr size_t kOdd = 1021, kBig = 262144;
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  cfg.transport = "socket";
  cfg.timeoutMs = 5000;
  auto c = initWithConfig(kRanks, cfg);
  ASSERT_TRUE(c[0] && c[1] && c[2]);
  std::vector<groveResult_t> res(kRanks, groveSuccess);
  onRanks(kRanks, [&](int r) {
    std::vector<int8_t> a(kOdd, static_cast<int8_t>(r)), ra(kOdd * kRanks, -1);
    res[r] = groveAllGather(a.data(), ra.data(), kOdd, groveInt8, c[r], nullptr);
    if (res[r] != groveSuccess) return;
    EXPECT_EQ(ra.back(), kRanks - 1);
    std::vector<int32_t> b(kBig, r), rb(kBig * kRanks, -1);
    res[r] = groveAllGather(b.data(), rb.data(), kBig, groveInt32, c[r], nullptr);
    if (res[r] == groveSuccess) {
      EXPECT_EQ(rb[kBig], 1);
      EXPECT_EQ(rb.back(), kRanks - 1);
    }
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(res[r], groveSuccess) << "rank " << r << ": " << groveGetLastError(c[r]);
  }
  bool ok = res[0] == groveSuccess && res[1] == groveSuccess && res[2] == groveSuccess;
  onRanks(kRanks, [&](int r) {
    if (ok) {
      EXPECT_EQ(groveCommDestroy(c[r]), groveSuccess);
    } else {
      groveCommAbort(c[r]);
    }
  });
}

}  // namespace
