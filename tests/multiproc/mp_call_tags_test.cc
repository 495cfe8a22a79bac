// GROVE_CHECK=tags (the default): ranks that call different collectives,
// counts, types, ops or roots, or a receive that differs in size from its
// send (one by one, in a group of several to one peer), get a clear error
// naming both calls instead of wrong data, over shared memory (eager and
// program paths) and sockets; matching calls run, and sends pair with
// receives whatever groups each side made. Ranks are threads of this
// process (groveCommInitAll).
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "grove/grove.h"
#include "mp_api_util.h"
#include "mp_spawn.h"

using mpapi::Comms;
using mpapi::onRanks;

namespace {

using CallFn = groveResult_t (*)(groveComm_t, int rank, float* buf, size_t count);

struct Case {
  const char* name;
  const char* word;  // what the error of the rank that saw it must name
  CallFn call;
};

const Case kCases[] = {
    {"op", "max",
     [](groveComm_t c, int r, float* b, size_t n) {
       return groveAllReduce(b, b, n, groveFloat32, r == 0 ? groveSum : groveMax, c, nullptr);
     }},
    {"type of the same size", "int32",
     [](groveComm_t c, int r, float* b, size_t n) {
       return groveAllReduce(b, b, n, r == 0 ? groveFloat32 : groveInt32, groveSum, c, nullptr);
     }},
    {"count", "count",
     [](groveComm_t c, int r, float* b, size_t n) {
       return groveAllReduce(b, b, r == 0 ? n : n / 2, groveFloat32, groveSum, c, nullptr);
     }},
    {"collective", "broadcast",
     [](groveComm_t c, int r, float* b, size_t n) {
       return r == 0 ? groveAllReduce(b, b, n, groveFloat32, groveSum, c, nullptr)
                     : groveBroadcast(b, b, n, groveFloat32, 0, c, nullptr);
     }},
    {"receive shorter than its send", "send/recv size mismatch: rank 0 sends",
     [](groveComm_t c, int r, float* b, size_t n) {
       return r == 0 ? groveSend(b, n, groveFloat32, 1, c, nullptr)
                     : groveRecv(b, n / 2, groveFloat32, 0, c, nullptr);
     }},
    {"receive of another type of the same size", "send/recv(int32)",
     [](groveComm_t c, int r, float* b, size_t n) {
       return r == 0 ? groveSend(b, n, groveFloat32, 1, c, nullptr)
                     : groveRecv(b, n, groveInt32, 0, c, nullptr);
     }},
    {"two sends in a group met by receives of the same total in the other order",
     "send/recv size mismatch",
     [](groveComm_t c, int r, float* b, size_t n) {
       // 3/4 then 1/4 of the buffer against 1/4 then 3/4: each a multiple of
       // 16 bytes, so the totals and the stream's alignment both agree.
       const size_t big = n / 4 * 3, small = n / 4;
       groveGroupStart();
       if (r == 0) {
         groveSend(b, big, groveFloat32, 1, c, nullptr);
         groveSend(b + big, small, groveFloat32, 1, c, nullptr);
       } else {
         groveRecv(b, small, groveFloat32, 0, c, nullptr);
         groveRecv(b + small, big, groveFloat32, 0, c, nullptr);
       }
       return groveGroupEnd();
     }},
    {"receive longer than its send", "which receives",
     [](groveComm_t c, int r, float* b, size_t n) {
       return r == 0 ? groveSend(b, n / 2, groveFloat32, 1, c, nullptr)
                     : groveRecv(b, n, groveFloat32, 0, c, nullptr);
     }},
};

struct Setup {
  const char* transport;
  size_t count;  // elements per call: 16 runs eagerly over shm, 65536 runs a program
};

class CallTags : public ::testing::TestWithParam<Setup> {
 protected:
  void SetUp() override {
    setenv("GROVE_TRANSPORT", GetParam().transport, 1);
    setenv("GROVE_TIMEOUT", "10", 1);
  }
  void TearDown() override {
    unsetenv("GROVE_TRANSPORT");
    unsetenv("GROVE_TIMEOUT");
  }
};

TEST_P(CallTags, MismatchesFailEveryRankNamingTheCalls) {
  const size_t n = GetParam().count;
  for (const Case& k : kCases) {
    SCOPED_TRACE(k.name);
    Comms comms(2);
    ASSERT_TRUE(comms.ok());
    std::vector<float> before(2, -1.f);
    std::vector<groveResult_t> got(2, groveSuccess);
    std::vector<std::string> text(2);
    const double start = mptest::now();
    onRanks(2, [&](int r) {
      std::vector<float> buf(n, static_cast<float>(r + 1));
      // A matching call first: tagged, and it runs.
      ASSERT_EQ(
          groveAllReduce(buf.data(), buf.data(), n, groveFloat32, groveSum, comms[r], nullptr),
          groveSuccess)
          << groveGetLastError(comms[r]);
      before[r] = buf[0];
      got[r] = k.call(comms[r], r, buf.data(), n);
      // A sender whose bytes left before its peer saw the mismatch returns
      // success, as MPI_Send does; the communicator is aborted, so its next
      // call fails with the peer's reason.
      if (got[r] == groveSuccess)
        got[r] =
            groveAllReduce(buf.data(), buf.data(), n, groveFloat32, groveSum, comms[r], nullptr);
      text[r] = groveGetLastError(comms[r]);
    });
    EXPECT_LT(mptest::now() - start, 5.0) << "a mismatch waited for the timeout";
    bool named = false;
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(before[r], 3.f);
      EXPECT_NE(got[r], groveSuccess) << "rank " << r << " returned success";
      EXPECT_NE(text[r].find("mismatch"), std::string::npos) << text[r];
      named = named || text[r].find(k.word) != std::string::npos;
    }
    EXPECT_TRUE(named) << k.word << ": " << text[0] << " | " << text[1];
  }
}

