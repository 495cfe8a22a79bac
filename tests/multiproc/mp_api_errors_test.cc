// In-process API tests of bad input: every bad call must return the right
// groveResult_t, leave a groveGetLastError text that names the problem, and
// leave the communicator working for later valid calls. Ranks are threads
// (groveCommInitAll); the bad calls fail their argument checks before any
// communication, so one thread can make them on one rank.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "mp_api_util.h"

namespace {

using mpapi::Comms;
using mpapi::lastErrorNames;

TEST(MpApiErrors, ErrorStringForEveryCode) {
  std::set<std::string> seen;
  for (int code = 0; code < groveNumResults; ++code) {
    const char* s = groveGetErrorString(static_cast<groveResult_t>(code));
    ASSERT_NE(s, nullptr) << code;
    EXPECT_GT(strlen(s), 3u) << code;
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(groveNumResults)) << "error strings are not distinct";
  EXPECT_NE(groveGetErrorString(static_cast<groveResult_t>(99)), nullptr);
  EXPECT_NE(groveGetErrorString(static_cast<groveResult_t>(-1)), nullptr);
}

TEST(MpApiErrors, Version) {
  int v = 0;
  EXPECT_EQ(groveGetVersion(&v), groveSuccess);
  EXPECT_EQ(v, GROVE_VERSION_CODE);
  EXPECT_EQ(groveGetVersion(nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "NULL"));
}

// groveGetConfig: the value the library reads, canonical, checked; unknown
// names, refused values and short buffers are clear errors.
TEST(MpApiErrors, Config) {
  char v[64];
  int set = -1;
  unsetenv("GROVE_NRANKS");
  ASSERT_EQ(groveGetConfig("GROVE_NRANKS", v, sizeof v, &set), groveSuccess);
  EXPECT_STREQ(v, "0");  // the default
  EXPECT_EQ(set, 0);
  setenv("GROVE_NRANKS", "+12", 1);
  ASSERT_EQ(groveGetConfig("GROVE_NRANKS", v, sizeof v, &set), groveSuccess);
  EXPECT_STREQ(v, "12");  // canonical decimal
  EXPECT_EQ(set, 1);
  setenv("GROVE_NRANKS", "twelve", 1);
  EXPECT_EQ(groveGetConfig("GROVE_NRANKS", v, sizeof v, &set), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "GROVE_NRANKS"));
  unsetenv("GROVE_NRANKS");
  setenv("GROVE_DEVICE_EMULATION", "yes", 1);
  ASSERT_EQ(groveGetConfig("GROVE_DEVICE_EMULATION", v, sizeof v, nullptr), groveSuccess);
  EXPECT_STREQ(v, "1");
  unsetenv("GROVE_DEVICE_EMULATION");
  setenv("GROVE_DEVICE_KIND", "CUDA", 1);
  ASSERT_EQ(groveGetConfig("GROVE_DEVICE_KIND", v, sizeof v, nullptr), groveSuccess);
  EXPECT_STREQ(v, "cuda");  // as its choices spell it
  setenv("GROVE_DEVICE_KIND", "", 1);
  ASSERT_EQ(groveGetConfig("GROVE_DEVICE_KIND", v, sizeof v, &set), groveSuccess);
  EXPECT_STREQ(v, "host");  // empty: the default, and not set
  EXPECT_EQ(set, 0);
  setenv("GROVE_DEVICE_KIND", "CUDA", 1);
  EXPECT_EQ(groveGetConfig("GROVE_DEVICE_KIND", v, 4, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "5 bytes"));
  unsetenv("GROVE_DEVICE_KIND");
  EXPECT_EQ(groveGetConfig("GROVE_NO_SUCH_THING", v, sizeof v, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "GROVE_NO_SUCH_THING"));
  EXPECT_EQ(groveGetConfig(nullptr, v, sizeof v, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveGetConfig("GROVE_NRANKS", nullptr, 0, nullptr), groveInvalidArgument);
}

TEST(MpApiErrors, NullComm) {
  float a[4] = {}, b[4] = {};
  EXPECT_EQ(groveAllReduce(a, b, 4, groveFloat32, groveSum, nullptr, nullptr),
            groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "comm"));
  EXPECT_EQ(groveBroadcast(a, b, 4, groveFloat32, 0, nullptr, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveSend(a, 4, groveFloat32, 0, nullptr, nullptr), groveInvalidArgument);
  int n = 0;
  EXPECT_EQ(groveCommCount(nullptr, &n), groveInvalidArgument);
  EXPECT_EQ(groveCommUserRank(nullptr, &n), groveInvalidArgument);
  groveResult_t async = groveSuccess;
  EXPECT_EQ(groveCommGetAsyncError(nullptr, &async), groveInvalidArgument);
  // A pointer that is no communicator at all.
  groveComm_t fake = reinterpret_cast<groveComm_t>(&n);
  EXPECT_EQ(groveAllReduce(a, b, 4, groveFloat32, groveSum, fake, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "comm"));
}

class BadInput : public ::testing::Test {
 protected:
  void TearDown() override {
    // Whatever the bad calls did, the communicator still works.
    if (comms_.ok()) {
      EXPECT_TRUE(mpapi::allReduceWorks(comms_)) << "communicator broken by a bad call";
    }
  }
  Comms comms_{2};
  float a_[64] = {}, b_[64] = {};
};

TEST_F(BadInput, NullBuffers) {
  ASSERT_TRUE(comms_.ok());
  groveComm_t c = comms_[0];
  EXPECT_EQ(groveAllReduce(nullptr, b_, 4, groveFloat32, groveSum, c, nullptr),
            groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "sendbuff"));
  EXPECT_EQ(groveAllReduce(a_, nullptr, 4, groveFloat32, groveSum, c, nullptr),
            groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "recvbuff"));
  EXPECT_EQ(groveAllGather(a_, nullptr, 4, groveFloat32, c, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "recvbuff"));
  EXPECT_EQ(groveReduceScatter(nullptr, b_, 4, groveFloat32, groveSum, c, nullptr),
            groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "sendbuff"));
  EXPECT_EQ(groveAlltoAll(a_, nullptr, 4, groveFloat32, c, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveSend(nullptr, 4, groveFloat32, 1, c, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "sendbuff"));
  EXPECT_EQ(groveRecv(nullptr, 4, groveFloat32, 1, c, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "recvbuff"));
  // Rank 0 is root: its broadcast sendbuff and reduce/gather recvbuff are needed.
  EXPECT_EQ(groveBroadcast(nullptr, b_, 4, groveFloat32, 0, c, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "sendbuff"));
  EXPECT_EQ(groveReduce(a_, nullptr, 4, groveFloat32, groveSum, 0, c, nullptr),
            groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "recvbuff"));
  EXPECT_EQ(groveGather(a_, nullptr, 4, groveFloat32, 0, c, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveScatter(nullptr, b_, 4, groveFloat32, 0, c, nullptr), groveInvalidArgument);
}

