// Net transport: the byte links (send and receive halves, their set-up)
// over the shared NetCore of net_core.h; one-sided access is in
// net_one_sided.cc. See net_transport.h for how it works.
#include "transports/net/net_transport.h"

#include "transports/net/net_core.h"

namespace grove::transport {

using namespace net;  // NetCore, its links and wire constants (net_core.h)

namespace {

class NetSendHalf final : public SendHalf {
 public:
  NetSendHalf(std::shared_ptr<NetCore> core, uint32_t id)
      : core_(std::move(core)), s_(core_->sendLink(id)) {}
  ~NetSendHalf() override {
    std::lock_guard<std::mutex> lock(core_->mu);
    core_->close(s_);
  }
  size_t reserve(void** ptr) override {
    std::lock_guard<std::mutex> lock(core_->mu);
    // Completions only matter when room or write slots run short: reading
    // the completion queue costs system calls on software providers.
    if (s_.head - s_.credited >= core_->capacity() / 2 || s_.freeOps.size() < kOpsPerLink / 2)
      core_->progress();
    if (s_.closed)
      throw Error(groveRemoteError, "net transport: rank " + std::to_string(s_.key.peer) +
                                        " closed its receiving half of channel " +
                                        std::to_string(s_.key.channel));
    core_->post(s_);
    const uint64_t cap = core_->capacity();
    const uint64_t free = cap - (s_.head - s_.credited);
    const uint64_t off = s_.head % cap;
    *ptr = static_cast<char*>(s_.staging.get()) + off;
    return static_cast<size_t>(std::min(free, cap - off));
  }
  void commit(size_t n) override {
    std::lock_guard<std::mutex> lock(core_->mu);
    s_.head += n;
    core_->post(s_);
  }
  bool flush() override {
    std::lock_guard<std::mutex> lock(core_->mu);
    core_->progress();
    core_->post(s_);
    return s_.posted == s_.head && s_.inFlight == 0;
  }

 private:
  std::shared_ptr<NetCore> core_;
  NetCore::SendLink& s_;
};

class NetRecvHalf final : public RecvHalf {
 public:
  NetRecvHalf(std::shared_ptr<NetCore> core, uint32_t id)
      : core_(std::move(core)), r_(core_->recvLink(id)) {}
  ~NetRecvHalf() override {
    std::lock_guard<std::mutex> lock(core_->mu);
    core_->close(r_);
  }
  size_t peek(const void** ptr) override {
    std::lock_guard<std::mutex> lock(core_->mu);
    if (r_.arrived == r_.consumed) core_->progress();  // nothing landed yet: look
    const uint64_t avail = r_.arrived - r_.consumed;
    if (avail == 0 && r_.closed)
      throw Error(groveRemoteError, "net transport: rank " + std::to_string(r_.key.peer) +
                                        " closed its sending half of channel " +
                                        std::to_string(r_.key.channel) +
                                        " (everything it sent was read)");
    if (avail == 0) {
      core_->credit(r_, true);  // nothing to read: the sender may be waiting for room
      return 0;
    }
    const uint64_t cap = core_->capacity();
    const uint64_t off = r_.consumed % cap;
    *ptr = static_cast<const char*>(r_.ring.get()) + off;
    return static_cast<size_t>(std::min(avail, cap - off));
  }
  void consume(size_t n) override {
    std::lock_guard<std::mutex> lock(core_->mu);
    r_.consumed += n;
    core_->credit(r_, false);
  }

