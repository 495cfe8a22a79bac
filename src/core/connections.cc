#include "core/connections.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "base/log.h"

namespace grove::core {

namespace {

std::vector<std::string> modeNames(const std::string& mode) {
  std::vector<std::string> names;
  size_t at = 0;
  while (at <= mode.size()) {
    size_t comma = mode.find(',', at);
    if (comma == std::string::npos) comma = mode.size();
    if (comma > at) names.push_back(mode.substr(at, comma - at));
    at = comma + 1;
  }
  return names;
}

bool enabled(const std::string& mode, const transport::TransportEntry& e) {
  if (!e.has(transport::kByteStreams)) return false;  // device rings: DeviceConnections
  if (mode == "auto") return e.priority > 0;
  for (const std::string& n : modeNames(mode))
    if (n == e.name) return true;
  return false;
}

}  // namespace

std::string parseTransportMode(const std::string& text, const char* source) {
  std::string mode;
  for (char c : text)
    if (c != ' ' && c != '\t')
      mode += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (mode.empty() || mode == "auto") return "auto";
  if (mode == "tcp") mode = "socket";  // the older name
  for (const std::string& n : modeNames(mode)) {
    const transport::TransportEntry* e = transport::findTransport(n);
    if (e == nullptr || !e->has(transport::kByteStreams))
      throwInvalidArgument(
          std::string(source) + " '" + text + "' is not a host transport (auto, or of " +
          transport::transportNames(transport::kByteStreams) + ", separated by commas)" +
          (e != nullptr ? std::string("; ") + e->name +
                              " makes device rings, which a CUDA communicator "
                              "chooses itself"
                        : std::string()));
  }
  if (modeNames(mode).empty())
    throwInvalidArgument(std::string(source) + " '" + text + "' names no transport");
  return mode;
}

std::vector<OpenedTransport> openTransports(const std::string& mode,
                                            const transport::OpenArgs& args,
                                            transport::PeerInfo* self) {
  transport::sealRegistry();  // the slots below are this process's for good
  const auto& rows = transport::registry();
  std::vector<OpenedTransport> opened;
  for (size_t slot = 0; slot < rows.size(); ++slot) {
    if (!enabled(mode, rows[slot])) continue;
    transport::OpenArgs a = args;
    a.named = mode != "auto";
    std::unique_ptr<transport::Endpoint> e = rows[slot].open(a);
    if (!e) {
      if (a.named)
        throwInvalidArgument(std::string("GROVE_TRANSPORT names ") + rows[slot].name +
                             ", which cannot work on this host (see the log)");
      continue;
    }
    self->addresses[slot] = e->address();
    opened.push_back({static_cast<int>(slot), std::move(e)});
  }
  return opened;
}

Connections::Connections(const transport::Context& ctx, std::vector<OpenedTransport> opened,
                         const std::string& mode, RouteResolver routes)
    : byPeer_(ctx.nranks, nullptr),
      resolver_(std::move(routes)),
      rank_(ctx.rank),
      nranks_(ctx.nranks) {
  const auto& rows = transport::registry();
  std::vector<const transport::TransportEntry*> entries;
  for (OpenedTransport& o : opened) {
    entries.push_back(&rows.at(o.slot));
    transports_.push_back(
        rows[o.slot].make(transport::contextForSlot(ctx, o.slot), std::move(o.endpoint)));
  }
  std::vector<int> peersOf(transports_.size(), 0);
  const transport::PeerInfo& me = ctx.peers[ctx.rank];
  const LinkTraits* slowest = nullptr;
  for (int peer = 0; peer < ctx.nranks; ++peer) {
    if (peer == ctx.rank) continue;
    const transport::PeerInfo& them = ctx.peers[peer];
    for (size_t i = 0; i < transports_.size() && byPeer_[peer] == nullptr; ++i) {
      const int slot = opened[i].slot;
      if (!entries[i]->canConnect({me, me.addresses[slot]}, {them, them.addresses[slot]}) ||
          !transports_[i]->canConnect(peer))
        continue;
      byPeer_[peer] = transports_[i].get();
      ++peersOf[i];
      const LinkTraits& t = entries[i]->traits;
      if (slowest == nullptr || t.stepOverheadUs > slowest->stepOverheadUs) slowest = &t;
      slotLinks_ = slotLinks_ && t.slotLinks;
    }
    if (byPeer_[peer] == nullptr)
      throwInvalidUsage("no enabled transport (GROVE_TRANSPORT=" + mode + ") can reach rank " +
                        std::to_string(peer) + " (host " + them.hostName + ") from rank " +
                        std::to_string(ctx.rank) + " (host " + me.hostName + ")");
  }
  if (slowest != nullptr)
    traits_ = *slowest;
  else
    traits_ = rows.front().traits;
  std::string counts;
  for (size_t i = 0; i < transports_.size(); ++i) {
    if (peersOf[i] == 0) continue;
    summary_ += (summary_.empty() ? "" : "+") + std::string(entries[i]->name);
    counts +=
        (counts.empty() ? "" : ", ") + std::to_string(peersOf[i]) + " over " + entries[i]->name;
  }
  if (summary_.empty()) summary_ = "none";
  GROVE_INFO(log::kInit, "rank %d reaches its peers: %s", ctx.rank,
             counts.empty() ? "no peers" : counts.c_str());
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

transport::OneSided* Connections::oneSidedTo(int peer) const {
  transport::Transport* t = peer == rank_ ? nullptr : transportFor(peer);
  return t != nullptr ? t->oneSided() : nullptr;
}

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

int Connections::eagerSlots(int nranks, size_t stride) {
  const size_t perSlot = stride * static_cast<size_t>(std::max(nranks - 1, 1));
  const size_t fit = kEagerBudgetBytes / perSlot;
  return static_cast<int>(std::clamp<size_t>(fit, kEagerMinSlots, kEagerMaxSlots));
}

exec::EagerCollectives& Connections::openEager(size_t maxBytes, bool tags) {
  if (eager_) throwInternalError("eager slot links are already open with smaller slots");
  if (!slotLinks_) throwInternalError("eager collectives need slot links to every peer");
  const size_t slot = exec::EagerCollectives::slotBytes(maxBytes, tags);
  std::vector<std::unique_ptr<transport::SlotSender>> sends(nranks_);
  std::vector<std::unique_ptr<transport::SlotReceiver>> recvs(nranks_);
  // Every peer is on a transport with slot links; each opens its peers'.
  for (const auto& t : transports_) {
    std::vector<int> peers;
    for (int p = 0; p < nranks_; ++p)
      if (p != rank_ && byPeer_[p] == t.get()) peers.push_back(p);
    if (peers.empty()) continue;
    std::vector<std::unique_ptr<transport::SlotSender>> s;
    std::vector<std::unique_ptr<transport::SlotReceiver>> r;
    if (!t->establishSlots(peers, slot, eagerSlots(nranks_, t->slotStride(slot)), s, r))
      throwInternalError(std::string("the ") + t->name() + " transport opened no slot links");
    for (size_t i = 0; i < peers.size(); ++i) {
      sends[peers[i]] = std::move(s[i]);
      recvs[peers[i]] = std::move(r[i]);
    }
  }
  eager_ = std::make_unique<exec::EagerCollectives>(rank_, nranks_, maxBytes, tags,
                                                    std::move(sends), std::move(recvs));
  return *eager_;
}

std::unique_ptr<Connections::RoutedLinks> Connections::open(const plan::Program& program) {
  std::vector<transport::LinkKey> sends, recvs;
  exec::collectLinks(program, sends, recvs);
  // Planned routes over routable transports get their own connections (see the file comment).
  std::unique_ptr<RoutedLinks> view;
  if (resolver_)
    for (const plan::LinkRoute& lr : program.routes) {
      if (lr.peer < 0 || lr.peer >= static_cast<int>(byPeer_.size()) ||
          byPeer_[lr.peer] == nullptr || !byPeer_[lr.peer]->routable())
        continue;
      const PlannedRoute pr = resolver_(lr);
      if (pr.id == 0) continue;
      if (!view) view = std::make_unique<RoutedLinks>(table_);
      (lr.send ? view->sends_ : view->recvs_)[{lr.peer, lr.channel}] = pr.id;
      if (lr.send) byPeer_[lr.peer]->addRoute(lr.peer, pr.id, pr.addresses);
    }
  if (view) {
    for (auto& k : sends) k = RoutedLinks::routed(view->sends_, k);
    for (auto& k : recvs) k = RoutedLinks::routed(view->recvs_, k);
  }
  // Fixed transport order: the registry's (see the file comment).
  for (const auto& owned : transports_) {
    transport::Transport* t = owned.get();
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