TEST_F(BadInput, ZeroCountWithNullBuffersIsANoOp) {
  ASSERT_TRUE(comms_.ok());
  groveComm_t c = comms_[0];
  EXPECT_EQ(groveAllReduce(nullptr, nullptr, 0, groveFloat32, groveSum, c, nullptr), groveSuccess)
      << groveGetLastError(c);
  EXPECT_EQ(groveAllGather(nullptr, nullptr, 0, groveInt8, c, nullptr), groveSuccess);
  EXPECT_EQ(groveSend(nullptr, 0, groveInt8, 1, c, nullptr), groveSuccess);
}

TEST_F(BadInput, BadDtypeAndOp) {
  ASSERT_TRUE(comms_.ok());
  groveComm_t c = comms_[0];
  auto badType = static_cast<groveDataType_t>(42);
  EXPECT_EQ(groveAllReduce(a_, b_, 4, badType, groveSum, c, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "42"));
  EXPECT_TRUE(lastErrorNames(c, "datatype"));
  EXPECT_EQ(groveAllReduce(a_, b_, 4, static_cast<groveDataType_t>(-1), groveSum, c, nullptr),
            groveInvalidArgument);
  EXPECT_EQ(groveAllReduce(a_, b_, 4, groveNumTypes, groveSum, c, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveBroadcast(a_, b_, 4, badType, 0, c, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveAllGather(a_, b_, 4, badType, c, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveSend(a_, 4, badType, 1, c, nullptr), groveInvalidArgument);
  auto badOp = static_cast<groveRedOp_t>(17);
  EXPECT_EQ(groveAllReduce(a_, b_, 4, groveFloat32, badOp, c, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "op"));
  EXPECT_TRUE(lastErrorNames(c, "17"));
  EXPECT_EQ(groveReduce(a_, b_, 4, groveFloat32, groveNumOps, 0, c, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveReduceScatter(a_, b_, 4, groveFloat32, static_cast<groveRedOp_t>(-3), c, nullptr),
            groveInvalidArgument);
}

TEST_F(BadInput, RootAndPeerOutOfRange) {
  ASSERT_TRUE(comms_.ok());
  groveComm_t c = comms_[0];
  EXPECT_EQ(groveBroadcast(a_, b_, 4, groveFloat32, 2, c, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "root"));
  EXPECT_TRUE(lastErrorNames(c, "2"));
  EXPECT_EQ(groveBroadcast(a_, b_, 4, groveFloat32, -1, c, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "root"));
  EXPECT_EQ(groveReduce(a_, b_, 4, groveFloat32, groveSum, 7, c, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "root"));
  EXPECT_EQ(groveGather(a_, b_, 4, groveFloat32, 2, c, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveScatter(a_, b_, 4, groveFloat32, INT32_MAX, c, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "root"));
  EXPECT_EQ(groveSend(a_, 4, groveFloat32, 2, c, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "peer"));
  EXPECT_EQ(groveRecv(b_, 4, groveFloat32, -1, c, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "peer"));
}

TEST_F(BadInput, SendToSelfWithoutItsMatch) {
  // Refused before anything is sent: the communicator still works
  // (TearDown), where it once ended the job.
  ASSERT_TRUE(comms_.ok());
  groveComm_t c = comms_[0];
  EXPECT_EQ(groveSend(a_, 4, groveFloat32, 0, c, nullptr), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(c, "send to self"));
  EXPECT_EQ(groveRecv(b_, 4, groveFloat32, 0, c, nullptr), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(c, "receive from self"));
  // In a group: two sends to self and one receive, then sizes that differ.
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  EXPECT_EQ(groveSend(a_, 4, groveFloat32, 0, c, nullptr), groveSuccess);
  EXPECT_EQ(groveSend(a_, 4, groveFloat32, 0, c, nullptr), groveSuccess);
  EXPECT_EQ(groveRecv(b_, 4, groveFloat32, 0, c, nullptr), groveSuccess);
  EXPECT_EQ(groveGroupEnd(), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(c, "2 sends to self and 1 receives from self"));
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  EXPECT_EQ(groveSend(a_, 4, groveFloat32, 0, c, nullptr), groveSuccess);
  EXPECT_EQ(groveRecv(b_, 3, groveFloat32, 0, c, nullptr), groveSuccess);
  EXPECT_EQ(groveGroupEnd(), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(c, "differ in size"));
  // A matched pair copies.
  for (int i = 0; i < 4; ++i) a_[i] = 1.5f * static_cast<float>(i + 1);
  ASSERT_EQ(groveGroupStart(), groveSuccess);
  EXPECT_EQ(groveSend(a_, 4, groveFloat32, 0, c, nullptr), groveSuccess);
  EXPECT_EQ(groveRecv(b_, 4, groveFloat32, 0, c, nullptr), groveSuccess);
  EXPECT_EQ(groveGroupEnd(), groveSuccess) << groveGetLastError(c);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b_[i], a_[i]);
}

TEST_F(BadInput, CountOverflow) {
  ASSERT_TRUE(comms_.ok());
  groveComm_t c = comms_[0];
  EXPECT_EQ(groveAllReduce(a_, b_, SIZE_MAX, groveFloat32, groveSum, c, nullptr),
            groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "count"));
  EXPECT_EQ(groveAllReduce(a_, b_, SIZE_MAX / 4 + 1, groveFloat32, groveSum, c, nullptr),
            groveInvalidArgument);
  // count * nranks * elemsize overflows although count * elemsize does not.
  EXPECT_EQ(groveAllGather(a_, b_, SIZE_MAX / 8, groveInt8, c, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "count"));
  EXPECT_EQ(groveReduceScatter(a_, b_, SIZE_MAX / 8, groveInt32, groveSum, c, nullptr),
            groveInvalidArgument);
  EXPECT_EQ(groveAlltoAll(a_, b_, SIZE_MAX / 2, groveInt8, c, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveSend(a_, SIZE_MAX, groveFloat64, 1, c, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "count"));
}

TEST_F(BadInput, OverlapNotInPlaceForm) {
  ASSERT_TRUE(comms_.ok());
  groveComm_t c0 = comms_[0], c1 = comms_[1];
  // All-reduce: recvbuff one element after sendbuff.
  EXPECT_EQ(groveAllReduce(a_, a_ + 1, 8, groveFloat32, groveSum, c0, nullptr),
            groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c0, "overlap"));
  // All-gather on rank 1: the in-place form is sendbuff == recvbuff + 1*count.
  EXPECT_EQ(groveAllGather(a_, a_, 8, groveFloat32, c1, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c1, "overlap"));
  // Reduce-scatter on rank 1: the in-place form is recvbuff == sendbuff + 1*count.
  EXPECT_EQ(groveReduceScatter(a_, a_ + 3, 8, groveFloat32, groveSum, c1, nullptr),
            groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c1, "overlap"));
  // All-to-all: in place is sendbuff == recvbuff exactly; a partial overlap is refused.
  EXPECT_EQ(groveAlltoAll(a_, a_ + 1, 4, groveFloat32, c0, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c0, "overlap"));
  // Broadcast from the root with half-overlapping buffers.
  EXPECT_EQ(groveBroadcast(a_, a_ + 2, 8, groveFloat32, 0, c0, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c0, "overlap"));
}

TEST_F(BadInput, StreamThatIsNotAHostStream) {
  ASSERT_TRUE(comms_.ok());
  groveComm_t c = comms_[0];
  long notAStream[16] = {};
  EXPECT_EQ(groveAllReduce(a_, b_, 4, groveFloat32, groveSum, c, notAStream), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "stream"));
  // A destroyed host stream is no stream either.
  groveHostStream_t s = nullptr;
  ASSERT_EQ(groveHostStreamCreate(&s), groveSuccess);
  ASSERT_EQ(groveHostStreamDestroy(s), groveSuccess);
  EXPECT_EQ(groveAllReduce(a_, b_, 4, groveFloat32, groveSum, c, s), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(c, "stream"));
  EXPECT_EQ(groveHostStreamSynchronize(s), groveInvalidArgument);
  EXPECT_EQ(groveHostStreamQuery(s), groveInvalidArgument);
  EXPECT_EQ(groveHostStreamDestroy(s), groveInvalidArgument);
  EXPECT_EQ(groveHostStreamCreate(nullptr), groveInvalidArgument);
}

TEST(MpApiErrors, UseAfterDestroyAndDoubleDestroy) {
  groveComm_t c = nullptr;
  ASSERT_EQ(groveCommInitAll(&c, 1, nullptr), groveSuccess) << groveGetLastError(nullptr);
  float a[4] = {1, 2, 3, 4}, b[4] = {};
  ASSERT_EQ(groveAllReduce(a, b, 4, groveFloat32, groveSum, c, nullptr), groveSuccess);
  EXPECT_EQ(b[3], 4.f);
  ASSERT_EQ(groveCommDestroy(c), groveSuccess);
  EXPECT_EQ(groveAllReduce(a, b, 4, groveFloat32, groveSum, c, nullptr), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(nullptr, "destroy"));
  int n = 0;
  EXPECT_EQ(groveCommCount(c, &n), groveInvalidUsage);
  EXPECT_EQ(groveSend(a, 4, groveFloat32, 0, c, nullptr), groveInvalidUsage);
  groveComm_t child = nullptr;
  EXPECT_EQ(groveCommSplit(c, 0, 0, &child, nullptr), groveInvalidUsage);
  EXPECT_EQ(child, nullptr);
  EXPECT_EQ(groveCommDestroy(c), groveInvalidUsage);
  EXPECT_TRUE(lastErrorNames(nullptr, "destroyed"));
  EXPECT_EQ(groveCommAbort(c), groveInvalidUsage);
  EXPECT_EQ(groveCommDestroy(nullptr), groveSuccess);  // like free(NULL) and ncclCommDestroy(NULL)
}

TEST(MpApiErrors, UseAfterAbort) {
  groveComm_t c = nullptr;
  ASSERT_EQ(groveCommInitAll(&c, 1, nullptr), groveSuccess) << groveGetLastError(nullptr);
  ASSERT_EQ(groveCommAbort(c), groveSuccess);
  float a[4] = {}, b[4] = {};
  EXPECT_EQ(groveAllReduce(a, b, 4, groveFloat32, groveSum, c, nullptr), groveInvalidUsage);
  EXPECT_EQ(groveCommDestroy(c), groveInvalidUsage);
}

class BadInit : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(groveGetUniqueId(&id_), groveSuccess) << groveGetLastError(nullptr);
  }
  // Inits with cfg and expects `want` plus a text naming `word`; no comm made.
  void expectRefused(groveConfig_t* cfg, int nranks, int rank, groveResult_t want,
                     const std::string& word) {
    groveComm_t c = reinterpret_cast<groveComm_t>(0x1);
    groveResult_t r = groveCommInitRankConfig(&c, nranks, id_, rank, cfg);
    EXPECT_EQ(r, want) << groveGetLastError(nullptr);
    EXPECT_TRUE(lastErrorNames(nullptr, word));
    if (r == groveSuccess || r == groveInProgress) groveCommAbort(c);
  }
  groveUniqueId id_;
};

