// The loopback transport on its own: two in-process sides meet on one
// ring, capacity rounding, reserve/commit/peek/consume, and what a reader
// sees after the sender goes away.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "transports/loopback/loopback_transport.h"
#include "unit/harness/thread_ranks.h"

namespace grove {
namespace {

TEST(Loopback, RingsMeetCloseAndFree) {
  transport::Context c0, c1;
  c0.rank = 0;
  c1.rank = 1;
  c0.nranks = c1.nranks = 2;
  c0.jobId = c1.jobId = harness::newJobId();
  c0.bufferBytes = 100;   // rounded up to 128
  c1.bufferBytes = 4096;  // the first side decides the capacity
  transport::LoopbackTransport t0(c0), t1(c1);
  EXPECT_STREQ(t0.name(), "loopback");
  EXPECT_TRUE(t0.canConnect(1));
  EXPECT_FALSE(t0.canConnect(2));
  size_t pendingBefore = transport::LoopbackTransport::pendingRings();
  std::vector<std::unique_ptr<transport::SendHalf>> s0, s1;
  std::vector<std::unique_ptr<transport::RecvHalf>> r0, r1;
  t0.establish({{1, 0}}, {}, s0, r0);
  EXPECT_EQ(transport::LoopbackTransport::pendingRings(), pendingBefore + 1);
  t1.establish({}, {{0, 0}}, s1, r1);
  EXPECT_EQ(transport::LoopbackTransport::pendingRings(), pendingBefore);
  void* p;
  ASSERT_EQ(s0[0]->reserve(&p), 128u);
  std::memset(p, 7, 100);
  s0[0]->commit(100);
  EXPECT_EQ(s0[0]->reserve(&p), 28u);
  const void* q;
  ASSERT_EQ(r1[0]->peek(&q), 100u);
  EXPECT_EQ(static_cast<const uint8_t*>(q)[99], 7);
  r1[0]->consume(60);
  s0.clear();  // the sender goes away: what it sent can still be read
  ASSERT_EQ(r1[0]->peek(&q), 40u);
  r1[0]->consume(40);
  EXPECT_THROW(r1[0]->peek(&q), Error);
  EXPECT_THROW(t0.establish({{5, 0}}, {}, s0, r0), Error);
}

// A communicator that failed while a link was half open leaves its ring in
// the registry; a new run of the same communicator id (the same job id, a
// fresh link key) meets on a ring of its own, not on the leftover (before,
// its sender was refused as "established twice", and its receiver would
// have read the failed run's bytes).
TEST(Loopback, ALeftoverRingIsNotTheNextRunsOfTheSameJob) {
  const std::string job = harness::newJobId();
  auto context = [&](int rank, uint64_t run) {
    transport::Context c;
    c.rank = rank;
    c.nranks = 2;
    c.jobId = job;
    c.secret = run;
    c.bufferBytes = 64;
    return c;
  };
  std::vector<std::unique_ptr<transport::SendHalf>> s;
  std::vector<std::unique_ptr<transport::RecvHalf>> r;
  {
    transport::LoopbackTransport failed(context(0, 1));
    failed.establish({{1, 0}}, {}, s, r);
    void* p;
    ASSERT_GE(s[0]->reserve(&p), 1u);
    std::memset(p, 'x', 1);
    s[0]->commit(1);
    s.clear();  // the run fails before rank 1 comes
  }
  transport::LoopbackTransport t0(context(0, 2)), t1(context(1, 2));
  std::vector<std::unique_ptr<transport::SendHalf>> s0, s1;
  std::vector<std::unique_ptr<transport::RecvHalf>> r0, r1;
  ASSERT_NO_THROW(t0.establish({{1, 0}}, {}, s0, r0));
  ASSERT_NO_THROW(t1.establish({}, {{0, 0}}, s1, r1));
  void* p;
  ASSERT_GE(s0[0]->reserve(&p), 1u);
  std::memset(p, 'y', 1);
  s0[0]->commit(1);
  const void* q;
  ASSERT_EQ(r1[0]->peek(&q), 1u);
  EXPECT_EQ(*static_cast<const char*>(q), 'y');
}

}  // namespace
}  // namespace grove
