// The call board (core/call_board.h): pages written by one rank and read by
// another of the same host, the history of collectives, the probe that
// fails a wait on a peer in another call, and the diagnosis of a host whose
// processes died or were stopped.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "core/call_board.h"

namespace grove::core {
namespace {

exec::CallTag reduceTo(int root, int rank) {
  plan::CollArgs a;
  a.coll = plan::Coll::kReduce;
  a.count = 64;
  a.root = root;
  return exec::callTagOf(a, rank);
}

// The test process's (a forked child keeps its parent's: computed before any fork).
const std::string& jobId() {
  static const std::string id = "unit-board-" + std::to_string(getpid());
  return id;
}

bool fileExists(int rank) {
  const std::string path =
      config::getString("GROVE_SHM_DIR") + "/grove-" + jobId() + "-board-" + std::to_string(rank);
  return access(path.c_str(), F_OK) == 0;
}

// A tracker attached to a board, as a communicator has.
struct Rank {
  CallBoard board;
  CallTracker tracker;
  Rank(int rank, int nranks) : board(jobId(), rank, nranks), tracker(rank) {
    tracker.attach(&board);
  }
};

TEST(CallBoard, PeersReadPositionsAndHistory) {
  Rank a(0, 2), b(1, 2);
  const std::vector<int> pids = {getpid(), getpid()};
  a.board.openPeers({1}, pids);
  b.board.openPeers({0}, pids);
  ASSERT_EQ(a.board.peers(), std::vector<int>{1});
  // Every rank mapped the others' pages: the names go, the pages stay.
  a.board.unlinkOwn();
  b.board.unlinkOwn();
  EXPECT_FALSE(fileExists(0));
  EXPECT_FALSE(fileExists(1));

  const uint64_t last = kBoardHistory + 5;  // the page forgets the first few
  for (uint64_t i = 1; i < last; ++i) {
    b.tracker.begin(reduceTo(static_cast<int>(i % 3), 1));
    b.tracker.end();
  }
  b.tracker.begin(reduceTo(2, 1));                 // the last, under way
  b.tracker.blockedOn()->store(int64_t{1} << 32);  // waits to receive from rank 0
  Position p;
  ASSERT_TRUE(a.board.peerPosition(1, &p));
  EXPECT_EQ(p.state, kInCollective);
  EXPECT_EQ(p.collectives, last);
  EXPECT_EQ(p.call.root, 2);
  EXPECT_EQ(p.recvPeer, 0);
  exec::CallTag t;
  ASSERT_TRUE(a.board.peerCollective(1, last - 1, &t));
  EXPECT_EQ(t.root, static_cast<int>((last - 1) % 3));
  uint64_t begun = 0;
  ASSERT_TRUE(a.board.peerCollective(1, last - kBoardHistory + 1, &t, &begun));
  EXPECT_EQ(begun, last);
  EXPECT_FALSE(a.board.peerCollective(1, last - kBoardHistory, &t)) << "overwritten since";
  EXPECT_FALSE(a.board.peerCollective(1, last + 1, &t, &begun)) << "not begun yet";
  EXPECT_EQ(begun, last);
  EXPECT_FALSE(a.board.peerCollective(0, 1, &t)) << "its own page is not a peer's";
}

TEST(CallBoard, TheProbeFailsOnAPeerInAnotherCallOfTheSameNumber) {
  Rank a(0, 2), b(1, 2);
  const std::vector<int> pids = {getpid(), getpid()};
  a.board.openPeers({1}, pids);
  CallBoardProbe probe(&a.board, &a.tracker);
  a.tracker.begin(reduceTo(0, 0));
  probe.probe();  // the peer has not begun #1: nothing known
  b.tracker.begin(reduceTo(0, 1));
  probe.probe();  // the same call
  b.tracker.end();
  a.tracker.end();
  a.tracker.begin(reduceTo(0, 0));
  b.tracker.begin(reduceTo(1, 1));  // #2: rank 1 claims the root
  try {
    probe.probe();
    FAIL() << "no mismatch seen";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("call mismatch: rank 1 runs reduce(count 64, float, sum, "
                                         "root 1) while rank 0 runs reduce(count 64, float, sum, "
                                         "root 0)"),
              std::string::npos)
        << e.what();
  }
}

// A CUDA communicator's launches (Comm::beginDeviceCalls): a group's
// collectives are numbered one by one, and checkPeersUpTo compares every
// number once per peer, as far as both ranks have begun it -- also numbers
// behind a rank that ran ahead -- and passes over those a page forgot.
TEST(CallBoard, LaunchesCompareEveryNumberOnceAsFarAsBothRanksGot) {
  Rank a(0, 2), b(1, 2);
  const std::vector<int> pids = {getpid(), getpid()};
  a.board.openPeers({1}, pids);
  b.board.openPeers({0}, pids);
  std::vector<uint64_t> aChecked(2, 0), bChecked(2, 0);
  // Rank 0 groups #1-#3; rank 1 has begun only #1 of them: #1 compared.
  EXPECT_EQ(a.tracker.beginLaunch({reduceTo(0, 0), reduceTo(1, 0), reduceTo(2, 0)}, false), 3u);
  EXPECT_EQ(b.tracker.beginLaunch({reduceTo(0, 1)}, false), 1u);
  checkPeersUpTo(a.board, 3, aChecked);
  EXPECT_EQ(aChecked[1], 1u);
  const Position p = a.tracker.snapshot();
  EXPECT_EQ(p.firstCollective, 1u);
  EXPECT_EQ(p.collectives, 3u);
  EXPECT_EQ(p.call.root, 2) << "the position says the group's last";
  a.tracker.end();
  b.tracker.end();
  // Rank 1 calls #2 alike and #3 with another root: rank 1 sees it at once,
  // and so does rank 0, which ran ahead, at its next launch.
  b.tracker.beginLaunch({reduceTo(1, 1)}, false);
  checkPeersUpTo(b.board, 2, bChecked);
  EXPECT_EQ(bChecked[0], 2u);
  b.tracker.end();
  b.tracker.beginLaunch({reduceTo(0, 1)}, false);
  for (auto* side : {&b, &a}) {
    std::vector<uint64_t>& checked = side == &b ? bChecked : aChecked;
    const uint64_t upTo = side == &b ? 3 : 4;
    if (side == &a) a.tracker.beginLaunch({reduceTo(0, 0)}, true);  // #4, with a send/recv batch
    try {
      checkPeersUpTo(side->board, upTo, checked);
      FAIL() << "rank " << (side == &b ? 1 : 0) << " saw no mismatch";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), groveInvalidUsage);
      EXPECT_NE(std::string(e.what()).find("call mismatch"), std::string::npos) << e.what();
    }
  }
  a.tracker.end();
  b.tracker.end();
}