TEST_F(BadInit, WrongMagic) {
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  cfg.magic = 0x12345678u;
  expectRefused(&cfg, 1, 0, groveInvalidArgument, "magic");
}

TEST_F(BadInit, WrongSize) {
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  cfg.size = 3;
  expectRefused(&cfg, 1, 0, groveInvalidArgument, "size");
}

TEST_F(BadInit, BlockingNotZeroOrOne) {
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  cfg.blocking = 5;
  expectRefused(&cfg, 1, 0, groveInvalidArgument, "blocking");
}

TEST_F(BadInit, UnknownTransport) {
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  cfg.transport = "carrier-pigeon";
  expectRefused(&cfg, 1, 0, groveInvalidArgument, "carrier-pigeon");
}

TEST_F(BadInit, NranksZeroAndRankOutOfRange) {
  expectRefused(nullptr, 0, 0, groveInvalidArgument, "nranks");
  expectRefused(nullptr, -2, 0, groveInvalidArgument, "nranks");
  expectRefused(nullptr, 4, 4, groveInvalidArgument, "rank");
  expectRefused(nullptr, 4, -1, groveInvalidArgument, "rank");
  EXPECT_EQ(groveCommInitRank(nullptr, 1, id_, 0), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "NULL"));
}

TEST_F(BadInit, GarbageUniqueId) {
  groveUniqueId junk;
  memset(&junk, 0x5a, sizeof junk);
  groveComm_t c = nullptr;
  EXPECT_EQ(groveCommInitRank(&c, 1, junk, 0), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "unique id"));
}

