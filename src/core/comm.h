// Comm: one rank of a communicator -- the object behind groveComm_t.
//
// It joins the job through the bootstrap (src/core/bootstrap.h), keeps the
// transports and open links (connections.h), picks an algorithm per call
// from the selection table (algorithms/select/selector.h), gets the program from a
// cache (built with the topology plans made at init: rings, trees and the
// hierarchical plan, each planned on first use), and runs it with the host
// executor. Operations run in issue order
// (sequencer.h). The first failure puts the communicator in an error state,
// tells every other rank through the bootstrap so they fail fast too, and
// makes every later call return that error.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/builders/builders.h"
#include "base/wait.h"
#include "core/engine_choice.h"
#include "core/options.h"
#include "core/sequencer.h"
#include "core/unique_id.h"
#include "exec/call_tag.h"
#include "grove/grove.h"
#include "ir/schedule.h"

namespace grove::plan {
class Selector;
class ProgramCache;
class TopoPlans;
}  // namespace grove::plan

namespace grove::topo {
struct CommTopology;
}  // namespace grove::topo

namespace grove::core {

class Bootstrap;
class CallTracker;
class CallBoard;
class CallBoardProbe;
struct P2PNote;
class Connections;
class DevicePath;
struct DeviceOp;
class Rma;

/// One point-to-point operation of a group.
struct P2PCall {
  bool isSend = false;
  int peer = -1;
  void* buffer = nullptr;  ///< const for sends
  size_t bytes = 0;
  groveDataType_t dtype = groveUint8;  ///< the caller's type (checked against the peer's)
};

/// The one data type of a send/recv batch's calls (groveDataType_t), or
/// exec::kMixedTypes when they use several: what the peer's is checked against.
uint8_t batchType(const std::vector<P2PCall>& calls);

/// The schedule's form of one send or receive, its buffer Buf::kExtra `extraIndex`.
plan::P2POp p2pOpOf(const P2PCall& call, uint32_t extraIndex);

/// Throws invalid usage unless `rank`'s sends to self pair, in call order and
/// size, with its receives from self (the checks a group's end makes before
/// any of its work starts).
void checkSelfPairs(const std::vector<P2PCall>& calls, int rank);

/// Lets another thread end a communicator's construction: a non-blocking
/// init that groveCommAbort stops. While the constructor runs it ties its
/// abort signal here, so cancel() makes every wait of the init (the
/// bootstrap root, the other ranks) fail at once instead of at the timeout.
class InitCancel {
 public:
  /// Raises the tied signal with `why`, or the next one tied.
  void cancel(const std::string& why);
  /// Ties `signal` (null unties); a cancel that came first raises it now.
  void tie(AbortSignal* signal);

 private:
  std::mutex mu_;
  AbortSignal* signal_ = nullptr;
  bool cancelled_ = false;
  std::string why_;
};

/// A communicator handle owns its Comm through a shared_ptr: work queued on
/// a host stream keeps the Comm it runs on alive (core/group.cc), so a
/// destroy that gives up waiting for it never frees what it will touch.
class Comm : public std::enable_shared_from_this<Comm> {
 public:
  /// Joins rank `rank` of an `nranks`-rank communicator; blocks until all
  /// joined, or until `cancel` (may be null) is cancelled.
  Comm(const UniqueIdData& id, int nranks, int rank, const CommOptions& options,
       InitCancel* cancel = nullptr);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  /// The same on every rank, different per communicator (its id's nonce).
  uint64_t hash() const { return id_.nonce; }
  int nranks() const { return nranks_; }
  const CommOptions& options() const { return options_; }
  /// The machine graph every rank agreed on at init, with this comm's ranks placed on it.
  const topo::CommTopology& topology() const { return *topology_; }
  Sequencer& sequencer() { return sequencer_; }

  /// Runs a collective now (the caller holds its sequencer ticket). A CUDA
  /// communicator enqueues it on `stream` (a cudaStream_t) and returns.
  void collective(const plan::CollArgs& args, const void* sendbuff, void* recvbuff,
                  void* stream = nullptr);
  /// Runs a batch of sends and receives concurrently (CUDA: enqueued on `stream`).
  void pointToPoint(const std::vector<P2PCall>& calls, groveDataType_t dtype,
                    void* stream = nullptr);
  /// CUDA communicators: the collectives `colls` (with their buffers) and the
  /// sends and receives `p2p` of one group as one launch on `stream`.
  struct DeviceCollective {
    plan::CollArgs args;
    const void* sendbuff = nullptr;
    void* recvbuff = nullptr;
  };
  void deviceGroup(const std::vector<DeviceCollective>& colls, const std::vector<P2PCall>& p2p,
                   void* stream);
  /// True for a CUDA communicator (buffers are device memory; streams are cudaStream_t).
  bool isDevice() const { return device_ != nullptr; }
  /// The CUDA device of a CUDA communicator (-1 when emulated or a host communicator).
  int cudaDevice() const { return cudaDevice_; }
  /// Collective over this comm: the new comm of this rank's color, or null for a negative color.
  std::unique_ptr<Comm> split(int color, int key, const CommOptions& options);

