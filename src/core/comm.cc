#include "core/comm.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "algorithms/builders/builders.h"
#include "algorithms/cost/cost_model.h"
#include "algorithms/planner/plan_store.h"
#include "algorithms/planner/topo_plans.h"
#include "algorithms/select/program_cache.h"
#include "algorithms/select/selector.h"
#include "base/dtype.h"
#include "base/entropy.h"
#include "base/error.h"
#include "base/log.h"
#include "base/socket.h"
#include "core/agreement.h"
#include "core/bootstrap.h"
#include "core/call_board.h"
#include "core/call_check.h"
#include "core/connections.h"
#include "core/device_engine.h"
#include "core/device_path.h"
#include "core/hang_doctor.h"
#include "core/planned_routes.h"
#include "core/rma.h"
#include "exec/host_executor.h"
#include "topology/comm_topology.h"
#include "topology/detect.h"
#include "topology/link_addresses.h"
#include "topology/paths.h"

namespace grove::core {
namespace {

// How long a collective that failed on a remote error (a peer's connection
// closed, a timeout) waits for the job's abort notice before it reports. A
// dead rank takes its neighbours down first and the rest of the job through
// them, so a rank two hops away often sees a neighbour that gave up before
// the bootstrap root's notice naming the dead rank arrives; waiting briefly
// reports the cause, not the echo. A peer's death closes its bootstrap
// connection, so the notice normally comes within milliseconds.
constexpr double kCauseGraceSec = 1.0;

int onlineCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

// The host's online CPUs, the same for every process on it (not the
// affinity mask, which differs between bound ranks): the selector's choice
// depends on it, and every rank must make the same choice.
int hostCpus() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 0;
}

// Socket routes from the topology's link addresses (topology/link_addresses.h);
// logs every peer's path once. Empty when the topology has no addresses.
std::vector<transport::PeerRoute> linkRoutes(const topo::CommTopology& t, int rank) {
  std::vector<transport::PeerRoute> routes;
  if (!t.graph.hasLinkAddresses()) return routes;
  auto toAddr = [](const std::string& text) {
    return text.empty() ? sockaddr_storage{} : net::resolveAddress(text, 0);
  };
  for (const topo::PeerLinkAddress& p : topo::resolvePeerLinkAddresses(t, rank)) {
    const int peer = static_cast<int>(routes.size());
    routes.push_back({toAddr(p.local), toAddr(p.remote), p.path});
    if (peer != rank)
      GROVE_INFO(log::kNet, "rank %d -> rank %d: %s; local %s, remote %s", rank, peer,
                 p.path.c_str(), p.local.empty() ? "any" : p.local.c_str(),
                 p.remote.empty() ? "published address" : p.remote.c_str());
  }
  return routes;
}

// Names of the NIC closest to this rank's GPU (or NUMA node) in the local
// topology: its verbs device, its network interface and its node name. The
// network transport puts the fabric domain of that name first, so channel 0
// -- and every channel with GROVE_NET_NICS=1 -- leaves through it.
std::vector<std::string> closestNicNames(const topo::Graph& g, const topo::LocalView& v) {
  topo::NodeId from = -1;
  for (topo::NodeId id : g.nodesOfKind(topo::NodeKind::kGpu))
    if (!v.gpuBusId.empty() && g.node(id).busId == v.gpuBusId) from = id;
  if (from < 0 && v.numa >= 0)
    for (topo::NodeId id : g.nodesOfKind(topo::NodeKind::kCpu))
      if (g.node(id).name == "cpu" + std::to_string(v.numa)) from = id;
  const topo::NodeId nic = from >= 0 ? topo::closestNic(g, from) : -1;
  if (nic < 0) return {};
  std::vector<std::string> names;
  for (const char* key : {"device", "netdev"})
    if (!g.node(nic).attr(key).empty()) names.push_back(g.node(nic).attr(key));
  names.push_back(g.node(nic).name);
  return names;
}

}  // namespace
void InitCancel::cancel(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!cancelled_) why_ = why;
  cancelled_ = true;
  if (signal_ != nullptr) signal_->raise(why_);
}