// Mismatches that no tag can show, because the ranks that disagree never
// receive from each other: two roots of a reduce wait for each other's data,
// two roots of a broadcast or scatter both only send. The ranks of one host
// see each other's calls on the call board (core/call_board.h): the call
// fails on at least one rank at once and the job ends on every rank, not at
// the timeout. On 2 and 3 ranks.
using RootedFn = groveResult_t (*)(groveComm_t, float* buf, size_t count, int root);

struct RootedCase {
  const char* name;
  RootedFn call;
};

const RootedCase kRooted[] = {
    {"reduce",
     [](groveComm_t c, float* b, size_t n, int root) {
       return groveReduce(b, b, n, groveFloat32, groveSum, root, c, nullptr);
     }},
    {"broadcast", [](groveComm_t c, float* b, size_t n,
                     int root) { return groveBroadcast(b, b, n, groveFloat32, root, c, nullptr); }},
    {"scatter",
     [](groveComm_t c, float* b, size_t n, int root) {
       return groveScatter(b, b + 3 * n, n / 4, groveFloat32, root, c, nullptr);
     }},
    {"gather",
     [](groveComm_t c, float* b, size_t n, int root) {
       return groveGather(b + 3 * n, b, n / 4, groveFloat32, root, c, nullptr);
     }},
};

TEST_P(CallTags, RanksClaimingDifferentRootsFailAtOnce) {
  const size_t n = GetParam().count;
  for (int nranks : {2, 3}) {
    for (const RootedCase& k : kRooted) {
      SCOPED_TRACE(std::string(k.name) + " on " + std::to_string(nranks) + " ranks");
      Comms comms(nranks);
      ASSERT_TRUE(comms.ok());
      std::vector<groveResult_t> first(nranks, groveSuccess), last(nranks, groveSuccess);
      std::vector<std::string> text(nranks);
      const double start = mptest::now();
      onRanks(nranks, [&](int r) {
        std::vector<float> buf(4 * n, 1.f);
        // Rank 0 thinks the root is 0; every other rank thinks it is itself.
        first[r] = k.call(comms[r], buf.data(), n, r);
        last[r] = first[r];
        if (last[r] == groveSuccess)
          last[r] =
              groveAllReduce(buf.data(), buf.data(), n, groveFloat32, groveSum, comms[r], nullptr);
        text[r] = groveGetLastError(comms[r]);
      });
      EXPECT_LT(mptest::now() - start, 5.0) << "a mismatch waited for the timeout";
      int failedAtTheCall = 0;
      bool named = false;
      for (int r = 0; r < nranks; ++r) {
        EXPECT_NE(last[r], groveSuccess) << "rank " << r << " returned success";
        failedAtTheCall += first[r] != groveSuccess ? 1 : 0;
        // Two different roots are named (any two of the claims).
        int roots = 0;
        for (int claim = 0; claim < nranks; ++claim)
          roots += text[r].find("root " + std::to_string(claim) + ")") != std::string::npos;
        named = named || (text[r].find("call mismatch") != std::string::npos && roots >= 2);
      }
      EXPECT_GE(failedAtTheCall, 1) << "every rank returned success from the mismatched call";
      EXPECT_TRUE(named) << text[0] << " | " << text[nranks - 1];
    }
  }
}

