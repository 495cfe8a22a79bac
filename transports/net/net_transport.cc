// Net transport: the links and one-sided access over the endpoints of
// net_endpoint.h; see net_transport.h for how it works.
#include "transports/net/net_transport.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "base/entropy.h"
#include "base/error.h"
#include "base/log.h"
#include "base/siphash.h"
#include "base/socket.h"
#include "transports/net/net_endpoint.h"
#include "transports/net/nic.h"

namespace grove::transport {
namespace {

using net::Control;
using net::Nic;
using net::NicEvent;
using net::Region;
using net::WriteOp;

constexpr uint32_t kControlMagic = 0x4e455443;  // "CTEN"
constexpr uint32_t kLinkBits = 12;   // link ids in a signal's high bits
constexpr uint32_t kByteBits = 20;   // the write's bytes in its low bits
constexpr uint32_t kMaxLinks = (1u << kLinkBits) - 1;
constexpr int kOpsPerLink = 64;      // writes in flight per send link

enum ControlKind : uint32_t { kSendOffer = 1, kRingOffer = 2, kCredit = 3, kClose = 4 };

void* alignedBuffer(size_t bytes) {
  void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (p == nullptr) throw Error(groveSystemError, "net transport: out of memory");
  std::memset(p, 0, bytes);
  return p;
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, FreeDeleter>;

}  // namespace

// The state every half of one transport shares: NICs, links, progress.
class NetCore {
 public:
  struct SendLink {
    LinkKey key;
    uint32_t id = 0;
    int nic = 0;
    fi_addr_t dst = FI_ADDR_UNSPEC;
    Buffer staging;
    Region local, remote;
    uint32_t peerLink = 0;  // the receiver's id for the link (0: no offer yet)
    uint64_t head = 0;      // bytes committed
    uint64_t posted = 0;    // bytes handed to the provider
    uint64_t credited = 0;  // bytes the receiver consumed
    int inFlight = 0;
    bool closed = false;    // the receiver closed its half
    WriteOp ops[kOpsPerLink];
    std::vector<WriteOp*> freeOps;
  };
  struct RecvLink {
    LinkKey key;
    uint32_t id = 0;
    int nic = 0;
    fi_addr_t dst = FI_ADDR_UNSPEC;  // the sender's endpoint (credits)
    Buffer ring;
    Region region;
    uint32_t peerLink = 0;  // the sender's id (0: no offer yet)
    uint64_t arrived = 0, consumed = 0, credited = 0;
    bool closed = false;    // the sender closed its half
  };

  NetCore(const Context& ctx, NetEndpoint& ep) : ctx_(ctx), provider_(ep.provider) {
    nics_ = std::move(ep.nics);
    capacity_ = (std::max<size_t>(ctx_.bufferBytes, 4096) + 63) / 64 * 64;
    key_ = SipKey{ctx_.secret, fnv1a64(ctx_.jobId.data(), ctx_.jobId.size())};
    peerAddrs_.resize(nics_.size());
    peerNics_.assign(ctx_.nranks, 0);
    peerHosts_.resize(ctx_.nranks);
    for (const auto& n : nics_) localHosts_.push_back(hostOf(n->address()));
    for (int r = 0; r < ctx_.nranks; ++r) {
      PeerBlob b;
      if (r >= static_cast<int>(ctx_.addresses.size()) || !parseBlob(ctx_.addresses[r], &b) ||
          b.provider != provider_)
        continue;
      peerNics_[r] = static_cast<int>(b.nics.size());
      peerHosts_[r].clear();
      for (const auto& addr : b.nics) peerHosts_[r].push_back(hostOf(addr));
      for (size_t i = 0; i < nics_.size(); ++i) {
        peerAddrs_[i].resize(ctx_.nranks);
        for (const auto& addr : b.nics) peerAddrs_[i][r].push_back(nics_[i]->insert(addr.data(), addr.size()));
      }
    }
  }

  bool reaches(int peer) const {
    return peer >= 0 && peer < ctx_.nranks && peerNics_[peer] > 0;
  }

