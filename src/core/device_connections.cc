#include "core/device_connections.h"

#include <unistd.h>

#include <cstring>
#include <set>

#include "base/error.h"
#include "base/log.h"
#include "core/bootstrap.h"
#include "core/engine_choice.h"
#include "grove_build_info.h"
#include "transports/registry.h"

#if GROVE_HAVE_CUDA
#include "exec/cuda/stream_exec.h"
#endif

namespace grove::core {

using transport::DeviceTransport;
using transport::DevRing;
using transport::LinkKey;
using transport::RingExport;

uint64_t deviceRingCapacity(size_t bufferBytes, uint64_t chunkBytes) {
  const uint64_t a = transport::kRingCapacityAlign;
  uint64_t want = bufferBytes > chunkBytes + 64 ? bufferBytes : chunkBytes + 64;
  return (want + a - 1) / a * a;
}

transport::DevicePeer localDevicePeer(int rank, int cudaDevice) {
  transport::DevicePeer p;
  p.rank = rank;
  p.pid = static_cast<int32_t>(getpid());
  p.hostHash = localHostHash();
  if (cudaDevice >= 0 && !transport::describeLocalDevice(p, cudaDevice)) p.cudaDevice = cudaDevice;
#if GROVE_HAVE_CUDA
  if (cudaDevice >= 0 && exec::cuda::streamTapesSupported(cudaDevice, nullptr))
    p.flags |= transport::kDevicePeerStreamOps;
  if (cudaDevice >= 0 && mpsDaemonRunning()) p.flags |= transport::kDevicePeerMps;
#endif
  if (cudaDevice < 0) p.flags |= transport::kDevicePeerStreamOps;  // the emulation runs tapes
  return p;
}

std::vector<transport::DevicePeer> gatherDevicePeers(const transport::DevicePeer& self, int nranks,
                                                     const AllGatherFn& allGather) {
  const std::vector<uint8_t> all = allGather(&self, sizeof(self));
  if (all.size() != sizeof(self) * static_cast<size_t>(nranks))
    throwInternalError("device peers: all-gather returned " + std::to_string(all.size()) +
                       " bytes for " + std::to_string(nranks) + " ranks");
  std::vector<transport::DevicePeer> peers(nranks);
  for (int r = 0; r < nranks; ++r) {
    std::memcpy(&peers[r], all.data() + r * sizeof(self), sizeof(self));
    if (peers[r].rank != r)
      throwInternalError("device peers: entry " + std::to_string(r) + " came from rank " +
                         std::to_string(peers[r].rank));
  }
  return peers;
}

namespace {

// One transport per device row of the registry, highest priority first.
std::vector<std::unique_ptr<DeviceTransport>> makeTransports(const transport::DeviceContext& ctx,
                                                             const DeviceLinkOptions& options,
                                                             const WaitContext& wait) {
  std::vector<const transport::TransportEntry*> rows;
  for (const transport::TransportEntry& e : transport::registry())
    if (e.has(transport::kDeviceRings)) rows.push_back(&e);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto* a, const auto* b) { return a->priority > b->priority; });
  transport::DeviceOpenArgs args;
  args.emulate = options.emulate;
  args.disableP2P = options.disableP2P;
  args.wait = wait;
  std::vector<std::unique_ptr<DeviceTransport>> out;
  for (const transport::TransportEntry* e : rows)
    if (auto t = e->makeDevice(ctx, args)) out.push_back(std::move(t));
  return out;
}

}  // namespace

DeviceConnections::DeviceConnections(transport::DeviceContext ctx, HostLinks hostLinks,
                                     const WaitContext& wait, const DeviceLinkOptions& options)
    : DeviceConnections(ctx, std::move(hostLinks), wait, options,
                        makeTransports(ctx, options, wait)) {}

DeviceConnections::DeviceConnections(transport::DeviceContext ctx, HostLinks hostLinks,
                                     const WaitContext& wait, const DeviceLinkOptions& options,
                                     std::vector<std::unique_ptr<DeviceTransport>> transports)
    : ctx_(std::move(ctx)),
      hostLinks_(std::move(hostLinks)),
      wait_(wait),
      capacity_(options.ringCapacity),
      emulated_(options.emulate),
      transports_(std::move(transports)) {
  transport::checkDeviceContext(ctx_, "device connections");
  if (!hostLinks_) throwInvalidArgument("device connections: no host links for the ring exchange");
  if (capacity_ == 0 || capacity_ % transport::kRingCapacityAlign != 0)
    throwInvalidArgument("device connections: ring capacity " + std::to_string(capacity_) +
                         " is not a positive multiple of " +
                         std::to_string(transport::kRingCapacityAlign));
  choose();
}