// Matching calls of every kind keep running with tags: sends and receives in
// groups (several to one peer), every collective, in place and not.
TEST_P(CallTags, MatchingCallsRunWithTags) {
  const size_t n = GetParam().count;
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  onRanks(2, [&](int r) {
    groveComm_t c = comms[r];
    std::vector<float> a(2 * n, static_cast<float>(r + 1)), b(2 * n, 0.f);
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ(groveAllReduce(a.data(), b.data(), n, groveFloat32, groveSum, c, nullptr),
                groveSuccess)
          << groveGetLastError(c);
      ASSERT_EQ(b[0], 3.f);
      ASSERT_EQ(groveBroadcast(a.data(), b.data(), n, groveFloat32, 1, c, nullptr), groveSuccess);
      ASSERT_EQ(b[n - 1], 2.f);
      ASSERT_EQ(groveAllGather(a.data(), b.data(), n, groveFloat32, c, nullptr), groveSuccess);
      ASSERT_EQ(b[n], 2.f);
      ASSERT_EQ(groveGroupStart(), groveSuccess);
      const int peer = 1 - r;
      // Two sends to one peer pair with two receives of their sizes, in order.
      groveSend(a.data(), n / 2, groveFloat32, peer, c, nullptr);
      groveSend(a.data() + n / 2, n / 2, groveFloat32, peer, c, nullptr);
      groveRecv(b.data(), n / 2, groveFloat32, peer, c, nullptr);
      groveRecv(b.data() + n / 2, n / 2, groveFloat32, peer, c, nullptr);
      // A group of several types is not compared by type, only by bytes.
      int32_t mine = r, theirs = -1;
      groveSend(&mine, 1, groveInt32, peer, c, nullptr);
      groveRecv(&theirs, 1, groveInt32, peer, c, nullptr);
      ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(c);
      ASSERT_EQ(b[n - 1], static_cast<float>(peer + 1));
      ASSERT_EQ(theirs, peer);
    }
  });
}

// Sends pair with receives one by one in call order, whatever groups each
// side made (NCCL's rule): a group of two sends meets two receives in
// separate calls, and two separate sends meet one group of two receives,
// with exact data; sizes that are not whole 16-byte blocks too (the
// stream pads before each step's tag, in one call as across two). (A tag
// per batch and link refused the first as a size mismatch: it took both
// sends' bytes as one.) Send/recv runs the program path at every size.
TEST_P(CallTags, SendsPairWithReceivesWhateverTheGroups) {
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  onRanks(2, [&](int r) {
    groveComm_t c = comms[r];
    for (int round = 0; round < 8; ++round) {
      const bool senderGroups = round % 2 == 0;
      const bool odd = round >= 4;  // 5 and 3 floats: 20 and 12 bytes
      const size_t big = odd ? 5 : GetParam().count / 4 * 3;
      const size_t small = odd ? 3 : GetParam().count / 4, n = big + small;
      std::vector<float> buf(n);
      if (r == 0) {
        for (size_t i = 0; i < n; ++i) buf[i] = static_cast<float>(round * 1000 + i % 1000);
        if (senderGroups) ASSERT_EQ(groveGroupStart(), groveSuccess);
        ASSERT_EQ(groveSend(buf.data(), big, groveFloat32, 1, c, nullptr), groveSuccess);
        ASSERT_EQ(groveSend(buf.data() + big, small, groveFloat32, 1, c, nullptr), groveSuccess);
        if (senderGroups) ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(c);
      } else {
        std::fill(buf.begin(), buf.end(), -1.f);
        if (!senderGroups) ASSERT_EQ(groveGroupStart(), groveSuccess);
        ASSERT_EQ(groveRecv(buf.data(), big, groveFloat32, 0, c, nullptr), groveSuccess)
            << groveGetLastError(c);
        ASSERT_EQ(groveRecv(buf.data() + big, small, groveFloat32, 0, c, nullptr), groveSuccess)
            << groveGetLastError(c);
        if (!senderGroups) ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(c);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(buf[i], static_cast<float>(round * 1000 + i % 1000)) << "element " << i;
      }
    }
  });
}