void InitCancel::tie(AbortSignal* signal) {
  std::lock_guard<std::mutex> lock(mu_);
  signal_ = signal;
  if (signal_ != nullptr && cancelled_) signal_->raise(why_);
}

Comm::Comm(const UniqueIdData& id, int nranks, int rank, const CommOptions& options,
           InitCancel* cancel)
    : rank_(rank), nranks_(nranks), options_(options), id_(id) {
  // Untied when the constructor ends, however it ends.
  struct Tie {
    InitCancel* c;
    ~Tie() {
      if (c != nullptr) c->tie(nullptr);
    }
  } tie{cancel};
  if (cancel != nullptr) cancel->tie(&abort_);
  wait_ = WaitContext::of(abort_, options_.timeoutSec);
  tracker_ = std::make_shared<CallTracker>(rank);
  jobId_ = jobIdOf(id);
  try {
    board_ = std::make_unique<CallBoard>(jobId_, rank, nranks);
    tracker_->attach(board_.get());
  } catch (const Error& e) {
    GROVE_INFO(log::kInit, "rank %d: no call board (%s)", rank, e.what());
  }
  // An init that fails removes its host's board names (the pages are
  // unlinked by their owners once every rank has mapped them).
  struct BoardNames {
    const std::string& job;
    int n;
    bool keep = false;
    ~BoardNames() {
      if (keep) return;
      std::vector<int> all(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) all[r] = r;
      CallBoard::unlinkNames(job, all);
    }
  } boardNames{jobId_, nranks};
  wait_.blockedOn = tracker_->blockedOn();
  log::setRank(rank);
  // A CUDA communicator checks its device before joining, so a bad one fails fast.
  const bool cuda = options_.deviceKind == groveDeviceCuda;
  if (cuda && !options_.emulateDevice) cudaDevice_ = resolveCudaDevice(options_.device);

  // Link addresses in the topology file: listen on every address, connect over the links.
  const topo::Graph localGraph = topo::localTopology();
  const bool linkAddresses = localGraph.hasLinkAddresses();
  // Each enabled transport opens what peers need and publishes its address.
  transport::PeerInfo self = localPeerInfo(rank);
  const bool onGpu = cudaDevice_ >= 0;
  topo::LocalView view = topo::makeLocalView(
      localGraph, onGpu ? topo::DeviceKind::kCuda : topo::DeviceKind::kHost, cudaDevice_);
  transport::OpenArgs openArgs;
  openArgs.timeoutSec = options_.timeoutSec;
  openArgs.linkAddresses = linkAddresses;
  openArgs.closestNics = closestNicNames(localGraph, view);
  std::vector<OpenedTransport> opened = openTransports(options_.transport, openArgs, &self);
  bootstrap_ = std::make_unique<Bootstrap>(id, rank, nranks, self, &abort_, options_.timeoutSec);
  bootstrap_->setTracker(tracker_);
  // Settings that shape schedules and links must be the same on every rank.
  checkAgreement(agreedSettings(options_), nranks, bootstrapAllGather());
  // A CUDA communicator's engine shapes its schedules (channels), so every
  // rank chooses it from the same facts before the selector exists.
  if (cuda) chooseEngine();

  // Topology: each rank's local view, exchanged and merged identically on every rank.
  // (An emulated device is host memory: it is placed like a host rank.)
  topology_ = std::make_unique<topo::CommTopology>(
      topo::exchangeCommTopology(view, nranks, bootstrapAllGather()));

  openCallBoard(self);

  // More ranks on this host than CPUs: spinning only steals the CPU from the
  // rank we wait for, so yield at once (as MPI libraries do when oversubscribed).
  int local = 0;
  for (const auto& p : bootstrap_->peers()) local += p.hostHash == self.hostHash ? 1 : 0;
  if (local > onlineCpus()) {
    wait_.spinUs = 0;
    GROVE_INFO(log::kInit, "%d ranks share %d CPUs on this host: waits yield without spinning",
               local, onlineCpus());
  }

  transport::Context ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.jobId = jobId_;
  // The link key is fresh per run: the id's secret mixed with a random
  // value from every rank (exchanged over the bootstrap), so no hello
  // recorded in another run of the same GROVE_COMM_ID and secret is
  // accepted here. The values need no secrecy: the key still needs the
  // secret, which never travels.
  const uint64_t salt = randomU64();
  const std::vector<uint8_t> salts = bootstrap_->allGather(&salt, sizeof(salt));
  ctx.secret = runLinkSecret(id, salts);
  // Every rank mapped its host's boards before it gave its salt.
  if (board_) board_->unlinkOwn();
  ctx.peers = bootstrap_->peers();
  ctx.bufferBytes = options_.bufferBytes;
  ctx.wait = wait_;
  if (linkAddresses) ctx.routes = linkRoutes(*topology_, rank);
  // Planned routes become connections over their end addresses (planned_routes.h).
  RouteResolver routes;
  if (linkAddresses)
    routes = [this](const plan::LinkRoute& lr) {
      return plans_ ? plannedRoute(plans_->graph(), topology_->graph, lr) : PlannedRoute{};
    };
  connections_ =
      std::make_unique<Connections>(ctx, std::move(opened), options_.transport, std::move(routes));

  plan::SelectorConfig sel =
      plan::SelectorConfig::fromRegistry(options_.algo.c_str(), options_.nChannels);
  sel.bufferBytes = options_.bufferBytes;
  sel.chunkBytes = options_.chunkBytes;
  // Lanes are thread blocks of the persistent kernel; a stream tape's lanes
  // are streams, and fewer, longer ones cost fewer host operations.
  sel.gpuLanes = cuda && !options_.emulateDevice && engine_.kind == DeviceEngineKind::kKernel;
  if (topology_->ranksByMachine.size() == 1) sel.hostCpus = hostCpus();
  sel.eager = sel.eager && connections_->slotLinks();
  selector_ = std::make_unique<plan::Selector>(nranks, connections_->traits(), sel);
  nChannels_ = selector_->params().nChannels;
  // Plans over the agreed topology: building the graph is cheap, the rings
  // and trees are searched on first use. Every rank has the same topology,
  // so every rank plans the same rings and trees.
  try {
    plans_ = std::make_unique<plan::TopoPlans>(plan::PlanGraph::fromTopology(*topology_));
  } catch (const Error& e) {
    GROVE_WARN(log::kPlan, "no topology plans (%s): tree and hier algorithms are unavailable",
               e.what());
  }
  // The cost model chooses how many trees the tree plans keep (more trees
  // reach closer to the optimum, fewer have less pipeline fill per tree).
  if (plans_ && options_.treeJudgeBytes > 0) {
    const plan::SimParams sim = plan::simParamsFor(connections_->traits());
    plan::installTreeJudges(*plans_, *selector_, sim, options_.treeJudgeBytes);
  }
  // Communicators of the same topology (subgroups, shrunk and grown ones,
  // later jobs with GROVE_PLAN_CACHE_DIR) share their plans.
  if (plans_) plans_->useStore(&plan::PlanStore::process(), options_.planCacheDir);
  if (plans_ && topology_->graph.hasLinkAddresses()) tuneIfFabric(linkAddresses);
  cache_ = std::make_unique<plan::ProgramCache>(256, plans_.get());
  if (cuda) initDevice();
  boardNames.keep = true;
  GROVE_INFO(log::kInit, "comm %s rank %d/%d ready: transport %s, %d channel(s), buffer %zu B",
             options_.name.empty() ? "-" : options_.name.c_str(), rank, nranks,
             (device_ ? device_->summary() : connections_->summary()).c_str(), nChannels_,
             options_.bufferBytes);
}