  // The NICs a send link uses at both ends: the link addresses of its
  // route (a planned route, else the topology's path to the peer), else
  // NIC channel mod n at each end.
  std::pair<int, int> nicsFor(const LinkKey& k) const {
    int local = k.channel % static_cast<int>(nics_.size());
    int remote = k.channel % peerNics_[k.peer];
    const PeerRoute* r = nullptr;
    if (k.route != 0) {
      auto it = planned_.find({k.peer, k.route});
      if (it == planned_.end())
        throwInvalidArgument("net transport: route " + std::to_string(k.route) + " to rank " +
                             std::to_string(k.peer) + " was never registered");
      r = &it->second;
    } else if (static_cast<int>(ctx_.routes.size()) == ctx_.nranks) {
      r = &ctx_.routes[k.peer];
    }
    if (r == nullptr) return {local, remote};
    auto find = [](const std::vector<std::string>& hosts, const sockaddr_storage& a, int dflt) {
      if (a.ss_family != AF_INET && a.ss_family != AF_INET6) return dflt;
      const std::string want = ::grove::net::formatHost(a);
      for (size_t i = 0; i < hosts.size(); ++i)
        if (hosts[i] == want) return static_cast<int>(i);
      return dflt;
    };
    return {find(localHosts_, r->local, local), find(peerHosts_[k.peer], r->remote, remote)};
  }
  fi_addr_t addrOf(int nic, int peer, int peerNic) const { return peerAddrs_[nic][peer][peerNic]; }
  int peerNics(int peer) const { return peerNics_[peer]; }

  void addRoute(int peer, uint32_t route, const PeerRoute& addresses) {
    if (peer < 0 || peer >= ctx_.nranks || route == 0)
      throwInvalidArgument("net transport: bad planned route " + std::to_string(route) +
                           " to rank " + std::to_string(peer));
    planned_[{peer, route}] = addresses;
  }

  std::mutex mu;

  // Reads every NIC's completions (under mu).
  void progress() {
    if (!failure_.empty()) throw Error(groveRemoteError, failure_);
    try {
      for (auto& n : nics_) n->progress([this](const NicEvent& e) { dispatch(e); });
    } catch (const Error& e) {
      failure_ = e.what();
      throw;
    }
  }

  // Stamps a control message as this rank's, with its MAC under the job key.
  void seal(Control& c) const {
    c.magic = kControlMagic;
    c.src = ctx_.rank;
    c.mac = 0;
    c.mac = sipHash24(key_, &c, sizeof(c));
  }

  void sendControl(Control c, int nic, fi_addr_t dst, const WaitContext& wait) {
    seal(c);
    Waiter waiter(wait, "net transport: sending a control message");
    while (!nics_[nic]->send(c, dst)) {
      progress();
      waiter.wait();
    }
  }

  void establish(const std::vector<LinkKey>& sends, const std::vector<LinkKey>& recvs,
                 std::vector<std::unique_ptr<SendHalf>>& outSends,
                 std::vector<std::unique_ptr<RecvHalf>>& outRecvs,
                 const std::shared_ptr<NetCore>& self);

  SendLink& sendLink(uint32_t id) { return *sends_.at(id); }
  RecvLink& recvLink(uint32_t id) { return *recvs_.at(id); }
  size_t capacity() const { return capacity_; }
  Nic& nic(int i) { return *nics_[i]; }
  const std::vector<std::unique_ptr<Nic>>& nics() const { return nics_; }
  const Context& ctx() const { return ctx_; }

  // Posts what a send link has committed and not yet posted.
  void post(SendLink& s) {
    while (s.posted < s.head && !s.freeOps.empty()) {
      const uint64_t off = s.posted % capacity_;
      const size_t n = static_cast<size_t>(
          std::min<uint64_t>({s.head - s.posted, capacity_ - off, nics_[s.nic]->maxWrite()}));
      WriteOp* op = s.freeOps.back();
      op->owner = &s;
      op->bytes = n;
      const uint32_t signal = (s.peerLink << kByteBits) | static_cast<uint32_t>(n);
      const char* src = static_cast<const char*>(s.staging.get()) + off;
      if (!nics_[s.nic]->write(src, n, s.local, s.dst, s.remote, off, signal, op)) break;
      s.freeOps.pop_back();
      ++s.inFlight;
      s.posted += n;
    }
  }

  // Posts a control message about `key` to the peer's link `peerLink`
  // without waiting; false when the NIC is busy.
  bool tryControl(uint32_t kind, const LinkKey& key, uint32_t peerLink, uint64_t value, int nic,
                  fi_addr_t dst) {
    Control c;
    c.kind = kind;
    c.channel = key.channel;
    c.route = key.route;
    c.link = peerLink;
    c.value = value;
    seal(c);
    return nics_[nic]->send(c, dst);
  }

  // Sends a receive link's credit when worth it (or `always` and any is owed).
  void credit(RecvLink& r, bool always) {
    const uint64_t owed = r.consumed - r.credited;
    if (owed == 0 || (!always && owed < capacity_ / 4)) return;
    if (tryControl(kCredit, r.key, r.peerLink, r.consumed, r.nic, r.dst))
      r.credited = r.consumed;  // busy: the next call retries
  }