// A peer that ran more than kBoardHistory further on: the numbers its page
// forgot are passed over (its first ten differ there), the ones it
// remembers compared, from the first it remembers on -- also when this
// rank is far behind.
TEST(CallBoard, LaunchesPassOverWhatAPageForgot) {
  const std::vector<int> pids = {getpid(), getpid()};
  const uint64_t last = kBoardHistory + 10;  // the peer remembers #11 on
  for (bool firstRememberedDiffers : {false, true}) {
    Rank c(0, 2), d(1, 2);
    c.board.openPeers({1}, pids);
    std::vector<uint64_t> checked(2, 0);
    for (uint64_t i = 1; i <= last; ++i) {
      const bool differs = i <= 10 || (firstRememberedDiffers && i == 11);
      d.tracker.beginLaunch({reduceTo(differs ? 1 : 0, 1)}, false);
      d.tracker.end();
    }
    // Far behind: at #5, nothing of the peer's to compare; it goes on from #11.
    for (uint64_t i = 1; i <= 5; ++i) c.tracker.beginLaunch({reduceTo(0, 0)}, false);
    checkPeersUpTo(c.board, 5, checked);
    EXPECT_EQ(checked[1], 10u);
    for (uint64_t i = 6; i <= last; ++i) c.tracker.beginLaunch({reduceTo(0, 0)}, false);
    if (!firstRememberedDiffers) {
      checkPeersUpTo(c.board, last, checked);
      EXPECT_EQ(checked[1], last);
      continue;
    }
    EXPECT_THROW(checkPeersUpTo(c.board, last, checked), Error) << "#11 differs";
    EXPECT_EQ(checked[1], 10u);
  }
}