DeviceConnections::~DeviceConnections() = default;

void DeviceConnections::choose() {
  byPeer_.assign(ctx_.nranks, nullptr);
  std::map<std::string, int> counts;
  for (int peer = 0; peer < ctx_.nranks; ++peer) {
    if (peer == ctx_.rank) continue;
    for (auto& t : transports_)
      if (t && t->canConnect(peer)) {
        byPeer_[peer] = t.get();
        break;
      }
    if (byPeer_[peer] == nullptr) {
      const bool here = ctx_.peers[peer].hostHash == ctx_.peers[ctx_.rank].hostHash;
      throwInvalidUsage("no device transport can reach rank " + std::to_string(peer) +
                        " from rank " + std::to_string(ctx_.rank) +
                        (here ? " on the same host" : " on another host"));
    }
    ++counts[byPeer_[peer]->name()];
  }
  for (const auto& [name, n] : counts) summary_ += (summary_.empty() ? "" : "+") + name;
  if (summary_.empty()) summary_ = "none";
  if (emulated_) summary_ += " (emulated)";
  for (const auto& [name, n] : counts)
    GROVE_INFO(log::kP2p, "rank %d reaches %d peer(s) over %s", ctx_.rank, n, name.c_str());
}

const char* DeviceConnections::transportName(int peer) const {
  if (peer < 0 || peer >= ctx_.nranks || peer == ctx_.rank) return "";
  return byPeer_[peer] != nullptr ? byPeer_[peer]->name() : "";
}

void DeviceConnections::checkPeer(int peer, const char* what) const {
  if (peer < 0 || peer >= ctx_.nranks || peer == ctx_.rank)
    throwInternalError(std::string("device connections: a device program ") + what + " rank " +
                       std::to_string(peer) + " (rank " + std::to_string(ctx_.rank) + " of " +
                       std::to_string(ctx_.nranks) + ")");
}

DeviceTransport& DeviceConnections::transportFor(int peer, const char* what) const {
  checkPeer(peer, what);
  if (byPeer_[peer] == nullptr)
    throwInternalError("device connections: no device transport for rank " + std::to_string(peer));
  return *byPeer_[peer];
}

// One send/recv program on the control channel: to each peer the exports of
// the rings this rank made for it, from each peer the exports of the rings
// this rank sends on.
void DeviceConnections::exchange(const std::map<int, std::vector<RingExport>>& outgoing,
                                 std::map<int, std::vector<RingExport>>& incoming) {
  std::vector<plan::P2POp> ops;
  exec::Buffers buffers;
  for (const auto& [peer, exports] : outgoing) {
    const uint32_t slot = static_cast<uint32_t>(buffers.extra.size());
    buffers.extra.push_back(const_cast<RingExport*>(exports.data()));
    ops.push_back({true, peer, exports.size() * sizeof(RingExport), {plan::Buf::kExtra, slot, 0}});
  }
  for (auto& [peer, exports] : incoming) {
    const uint32_t slot = static_cast<uint32_t>(buffers.extra.size());
    buffers.extra.push_back(exports.data());
    ops.push_back({false, peer, exports.size() * sizeof(RingExport), {plan::Buf::kExtra, slot, 0}});
  }
  plan::Program program = plan::buildP2P(ops, ctx_.rank, ctx_.nranks);
  for (auto& phase : program.phases)
    for (auto& lane : phase.lanes)
      for (auto& step : lane.steps) step.channel = kDeviceControlChannel;
  program.algo = "device-ring-exchange";
  exec::ReduceSpec spec;
  spec.dtype = groveUint8;
  spec.nranks = ctx_.nranks;
  exec::runProgram(program, buffers, spec, hostLinks_(program), wait_);
}