Comm::~Comm() {
  try {
    close();
  } catch (...) {
    // Destruction never throws; close() already recorded what went wrong.
  }
}

groveResult_t Comm::errorState(std::string* text) const {
  std::lock_guard<std::mutex> lock(errorMu_);
  const groveResult_t e = error_.load();
  // A rank that has made no call since a peer died or revoked the
  // communicator learns it here too, not only at its next call.
  if (e == groveSuccess && abort_.raised()) {
    if (text != nullptr) *text = abort_.reason();
    return groveRemoteError;
  }
  if (text != nullptr) *text = errorText_;
  return e;
}

void Comm::checkUsable() const {
  // The common case, no error: no lock, no copy of the text.
  if (error_.load(std::memory_order_acquire) == groveSuccess) {
    if (abort_.raised()) throw Error(groveRemoteError, abort_.reason());
    if (suspended_.load(std::memory_order_acquire))
      throw Error(groveInvalidUsage, "communicator is suspended; resume it first");
    return;
  }
  std::string text;
  groveResult_t e = errorState(&text);
  if (e != groveSuccess)
    throw Error(e, "communicator is in an error state (" + text + "); destroy or abort it");
  if (abort_.raised()) throw Error(groveRemoteError, abort_.reason());
}

// Runs fn; on failure records the error, tells the other ranks, and rethrows.
// Every failure does: one that is not a grove error (out of memory in the
// middle of a call) leaves this rank's streams out of step with its peers'
// as much as any other.
template <typename Fn>
void Comm::guarded(const char* what, Fn&& fn) {
  checkUsable();
  try {
    fn();
  } catch (const Error& e) {
    failCall(what, e.code(), e.what());
  } catch (const std::bad_alloc&) {
    failCall(what, groveSystemError, "out of memory");
  } catch (const std::exception& e) {
    failCall(what, groveInternalError, std::string("internal error: ") + e.what());
  } catch (...) {
    failCall(what, groveInternalError, "unknown internal error");
  }
}