TEST(MpApiErrors, InitAllBadArguments) {
  groveComm_t c[2];
  EXPECT_EQ(groveCommInitAll(c, 0, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "ndev"));
  EXPECT_EQ(groveCommInitAll(nullptr, 2, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveGetUniqueId(nullptr), groveInvalidArgument);
}

TEST(MpApiErrors, SplitBadArguments) {
  groveComm_t c = nullptr;
  ASSERT_EQ(groveCommInitAll(&c, 1, nullptr), groveSuccess) << groveGetLastError(nullptr);
  groveComm_t child = reinterpret_cast<groveComm_t>(0x1);
  EXPECT_EQ(groveCommSplit(c, -5, 0, &child, nullptr), groveInvalidArgument);
  EXPECT_TRUE(lastErrorNames(nullptr, "color"));
  EXPECT_EQ(groveCommSplit(c, 0, 0, nullptr, nullptr), groveInvalidArgument);
  EXPECT_EQ(groveCommSplit(nullptr, 0, 0, &child, nullptr), groveInvalidArgument);
  // The communicator still splits fine.
  child = nullptr;
  ASSERT_EQ(groveCommSplit(c, 3, 0, &child, nullptr), groveSuccess) << groveGetLastError(c);
  ASSERT_NE(child, nullptr);
  int n = 0;
  EXPECT_EQ(groveCommCount(child, &n), groveSuccess);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(groveCommDestroy(child), groveSuccess);
  EXPECT_EQ(groveCommDestroy(c), groveSuccess);
}

}  // namespace
