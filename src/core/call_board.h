// The call board: what each rank of a communicator is doing, readable by
// the communicator's other ranks on the same host without asking anyone.
//
// How it works. Each rank makes a few pages of shared memory (the file
// "grove-<jobId>-board-<rank>" in GROVE_SHM_DIR) and its CallTracker writes
// into them what it knows: the state, how many collectives and send/recv
// batches it began, when the current call began, the tag of the current
// collective and of the kBoardHistory - 1 before it, a CUDA communicator's
// latest sends and receives (P2PNote), and -- written by the executors
// straight into the page -- the peers it waits on. The other ranks on the
// host map the page during init, after the settings exchange (every page
// exists by then); the owner removes the file's name after the next
// exchange (every peer has mapped it by then), and every rank removes the
// names of its host's pages when init fails, so no file outlives the job.
// The writer is the rank's calling thread (one call at a time per
// communicator); the words are atomics under a sequence counter (odd while
// written), and a reader retries a copy that changed while it read.
//
// Three uses:
//  - Mismatches found at once. A wait that made no progress for 2 ms runs
//    CallBoardProbe (base/wait.h's WaitProbe): a peer on this host whose
//    collective of the same number is another call (different roots of a
//    reduce, where both ranks wait to receive and no tag ever arrives) fails
//    the call at once, naming both calls. The root of a broadcast or
//    scatter receives nothing, so it looks once when its call ends: of two
//    ranks that both claim the root, the one that ends later fails there.
//  - CUDA communicators' launches (their rings carry no tags): each launch
//    compares this rank's collectives with its peers', every number once
//    (checkPeersUpTo), and its sends and receives with the receives and
//    sends they pair with (checkP2POnBoard), before it starts.
//  - A diagnosis without the bootstrap root. When the root cannot answer
//    (its process died or was stopped), a rank turns its host's pages into
//    the hang doctor's reports (hostDiagnosis()), with /proc telling which
//    of those processes are gone or stopped.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/shm_segment.h"
#include "base/wait.h"
#include "core/hang_doctor.h"

namespace grove::core {

/// How many of a rank's latest collectives its page remembers: how far
/// apart two ranks may be and still have their calls compared (a CUDA
/// communicator's launches are only enqueued, so a rank may run ahead).
constexpr uint64_t kBoardHistory = 1024;

/// How many of a rank's latest sends and receives to its host's peers its
/// page remembers, all peers together (CUDA communicators compare them:
/// P2PNote); the page also counts them per peer, so that one it forgot is
/// told from one not begun.
constexpr uint64_t kBoardP2PHistory = 1024;

/// One send or receive of a CUDA communicator's launch, as its page
/// remembers it: the nth send to (or receive from) `peer` of this rank,
/// counting only those that move bytes.
struct P2PNote {
  int peer = -1;
  bool send = false;
  /// The data type of the launch's sends and receives (groveDataType_t), or
  /// exec::kMixedTypes when they use several (then only bytes are compared,
  /// as on a host communicator).
  uint8_t dtype = 0;
  uint64_t nth = 0;  ///< 1 for the first send to (or receive from) `peer`
  uint64_t bytes = 0;
};

/// One rank's page (in shared memory; every field an atomic word).
struct BoardPage;

class CallBoard {
 public:
  /// Makes this rank's page in GROVE_SHM_DIR. Throws grove::Error if it
  /// cannot (the communicator then runs without a board).
  CallBoard(const std::string& jobId, int rank, int nranks);
  /// Unmaps every page and removes this rank's name if it is still there.
  ~CallBoard();
  CallBoard(const CallBoard&) = delete;
  CallBoard& operator=(const CallBoard&) = delete;

  /// Maps the pages of this communicator's other ranks on this host
  /// (`pids[r]` is rank r's process; ranks not listed are elsewhere). A page
  /// that cannot be opened is left out (another /dev/shm, a peer that died).
  void openPeers(const std::vector<int>& ranks, const std::vector<int>& pids);
  /// Removes this rank's file name (call when every peer has mapped it).
  void unlinkOwn();
  /// Removes the file names of the pages of `ranks` (a failed init's cleanup).
  static void unlinkNames(const std::string& jobId, const std::vector<int>& ranks);

