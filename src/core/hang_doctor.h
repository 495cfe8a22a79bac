// The hang doctor: when a call cannot finish, every rank says where it is
// and the bootstrap root turns that into one diagnosis.
//
// How it works. Each communicator keeps a CallTracker: the collective or
// send/recv batch it is in (numbered per kind, so ranks that call the same
// collectives count alike), since when, and -- written by the executors
// while they wait -- the peer it waits on. When a call fails without the
// job knowing why (its own timeout, a link that broke), the rank asks the
// bootstrap root for a diagnosis before it aborts. The root asks every
// rank for its Position; each rank's bootstrap watcher thread answers from
// its tracker, so a rank that is stuck inside a call still answers. After
// every rank answered, or after kReportWindowSec, diagnose() names the
// culprit: a rank that stopped answering (SIGSTOP, stuck outside grove), a
// rank waiting for a peer that is in another call, behind, or not in a call
// at all, ranks in different calls of the same number. The root logs the
// diagnosis and sends it to every rank; the failing call's error carries it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/wait.h"
#include "exec/call_tag.h"

namespace grove::core {

/// What a rank reports about itself (fixed size; host byte order).
struct Position {
  int32_t rank = -1;
  uint32_t state = 0;        ///< kIdle, kInCollective or kInSendRecv
  uint64_t collectives = 0;  ///< collectives begun (the current one's number while in one)
  /// The first collective of the current call: a CUDA communicator's launch
  /// begins a group's collectives together, numbered firstCollective to
  /// `collectives` (equal for a single call).
  uint64_t firstCollective = 0;
  uint64_t p2pBatches = 0;  ///< send/recv batches begun
  exec::CallTag call;       ///< the current call, or the last one when idle
  int32_t recvPeer = -1;    ///< the peer it waits to receive from (-1: none known)
  int32_t sendPeer = -1;    ///< the peer it waits to send to (-1: none known)
  double inCallSec = 0;     ///< seconds in the current call
};

enum PositionState : uint32_t { kIdle = 0, kInCollective = 1, kInSendRecv = 2 };

/// How long the root waits for every rank's report.
constexpr double kReportWindowSec = 1.0;

/// One communicator's current call, for its reports.
class CallBoard;
struct P2PNote;

class CallTracker {
 public:
  explicit CallTracker(int rank) { pos_.rank = rank; }
  /// Also writes every change to `board` (core/call_board.h), whose page then
  /// holds the word blockedOn() returns. Call before any call begins.
  void attach(CallBoard* board);
  /// A collective (or, for kSendRecv, a send/recv batch) starts. Returns
  /// the collectives begun, this one included (the call's number,
  /// CallTag::seq).
  uint64_t begin(const exec::CallTag& call);
  /// A CUDA communicator's launch starts: its collectives `calls` (a
  /// group's, each numbered and remembered as if called alone) and, with
  /// `p2p`, a send/recv batch. The position then says the last collective
  /// (in a collective, also when the launch has sends and receives), or the
  /// batch when there is none. Returns the collectives begun.
  uint64_t beginLaunch(const std::vector<exec::CallTag>& calls, bool p2p);
  /// Notes a launch's sends and receives on the board (CallBoard::publishP2P).
  void publishP2P(const std::vector<P2PNote>& notes);
  /// The current call ended (either way).
  void end();
  /// Where the executors note what they wait on (WaitContext::blockedOn).
  std::atomic<int64_t>* blockedOn() { return blocked_; }
  /// A consistent copy of the position now.
  Position snapshot();

 private:
  /// begin() and beginLaunch(): `n` collectives from `calls`, then with
  /// `p2p` a send/recv batch.
  uint64_t beginCalls(const exec::CallTag* calls, size_t n, bool p2p);
  std::mutex mu_;
  Position pos_;
  uint64_t sinceNs_ = 0;
  std::atomic<int64_t> blockedOn_{0};
  std::atomic<int64_t>* blocked_ = &blockedOn_;
  CallBoard* board_ = nullptr;
};

/// A rank's answer, as the root holds it.
struct RankReport {
  bool answered = false;
  bool gone = false;    ///< left or died before the question
  bool died = false;    ///< gone because its process ended (seen on the call board)
  bool unseen = false;  ///< on another host, seen by nobody (no bootstrap root to ask)
  std::string name;     ///< "rank 3 (host h pid 123)"
  std::string silence;  ///< why it did not answer, when that is known
  Position pos;         ///< its position (for a rank that died: its last one)
};

/// The diagnosis of reports indexed by rank: one line, then details.
std::string diagnose(const std::vector<RankReport>& reports);

}  // namespace grove::core