void Comm::failCall(const char* what, groveResult_t code, const std::string& seenHere) {
  bool remote = abort_.raised();
  if (!remote && code == groveRemoteError) remote = abort_.waitRaised(kCauseGraceSec);
  // The job's notice names the cause; what this rank saw, if it differs, follows it.
  std::string seen = seenHere;
  // A wait that ran out (or a link that broke) with no notice from the job:
  // ask every rank where it is before the job ends (core/hang_doctor.h).
  if (!remote && code == groveRemoteError) seen += doctorSuffix(&remote);
  std::string text = std::string(what) + " failed on rank " + std::to_string(rank_) + ": ";
  if (remote && seen.compare(0, abort_.reason().size(), abort_.reason()) != 0)
    text += abort_.reason() + " (seen here as: " + seen + ")";
  else
    text += seen;
  {
    std::lock_guard<std::mutex> lock(errorMu_);
    if (error_ == groveSuccess) {
      error_ = code == groveInvalidArgument ? groveInternalError : code;
      errorText_ = text;
    }
  }
  abort_.raise(text);
  if (!remote && bootstrap_) bootstrap_->abort(text);
  GROVE_WARN(log::kColl, "%s", text.c_str());
  throw Error(code, text);
}

void Comm::checkCall(const plan::CollArgs& args) {
  if (options_.checkCalls)
    guarded(plan::collName(args.coll),
            [&] { checkCollectiveCall(args, ++checkSeq_, nranks_, bootstrapAllGather()); });
}

plan::P2POp p2pOpOf(const P2PCall& call, uint32_t extraIndex) {
  plan::P2POp op;
  op.isSend = call.isSend;
  op.peer = call.peer;
  op.bytes = call.bytes;
  op.buf.buf = plan::Buf::kExtra;
  op.buf.index = extraIndex;
  return op;
}

std::function<std::vector<uint8_t>(const void*, size_t)> Comm::bootstrapAllGather() {
  return [this](const void* d, size_t n) { return bootstrap_->allGather(d, n); };
}

void Comm::runGuarded(const char* what, const std::function<void()>& fn) { guarded(what, fn); }

void* Comm::scratch(size_t bytes) {
  if (scratchStore_.size() < bytes) scratchStore_.resize(bytes);
  return scratchStore_.data();
}

Comm::Tracked::Tracked(CallTracker* t, exec::CallTag& call) : t(t) {
  call.seq = static_cast<uint8_t>(t->begin(call));
}
Comm::Tracked::~Tracked() { t->end(); }