// Sends and receives of CUDA communicators: a note is found by its peer,
// direction and number; one not begun yet, and one a page forgot (its
// owner ran more than kBoardP2PHistory notes on), are told apart; and
// checkP2POnBoard fails on sizes or types that differ, naming both ranks
// (types only where both batches have one).
TEST(CallBoard, SendsAndReceivesPairByNumber) {
  const std::vector<int> pids = {getpid(), getpid(), getpid()};
  Rank a(0, 3), b(1, 3), c(2, 3);
  a.board.openPeers({1, 2}, pids);
  b.board.openPeers({0, 2}, pids);
  EXPECT_TRUE(a.board.hasPeer(1));
  EXPECT_FALSE(a.board.hasPeer(0)) << "not its own";
  // Rank 0: sends #1 and #2 to rank 1 (int32: dtype 2), a receive #1 from rank 2.
  a.board.publishP2P({{1, true, 2, 1, 400}, {1, true, 2, 2, 800}, {2, false, 2, 1, 16}});
  P2PNote n;
  EXPECT_EQ(b.board.peerP2P(0, 1, true, 2, &n), CallBoard::Lookup::kFound);
  EXPECT_EQ(n.bytes, 800u);
  EXPECT_EQ(n.dtype, 2);
  EXPECT_EQ(b.board.peerP2P(0, 1, true, 3, &n), CallBoard::Lookup::kNotYet);
  EXPECT_EQ(b.board.peerP2P(0, 1, false, 1, &n), CallBoard::Lookup::kNotYet) << "no receives";
  EXPECT_EQ(b.board.peerP2P(0, 2, false, 1, &n), CallBoard::Lookup::kFound);
  // Rank 1 receives #1 alike and #2 smaller: it fails there, naming both.
  checkP2POnBoard(b.board, 1, {{0, false, 2, 1, 400}});
  try {
    checkP2POnBoard(b.board, 1, {{0, false, 2, 2, 400}});
    FAIL() << "a smaller receive passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("rank 0 sends 800 bytes to rank 1, which receives 400"),
              std::string::npos)
        << e.what();
  }
  try {
    checkP2POnBoard(b.board, 1, {{0, false, 7, 2, 800}});  // float32 where int32 was sent
    FAIL() << "a receive of another type passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("call mismatch"), std::string::npos) << e.what();
  }
  // A batch of several types is compared by bytes only (as on the host).
  checkP2POnBoard(b.board, 1, {{0, false, exec::kMixedTypes, 2, 800}});
  // A receive whose send is not begun passes (the sender compares it).
  checkP2POnBoard(b.board, 1, {{0, false, 2, 3, 1}});
  // Rank 0 runs far on with rank 2: its notes about rank 1 are forgotten,
  // told from those not begun, and passed over without a false mismatch.
  for (uint64_t k = 2; k < 2 + kBoardP2PHistory; ++k) a.board.publishP2P({{2, false, 2, k, 16}});
  EXPECT_EQ(b.board.peerP2P(0, 1, true, 2, &n), CallBoard::Lookup::kForgotten);
  EXPECT_EQ(b.board.peerP2P(0, 1, true, 3, &n), CallBoard::Lookup::kNotYet);
  checkP2POnBoard(b.board, 1, {{0, false, 2, 2, 5}});
  a.board.publishP2P({{1, true, 2, 3, 4}});
  EXPECT_EQ(b.board.peerP2P(0, 1, true, 3, &n), CallBoard::Lookup::kFound);
  (void)c;
}

// The diagnosis without the bootstrap root: a peer process (a child that
// made its own page and began a reduce) that is stopped, then one that
// died, named from /proc and its last position.
TEST(CallBoard, HostDiagnosisNamesAStoppedAndADeadProcess) {
  Rank a(0, 3);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Rank b(1, 3);
    b.tracker.begin(reduceTo(0, 1));
    char one = 1;
    if (write(ready[1], &one, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  // The child goes however the test ends.
  struct Reap {
    pid_t pid;
    ~Reap() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      CallBoard::unlinkNames(jobId(), {1});  // the child never ended its own
    }
  } reap{child};
  char got = 0;
  ASSERT_EQ(read(ready[0], &got, 1), 1);
  close(ready[0]);
  close(ready[1]);
  const std::vector<int> pids = {getpid(), static_cast<int>(child), 0};
  a.board.openPeers({1}, pids);
  ASSERT_EQ(a.board.peers(), std::vector<int>{1});
  a.tracker.begin(reduceTo(0, 0));
  const std::vector<std::string> names = {"rank 0 (host h pid 1)", "rank 1 (host h pid 2)",
                                          "rank 2 (host g pid 3)"};
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);
  std::string d = hostDiagnosis(a.board, a.tracker.snapshot(), names, 0.5);
  EXPECT_EQ(d.find("rank 1 (host h pid 2) is stopped (SIGSTOP or a debugger)"), 0u) << d;
  ASSERT_EQ(kill(child, SIGKILL), 0);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  d = hostDiagnosis(a.board, a.tracker.snapshot(), names, 0.5);
  EXPECT_EQ(d.find("rank 1 (host h pid 2) has died (its process is gone) while in "
                   "reduce(count 64, float, sum, root 0) #1"),
            0u)
      << d;
  // Rank 2 is on another host: not seen, never blamed.
  EXPECT_EQ(d.find("rank 2"), std::string::npos) << d;
}

// A page is read only if its owner is the process the peer list names:
// not a stale page of another run, not a process this one cannot see.
TEST(CallBoard, OnlyTheOwnersPageIsRead) {
  Rank a(0, 2), b(1, 2);
  a.board.openPeers({1}, {getpid(), 1});  // process 1 exists, but made no page
  EXPECT_TRUE(a.board.peers().empty());
  a.board.openPeers({1}, {getpid(), -1});  // no process
  EXPECT_TRUE(a.board.peers().empty());
  a.board.openPeers({1}, {getpid(), getpid()});
  EXPECT_EQ(a.board.peers(), std::vector<int>{1});
}

}  // namespace
}  // namespace grove::core