  /// Elastic communicators (comm_elastic.cc). What a rank needs to join a
  /// communicator reformed from this one: the id, the new size and this
  /// rank's place in it.
  struct Reform {
    UniqueIdData id;
    int nranks = 0;
    int rank = -1;
  };
  /// Shrink, called by every rank not in `excluded` (the excluded ones do not
  /// take part; they may be dead). Without `abortMode` this communicator must
  /// be healthy and its queued work finishes first; with it, its pending work
  /// is aborted here. The lowest surviving rank hosts the new communicator's
  /// bootstrap root on its rescue listener; nothing of this communicator's
  /// root or the excluded ranks is needed.
  Reform prepareShrink(const std::vector<int>& excluded, bool abortMode);
  /// Grow, collective over this communicator: one or more ranks pass `id`
  /// (groveCommGetUniqueId's, made by one of them), the others null; every
  /// rank keeps its rank in the `nranks`-rank communicator it forms with
  /// the new ranks.
  Reform prepareGrow(int nranks, const UniqueIdData* id);
  /// Ends every pending and later call on this communicator, here and (through
  /// the bootstrap root, while it lives) on every other rank, with an error
  /// that names this rank; the communicator can then be shrunk or destroyed.
  void revoke();
  /// revoke() with `why` as the error's text: a failure every rank must
  /// see (a group's end that could not run its share).
  void failEverywhere(const std::string& why);

  /// Memory this rank of the communicator holds for it (comm_memory.cc).
  struct Memory {
    uint64_t releasable = 0;  ///< scratch: what suspend() gives back
    uint64_t persistent = 0;  ///< rings: held for the communicator's life
    bool suspended = false;
  };
  Memory memory() const;
  /// Waits for this rank's queued and enqueued work, then gives back the
  /// scratch memory; every later call fails with groveInvalidUsage until
  /// resume(). Local: the other ranks are not involved.
  void suspend();
  /// Ends a suspension (scratch is allocated again as calls need it).
  void resume();
  /// One-sided access (comm_rma.cc, core/rma.h). Registers this rank's
  /// window [base, base + bytes); collective, in the same order on every
  /// rank. Returns its id (the same on every rank).
  int windowRegister(void* base, uint64_t bytes);
  /// Counts a groveWindowRegister call, refused ones included (before its
  /// checks): each registration compares its count across ranks, so one
  /// that pairs with another rank's refused call fails instead of pairing
  /// up windows that were not registered together. Not while suspended (a
  /// rank's own state: its refusal there is not a call the others make).
  void countWindowCall() {
    if (!suspended_.load()) ++windowCalls_;
  }
  /// Collective: waits for every put in flight to this rank, then drops window `id`.
  void windowDeregister(int id);
  /// Rank `rank`'s bytes of window `id`; false if there is no such window.
  bool windowBytes(int id, int rank, uint64_t* bytes) const;
  /// Puts `bytes` from src into `peer`'s window at `offset` and raises its
  /// signal slot `signal` there (the caller holds its sequencer ticket).
  void putSignal(int peer, int window, uint64_t offset, const void* src, uint64_t bytes,
                 int signal);
  /// Waits for signals (each {peer, slot, count}) and consumes them.
  void waitSignals(const std::vector<std::array<int, 3>>& waits);
  /// Stops every pending and future call here and on the other ranks.
  void abort(const std::string& why);
  /// Graceful end: waits for queued work, then leaves the job.
  void close();
  /// groveSuccess, or the error that put the comm in its error state (and its text).
  groveResult_t errorState(std::string* text) const;

