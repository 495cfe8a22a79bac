// The CUDA side of Comm (comm.h): setting up the device path and turning
// collectives, send/recv batches and groups into device launches.
//
// How it works: a CUDA communicator is built like a host one -- bootstrap,
// topology, host links, selector, program cache -- and then gets a
// DevicePath (device_path.h): the engine (the CUDA executor on its GPU, or
// the host emulation with GROVE_DEVICE_EMULATION) plus the device rings
// (DeviceConnections), whose descriptions travel over the host links. A
// call picks its algorithm and program exactly as on the host; the device
// path lowers, opens, installs and launches it. Everything one thread
// records for this communicator in a group becomes one launch.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "algorithms/builders/builders.h"
#include "algorithms/select/program_cache.h"
#include "algorithms/select/selector.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/log.h"
#include "base/wait.h"
#include "core/bootstrap.h"
#include "core/call_board.h"
#include "core/comm.h"
#include "core/connections.h"
#include "core/device_engine.h"
#include "core/device_path.h"
#include "core/unique_id.h"
#include "exec/device/stream_tape.h"

namespace grove::core {

// Every rank's device facts, then the engine (engine_choice.h); rank 0 says
// once why, and what to do when the setup makes collectives slow.
void Comm::chooseEngine() {
  devicePeers_ =
      gatherDevicePeers(localDevicePeer(rank_, cudaDevice_), nranks_,
                        [this](const void* d, size_t n) { return bootstrap_->allGather(d, n); });
  engine_ = chooseDeviceEngine(options_.deviceEngine, devicePeers_);
  if (rank_ != 0) return;
  GROVE_INFO(log::kInit, "device engine %s: %s", deviceEngineName(engine_.kind),
             engine_.why.c_str());
  if (!engine_.advice.empty()) {
    if (engine_.kind == DeviceEngineKind::kKernel)
      GROVE_WARN(log::kInit, "%s", engine_.advice.c_str());
    else
      GROVE_INFO(log::kInit, "%s", engine_.advice.c_str());
  }
}

void Comm::initDevice() {
  const bool stream = engine_.kind == DeviceEngineKind::kStream;
  const int device = options_.emulateDevice ? -1 : cudaDevice_;
  std::unique_ptr<DeviceEngine> engine = stream ? makeStreamEngine(device, options_.timeoutSec)
                                         : options_.emulateDevice
                                             ? makeEmulatedEngine(options_.timeoutSec)
                                             : makeCudaEngine(cudaDevice_, options_.timeoutSec);
  transport::DeviceContext ctx;
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.jobId = jobId_;
  ctx.peers = devicePeers_;
  DeviceLinkOptions opt;
  opt.emulate = options_.emulateDevice;
  opt.disableP2P = options_.disableP2P;
  opt.ringCapacity = deviceRingCapacity(options_.bufferBytes, selector_->params().chunkBytes);
  // A tape piece is at most half a ring and costs a few host operations:
  // on a GPU, stream tapes get rings that hold two whole pieces.
  if (stream && !options_.emulateDevice)
    opt.ringCapacity = std::max<uint64_t>(opt.ringCapacity, 2 * exec::dev::kTapePieceBytes);
  HostLinks hostLinks = [this](const plan::Program& p) -> exec::LinkTable& {
    return connections_->ensure(p);
  };
  auto links =
      std::make_unique<DeviceConnections>(std::move(ctx), std::move(hostLinks), wait_, opt);
  device_ = std::make_unique<DevicePath>(
      nranks_, std::move(engine), std::move(links), abort_,
      [this](groveResult_t code, const std::string& text) { recordAsyncFailure(code, text); });
}

void Comm::recordAsyncFailure(groveResult_t code, const std::string& text) {
  std::string full = "rank " + std::to_string(rank_) + ": " + text;
  if (error_.load() != groveSuccess) return;
  // A wait that ran out with no notice from the job: ask where every rank is.
  bool remote = abort_.raised();
  if (!remote && code == groveRemoteError) full += doctorSuffix(&remote);
  {
    std::lock_guard<std::mutex> lock(errorMu_);
    if (error_ != groveSuccess) return;
    error_ = code;
    errorText_ = full;
  }
  // The peers first: raising the signal makes a stream-tape engine release
  // its waits, and a peer must not take what its streams then send for a
  // finished call.
  if (!remote && bootstrap_) bootstrap_->abort(full);
  abort_.raise(full);
  GROVE_WARN(log::kColl, "%s", full.c_str());
}

void Comm::addDeviceP2P(const std::vector<P2PCall>& calls, groveDataType_t dtype,
                        std::vector<DeviceOp>& ops) {
  DeviceOp op;
  op.oneOff = true;
  op.dtype = dtype;
  std::vector<plan::P2POp> p2p;
  for (const P2PCall& c : calls) {
    p2p.push_back(p2pOpOf(c, static_cast<uint32_t>(op.extra.size())));
    op.extra.push_back(c.buffer);
  }
  op.program = std::make_shared<const plan::Program>(
      plan::buildP2P(p2p, rank_, nranks_, selector_->p2pSplit()));
  if (op.program->phases.empty()) return;
  GROVE_INFO(log::kP2p, "send/recv group of %zu ops on the device, %s", calls.size(),
             device_->summary().c_str());
  ops.push_back(std::move(op));
}

// Device rings carry raw bytes, not call tags (exec/call_tag.h), so each
// launch compares this rank's collectives with those of its peers on this
// host through the call board before anything is launched: a peer whose
// collective of some number is another call (another count, type, op or
// root) fails the launch, naming both calls, instead of ranks returning
// wrong data as success. A group's collectives are numbered one by one, as
// if each were called alone, so ranks that group differently still number
// them alike. Every number is compared once per peer, at the first launch
// of this rank that finds both ranks past it (checkPeersUpTo), so a rank
// that ran ahead (a GPU's launches are only enqueued) finds a mismatch
// behind it at its next launch. Each rank publishes its numbers before it
// reads (a full fence between), so of two ranks that disagree at least one
// sees the other's call at the launch that begins it, as long as they are
// less than kBoardHistory collectives apart and the launch groups fewer
// than that (numbers passed over are logged); the communicator's abort then
// carries the failure to the rest. A rank already past the call (its
// launch enqueued, or a root that only sends) learns it at its next call.
// Peers on other hosts have no page here and are not compared.
//
// Sends and receives likewise: the nth send from rank a to rank b pairs with
// b's nth receive from a (NCCL's rule, whatever groups either side made;
// only those that move bytes count, as only those run), so each launch
// notes its sends and receives to peers on this host with their numbers,
// and compares each with the one it pairs with on the peer's page. Without
// it a receive smaller than its send returned the send's first bytes as
// success, and a larger one waited for the timeout.
void Comm::beginDeviceCalls(const std::vector<DeviceCollective>& colls,
                            const std::vector<P2PCall>& p2p) {
  std::vector<exec::CallTag> tags;
  for (const DeviceCollective& c : colls) tags.push_back(exec::callTagOf(c.args, rank_));
  const uint64_t begun = tracker_->beginLaunch(tags, !p2p.empty());
  if (!options_.tagCalls || !board_ || board_->peers().empty()) return;
  const std::vector<P2PNote> notes = numberP2P(p2p);
  tracker_->publishP2P(notes);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  checkPeersUpTo(*board_, begun, boardChecked_);
  checkP2POnBoard(*board_, rank_, notes);
}

std::vector<P2PNote> Comm::numberP2P(const std::vector<P2PCall>& p2p) {
  std::vector<P2PNote> notes;
  const uint8_t type = batchType(p2p);
  for (const P2PCall& c : p2p) {
    if (c.bytes == 0 || c.peer == rank_ || !board_->hasPeer(c.peer)) continue;
    uint64_t& n = (c.isSend ? p2pSent_ : p2pReceived_).at(static_cast<size_t>(c.peer));
    notes.push_back(P2PNote{c.peer, c.isSend, type, ++n, c.bytes});
  }
  return notes;
}

void Comm::deviceGroup(const std::vector<DeviceCollective>& colls, const std::vector<P2PCall>& p2p,
                       void* stream) {
  // GROVE_CHECK=calls: each collective of the launch, alone or a group's.
  for (const DeviceCollective& c : colls) checkCall(c.args);
  runGuarded(colls.empty() ? "send/recv" : plan::collName(colls.front().args.coll), [&] {
    struct Ended {
      CallTracker* t;
      ~Ended() { t->end(); }
    } ended{tracker_.get()};
    beginDeviceCalls(colls, p2p);
    const uint64_t t0 = monotonicNs();
    std::vector<DeviceOp> ops;
    for (const DeviceCollective& c : colls) {
      const uint64_t bytes = plan::messageBytes(c.args);
      plan::Selection sel = selector_->select(c.args.coll, bytes);
      DeviceOp op;
      op.program = cache_->get(sel.algo, c.args, sel.params);
      op.dtype = c.args.dtype;
      op.op = c.args.op;
      op.input = c.sendbuff;
      op.output = c.recvbuff;
      GROVE_INFO(
          log::kColl, "%s count %zu %s %s root %d bytes %zu in-place %d algo %s channels %d on %s",
          plan::collName(c.args.coll), static_cast<size_t>(c.args.count), dtypeName(c.args.dtype),
          opName(c.args.op), c.args.root, static_cast<size_t>(bytes), c.args.inPlace ? 1 : 0,
          op.program->algo.c_str(), sel.params.nChannels, device_->summary().c_str());
      ops.push_back(std::move(op));
    }
    if (!p2p.empty()) addDeviceP2P(p2p, groveUint8, ops);
    device_->noteSelect(monotonicNs() - t0);
    device_->launch(ops, stream);
  });
}

}  // namespace grove::core