 private:
  std::shared_ptr<NetCore> core_;
  NetCore::RecvLink& r_;
};

std::string linkText(const LinkKey& k) {
  return "rank " + std::to_string(k.peer) + " channel " + std::to_string(k.channel) +
         (k.route ? " route " + std::to_string(k.route) : "");
}

}  // namespace

void NetCore::establish(const std::vector<LinkKey>& sends, const std::vector<LinkKey>& recvs,
                        std::vector<std::unique_ptr<SendHalf>>& outSends,
                        std::vector<std::unique_ptr<RecvHalf>>& outRecvs,
                        const std::shared_ptr<NetCore>& self) {
  std::set<LinkKey> seenS, seenR;
  for (const LinkKey& k : sends)
    if (!reaches(k.peer) || k.channel < 0 || sendOpened_.count(k) || !seenS.insert(k).second)
      throwInvalidArgument("net transport: cannot open send link to " + linkText(k) +
                           " (unreachable or opened twice)");
  for (const LinkKey& k : recvs)
    if (!reaches(k.peer) || k.channel < 0 || recvOpened_.count(k) || !seenR.insert(k).second)
      throwInvalidArgument("net transport: cannot open receive link from " + linkText(k) +
                           " (unreachable or opened twice)");
  if (nextRecv_ + recvs.size() > kMaxLinks || nextSend_ + sends.size() > kMaxLinks)
    throwInvalidUsage("net transport: more than " + std::to_string(kMaxLinks) + " links");
  std::vector<uint32_t> sendIds, recvIds;
  // 1. What waits for no one: each send link's staging ring and its offer,
  //    naming the NICs it will use at both ends.
  for (const LinkKey& k : sends) {
    auto s = std::make_unique<SendLink>();
    s->key = k;
    s->id = nextSend_++;
    const auto [local, remote] = nicsFor(k);
    s->nic = local;
    s->dst = addrOf(local, k.peer, remote);
    s->staging.reset(alignedBuffer(capacity_));
    s->local = nics_[s->nic]->registerMemory(s->staging.get(), capacity_);
    for (auto& op : s->ops) s->freeOps.push_back(&op);
    Control c;
    c.kind = kSendOffer;
    c.channel = k.channel;
    c.route = k.route;
    c.replyLink = s->id;
    c.addr = static_cast<uint64_t>(local);
    c.key = static_cast<uint64_t>(remote);
    sendControl(c, s->nic, s->dst, ctx_.wait);
    sendIds.push_back(s->id);
    sends_[s->id] = std::move(s);
  }
  for (const LinkKey& k : recvs) {
    auto r = std::make_unique<RecvLink>();
    r->key = k;
    r->id = nextRecv_++;
    recvIds.push_back(r->id);
    recvs_[r->id] = std::move(r);
  }
  // 2. The peers' offers: a sender's offer gets this rank's ring, on the
  //    NIC it named, in reply; a receiver's reply completes a send link.
  Waiter waiter(ctx_.wait, "net transport: waiting for peers' link offers");
  size_t missing = sends.size() + recvs.size();
  while (missing > 0) {
    progress();
    size_t now = 0;
    for (uint32_t id : sendIds) {
      SendLink& s = *sends_[id];
      Control c;
      if (s.peerLink == 0 && takeOffer(kRingOffer, {s.key.peer, s.key.channel, s.key.route}, &c)) {
        if (c.value != capacity_)
          throwInvalidUsage("net transport: rank " + std::to_string(s.key.peer) + " has rings of " +
                            std::to_string(c.value) + " bytes, this rank " +
                            std::to_string(capacity_) + " (GROVE_BUFFSIZE differs)");
        s.peerLink = c.replyLink;
        s.remote.remoteBase = c.addr;
        s.remote.key = c.key;
        s.remote.bytes = c.value;
      }
      now += s.peerLink == 0;
    }
    for (uint32_t id : recvIds) {
      RecvLink& r = *recvs_[id];
      Control c;
      if (r.peerLink == 0 && takeOffer(kSendOffer, {r.key.peer, r.key.channel, r.key.route}, &c)) {
        if (c.key >= nics_.size() || c.addr >= static_cast<uint64_t>(peerNics(r.key.peer)))
          throw Error(groveRemoteError, "net transport: rank " + std::to_string(r.key.peer) +
                                            " offered a link on NICs this rank does not know");
        r.nic = static_cast<int>(c.key);
        r.dst = addrOf(r.nic, r.key.peer, static_cast<int>(c.addr));
        r.ring.reset(alignedBuffer(capacity_));
        r.region = nics_[r.nic]->registerMemory(r.ring.get(), capacity_);
        r.peerLink = c.replyLink;
        Control reply;
        reply.kind = kRingOffer;
        reply.channel = r.key.channel;
        reply.route = r.key.route;
        reply.replyLink = r.id;
        reply.addr = r.region.remoteBase;
        reply.key = r.region.key;
        reply.value = capacity_;
        sendControl(reply, r.nic, r.dst, ctx_.wait);
      }
      now += r.peerLink == 0;
    }
    if (now < missing) waiter.progressed();
    missing = now;
    if (missing > 0) waiter.wait();
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    outSends.push_back(std::make_unique<NetSendHalf>(self, sendIds[i]));
    sendOpened_.insert(sends[i]);
  }
  for (size_t i = 0; i < recvs.size(); ++i) {
    outRecvs.push_back(std::make_unique<NetRecvHalf>(self, recvIds[i]));
    recvOpened_.insert(recvs[i]);
  }
}

namespace {

class NetTransport final : public Transport {
 public:
  NetTransport(const Context& ctx, NetEndpoint& ep)
      : core_(std::make_shared<NetCore>(ctx, ep)), oneSided_(makeNetOneSided(*core_)) {}
  OneSided* oneSided() override { return oneSided_.get(); }
  const char* name() const override { return "net"; }
  bool canConnect(int peer) const override { return core_->reaches(peer); }
  bool routable() const override { return true; }
  void addRoute(int peer, uint32_t route, const PeerRoute& addresses) override {
    std::lock_guard<std::mutex> lock(core_->mu);
    core_->addRoute(peer, route, addresses);
  }
  void establish(const std::vector<LinkKey>& sends, const std::vector<LinkKey>& recvs,
                 std::vector<std::unique_ptr<SendHalf>>& outSends,
                 std::vector<std::unique_ptr<RecvHalf>>& outRecvs) override {
    std::lock_guard<std::mutex> lock(core_->mu);
    outSends.clear();
    outRecvs.clear();
    core_->establish(sends, recvs, outSends, outRecvs, core_);
    GROVE_INFO(log::kNet, "rank %d: %zu net send and %zu receive links established",
               core_->ctx().rank, sends.size(), recvs.size());
  }

 private:
  std::shared_ptr<NetCore> core_;
  std::unique_ptr<OneSided> oneSided_;
};

}  // namespace

std::unique_ptr<Transport> makeNetTransport(const Context& ctx,
                                            std::unique_ptr<Endpoint> endpoint) {
  auto* ep = dynamic_cast<NetEndpoint*>(endpoint.get());
  if (ep == nullptr) throwInternalError("net transport made without its endpoint");
  return std::make_unique<NetTransport>(ctx, *ep);
}

}  // namespace grove::transport