// Bridged links (the proxy): rings in local memory, pumped over host links
// of their own (channel kDeviceProxyChannelBase + the device channel); no
// exchange.
void DeviceConnections::openBridged(const std::set<LinkKey>& sends,
                                    const std::set<LinkKey>& recvs) {
  auto hostKey = [](const LinkKey& k) {
    return LinkKey{k.peer, kDeviceProxyChannelBase + k.channel, 0};
  };
  plan::Program links;
  links.algo = "device-proxy-links";
  plan::Lane lane;
  std::set<LinkKey> seenS, seenR;
  for (const auto* keys : {&sends, &recvs})
    for (const LinkKey& k : *keys) {
      const bool send = keys == &sends;
      if (k.channel < 0 || !(send ? seenS : seenR).insert(hostKey(k)).second)
        throwInvalidUsage("device proxy: rank " + std::to_string(k.peer) + " channel " +
                          std::to_string(k.channel) +
                          ": several routes (or a negative channel) to a rank on another host");
      plan::Step st;
      st.kind = send ? plan::StepKind::kSend : plan::StepKind::kRecv;
      (send ? st.sendPeer : st.recvPeer) = k.peer;
      st.channel = hostKey(k).channel;
      lane.steps.push_back(st);
    }
  links.phases.push_back(plan::Phase{{lane}});
  exec::LinkTable& table = hostLinks_(links);
  for (const LinkKey& k : sends)
    sends_[k] =
        transportFor(k.peer, "sends to").bridgeSend(k, capacity_, *table.sendLink(hostKey(k)).half);
  for (const LinkKey& k : recvs)
    recvs_[k] = transportFor(k.peer, "receives from")
                    .bridgeRecv(k, capacity_, *table.recvLink(hostKey(k)).half);
}

// Links of this host: receivers make the rings, the exports travel to the
// senders, which map them.
void DeviceConnections::openExported(const std::set<LinkKey>& sends,
                                     const std::set<LinkKey>& recvs) {
  std::map<int, std::vector<RingExport>> outgoing, incoming;
  try {
    for (const LinkKey& k : recvs) {
      RingExport exp;
      recvs_[k] = transportFor(k.peer, "receives from").createRecv(k, capacity_, exp);
      outgoing[k.peer].push_back(exp);
    }
    RingExport blank;
    blank.magic = 0;  // an export the exchange did not fill is rejected as garbled
    for (const LinkKey& k : sends) incoming[k.peer].push_back(blank);
    exchange(outgoing, incoming);
  } catch (...) {
    // The senders never got these rings: forget them (their transport frees them).
    for (const LinkKey& k : recvs) recvs_.erase(k);
    throw;
  }
  std::map<int, size_t> next;
  for (const LinkKey& k : sends) {
    const RingExport& exp = incoming[k.peer][next[k.peer]++];
    sends_[k] = transportFor(k.peer, "sends to").openSend(k, exp);
  }
}

DeviceRingTables DeviceConnections::ensure(const exec::dev::DevProgram& program) {
  // Missing links, sorted by (peer, channel, route): both ends list a pair's
  // links in the same order.
  std::set<LinkKey> newRecvs, newSends, bridgedRecvs, bridgedSends;
  for (const LinkKey& k : program.recvKeys)
    if (!recvs_.count(k))
      (transportFor(k.peer, "receives from").bridged() ? bridgedRecvs : newRecvs).insert(k);
  for (const LinkKey& k : program.sendKeys)
    if (!sends_.count(k))
      (transportFor(k.peer, "sends to").bridged() ? bridgedSends : newSends).insert(k);
  if (!bridgedSends.empty() || !bridgedRecvs.empty()) openBridged(bridgedSends, bridgedRecvs);
  if (!newSends.empty() || !newRecvs.empty()) openExported(newSends, newRecvs);
  if (!newSends.empty() || !newRecvs.empty() || !bridgedSends.empty() || !bridgedRecvs.empty())
    GROVE_TRACE(log::kP2p,
                "rank %d opened %zu send and %zu receive device rings (%zu, %zu bridged)",
                ctx_.rank, newSends.size() + bridgedSends.size(),
                newRecvs.size() + bridgedRecvs.size(), bridgedSends.size(), bridgedRecvs.size());
  DeviceRingTables tables;
  tables.sends.reserve(program.sendKeys.size());
  tables.recvs.reserve(program.recvKeys.size());
  for (const LinkKey& k : program.sendKeys) tables.sends.push_back(sends_.at(k));
  for (const LinkKey& k : program.recvKeys) tables.recvs.push_back(recvs_.at(k));
  return tables;
}

std::string DeviceConnections::transportError() const {
  for (const auto& t : transports_)
    if (t)
      if (std::string e = t->error(); !e.empty()) return std::string(t->name()) + ": " + e;
  return {};
}

}  // namespace grove::core
