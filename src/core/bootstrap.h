// Bootstrap: the out-of-band network that lets the ranks of a communicator
// find each other, exchange small data, and learn when one of them fails.
//
// How it works: every rank opens one TCP connection to the bootstrap root
// (core/bootstrap_root.h), a thread of the process that made the unique id
// (or of rank 0 when GROVE_COMM_ID names the root's address). The rank says
// hello with the id's secret, its rank, nranks and its PeerInfo, and blocks
// until the root has heard from all ranks and sends back every PeerInfo.
// From then on a watcher thread per Bootstrap reads what the root sends:
// all-gather results (handed to the waiting caller through a condition
// variable) and ABORT messages (which raise the communicator's AbortSignal).
// Losing the root connection without having said BYE also raises the signal.
// All-gathers and broadcasts are numbered; the root answers #k when every
// rank sent its part of #k, so calls must come in the same order on all
// ranks. Waits are
// bounded by the timeout and watch the AbortSignal.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "base/wait.h"
#include "core/unique_id.h"
#include "transports/transport.h"

namespace grove::core {

class RootServer;
enum class MsgType : uint32_t;  // bootstrap_root.h
class CallTracker;

/// Hash of /proc/sys/kernel/random/boot_id + host name: equal for every
/// process of one (booted) machine, different across machines. Cached.
uint64_t localHostHash();
/// Fills info.pid, info.hostName and info.hostHash for this process.
void fillHostIdentity(transport::PeerInfo& info);
/// A PeerInfo for this process as `rank`: rank, pid, host name and host hash set.
transport::PeerInfo localPeerInfo(int rank);

/// One rank's membership in a communicator's out-of-band network.
class Bootstrap {
 public:
  /// Joins the job: if id.fromEnv and rank == 0, first starts the root server
  /// on id.root's port. Connects to the root (retrying while refused, until
  /// timeoutSec), presents the secret, rank, nranks and `self` (pid, host name
  /// and host hash are filled in if left empty); blocks until all nranks ranks
  /// joined; then peers() holds every rank's PeerInfo. A refused rank (wrong
  /// secret, duplicate rank, nranks mismatch) throws Error(groveInvalidUsage)
  /// with the root's reason; a lost root, abort or timeout throws
  /// Error(groveRemoteError). Starts a watcher thread that reads messages
  /// from the root. `abort` must outlive this object (null: a private signal).
  Bootstrap(const UniqueIdData& id, int rank, int nranks, const transport::PeerInfo& self,
            AbortSignal* abort, double timeoutSec);
  /// Closes (as close()) if not closed.
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  /// Every rank's PeerInfo, indexed by rank.
  const std::vector<transport::PeerInfo>& peers() const { return peers_; }
  /// This rank.
  int rank() const { return rank_; }
  /// Number of ranks.
  int nranks() const { return nranks_; }