// A send made before a collective meets a receive that a group of the peer
// runs after the same collective (a group runs its collectives first): the
// two send/recv batches sit on either side of the collective, so their
// collective numbers differ, and they still pair (small messages over open
// links, which buffer them while the receiver is in the collective).
TEST_P(CallTags, ASendBeforeACollectiveMeetsAGroupsReceiveAfterIt) {
  const size_t n = std::min<size_t>(GetParam().count, 256);
  Comms comms(2);
  ASSERT_TRUE(comms.ok());
  onRanks(2, [&](int r) {
    groveComm_t c = comms[r];
    std::vector<float> a(n, static_cast<float>(r + 1)), b(n, 0.f), sum(n, 0.f);
    // Open the links first (shm links open when both ends first use them).
    ASSERT_EQ(groveGroupStart(), groveSuccess);
    groveSend(a.data(), n, groveFloat32, 1 - r, c, nullptr);
    groveRecv(b.data(), n, groveFloat32, 1 - r, c, nullptr);
    ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(c);
    ASSERT_EQ(groveAllReduce(a.data(), sum.data(), n, groveFloat32, groveSum, c, nullptr),
              groveSuccess);
    if (r == 0) {
      ASSERT_EQ(groveSend(a.data(), n, groveFloat32, 1, c, nullptr), groveSuccess)
          << groveGetLastError(c);
      ASSERT_EQ(groveAllReduce(a.data(), sum.data(), n, groveFloat32, groveSum, c, nullptr),
                groveSuccess)
          << groveGetLastError(c);
    } else {
      ASSERT_EQ(groveGroupStart(), groveSuccess);
      groveRecv(b.data(), n, groveFloat32, 0, c, nullptr);
      groveAllReduce(a.data(), sum.data(), n, groveFloat32, groveSum, c, nullptr);
      ASSERT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(c);
      EXPECT_EQ(b[n - 1], 1.f);
    }
    EXPECT_EQ(sum[0], 3.f);
  });
}

