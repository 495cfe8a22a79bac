// Communicator and stream lifetimes, bad settings and ranks that disagree,
// through the public API (ranks as threads of this process):
//   - destroying a communicator or host stream that an open group still uses
//     is refused (it used to free memory groveGroupEnd then read);
//   - handles are freed: init/destroy cycles leave memory flat, and a stale
//     handle gets a clear error;
//   - bad GROVE_* values are refused at init, naming the variable;
//   - ranks whose settings differ fail init alike, naming the setting.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "grove/grove.h"
#include "mp_api_util.h"
#include "mp_spawn.h"

using mpapi::Comms;
using mpapi::lastErrorNames;
using mpapi::onRanks;
using mpapi::rssKiB;

TEST(MpApiLifecycle, DestroyInsideAnOpenGroupIsRefused) {
  groveComm_t c = nullptr;
  ASSERT_EQ(groveCommInitAll(&c, 1, nullptr), groveSuccess) << groveGetLastError(nullptr);
  float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8] = {};
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  ASSERT_EQ(groveAllReduce(a, b, 8, groveFloat32, groveSum, c, nullptr), groveSuccess);
  EXPECT_EQ(groveCommDestroy(c), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(nullptr, "groveGroupEnd"));
  EXPECT_EQ(groveCommAbort(c), groveInvalidUsage);
  ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(nullptr);
  EXPECT_EQ(b[7], 8.f);  // the group ran on the communicator it still had
  EXPECT_EQ(groveCommDestroy(c), groveSuccess) << groveGetLastError(nullptr);
}

TEST(MpApiLifecycle, StreamDestroyInsideAnOpenGroupIsRefused) {
  groveComm_t c = nullptr;
  ASSERT_EQ(groveCommInitAll(&c, 1, nullptr), groveSuccess) << groveGetLastError(nullptr);
  groveHostStream_t s = nullptr;
  ASSERT_EQ(groveHostStreamCreate(&s), groveSuccess);
  float a[4] = {1, 2, 3, 4}, b[4] = {};
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  ASSERT_EQ(groveAllReduce(a, b, 4, groveFloat32, groveSum, c, s), groveSuccess);
  EXPECT_EQ(groveHostStreamDestroy(s), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(nullptr, "groveGroupEnd"));
  ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(nullptr);
  EXPECT_EQ(groveHostStreamSynchronize(s), groveSuccess);
  EXPECT_EQ(b[3], 4.f);
  EXPECT_EQ(groveHostStreamDestroy(s), groveSuccess);
  EXPECT_EQ(groveCommDestroy(c), groveSuccess);
}

TEST(MpApiLifecycle, DestroyOfAnInitDeferredByAnOpenGroupIsRefused) {
  groveUniqueId id;
  ASSERT_EQ(groveGetUniqueId(&id), groveSuccess);
  groveComm_t c = nullptr;
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  ASSERT_EQ(groveCommInitRank(&c, 1, id, 0), groveSuccess) << groveGetLastError(nullptr);
  EXPECT_EQ(groveCommDestroy(c), groveInvalidUsage);
  ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(nullptr);
  int n = 0;
  EXPECT_EQ(groveCommCount(c, &n), groveSuccess);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(groveCommDestroy(c), groveSuccess);
}

// Every handle is freed: 2,000 init/destroy cycles grow the resident set by
// less than 50 bytes a cycle (a handle is about 300; they used to be kept
// forever, with about 0.85 kB a cycle in all). The warm-up fills caches,
// thread pools and the bounded list of the last 1024 freed handles.
TEST(MpApiLifecycle, InitDestroyCyclesLeaveMemoryFlat) {
  auto cycle = [] {
    groveComm_t c = nullptr;
    ASSERT_EQ(groveCommInitAll(&c, 1, nullptr), groveSuccess) << groveGetLastError(nullptr);
    float x = 1.f;
    ASSERT_EQ(groveAllReduce(&x, &x, 1, groveFloat32, groveSum, c, nullptr), groveSuccess);
    ASSERT_EQ(groveCommDestroy(c), groveSuccess);
  };
  for (int i = 0; i < 1500; ++i) cycle();
  // Three windows: a leak grows every one of them; the allocator settling
  // (a new arena for a thread that ran on another core) grows only one.
  const int cycles = 1000;
  long least = -1;
  std::string seen;
  for (int w = 0; w < 3; ++w) {
    const long before = rssKiB();
    for (int i = 0; i < cycles; ++i) cycle();
    const long grown = rssKiB() - before;
    seen += " " + std::to_string(grown);
    if (least < 0 || grown < least) least = grown;
  }
  EXPECT_LT(least * 1024.0 / cycles, 50.0)
      << "RSS grew by" << seen << " KiB in three windows of " << cycles << " init/destroy cycles";
}