  /// Writes `pos` (its call is the current collective's tag; `sinceNs`:
  /// monotonicNs() when the call began). With `newCollective`, `pos.call`
  /// is also remembered as collective number pos.collectives.
  void publish(const Position& pos, uint64_t sinceNs, bool newCollective);
  /// The word the executors note their blocked peers in (WaitContext::blockedOn).
  std::atomic<int64_t>* blockedOn();

  /// The ranks whose pages this rank reads.
  const std::vector<int>& peers() const { return peers_; }
  /// Rank `peer`'s position now (false if it has no page here or it never
  /// stayed still long enough to be read).
  bool peerPosition(int peer, Position* out) const;
  /// Rank `peer`'s collective number `n`, if its page still remembers it
  /// (false: it has not begun that collective, or is more than
  /// kBoardHistory - 1 collectives further on). `begun`, when given, gets
  /// the collectives it has begun (0 when its page cannot be read).
  bool peerCollective(int peer, uint64_t n, exec::CallTag* out, uint64_t* begun = nullptr) const;
  /// This rank's own collective number `n`, if its page still remembers it.
  bool ownCollective(uint64_t n, exec::CallTag* out) const;
  /// Remembers this launch's sends and receives (their peers on this host);
  /// called by the page's one writer (CallTracker::publishP2P).
  void publishP2P(const std::vector<P2PNote>& notes);
  /// Whether `peer` has a page here.
  bool hasPeer(int peer) const;
  /// Rank `peer`'s nth send to (with `send`) or receive from rank `about`:
  /// kFound (in *out), kNotYet (it has not begun it, or its page never held
  /// still) or kForgotten (its page remembers later ones only).
  enum class Lookup { kFound, kNotYet, kForgotten };
  Lookup peerP2P(int peer, int about, bool send, uint64_t nth, P2PNote* out) const;
  /// The process of `peer` (0 if it has no page here).
  int peerPid(int peer) const;

 private:
  struct Mapped {
    ShmSegment seg;
    BoardPage* page = nullptr;
    int pid = 0;
  };
  std::string jobId_;
  int rank_;
  size_t pageBytes_;  ///< a page and its table of sends and receives by peer
  ShmSegment own_;
  BoardPage* mine_ = nullptr;
  std::vector<std::unique_ptr<Mapped>> byRank_;  // index: rank; null where not mapped
  std::vector<int> peers_;
};

/// Compares this rank's collectives up to number `upTo` with each peer's of
/// the same numbers that `checked` (by rank: how far that peer was compared;
/// it grows) has not compared yet, as far as the peer has begun them; throws
/// groveInvalidUsage, naming both calls, at the first that differs. Numbers
/// a page no longer remembers are passed over.
void checkPeersUpTo(const CallBoard& board, uint64_t upTo, std::vector<uint64_t>& checked);

/// Compares this launch's sends and receives (`mine`, published first)
/// with the receives and sends they pair with on the peers' pages, as far
/// as those peers have begun them: throws groveInvalidUsage at the first
/// pair whose sizes or data types differ. Pairs a page forgot are passed
/// over (logged).
void checkP2POnBoard(const CallBoard& board, int rank, const std::vector<P2PNote>& mine);

/// The check a blocked wait runs (base/wait.h): throws groveInvalidUsage
/// when a peer on this host is known to run another call as this rank's
/// current collective.
class CallBoardProbe : public WaitProbe {
 public:
  CallBoardProbe(const CallBoard* board, CallTracker* tracker) : board_(board), tracker_(tracker) {}
  void probe() const override;

 private:
  const CallBoard* board_;
  CallTracker* tracker_;
};

/// The hang doctor's diagnosis from this host's pages: `me` is this rank's
/// position, `names[r]` rank r's name; ranks on other hosts are not seen.
/// Waits up to `settleSec` for a local process that is going away to be
/// seen gone (a process whose sockets closed may not have ended yet).
std::string hostDiagnosis(const CallBoard& board, const Position& me,
                          const std::vector<std::string>& names, double settleSec);

}  // namespace grove::core