// Rank r of BytesAnEarlierCallLeftAreRefused, in a process of its own
// (this test binary again, run by the test below in a host of its own):
// exit 0 as the test wants it, else the number of the check that failed.
int hostRank(int r, int port) {
  setenv("GROVE_COMM_ID", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
  setenv("GROVE_COMM_SECRET", "call-tags-across-hosts-test", 1);
  setenv("GROVE_TRANSPORT", "socket", 1);
  setenv("GROVE_TIMEOUT", "20", 1);
  groveUniqueId id;
  groveComm_t c = nullptr;
  if (groveGetUniqueId(&id) != groveSuccess || groveCommInitRank(&c, 2, id, r) != groveSuccess)
    return 10;
  const size_t n = 65536;
  std::vector<float> buf(n);
  // Each rank thinks it is the broadcast's root: both only send, and return.
  std::fill(buf.begin(), buf.end(), 100.f * (r + 1) + 1);
  const groveResult_t first =
      groveBroadcast(buf.data(), buf.data(), n, groveFloat32, r, c, nullptr);
  // The next broadcast, from rank 0: rank 1 must not take the bytes the
  // first one left on the link from rank 0 (rank 0's 101s) as these.
  std::fill(buf.begin(), buf.end(), 100.f * (r + 1) + 2);
  const groveResult_t second = first != groveSuccess ? first
                                                     : groveBroadcast(buf.data(), buf.data(), n,
                                                                      groveFloat32, 0, c, nullptr);
  const std::string text = groveGetLastError(c);
  fprintf(stderr, "rank %d: first %d, second %d: %s\n", r, first, second, text.c_str());
  int rc = 0;
  if (r == 1) {
    if (second == groveSuccess)
      rc = buf[0] == 102.f ? 2 : 1;  // 1: the stale bytes as data
    else if (text.find("call out of step") == std::string::npos &&
             text.find("call mismatch") == std::string::npos)
      rc = 3;  // (rank 0's next call may meet rank 1's stale bytes first: its abort names them)
  } else if (second == groveSuccess) {
    // Rank 0 only sent: the communicator fails here once rank 1 found it.
    if (groveAllReduce(buf.data(), buf.data(), n, groveFloat32, groveSum, c, nullptr) ==
        groveSuccess)
      rc = 4;
  }
  groveCommAbort(c);
  return rc;
}

// Ranks on two hosts that name different roots of a broadcast both only
// send, and no call board sees across hosts: the next broadcast of the same
// shape took the bytes the first left on the link as its own, and returned
// success. The collective number in the tags refuses them. Each rank is a
// process with a host name of its own (a UTS namespace: another host, so
// sockets and no shared call board); skipped without the privilege.
TEST(CallTagsAcrossHosts, BytesAnEarlierCallLeftAreRefused) {
  if (const char* rank = getenv("GROVE_TEST_HOST_RANK"))
    _exit(hostRank(atoi(rank), atoi(getenv("GROVE_TEST_HOST_PORT"))));
  const int port = mptest::freePort();
  ASSERT_GT(port, 0);
  std::vector<pid_t> kids;
  for (int r = 0; r < 2; ++r) {
    fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      // A host of its own, then this binary afresh: a process that ran
      // other tests before has its host's identity cached.
      const std::string host = "grove-tags-host-" + std::to_string(r);
      if (unshare(CLONE_NEWUTS) != 0 || sethostname(host.c_str(), host.size()) != 0) _exit(77);
      setenv("GROVE_TEST_HOST_RANK", std::to_string(r).c_str(), 1);
      setenv("GROVE_TEST_HOST_PORT", std::to_string(port).c_str(), 1);
      execl("/proc/self/exe", "/proc/self/exe",
            "--gtest_filter=CallTagsAcrossHosts.BytesAnEarlierCallLeftAreRefused",
            static_cast<char*>(nullptr));
      _exit(99);
    }
    ASSERT_GT(pid, 0);
    kids.push_back(pid);
  }
  std::vector<int> rc(2, -1);
  for (int r = 0; r < 2; ++r) {
    int status = 0;
    if (!mptest::waitFor(kids[r], 60, &status)) {
      mptest::killGroup(kids[r]);
      ADD_FAILURE() << "rank " << r << " did not end within 60 s";
      continue;
    }
    rc[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
  }
  if (rc[0] == 77 || rc[1] == 77) GTEST_SKIP() << "no privilege to make a UTS namespace";
  EXPECT_EQ(rc[1], 0) << "rank 1: 1 = returned success with the first call's bytes, 2 = with the "
                         "right ones, 3 = failed with another error, 10 = init failed, 99 = "
                         "could not run this binary again";
  EXPECT_EQ(rc[0], 0) << "rank 0: 4 = its communicator did not fail, 10 = init failed";
}

INSTANTIATE_TEST_SUITE_P(Transports, CallTags,
                         ::testing::Values(Setup{"shm", 16}, Setup{"shm", 65536},
                                           Setup{"socket", 16}, Setup{"socket", 65536}),
                         [](const ::testing::TestParamInfo<Setup>& p) {
                           return std::string(p.param.transport) +
                                  (p.param.count > 1000 ? "_program" : "_small");
                         });

}  // namespace