 private:
  template <typename Fn>
  void guarded(const char* what, Fn&& fn);
  /// guarded()'s failure: records the error, tells the other ranks and
  /// throws it with the call's name (`seen`: what this rank saw).
  [[noreturn]] void failCall(const char* what, groveResult_t code, const std::string& seen);
  /// Tracks one call for the hang doctor from construction to destruction.
  struct Tracked {
    /// Begins `call` on t and numbers it (CallTag::seq).
    Tracked(CallTracker* t, exec::CallTag& call);
    ~Tracked();
    CallTracker* t;
  };
  /// A device launch's calls begin on the tracker (a group's collectives
  /// numbered one by one), and this rank's collectives, sends and receives
  /// are compared with its host's peers' on the call board (throws
  /// groveInvalidUsage when a peer ran another call as some number, or a
  /// send and the receive it pairs with differ); the caller ends them.
  void beginDeviceCalls(const std::vector<DeviceCollective>& colls,
                        const std::vector<P2PCall>& p2p);
  /// This launch's sends and receives to peers on this host, numbered per
  /// peer and direction (counting those that move bytes).
  std::vector<P2PNote> numberP2P(const std::vector<P2PCall>& p2p);
  /// Sets up the call board (core/call_board.h) once every rank's page exists.
  void openCallBoard(const transport::PeerInfo& self);
  /// A rank that only sends in a rooted collective (the root of a broadcast
  /// or scatter, the others of a reduce or gather) may receive no tag, so it
  /// looks at the board once its call has ended (throws groveInvalidUsage
  /// on a mismatch it sees).
  void checkRootOnBoard(const plan::CollArgs& args) const;
  /// For a wait that failed with no notice from the job: the hang doctor's
  /// diagnosis (through the bootstrap root, else this host's call board) as
  /// " -- hang doctor: ...", or "" (also when another rank's notice that
  /// came meanwhile carries one; *remote then says a notice came).
  std::string doctorSuffix(bool* remote);
  /// The hang doctor from this host's call board (the root did not answer).
  std::string hostDoctor();
  /// An all-gather over the bootstrap (the agreement and call checks).
  std::function<std::vector<uint8_t>(const void*, size_t)> bootstrapAllGather();
  /// GROVE_CHECK=calls: compares the collective's signature across the
  /// ranks before it runs (nothing otherwise); a mismatch fails it everywhere.
  void checkCall(const plan::CollArgs& args);
  /// guarded() for code outside comm.cc.
  void runGuarded(const char* what, const std::function<void()>& fn);
  void checkUsable() const;
  /// Waits up to GROVE_TIMEOUT for this rank's queued host work, then its
  /// enqueued device work; null when both finished, else which did not.
  const char* drainWork();
  void* scratch(size_t bytes);
  /// With a topology whose links carry addresses: whether every rank's
  /// links are addressed and carried by the network (collective), and if
  /// so tuneForFabric() (comm_tuning.cc).
  void tuneIfFabric(bool linkAddresses);
  /// Installs the cost model's per-size algorithm table, tuned on rank 0.
  void tuneForFabric();
  /// Sets up the device path of a CUDA communicator (after the host links).
  void chooseEngine();
  void initDevice();
  /// Ends this rank's pending and later calls with `why` (groveRemoteError,
  /// unless an error is recorded already) without telling the other ranks:
  /// the abort-mode shrink and, after its notice to the job, revoke.
  void stopHere(const std::string& why);
  /// Records a failure seen off the calling thread (the device watcher).
  void recordAsyncFailure(groveResult_t code, const std::string& text);
  /// Refuses one-sided access where buffers are real GPU memory.
  void checkOneSided(const char* what) const;
  /// The device operations of a send/recv batch (one one-off program).
  void addDeviceP2P(const std::vector<P2PCall>& calls, groveDataType_t dtype,
                    std::vector<DeviceOp>& ops);

  int rank_;
  int nranks_;
  CommOptions options_;
  AbortSignal abort_;
  /// What this rank does, shared with its host's other ranks (null: no
  /// shared memory); declared first so that it outlives every reader.
  std::unique_ptr<CallBoard> board_;
  std::unique_ptr<CallBoardProbe> probe_;  ///< blocked waits' look at the board
  std::vector<uint64_t> boardChecked_;     ///< by rank: collectives compared on the board (CUDA)
  std::vector<uint64_t> p2pSent_, p2pReceived_;  ///< by rank: sends to it, receives from it (CUDA)
  std::vector<std::string> boardNames_;          ///< "rank r (host h pid p)", for hostDoctor()
  std::shared_ptr<CallTracker> tracker_;         ///< where this rank is, for the hang doctor
  uint64_t checkSeq_ = 0;                        ///< collectives checked so far (GROVE_CHECK=calls)
  WaitContext wait_;
  Sequencer sequencer_;
  std::unique_ptr<Bootstrap> bootstrap_;
  std::unique_ptr<topo::CommTopology> topology_;
  std::unique_ptr<Connections> connections_;
  std::unique_ptr<plan::Selector> selector_;
  std::unique_ptr<plan::TopoPlans> plans_;  ///< rings / trees / hier plan of the topology (lazy)
  std::unique_ptr<plan::ProgramCache> cache_;
  std::unique_ptr<Rma> rma_;  ///< one-sided access: made at the first window registration
  std::atomic<int64_t> windowCalls_{0};             ///< countWindowCall()
  std::unique_ptr<DevicePath> device_;              ///< CUDA communicators only
  std::vector<transport::DevicePeer> devicePeers_;  ///< CUDA communicators: every rank's
  EngineChoice engine_;                             ///< CUDA communicators: kernel or stream
  int cudaDevice_ = -1;
  std::string jobId_;     ///< unique per communicator (names shared-memory segments)
  UniqueIdData id_;       ///< the id it was made from (shrinks derive theirs from it)
  uint64_t shrinks_ = 0;  ///< shrinks of this communicator so far (they number the new ids)
  int nChannels_ = 1;
  std::vector<uint8_t, std::allocator<uint8_t>> scratchStore_;
  mutable std::mutex errorMu_;
  // Written under errorMu_ (with errorText_); atomic so that checkUsable can
  // see "no error" without the lock.
  std::atomic<groveResult_t> error_{groveSuccess};
  std::string errorText_;
  bool closed_ = false;
  std::atomic<bool> suspended_{false};
};

}  // namespace grove::core