void Comm::collective(const plan::CollArgs& args, const void* sendbuff, void* recvbuff,
                      void* stream) {
  exec::CallTag tag = exec::callTagOf(args, rank_);
  // A call refused here (a suspended communicator) is not counted: the
  // ranks' collective numbers must stay alike (core/call_board.h; the tags
  // carry them, exec/call_tag.h).
  checkUsable();
  if (device_) {  // checks and tracks the call
    deviceGroup({DeviceCollective{args, sendbuff, recvbuff}}, {}, stream);
    return;
  }
  Tracked tracked(tracker_.get(), tag);
  checkCall(args);
  if (selector_->eager(args)) {
    guarded(plan::collName(args.coll), [&] {
      GROVE_INFO(log::kColl, "%s count %zu %s %s root %d in-place %d algo eager transport shm",
                 plan::collName(args.coll), static_cast<size_t>(args.count), dtypeName(args.dtype),
                 opName(args.op), args.root, args.inPlace ? 1 : 0);
      connections_->eager(selector_->eagerMaxBytes(), options_.tagCalls)
          .run(args, sendbuff, recvbuff, wait_, tag.seq);
      checkRootOnBoard(args);
    });
    return;
  }
  guarded(plan::collName(args.coll), [&] {
    uint64_t bytes = plan::messageBytes(args);
    plan::Selection sel = selector_->select(args.coll, bytes);
    std::shared_ptr<const plan::Program> shared = cache_->get(sel.algo, args, sel.params);
    const plan::Program& program = *shared;
    GROVE_INFO(log::kColl,
               "%s count %zu %s %s root %d bytes %zu in-place %d algo %s channels %d transport %s",
               plan::collName(args.coll), static_cast<size_t>(args.count), dtypeName(args.dtype),
               opName(args.op), args.root, static_cast<size_t>(bytes), args.inPlace ? 1 : 0,
               program.algo.c_str(), sel.params.nChannels, connections_->summary().c_str());
    exec::LoweredProgram* lowered = nullptr;
    exec::LinkTable& links = connections_->ensure(shared, &lowered);
    exec::Buffers buffers;
    buffers.input = sendbuff;
    buffers.output = recvbuff;
    buffers.scratch = scratch(program.scratchBytes);
    exec::ReduceSpec spec{args.dtype, args.op, nranks_};
    exec::runProgram(program, buffers, spec, links, wait_, lowered,
                     options_.tagCalls ? &tag : nullptr);
    checkRootOnBoard(args);
  });
}

void checkSelfPairs(const std::vector<P2PCall>& calls, int rank) {
  std::vector<size_t> sends, recvs;  // bytes, in call order
  for (const P2PCall& c : calls)
    if (c.peer == rank) (c.isSend ? sends : recvs).push_back(c.bytes);
  if (sends.size() != recvs.size())
    throwInvalidUsage("a send to self needs a receive from self in the same group (this one has " +
                      std::to_string(sends.size()) + " sends to self and " +
                      std::to_string(recvs.size()) + " receives from self)");
  for (size_t i = 0; i < sends.size(); ++i)
    if (sends[i] != recvs[i])
      throwInvalidUsage("send to self and receive from self differ in size (" +
                        std::to_string(sends[i]) + " and " + std::to_string(recvs[i]) + " bytes)");
}

uint8_t batchType(const std::vector<P2PCall>& calls) {
  uint8_t type = exec::kMixedTypes;
  for (size_t i = 0; i < calls.size(); ++i) {
    const auto t = static_cast<uint8_t>(calls[i].dtype);
    if (i == 0) type = t;
    if (t != type) return exec::kMixedTypes;
  }
  return type;
}

void Comm::pointToPoint(const std::vector<P2PCall>& calls, groveDataType_t dtype, void* stream) {
  if (device_) {
    deviceGroup({}, calls, stream);
    return;
  }
  // The batch's one data type, checked against the peer's (call_tag.h).
  exec::CallTag tag = exec::p2pTagOf(rank_, batchType(calls));
  checkUsable();
  // Sends to self pair with receives from self in call order: plain copies.
  // groupEnd checked the pairs before the group's work started; checked again
  // here, outside guarded(), a refusal still leaves the communicator as it was.
  checkSelfPairs(calls, rank_);
  std::vector<const P2PCall*> selfSends, selfRecvs;
  for (const P2PCall& c : calls)
    if (c.peer == rank_) (c.isSend ? selfSends : selfRecvs).push_back(&c);
  Tracked tracked(tracker_.get(), tag);
  guarded("send/recv", [&] {
    std::vector<plan::P2POp> ops;
    exec::Buffers buffers;
    for (const P2PCall& c : calls) {
      if (c.peer == rank_) continue;
      ops.push_back(p2pOpOf(c, static_cast<uint32_t>(buffers.extra.size())));
      buffers.extra.push_back(c.buffer);
    }
    for (size_t i = 0; i < selfSends.size(); ++i)
      std::memmove(selfRecvs[i]->buffer, selfSends[i]->buffer, selfSends[i]->bytes);
    if (ops.empty()) return;
    plan::Program program = plan::buildP2P(ops, rank_, nranks_);
    GROVE_INFO(log::kP2p, "send/recv group of %zu ops, transport %s", ops.size(),
               connections_->summary().c_str());
    exec::LinkTable& links = connections_->ensure(program);
    exec::ReduceSpec spec{dtype, groveSum, nranks_};
    exec::runProgram(program, buffers, spec, links, wait_, nullptr,
                     options_.tagCalls ? &tag : nullptr);
  });
}