  // A half is going: tell the peer (best effort; a gone peer hears nothing).
  void close(SendLink& s) noexcept {
    try {
      s.closed = true;
      tryControl(kClose, s.key, s.peerLink, 0, s.nic, s.dst);
    } catch (...) {
    }
  }
  void close(RecvLink& r) noexcept {
    try {
      r.closed = true;
      tryControl(kClose, r.key, r.peerLink, 1, r.nic, r.dst);
    } catch (...) {
    }
  }

 private:
  void dispatch(const NicEvent& e) {
    switch (e.kind) {
      case NicEvent::kSignal: {
        const uint32_t id = e.signal >> kByteBits;
        if (id == 0) {  // a one-sided put's signal
          signals_.push_back(e.signal & OneSided::kMaxSignal);
          return;
        }
        auto it = recvs_.find(id);
        if (it == recvs_.end()) throw Error(groveRemoteError, "net transport: a write for an unknown link");
        it->second->arrived += e.signal & ((1u << kByteBits) - 1);
        return;
      }
      case NicEvent::kWriteDone: {
        if (e.op->owner == nullptr) {  // a one-sided put
          e.op->bytes = 0;             // done
          return;
        }
        auto* s = static_cast<SendLink*>(e.op->owner);
        --s->inFlight;
        s->freeOps.push_back(e.op);
        return;
      }
      case NicEvent::kControl: onControl(e.control); return;
    }
  }

  void onControl(Control c) {
    const uint64_t mac = c.mac;
    c.mac = 0;
    if (c.magic != kControlMagic || sipHash24(key_, &c, sizeof(c)) != mac || c.src < 0 ||
        c.src >= ctx_.nranks) {
      GROVE_WARN(log::kNet, "net transport: dropped a control message that is not from this job");
      return;
    }
    const LinkKey key{c.src, c.channel, c.route};
    if (c.kind == kCredit || (c.kind == kClose && c.value == 1)) {
      auto it = sends_.find(c.link);
      if (it == sends_.end() || !(it->second->key == key)) return;
      if (c.kind == kCredit) it->second->credited = std::max(it->second->credited, c.value);
      else it->second->closed = true;
      return;
    }
    if (c.kind == kClose) {
      auto it = recvs_.find(c.link);
      if (it != recvs_.end() && it->second->key == key) it->second->closed = true;
      return;
    }
    if (c.kind == kRingOffer || c.kind == kSendOffer) offers_[{c.kind, key}] = c;
  }

 public:
  // An offer of `kind` for `key`, taken out of the stash (false: not yet).
  bool takeOffer(uint32_t kind, const LinkKey& key, Control* out) {
    auto it = offers_.find({kind, key});
    if (it == offers_.end()) return false;
    *out = it->second;
    offers_.erase(it);
    return true;
  }