TEST(MpApiLifecycle, StaleAndForeignHandlesGetClearErrors) {
  groveComm_t c = nullptr;
  ASSERT_EQ(groveCommInitAll(&c, 1, nullptr), groveSuccess);
  ASSERT_EQ(groveCommDestroy(c), groveSuccess);
  int n = 0;
  EXPECT_EQ(groveCommCount(c, &n), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(nullptr, "destroyed"));
  groveResult_t async = groveSuccess;
  EXPECT_EQ(groveCommGetAsyncError(c, &async), groveInvalidUsage);
  int local = 0;
  EXPECT_EQ(groveCommCount(reinterpret_cast<groveComm_t>(&local), &n), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "not a grove communicator"));
}

// A destroyed handle never aliases a later communicator: the allocator used
// to hand the next communicator the freed address, and a call on the stale
// handle then ran on the new one and returned success.
TEST(MpApiLifecycle, AStaleHandleNeverReachesALaterCommunicator) {
  for (int i = 0; i < 40; ++i) {
    groveComm_t old = nullptr, fresh = nullptr;
    ASSERT_EQ(groveCommInitAll(&old, 1, nullptr), groveSuccess);
    ASSERT_EQ(i % 2 == 0 ? groveCommDestroy(old) : groveCommAbort(old), groveSuccess);
    ASSERT_EQ(groveCommInitAll(&fresh, 1, nullptr), groveSuccess);
    EXPECT_NE(fresh, old) << "cycle " << i << ": a new communicator got a retired handle";
    float a = 1, b = 0;
    EXPECT_EQ(groveAllReduce(&a, &b, 1, groveFloat32, groveSum, old, nullptr), groveInvalidUsage)
        << "cycle " << i;
    EXPECT_TRUE(lastErrorNames(nullptr, "destroyed"));
    EXPECT_EQ(groveAllReduce(&a, &b, 1, groveFloat32, groveSum, fresh, nullptr), groveSuccess);
    EXPECT_EQ(groveCommDestroy(fresh), groveSuccess);
  }
}

// A thread that opens a group, queues a call and ends without
// groveGroupEnd used to leave a communicator that could never be destroyed
// ("inside a group"); its calls are dropped and the communicator goes.
TEST(MpApiLifecycle, ADestroyWorksAfterTheGroupsThreadIsGone) {
  groveComm_t c = nullptr;
  ASSERT_EQ(groveCommInitAll(&c, 1, nullptr), groveSuccess);
  float a = 1, b = 0;
  std::thread([&] {
    ASSERT_EQ(groveGroupStart(), groveSuccess);
    ASSERT_EQ(groveAllReduce(&a, &b, 1, groveFloat32, groveSum, c, nullptr), groveSuccess);
  }).join();
  EXPECT_EQ(groveAllReduce(&a, &b, 1, groveFloat32, groveSum, c, nullptr), groveSuccess)
      << groveGetLastError(c);
  EXPECT_EQ(b, 1.f);
  EXPECT_EQ(groveCommDestroy(c), groveSuccess) << groveGetLastError(nullptr);
}