std::unique_ptr<Comm> Comm::split(int color, int key, const CommOptions& options) {
  groveUniqueId id{};
  int numMembers = 0, newRank = -1;
  guarded("groveCommSplit", [&] {
    struct Entry {
      int32_t color, key, rank;
    };
    Entry mine{color < 0 ? -1 : color, key, rank_};
    std::vector<uint8_t> all = bootstrap_->allGather(&mine, sizeof(mine));
    std::vector<Entry> members;
    for (int r = 0; r < nranks_; ++r) {
      Entry e;
      std::memcpy(&e, all.data() + r * sizeof(Entry), sizeof(Entry));
      if (color >= 0 && e.color == mine.color) members.push_back(e);
    }
    std::stable_sort(members.begin(), members.end(), [](const Entry& a, const Entry& b) {
      return a.key != b.key ? a.key < b.key : a.rank < b.rank;
    });
    for (size_t i = 0; i < members.size(); ++i)
      if (members[i].rank == rank_) newRank = static_cast<int>(i);
    if (newRank == 0) encodeUniqueId(makeUniqueId(/*ignoreEnv=*/true), &id);
    std::vector<uint8_t> ids = bootstrap_->allGather(&id, sizeof(id));
    if (color < 0) return;
    std::memcpy(&id, ids.data() + members[0].rank * sizeof(id), sizeof(id));
    numMembers = static_cast<int>(members.size());
  });
  if (color < 0) return nullptr;
  // The child is made outside guarded(): what fails there (a setting its
  // members disagree on, a member that never comes) fails the split on the
  // child's members and leaves the parent as it was.
  return std::make_unique<Comm>(decodeUniqueId(id), numMembers, newRank, options);
}

void Comm::abort(const std::string& why) {
  // The peers hear of it first: the signal (watched by the device path)
  // and the device abort let a stream-tape engine's waiting streams run on,
  // and a peer must not take what they then send for a finished call.
  if (bootstrap_) bootstrap_->abort(why);
  abort_.raise(why);
  {
    std::lock_guard<std::mutex> lock(errorMu_);
    if (error_ == groveSuccess) {
      error_ = groveInvalidUsage;
      errorText_ = "communicator was aborted";
    }
  }
  if (device_) device_->abort();
  // Running work sees the signal at its next wait; give it a moment to leave.
  sequencer_.drainFor(std::min(options_.timeoutSec, 5.0));
  closed_ = true;
  rma_.reset();
  device_.reset();  // waits (briefly) for device launches to see the abort flag
  bootstrap_.reset();
}

const char* Comm::drainWork() {
  const double timeout = options_.timeoutSec > 0 ? options_.timeoutSec : 1e9;
  if (!sequencer_.drainFor(timeout)) return "queued work";
  if (device_ && !device_->drain(timeout)) return "enqueued device work";
  return nullptr;
}

void Comm::close() {
  if (closed_) return;
  closed_ = true;
  if (drainWork() != nullptr) {
    abort_.raise("communicator destroyed while work was still pending");
    if (device_) device_->abort();
    sequencer_.drainFor(5.0);
  }
  rma_.reset();     // stops the one-sided progress thread before its links go
  device_.reset();  // closes the device rings before the host links the proxy uses
  if (bootstrap_) bootstrap_->close();
}

}  // namespace grove::core