  /// Every rank contributes `bytes` bytes (same size on every rank); returns
  /// nranks*bytes, in rank order. Collective; calls must happen in the same
  /// order on all ranks. Throws Error(groveRemoteError) if the AbortSignal is
  /// raised, the root is lost, or timeout.
  std::vector<uint8_t> allGather(const void* data, size_t bytes);
  /// Rank `source`'s `data` on every rank (the other ranks' `data` is not
  /// read). Collective, in the same order as allGather on all ranks; each
  /// rank receives the bytes once. Waits up to `waitSec` (0: the timeout)
  /// for the slowest rank; throws as allGather does.
  std::vector<uint8_t> broadcast(int source, const std::vector<uint8_t>& data, double waitSec = 0);
  /// Returns when every rank has called barrier() (an all-gather of one byte).
  void barrier();
  /// Best effort, never blocks for long: asks the root to tell every other
  /// rank to abort with `reason` (they raise their AbortSignal with a message
  /// naming this rank and reason). Does not raise this rank's own signal.
  void abort(const std::string& reason);
  /// Where this rank's reports to the hang doctor come from (may be null).
  void setTracker(std::shared_ptr<CallTracker> tracker);
  /// What this rank adds when it loses the root (the call board's view of
  /// its host: core/call_board.h); run on the watcher thread, may be empty.
  void setHostDoctor(std::function<std::string()> doctor);
  /// Asks the root for a diagnosis of the job (core/hang_doctor.h) and waits
  /// up to `waitSec` for it; returns its text, or "" when none came (the
  /// root is gone, or the wait ran out). Never throws.
  std::string diagnose(double waitSec);
  /// diagnose(), else (the root did not answer) the host doctor's text; ""
  /// when `told` (may be empty), asked after the root's answer, says the job
  /// has already given its reason.
  std::string doctor(double waitSec, const std::function<bool()>& told = {});
  /// Starts a bootstrap root (core/bootstrap_root.h) for `secret` and
  /// `nonce` on this rank's rescue listener, whose address every rank has in
  /// peers()[rank].rescue: how the survivors of a shrink meet without the
  /// root of this job or a new unique id (core/comm_elastic.cc).
  std::shared_ptr<RootServer> startRescueRoot(uint64_t secret, uint64_t nonce);
  /// Graceful leave: sends BYE; on the rank whose process hosts the root
  /// server, waits (bounded by the timeout) until the root has seen every
  /// rank of other processes leave or die, so the root outlives the job.
  /// Idempotent.
  void close();

 private:
  void startLocalRootFromEnv();
  /// Listens (any port) on the address this rank's root connection comes from.
  void openRescueListener();
  void join(const transport::PeerInfo& self);
  /// Throws groveInvalidUsage: the id names a root of this process that ended.
  [[noreturn]] void throwSpentId() const;
  /// ", which rank 0's process hosts (GROVE_COMM_ID): ..." when rank 0
  /// starts the root (the id came from GROVE_COMM_ID), else "".
  std::string rootHost() const;
  /// While joining: asks the root which ranks have not joined (waits up to
  /// 1 s); "" if no answer. A welcome, abort or refusal that arrives first
  /// is handed back in *otherType and *other instead.
  std::string askWhoIsMissing(uint32_t* otherType, std::vector<uint8_t>* other);
  void watch();
  static constexpr size_t kAnySize = SIZE_MAX;
  /// Sends this rank's part (`data`) of the next collective (`type`:
  /// kGather, kBroadcast) and waits up to `waitSec` for the root's answer,
  /// which must hold `resultBytes` (kAnySize: any number); `name` and
  /// `detail` say which collective in errors.
  std::vector<uint8_t> collective(MsgType type, const std::string& name, const std::string& detail,
                                  const void* data, size_t bytes, double waitSec,
                                  size_t resultBytes = kAnySize);
  net::IoResult sendMessage(uint32_t type, uint64_t seq, const void* data, size_t bytes,
                            const net::Deadline& deadline, bool watchAbort);

  UniqueIdData id_;
  int rank_;
  int nranks_;
  AbortSignal ownAbort_;  // used when the caller passes no signal
  AbortSignal* abort_;
  double timeoutSec_;
  std::string rootText_;  // root address, for messages
  net::Fd fd_;
  net::Fd rescue_;  // listening; each startRescueRoot gets a dup
  sockaddr_storage rescueAddr_{};
  std::vector<transport::PeerInfo> peers_;
  std::shared_ptr<RootServer> localRoot_;  // set when this process hosts the root
  std::timed_mutex sendMu_;                // one writer on fd_ at a time
  std::mutex mu_;                          // guards the fields below
  std::condition_variable cv_;
  std::map<uint64_t, std::vector<uint8_t>> results_;
  bool rootLost_ = false;
  bool watcherDone_ = false;
  std::string lostReason_;
  std::atomic<bool> byeSent_{false};
  bool closed_ = false;
  uint64_t nextSeq_ = 1;
  std::shared_ptr<CallTracker> tracker_;     // guarded by mu_
  std::function<std::string()> hostDoctor_;  // guarded by mu_
  uint64_t diagnosisSeq_ = 0;                // the last diagnosis received (guarded by mu_)
  std::string diagnosis_;
  std::thread watcher_;
};

}  // namespace grove::core