// A group whose calls fail: groveGetLastError(comm) of each of its
// communicators holds the failure, as it does after a failed single call
// (it used to stay empty: the group's text went to the thread only).
TEST(MpApiLifecycle, AFailedGroupEndLeavesItsTextOnTheCommunicators) {
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  std::vector<groveResult_t> got(2, groveSuccess);
  std::vector<std::string> thread(2), comm(2);
  onRanks(2, [&](int r) {
    std::vector<float> buf(64, 1.f);
    ASSERT_EQ(groveGroupStart(), groveSuccess);
    groveAllReduce(buf.data(), buf.data(), 64, groveFloat32, r == 0 ? groveSum : groveMax, comms[r],
                   nullptr);
    got[r] = groveGroupEnd();
    thread[r] = groveGetLastError(nullptr);
    comm[r] = groveGetLastError(comms[r]);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(got[r], groveSuccess) << "rank " << r;
    EXPECT_NE(thread[r].find("groveGroupEnd"), std::string::npos) << thread[r];
    EXPECT_EQ(comm[r], thread[r]) << "rank " << r;
  }
}

// A call refused inside a group fails the whole group, as NCCL's group
// error does: none of the group's calls runs, the end returns the refusal,
// and the communicator stays usable (every rank left out the same group).
// Before, the end ran the group's other calls and returned success.
TEST(MpApiLifecycle, ACallRefusedInAGroupFailsTheWholeGroup) {
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  std::vector<groveResult_t> end(2, groveSuccess), next(2, groveSuccess);
  std::vector<std::string> text(2);
  std::vector<float> second(2, 0.f), after(2, 0.f);
  onRanks(2, [&](int r) {
    std::vector<float> a(64, 1.f + r), b(64, 10.f + r);
    ASSERT_EQ(groveGroupStart(), groveSuccess);
    EXPECT_EQ(groveAllReduce(a.data(), nullptr, 64, groveFloat32, groveSum, comms[r], nullptr),
              groveInvalidArgument);
    EXPECT_EQ(groveAllReduce(b.data(), b.data(), 64, groveFloat32, groveSum, comms[r], nullptr),
              groveSuccess);
    end[r] = groveGroupEnd();
    text[r] = groveGetLastError(comms[r]);
    second[r] = b[0];
    next[r] = groveAllReduce(b.data(), b.data(), 64, groveFloat32, groveSum, comms[r], nullptr);
    after[r] = b[0];
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(end[r], groveInvalidArgument) << text[r];
    EXPECT_NE(text[r].find("none of the group's calls ran"), std::string::npos) << text[r];
    EXPECT_NE(text[r].find("recvbuff is NULL"), std::string::npos) << text[r];
    EXPECT_EQ(second[r], 10.f + r) << "rank " << r << " ran a call of a refused group";
    EXPECT_EQ(next[r], groveSuccess) << "rank " << r << ": the communicator did not stay usable";
    EXPECT_EQ(after[r], 21.f);
  }
}

// A library's own refusal inside a group (groveGroupFail, as grove's NCCL
// library reports a PreMulSum op in a group) does the same; outside a
// group it does nothing, and a bad result code is refused.
TEST(MpApiLifecycle, GroupFailFailsTheOpenGroup) {
  Comms comms(1);
  ASSERT_TRUE(comms.ok());
  EXPECT_EQ(groveGroupFail(comms[0], groveSuccess, "no"), groveInvalidArgument);
  EXPECT_EQ(groveGroupFail(comms[0], groveInvalidUsage, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveGroupFail(comms[0], groveInvalidUsage, "outside a group"), groveSuccess);
  std::vector<float> a(16, 2.f), out(16, 0.f);
  ASSERT_EQ(groveAllReduce(a.data(), out.data(), 16, groveFloat32, groveSum, comms[0], nullptr),
            groveSuccess);
  EXPECT_EQ(out[0], 2.f);
  out.assign(16, 0.f);
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  ASSERT_EQ(groveAllReduce(a.data(), out.data(), 16, groveFloat32, groveSum, comms[0], nullptr),
            groveSuccess);
  EXPECT_EQ(groveGroupFail(comms[0], groveInvalidUsage, "the library refused a call"),
            groveSuccess);
  EXPECT_EQ(groveGroupEnd(), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(nullptr, "the library refused a call"));
  EXPECT_TRUE(lastErrorNames(comms[0], "the library refused a call"));
  EXPECT_EQ(out[0], 0.f) << "a call of the failed group ran";
  ASSERT_EQ(groveAllReduce(a.data(), out.data(), 16, groveFloat32, groveSum, comms[0], nullptr),
            groveSuccess);
  EXPECT_EQ(out[0], 2.f);
}

// A refusal grove recorded that a library reports again (grove's NCCL
// library does for every refusal of a grove call) fails the group once,
// with the first refusal's text; the communicator stays usable.
TEST(MpApiLifecycle, ARefusalReportedTwiceFailsTheGroupOnce) {
  Comms comms(1);
  ASSERT_TRUE(comms.ok());
  std::vector<float> a(16, 2.f), out(16, 0.f);
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  ASSERT_EQ(groveAllReduce(a.data(), out.data(), 16, groveFloat32, groveSum, comms[0], nullptr),
            groveSuccess);
  ASSERT_EQ(groveAllReduce(a.data(), nullptr, 16, groveFloat32, groveSum, comms[0], nullptr),
            groveInvalidArgument);
  const std::string first = groveGetLastError(nullptr);
  EXPECT_EQ(groveGroupFail(comms[0], groveInvalidArgument, first.c_str()), groveSuccess);
  EXPECT_EQ(groveGroupFail(comms[0], groveInvalidUsage, "a later refusal"), groveSuccess);
  EXPECT_EQ(groveGroupEnd(), groveInvalidArgument);
  const std::string text = groveGetLastError(comms[0]);
  const std::string why = "recvbuff";
  ASSERT_NE(text.find(why), std::string::npos) << text;
  EXPECT_EQ(text.find(why), text.rfind(why)) << "the refusal told twice: " << text;
  EXPECT_EQ(text.find("a later refusal"), std::string::npos) << text;
  EXPECT_EQ(out[0], 0.f) << "a call of the failed group ran";
  ASSERT_EQ(groveAllReduce(a.data(), out.data(), 16, groveFloat32, groveSum, comms[0], nullptr),
            groveSuccess);
  EXPECT_EQ(out[0], 2.f);
}

// Values that used to be accepted and meant something else (no timeout at
// all, a wrapped channel count, logging at the default level).
TEST(MpApiLifecycle, BadEnvironmentValuesAreRefusedAtInit) {
  const std::pair<const char*, const char*> bad[] = {
      {"GROVE_TIMEOUT", "nan"},   {"GROVE_TIMEOUT", "0"},    {"GROVE_NCHANNELS", "4294967298"},
      {"GROVE_DEBUG", "garbage"}, {"GROVE_BUFFSIZE", "-4M"}, {"GROVE_TIMEOUT", "0x10"}};
  for (const auto& [name, value] : bad) {
    setenv(name, value, 1);
    groveComm_t c = nullptr;
    EXPECT_EQ(groveCommInitAll(&c, 1, nullptr), groveInvalidArgument) << name << "=" << value;
    EXPECT_TRUE(lastErrorNames(nullptr, std::string(name) + "=" + value));
    unsetenv(name);
  }
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  cfg.timeoutMs = 0;
  groveUniqueId id;
  ASSERT_EQ(groveGetUniqueId(&id), groveSuccess);
  groveComm_t c = nullptr;
  EXPECT_EQ(groveCommInitRankConfig(&c, 1, id, 0, &cfg), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "timeoutMs"));
}

// Ranks whose settings differ would exchange data in two layouts; each rank
// fails init instead, naming the setting and the values.
TEST(MpApiLifecycle, RanksThatDisagreeFailInitAlike) {
  struct Case {
    const char* what;
    void (*set)(groveConfig_t&, int rank);
  };
  const Case cases[] = {
      {"GROVE_NCHANNELS", [](groveConfig_t& c, int r) { c.nChannels = r == 0 ? 1 : 2; }},
      {"GROVE_ALGO", [](groveConfig_t& c, int r) { c.algo = r == 0 ? "allreduce:ring" : ""; }},
      {"GROVE_TRANSPORT", [](groveConfig_t& c, int r) { c.transport = r == 0 ? "shm" : "socket"; }},
  };
  for (const Case& k : cases) {
    groveUniqueId id;
    ASSERT_EQ(groveGetUniqueId(&id), groveSuccess);
    std::vector<groveResult_t> got(2, groveSuccess);
    std::vector<std::string> text(2);
    onRanks(2, [&](int r) {
      groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
      k.set(cfg, r);
      groveComm_t c = nullptr;
      got[r] = groveCommInitRankConfig(&c, 2, id, r, &cfg);
      text[r] = groveGetLastError(nullptr);
      if (got[r] == groveSuccess) groveCommDestroy(c);
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(got[r], groveInvalidUsage) << k.what << ", rank " << r << ": " << text[r];
      EXPECT_NE(text[r].find(std::string("ranks disagree on ") + k.what), std::string::npos)
          << text[r];
    }
  }
}

// A non-blocking init whose peers never come: what the handle knows answers at
// once, and groveCommAbort ends the init instead of waiting out its timeout.
TEST(MpApiLifecycle, AbortEndsANonBlockingInitThatCannotFinish) {
  groveUniqueId id;
  ASSERT_EQ(groveGetUniqueId(&id), groveSuccess);
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.timeoutMs = 30000;
  groveComm_t c = nullptr;
  groveResult_t r = groveCommInitRankConfig(&c, 2, id, 0, &cfg);  // rank 1 never joins
  ASSERT_EQ(r, groveInProgress) << groveGetLastError(nullptr);
  const double start = mptest::now();
  int n = 0, rank = -1;
  EXPECT_EQ(groveCommCount(c, &n), groveSuccess);
  EXPECT_EQ(groveCommUserRank(c, &rank), groveSuccess);
  EXPECT_EQ(n, 2);
  EXPECT_EQ(rank, 0);
  groveResult_t state = groveSuccess;
  EXPECT_EQ(groveCommGetAsyncError(c, &state), groveSuccess);
  EXPECT_EQ(state, groveInProgress);
  EXPECT_EQ(groveCommAbort(c), groveSuccess) << groveGetLastError(nullptr);
  EXPECT_LT(mptest::now() - start, 10.0) << "abort waited for the init's 30 s timeout";
}

// An id whose job is over (its root, started by this process, has ended) is
// refused at once, instead of knocking on a closed port until the timeout.
TEST(MpApiLifecycle, ASpentUniqueIdIsRefusedAtOnce) {
  groveUniqueId id;
  ASSERT_EQ(groveGetUniqueId(&id), groveSuccess);
  groveComm_t c = nullptr;
  ASSERT_EQ(groveCommInitRank(&c, 1, id, 0), groveSuccess) << groveGetLastError(nullptr);
  // While it lives: every rank has joined, the root's listener is closed.
  groveComm_t again = nullptr;
  double start = mptest::now();
  EXPECT_EQ(groveCommInitRank(&again, 1, id, 0), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(nullptr, "has joined already"));
  EXPECT_LT(mptest::now() - start, 10.0) << "the init waited for GROVE_TIMEOUT";
  ASSERT_EQ(groveCommDestroy(c), groveSuccess);
  start = mptest::now();
  EXPECT_EQ(groveCommInitRank(&c, 1, id, 0), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(nullptr, "unique id is spent"));
  EXPECT_LT(mptest::now() - start, 10.0) << "the retry waited for GROVE_TIMEOUT";
}

// GROVE_CHECK=calls: ranks that call different collectives, counts, types,
// ops or roots in the same slot all fail with the same clear error instead
// of exchanging mismatched data; matching calls run as usual.
TEST(MpApiLifecycle, CheckedCallsNameTheMismatch) {
  setenv("GROVE_CHECK", "calls", 1);
  struct Case {
    const char* word;  // what the error must name
    groveResult_t (*call)(groveComm_t, int rank, float* buf);
  };
  const Case cases[] = {
      {"max",
       [](groveComm_t c, int r, float* b) {
         return groveAllReduce(b, b, 64, groveFloat32, r == 0 ? groveSum : groveMax, c, nullptr);
       }},
      {"count 32",
       [](groveComm_t c, int r, float* b) {
         return groveAllReduce(b, b, r == 0 ? 64 : 32, groveFloat32, groveSum, c, nullptr);
       }},
      {"int32",
       [](groveComm_t c, int r, float* b) {
         return groveAllReduce(b, b, 64, r == 0 ? groveFloat32 : groveInt32, groveSum, c, nullptr);
       }},
      {"root 1", [](groveComm_t c, int r,
                    float* b) { return groveBroadcast(b, b, 64, groveFloat32, r, c, nullptr); }},
      {"broadcast",
       [](groveComm_t c, int r, float* b) {
         return r == 0 ? groveAllReduce(b, b, 64, groveFloat32, groveSum, c, nullptr)
                       : groveBroadcast(b, b, 64, groveFloat32, 0, c, nullptr);
       }},
  };
  for (const Case& k : cases) {
    Comms comms(2);
    ASSERT_TRUE(comms.ok());
    std::vector<float> before(2, -1.f);
    std::vector<groveResult_t> got(2, groveSuccess);
    std::vector<std::string> text(2);
    onRanks(2, [&](int r) {
      std::vector<float> buf(64, static_cast<float>(r + 1));
      // A matching call first: checked, and it runs.
      ASSERT_EQ(
          groveAllReduce(buf.data(), buf.data(), 64, groveFloat32, groveSum, comms[r], nullptr),
          groveSuccess)
          << groveGetLastError(comms[r]);
      before[r] = buf[0];
      got[r] = k.call(comms[r], r, buf.data());
      text[r] = groveGetLastError(comms[r]);
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(before[r], 3.f);
      EXPECT_NE(got[r], groveSuccess) << k.word;
      EXPECT_NE(text[r].find("GROVE_CHECK: the ranks' collective #2 do not match"),
                std::string::npos)
          << text[r];
      EXPECT_NE(text[r].find(k.word), std::string::npos) << k.word << ": " << text[r];
    }
  }
  unsetenv("GROVE_CHECK");
}

// Suspend: calls refused with a clear error until resume, on a host
// communicator (nothing to release: memory 0) and inside a group refused;
// the communicator works again after resume. The CUDA path (scratch
// released, rings counted) runs in tests/nccl's client on the emulated device.
namespace {
// Two ranks of one communicator (threads of this process) whose calls time
// out after `timeoutMs`.
std::vector<groveComm_t> commsTimingOutAfter(int timeoutMs) {
  groveUniqueId id;
  EXPECT_EQ(groveGetUniqueId(&id), groveSuccess);
  std::vector<groveComm_t> c(2, nullptr);
  onRanks(2, [&](int r) {
    groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
    cfg.timeoutMs = timeoutMs;
    EXPECT_EQ(groveCommInitRankConfig(&c[r], 2, id, r, &cfg), groveSuccess)
        << groveGetLastError(nullptr);
  });
  return c;
}
}  // namespace

TEST(MpApiLifecycle, ADestroyThatStopsWaitingLeavesItsQueuedWorkACommunicator) {
  // On one host stream, communicator B's all-reduce waits (its peer never
  // calls) for 6 s, and A's waits behind it. Destroying A gives up after
  // A's timeout and 5 s more: A's work, still queued, then runs on A. It
  // fails at once, on a closed A, not on freed memory (the sanitizer tier
  // runs this test).
  std::vector<groveComm_t> a = commsTimingOutAfter(300), b = commsTimingOutAfter(6000);
  ASSERT_TRUE(a[0] && a[1] && b[0] && b[1]);
  groveHostStream_t s = nullptr;
  ASSERT_EQ(groveHostStreamCreate(&s), groveSuccess);
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  ASSERT_EQ(groveAllReduce(x, y, 4, groveFloat32, groveSum, b[0], s), groveSuccess);
  ASSERT_EQ(groveAllReduce(x, y, 4, groveFloat32, groveSum, a[0], s), groveSuccess);
  EXPECT_EQ(groveCommDestroy(a[0]), groveSuccess) << groveGetLastError(nullptr);
  EXPECT_NE(groveHostStreamSynchronize(s), groveSuccess);  // B's call timed out
  EXPECT_EQ(groveHostStreamDestroy(s), groveSuccess);
  for (groveComm_t c : {a[1], b[0], b[1]}) EXPECT_EQ(groveCommAbort(c), groveSuccess);
}

TEST(MpApiLifecycle, SuspendRefusesCallsUntilResume) {
  groveComm_t c = nullptr;
  ASSERT_EQ(groveCommInitAll(&c, 1, nullptr), groveSuccess) << groveGetLastError(nullptr);
  float a[4] = {1, 2, 3, 4}, b[4] = {};
  groveCommMemory_t m{7, 7, 7};
  ASSERT_EQ(groveCommMemory(c, &m), groveSuccess) << groveGetLastError(c);
  EXPECT_EQ(m.releasable, 0u);
  EXPECT_EQ(m.persistent, 0u);
  EXPECT_EQ(m.suspended, 0);
  EXPECT_EQ(groveCommResume(c), groveInvalidUsage);
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  EXPECT_EQ(groveCommSuspend(c), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(nullptr, "group"));
  ASSERT_EQ(groveGroupEnd(), groveSuccess);
  ASSERT_EQ(groveCommSuspend(c), groveSuccess) << groveGetLastError(c);
  ASSERT_EQ(groveCommMemory(c, &m), groveSuccess);
  EXPECT_EQ(m.suspended, 1);
  EXPECT_EQ(groveAllReduce(a, b, 4, groveFloat32, groveSum, c, nullptr), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(nullptr, "suspended"));
  EXPECT_EQ(groveCommSuspend(c), groveInvalidUsage);  // already suspended
  ASSERT_EQ(groveCommResume(c), groveSuccess) << groveGetLastError(c);
  ASSERT_EQ(groveAllReduce(a, b, 4, groveFloat32, groveSum, c, nullptr), groveSuccess)
      << groveGetLastError(c);
  EXPECT_EQ(b[3], 4.f);
  groveResult_t async = groveInternalError;
  EXPECT_EQ(groveCommGetAsyncError(c, &async), groveSuccess);
  EXPECT_EQ(async, groveSuccess);  // a refused call left no error state
  EXPECT_EQ(groveCommMemory(c, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveCommDestroy(c), groveSuccess);
}