 private:
  Context ctx_;
  std::string provider_;
  std::vector<std::unique_ptr<Nic>> nics_;
  std::vector<std::vector<std::vector<fi_addr_t>>> peerAddrs_;  // [local nic][peer][peer nic]
  std::vector<int> peerNics_;
  std::vector<std::vector<std::string>> peerHosts_;  // [peer][peer nic]: IP host ("" if none)
  std::vector<std::string> localHosts_;              // [nic]
  std::map<std::pair<int, uint32_t>, PeerRoute> planned_;  // (peer, route) -> addresses
  size_t capacity_ = 0;
  SipKey key_{};
  std::string failure_;
  std::map<std::pair<uint32_t, LinkKey>, Control> offers_;
 public:
  std::map<uint32_t, std::unique_ptr<SendLink>> sends_;
  std::map<uint32_t, std::unique_ptr<RecvLink>> recvs_;
  // One-sided puts in flight (op id -> context; bytes 0 once complete) and
  // signals that arrived.
  std::map<uint64_t, std::unique_ptr<WriteOp>> puts_;
  uint64_t nextPut_ = 1;
  std::deque<uint32_t> signals_;
  uint32_t nextSend_ = 1, nextRecv_ = 1;
  std::set<LinkKey> sendOpened_, recvOpened_;
};

namespace {

class NetSendHalf final : public SendHalf {
 public:
  NetSendHalf(std::shared_ptr<NetCore> core, uint32_t id) : core_(std::move(core)), s_(core_->sendLink(id)) {}
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
  NetRecvHalf(std::shared_ptr<NetCore> core, uint32_t id) : core_(std::move(core)), r_(core_->recvLink(id)) {}
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
                                        std::to_string(r_.key.channel) + " (everything it sent was read)");
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
                            std::to_string(c.value) + " bytes, this rank " + std::to_string(capacity_) +
                            " (GROVE_BUFFSIZE differs)");
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

// OneSided over the NICs: regions on NIC 0, puts from the NIC that pairs
// with the region's (nic mod this rank's NICs), signals under link id 0.
class NetOneSided final : public OneSided {
 public:
  explicit NetOneSided(NetCore& core) : core_(core) {}
  Remote expose(void* base, size_t bytes) override {
    std::lock_guard<std::mutex> lock(core_.mu);
    const Region r = core_.nic(0).registerMemory(base, bytes);
    Remote out;
    out.addr = r.remoteBase + (reinterpret_cast<uintptr_t>(base) - reinterpret_cast<uintptr_t>(r.base));
    out.key = r.key;
    out.bytes = bytes;
    out.rank = core_.ctx().rank;
    out.nic = 0;
    return out;
  }
  uint64_t put(const void* src, size_t n, const Remote& dst, uint64_t offset, uint32_t signal) override {
    std::lock_guard<std::mutex> lock(core_.mu);
    if (offset > dst.bytes || n > dst.bytes - offset)
      throwInvalidArgument("net put: " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                           " do not fit the " + std::to_string(dst.bytes) + "-byte region");
    if (signal > kMaxSignal) throwInvalidArgument("net put: signal above kMaxSignal");
    if (!core_.reaches(dst.rank) || dst.nic < 0 || dst.nic >= core_.peerNics(dst.rank))
      throwInvalidArgument("net put: region of an unreachable rank or NIC");
    core_.progress();
    const int local = dst.nic % static_cast<int>(core_.nics().size());
    Nic& nic = core_.nic(local);
    const Region from = nic.registerMemory(const_cast<void*>(src), n);
    Region to;
    to.remoteBase = dst.addr;
    to.key = dst.key;
    auto op = std::make_unique<WriteOp>();
    op->owner = nullptr;
    op->bytes = n == 0 ? 1 : n;  // nonzero while in flight
    if (!nic.write(src, n, from, core_.addrOf(local, dst.rank, dst.nic), to, offset, signal, op.get()))
      return 0;
    const uint64_t id = core_.nextPut_++;
    core_.puts_[id] = std::move(op);
    return id;
  }
  bool done(uint64_t op) override {
    std::lock_guard<std::mutex> lock(core_.mu);
    auto it = core_.puts_.find(op);
    if (it == core_.puts_.end()) return true;
    if (it->second->bytes != 0) core_.progress();
    if (it->second->bytes != 0) return false;
    core_.puts_.erase(it);
    return true;
  }
  bool takeSignal(uint32_t* signal) override {
    std::lock_guard<std::mutex> lock(core_.mu);
    if (core_.signals_.empty()) core_.progress();
    if (core_.signals_.empty()) return false;
    *signal = core_.signals_.front();
    core_.signals_.pop_front();
    return true;
  }
  bool flush() override {
    std::lock_guard<std::mutex> lock(core_.mu);
    core_.progress();
    for (const auto& [id, op] : core_.puts_)
      if (op->bytes != 0) return false;
    return true;
  }
  void release(void* base) override {
    std::lock_guard<std::mutex> lock(core_.mu);
    for (const auto& n : core_.nics()) n->deregister(base);
  }
  size_t registrations() const override { return sum(&Nic::registrations); }
  size_t registrationHits() const override { return sum(&Nic::registrationHits); }

 private:
  size_t sum(size_t (Nic::*counter)() const) const {
    std::lock_guard<std::mutex> lock(core_.mu);
    size_t s = 0;
    for (const auto& n : core_.nics()) s += ((*n).*counter)();
    return s;
  }
  NetCore& core_;
};

class NetTransport final : public Transport {
 public:
  NetTransport(const Context& ctx, NetEndpoint& ep)
      : core_(std::make_shared<NetCore>(ctx, ep)), oneSided_(*core_) {}
  OneSided* oneSided() override { return &oneSided_; }
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
  NetOneSided oneSided_;
};

}  // namespace

std::unique_ptr<Transport> makeNetTransport(const Context& ctx, std::unique_ptr<Endpoint> endpoint) {
  auto* ep = dynamic_cast<NetEndpoint*>(endpoint.get());
  if (ep == nullptr) throwInternalError("net transport made without its endpoint");
  return std::make_unique<NetTransport>(ctx, *ep);
}

}  // namespace grove::transport
