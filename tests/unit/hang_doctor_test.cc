// The hang doctor's diagnosis (core/hang_doctor.h) from hand-made reports.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/hang_doctor.h"

namespace grove::core {
namespace {

exec::CallTag allReduce(uint64_t count) {
  plan::CollArgs a;
  a.count = count;
  return exec::callTagOf(a, 0);
}

std::vector<RankReport> inStep(int n, uint64_t number) {
  std::vector<RankReport> reports(n);
  for (int r = 0; r < n; ++r) {
    reports[r].name = "rank " + std::to_string(r);
    reports[r].answered = true;
    reports[r].pos.rank = r;
    reports[r].pos.state = kInCollective;
    reports[r].pos.collectives = number;
    reports[r].pos.call = allReduce(64);
  }
  return reports;
}

TEST(HangDoctor, AStoppedRankComesFirst) {
  auto reports = inStep(4, 7);
  reports[2].answered = false;
  reports[3].pos.recvPeer = 2;
  const std::string d = diagnose(reports);
  EXPECT_EQ(d.find("rank 2 stopped answering"), 0u) << d;
  EXPECT_NE(d.find("rank 3 is in allreduce(count 64, float, sum) #7 waiting for data from rank 2, "
                   "which stopped answering"),
            std::string::npos)
      << d;
}

TEST(HangDoctor, APeerInAnotherCallIsNamed) {
  auto reports = inStep(3, 12);
  reports[0].pos.recvPeer = 1;
  reports[1].pos.collectives = 11;
  plan::CollArgs b;
  b.coll = plan::Coll::kBroadcast;
  b.count = 64;
  reports[1].pos.call = exec::callTagOf(b, 1);
  const std::string d = diagnose(reports);
  EXPECT_EQ(d.find("rank 0 is in allreduce(count 64, float, sum) #12 waiting for data from rank 1, "
                   "which is in broadcast(count 64, float, root 0) #11"),
            0u)
      << d;
}

TEST(HangDoctor, AnIdlePeerAndASenderAreNamed) {
  auto reports = inStep(2, 3);
  reports[0].pos.sendPeer = 1;
  reports[1].pos.state = kIdle;
  const std::string d = diagnose(reports);
  EXPECT_NE(d.find("rank 0 is in allreduce(count 64, float, sum) #3 waiting to send to rank 1, "
                   "which is not in a call"),
            std::string::npos)
      << d;
}

TEST(HangDoctor, RanksInStepSayNobodyIsStuck) {
  auto reports = inStep(3, 5);
  reports[0].pos.recvPeer = 2;
  reports[2].gone = true;
  reports[2].answered = false;
  const std::string d = diagnose(reports);
  EXPECT_NE(d.find("which has left the job"), std::string::npos) << d;
  auto fine = inStep(3, 5);
  EXPECT_EQ(diagnose(fine).find("no rank is stuck on another"), 0u) << diagnose(fine);
}

// A CUDA communicator's group of collectives #5-#6 (one launch) is in
// step with a peer that calls them one by one and is in #5 or #6, and not
// with one in #4.
TEST(HangDoctor, AGroupIsInStepWithAnyOfItsCollectives) {
  auto reports = inStep(2, 6);
  reports[0].pos.firstCollective = 5;
  reports[0].pos.recvPeer = 1;
  for (uint64_t peerAt : {5u, 6u}) {
    reports[1].pos.collectives = peerAt;
    reports[1].pos.firstCollective = peerAt;
    const std::string d = diagnose(reports);
    EXPECT_EQ(d.find("no rank is stuck on another"), 0u) << d;
    EXPECT_NE(d.find("#6 (the last of a group, #5 to #6)"), std::string::npos) << d;
  }
  reports[1].pos.collectives = 4;
  reports[1].pos.firstCollective = 4;
  const std::string d = diagnose(reports);
  EXPECT_EQ(d.find("rank 0 is in allreduce(count 64, float, sum) #6 (the last of a group, #5 to "
                   "#6) waiting for data from rank 1, which is in allreduce(count 64, float, "
                   "sum) #4"),
            0u)
      << d;
  // Idle, the group's range does not count: the last numbers must agree (a
  // rank idle after #5-#6 and one idle after #5 are not in step).
  auto idle = inStep(2, 6);
  idle[0].pos.firstCollective = 5;
  idle[1].pos.collectives = 5;
  idle[1].pos.firstCollective = 5;
  for (RankReport& q : idle) q.pos.state = kIdle;
  const std::string i = diagnose(idle);
  EXPECT_EQ(i.find("rank 0 is not in a call"), 0u) << i;
  EXPECT_NE(i.find("rank 1 is not in a call (its last collective: allreduce(count 64, float, "
                   "sum) #5)"),
            std::string::npos)
      << i;
  // An idle rank's send/recv batches are said too.
  idle[1].pos.p2pBatches = 3;
  EXPECT_NE(diagnose(idle).find("(its last collective: allreduce(count 64, float, sum) #5; "
                                "send/recv batches: 3)"),
            std::string::npos)
      << diagnose(idle);
}

}  // namespace
}  // namespace grove::core
