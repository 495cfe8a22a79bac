#include "core/connections.h"

#include "base/error.h"
#include "base/log.h"
#include "transports/shm/shm_transport.h"

namespace grove::core {

Connections::Connections(const transport::Context& ctx, TransportMode mode,
                         std::unique_ptr<transport::Transport> socket)
    : socket_(std::move(socket)), byPeer_(ctx.nranks, nullptr) {
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

Connections::~Connections() = default;

transport::Transport* Connections::transportFor(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(byPeer_.size()) || byPeer_[peer] == nullptr)
    throwInternalError("no transport for rank " + std::to_string(peer));
  return byPeer_[peer];
}

void Connections::ensure(const std::shared_ptr<const plan::Program>& program) {
  if (ready_.count(program) != 0) return;
  ensure(*program);
  if (ready_.size() >= 1024) ready_.clear();  // bound the memo; a miss only re-checks
  ready_.insert(program);
}

void Connections::ensure(const plan::Program& program) {
  std::vector<transport::LinkKey> sends, recvs;
  exec::collectLinks(program, sends, recvs);
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
}

}  // namespace grove::core
