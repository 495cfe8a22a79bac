#include "core/connections.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "transports/shm/shm_slots.h"
#include "transports/shm/shm_transport.h"

namespace grove::core {

Connections::Connections(const transport::Context& ctx, TransportMode mode,
                         std::unique_ptr<transport::Transport> socket, RouteResolver routes)
    : socket_(std::move(socket)),
      byPeer_(ctx.nranks, nullptr),
      resolver_(std::move(routes)),
      rank_(ctx.rank),
      nranks_(ctx.nranks) {
  if (mode != TransportMode::kSocket) shm_ = std::make_unique<transport::ShmTransport>(ctx);
  int shmPeers = 0;
  for (int peer = 0; peer < ctx.nranks; ++peer) {
    if (peer == ctx.rank) continue;
    if (shm_ && shm_->canConnect(peer)) {
      byPeer_[peer] = shm_.get();
      ++shmPeers;
    } else if (mode == TransportMode::kShm) {
      throwInvalidUsage("GROVE_TRANSPORT=shm, but rank " + std::to_string(peer) + " (host " +
                        ctx.peers[peer].hostName + ") is not on this host");
    } else if (socket_->canConnect(peer)) {
      byPeer_[peer] = socket_.get();
      ++socketPeers_;
    } else {
      throwInvalidUsage("no transport can reach rank " + std::to_string(peer));
    }
  }
  summary_ = shmPeers > 0 && socketPeers_ > 0 ? "shm+socket"
             : socketPeers_ > 0               ? "socket"
             : shmPeers > 0                   ? "shm"
                                              : "none";
  GROVE_INFO(log::kInit, "rank %d reaches %d peers over shm and %d over socket", ctx.rank,
             shmPeers, socketPeers_);
}

// The table a program with planned routes runs on: its (peer, channel)
// links, looked up under the route ids they were opened with.
class Connections::RoutedLinks final : public exec::LinkTable {
 public:
  explicit RoutedLinks(exec::MapLinkTable& table) : table_(table) {}
  exec::SendLink& sendLink(const transport::LinkKey& key) override {
    return table_.sendLink(routed(sends_, key));
  }
  exec::RecvLink& recvLink(const transport::LinkKey& key) override {
    return table_.recvLink(routed(recvs_, key));
  }
  std::map<std::pair<int, int>, uint32_t> sends_, recvs_;  // (peer, channel) -> route id

  /// `key` under the route id `ids` gives its (peer, channel), if any.
  static transport::LinkKey routed(const std::map<std::pair<int, int>, uint32_t>& ids,
                                   transport::LinkKey key) {
    auto it = ids.find({key.peer, key.channel});
    if (it != ids.end()) key.route = it->second;
    return key;
  }

 private:
  exec::MapLinkTable& table_;
};

Connections::~Connections() = default;

transport::Transport* Connections::transportFor(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(byPeer_.size()) || byPeer_[peer] == nullptr)
    throwInternalError("no transport for rank " + std::to_string(peer));
  return byPeer_[peer];
}

exec::LinkTable& Connections::ensure(const std::shared_ptr<const plan::Program>& program,
                                     exec::LoweredProgram** lowered) {
  auto it = ready_.find(program);
  if (it == ready_.end()) {
    if (ready_.size() >= 1024) ready_.clear();  // bound the memo; a miss only re-checks
    it = ready_.emplace(program, Ready{open(*program), {}}).first;
  }
  if (lowered != nullptr) *lowered = &it->second.lowered;
  if (it->second.view) return *it->second.view;
  return table_;
}

exec::LinkTable& Connections::ensure(const plan::Program& program) {
  oneOff_ = open(program);
  if (oneOff_) return *oneOff_;
  return table_;
}

int Connections::eagerSlots(int nranks, size_t maxBytes) {
  const size_t perSlot =
      transport::shm::slotStrideFor(maxBytes) * static_cast<size_t>(std::max(nranks - 1, 1));
  const size_t fit = kEagerBudgetBytes / perSlot;
  return static_cast<int>(std::clamp<size_t>(fit, kEagerMinSlots, kEagerMaxSlots));
}

exec::EagerCollectives& Connections::openEager(size_t maxBytes, bool tags) {
  if (eager_) throwInternalError("eager slot links are already open with smaller slots");
  if (!shm_ || socketPeers_ > 0)
    throwInternalError("eager collectives need every peer on shared memory");
  std::vector<int> peers;
  for (int p = 0; p < nranks_; ++p)
    if (p != rank_) peers.push_back(p);
  std::vector<std::unique_ptr<transport::SlotSender>> s;
  std::vector<std::unique_ptr<transport::SlotReceiver>> r;
  const size_t slot = exec::EagerCollectives::slotBytes(maxBytes, tags);
  if (!shm_->establishSlots(peers, slot, eagerSlots(nranks_, slot), s, r))
    throwInternalError("the shm transport opened no slot links");
  std::vector<std::unique_ptr<transport::SlotSender>> sends(nranks_);
  std::vector<std::unique_ptr<transport::SlotReceiver>> recvs(nranks_);
  for (size_t i = 0; i < peers.size(); ++i) {
    sends[peers[i]] = std::move(s[i]);
    recvs[peers[i]] = std::move(r[i]);
  }
  eager_ = std::make_unique<exec::EagerCollectives>(rank_, nranks_, maxBytes, tags, std::move(sends),
                                                    std::move(recvs));
  return *eager_;
}

std::unique_ptr<Connections::RoutedLinks> Connections::open(const plan::Program& program) {
  std::vector<transport::LinkKey> sends, recvs;
  exec::collectLinks(program, sends, recvs);
  // Planned routes over sockets get their own connections (see the file comment).
  std::unique_ptr<RoutedLinks> view;
  if (resolver_ && socket_)
    for (const plan::LinkRoute& lr : program.routes) {
      if (lr.peer < 0 || lr.peer >= static_cast<int>(byPeer_.size()) ||
          byPeer_[lr.peer] != socket_.get())
        continue;
      const PlannedRoute pr = resolver_(lr);
      if (pr.id == 0) continue;
      if (!view) view = std::make_unique<RoutedLinks>(table_);
      (lr.send ? view->sends_ : view->recvs_)[{lr.peer, lr.channel}] = pr.id;
      if (lr.send) socket_->addRoute(lr.peer, pr.id, pr.addresses);
    }
  if (view) {
    for (auto& k : sends) k = RoutedLinks::routed(view->sends_, k);
    for (auto& k : recvs) k = RoutedLinks::routed(view->recvs_, k);
  }
  // Fixed transport order: shm first, then socket (see the file comment).
  for (transport::Transport* t : {shm_.get(), socket_.get()}) {
    if (t == nullptr) continue;
    std::vector<transport::LinkKey> s, r;
    for (const auto& k : sends)
      if (!table_.hasSend(k) && transportFor(k.peer) == t) s.push_back(k);
    for (const auto& k : recvs)
      if (!table_.hasRecv(k) && transportFor(k.peer) == t) r.push_back(k);
    if (s.empty() && r.empty()) continue;
    std::vector<std::unique_ptr<transport::SendHalf>> outS;
    std::vector<std::unique_ptr<transport::RecvHalf>> outR;
    t->establish(s, r, outS, outR);
    for (size_t i = 0; i < s.size(); ++i) table_.addSend(s[i], std::move(outS[i]));
    for (size_t i = 0; i < r.size(); ++i) table_.addRecv(r[i], std::move(outR[i]));
    GROVE_TRACE(log::kInit, "opened %zu send and %zu receive links over %s", s.size(), r.size(),
                t->name());
  }
  return view;
}

}  // namespace grove::core
