// Net transport; see net_transport.h for how it works.
#include "transports/net/net_transport.h"

#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "base/config.h"
#include "base/entropy.h"
#include "base/error.h"
#include "base/log.h"
#include "base/siphash.h"
#include "base/socket.h"
#include "transports/net/fabric_lib.h"
#include "transports/net/nic.h"

namespace grove::transport {
namespace {

using net::Control;
using net::Nic;
using net::NicEvent;
using net::Region;
using net::WriteOp;

constexpr uint32_t kBlobMagic = 0x4e455447;     // "GTEN"
constexpr uint32_t kControlMagic = 0x4e455443;  // "CTEN"
constexpr size_t kProviderChars = 32;
constexpr int kMaxNics = 4;
constexpr uint32_t kLinkBits = 12;   // link ids in a signal's high bits
constexpr uint32_t kByteBits = 20;   // the write's bytes in its low bits
constexpr uint32_t kMaxLinks = (1u << kLinkBits) - 1;
constexpr int kOpsPerLink = 64;      // writes in flight per send link

enum ControlKind : uint32_t { kSendOffer = 1, kRingOffer = 2, kCredit = 3, kClose = 4 };

// The published blob: header, then per NIC its address length and bytes.
struct BlobHeader {
  uint32_t magic = kBlobMagic;
  uint8_t nics = 0;
  uint8_t pad[3] = {};
  char provider[kProviderChars] = {};
};

struct PeerBlob {
  std::string provider;
  std::vector<std::vector<uint8_t>> nics;
};

bool parseBlob(const Address& a, PeerBlob* out) {
  if (a.size < sizeof(BlobHeader) || a.size > Address::kMaxBytes) return false;
  BlobHeader h;
  std::memcpy(&h, a.bytes, sizeof(h));
  if (h.magic != kBlobMagic || h.nics == 0 || h.nics > kMaxNics) return false;
  out->provider.assign(h.provider, strnlen(h.provider, kProviderChars));
  size_t at = sizeof(h);
  for (int i = 0; i < h.nics; ++i) {
    if (at >= a.size) return false;
    const size_t len = a.bytes[at++];
    if (len == 0 || at + len > a.size) return false;
    out->nics.emplace_back(a.bytes + at, a.bytes + at + len);
    at += len;
  }
  return true;
}

bool rdmaProvider(const std::string& prov) {
  // Providers that move bytes in software over sockets, or only on one host.
  for (const char* slow : {"tcp", "sockets", "udp", "shm", "net"})
    if (prov == slow || prov.rfind(std::string(slow) + ";", 0) == 0) return false;
  return true;
}

class NetEndpoint final : public Endpoint {
 public:
  std::vector<std::unique_ptr<Nic>> nics;
  std::string provider;
  Address address() const override {
    Address a;
    BlobHeader h;
    std::snprintf(h.provider, sizeof(h.provider), "%s", provider.c_str());
    size_t at = sizeof(h);
    for (const auto& n : nics) {
      const auto& bytes = n->address();
      if (bytes.size() > 255 || at + 1 + bytes.size() > Address::kMaxBytes) break;
      a.bytes[at++] = static_cast<uint8_t>(bytes.size());
      std::memcpy(a.bytes + at, bytes.data(), bytes.size());
      at += bytes.size();
      ++h.nics;
    }
    std::memcpy(a.bytes, &h, sizeof(h));
    a.size = static_cast<uint32_t>(at);
    return a;
  }
};

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
    for (int r = 0; r < ctx_.nranks; ++r) {
      PeerBlob b;
      if (r >= static_cast<int>(ctx_.addresses.size()) || !parseBlob(ctx_.addresses[r], &b) ||
          b.provider != provider_)
        continue;
      peerNics_[r] = static_cast<int>(b.nics.size());
      for (size_t i = 0; i < nics_.size(); ++i) {
        peerAddrs_[i].resize(ctx_.nranks);
        for (const auto& addr : b.nics) peerAddrs_[i][r].push_back(nics_[i]->insert(addr.data(), addr.size()));
      }
    }
  }

  bool reaches(int peer) const {
    return peer >= 0 && peer < ctx_.nranks && peerNics_[peer] > 0;
  }

  // The local NIC of a link on `channel`, and the peer's endpoint address on it.
  int nicOf(int channel) const { return channel % static_cast<int>(nics_.size()); }
  fi_addr_t addrOf(int nic, int peer, int channel) const {
    return peerAddrs_[nic][peer][channel % peerNics_[peer]];
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

  void sendControl(Control c, int nic, fi_addr_t dst, const WaitContext& wait) {
    c.magic = kControlMagic;
    c.src = ctx_.rank;
    c.mac = 0;
    c.mac = sipHash24(key_, &c, sizeof(c));
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
    c.magic = kControlMagic;
    c.src = ctx_.rank;
    c.mac = 0;
    c.mac = sipHash24(key_, &c, sizeof(c));
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
        auto it = recvs_.find(id);
        if (it == recvs_.end()) throw Error(groveRemoteError, "net transport: a write for an unknown link");
        it->second->arrived += e.signal & ((1u << kByteBits) - 1);
        return;
      }
      case NicEvent::kWriteDone: {
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
  size_t capacity_ = 0;
  SipKey key_{};
  std::string failure_;
  std::map<std::pair<uint32_t, LinkKey>, Control> offers_;
 public:
  std::map<uint32_t, std::unique_ptr<SendLink>> sends_;
  std::map<uint32_t, std::unique_ptr<RecvLink>> recvs_;
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
    core_->progress();
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
  // 1. Everything that waits for no one: buffers, registrations, offers.
  for (const LinkKey& k : sends) {
    auto s = std::make_unique<SendLink>();
    s->key = k;
    s->id = nextSend_++;
    s->nic = nicOf(k.channel);
    s->dst = addrOf(s->nic, k.peer, k.channel);
    s->staging.reset(alignedBuffer(capacity_));
    s->local = nics_[s->nic]->registerMemory(s->staging.get(), capacity_);
    for (auto& op : s->ops) s->freeOps.push_back(&op);
    Control c;
    c.kind = kSendOffer;
    c.channel = k.channel;
    c.route = k.route;
    c.replyLink = s->id;
    sendControl(c, s->nic, s->dst, ctx_.wait);
    sendIds.push_back(s->id);
    sends_[s->id] = std::move(s);
  }
  for (const LinkKey& k : recvs) {
    auto r = std::make_unique<RecvLink>();
    r->key = k;
    r->id = nextRecv_++;
    r->nic = nicOf(k.channel);
    r->dst = addrOf(r->nic, k.peer, k.channel);
    r->ring.reset(alignedBuffer(capacity_));
    r->region = nics_[r->nic]->registerMemory(r->ring.get(), capacity_);
    Control c;
    c.kind = kRingOffer;
    c.channel = k.channel;
    c.route = k.route;
    c.replyLink = r->id;
    c.addr = r->region.remoteBase;
    c.key = r->region.key;
    c.value = capacity_;
    sendControl(c, r->nic, r->dst, ctx_.wait);
    recvIds.push_back(r->id);
    recvs_[r->id] = std::move(r);
  }
  // 2. The peers' offers.
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
      if (r.peerLink == 0 && takeOffer(kSendOffer, {r.key.peer, r.key.channel, r.key.route}, &c))
        r.peerLink = c.replyLink;
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
  NetTransport(const Context& ctx, NetEndpoint& ep) : core_(std::make_shared<NetCore>(ctx, ep)) {}
  const char* name() const override { return "net"; }
  bool canConnect(int peer) const override { return core_->reaches(peer); }
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
  NetStats stats() const {
    std::lock_guard<std::mutex> lock(core_->mu);
    NetStats s;
    for (const auto& n : core_->nics()) {
      s.nics.push_back(n->name());
      s.registrations += n->registrations();
      s.registrationHits += n->registrationHits();
    }
    return s;
  }

 private:
  std::shared_ptr<NetCore> core_;
};

// One fi_getinfo entry per domain of `provider` (the first of each), in order.
std::vector<const fi_info*> domainsOf(const fi_info* list, const std::string& provider) {
  std::vector<const fi_info*> out;
  std::set<std::string> seen;
  for (const fi_info* i = list; i != nullptr; i = i->next) {
    if (provider != i->fabric_attr->prov_name) continue;
    const std::string dom = i->domain_attr->name != nullptr ? i->domain_attr->name : "";
    if (i->addr_format != FI_SOCKADDR_IN && i->addr_format != FI_SOCKADDR_IN6 &&
        i->addr_format != FI_SOCKADDR && rdmaProvider(provider) == false)
      continue;
    if (!seen.insert(dom).second) continue;
    out.push_back(i);
  }
  return out;
}

}  // namespace

bool netCanConnect(const Address& a, const Address& b) {
  PeerBlob x, y;
  return parseBlob(a, &x) && parseBlob(b, &y) && x.provider == y.provider;
}

std::unique_ptr<Endpoint> openNetEndpoint(const OpenArgs& args) {
  std::string why;
  const net::FabricLib* lib = net::fabricLib(&why);
  const std::string chosen = config::getString("GROVE_NET_PROVIDER");
  if (lib == nullptr) {
    if (!chosen.empty()) throwInvalidUsage("GROVE_NET_PROVIDER=" + chosen + ", but " + why);
    GROVE_INFO(log::kNet, "net transport unavailable: %s", why.c_str());
    return nullptr;
  }
  fi_info* hints = lib->dupinfo(nullptr);
  if (hints == nullptr) throw Error(groveSystemError, "net transport: fi_allocinfo failed");
  hints->caps = FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  if (!chosen.empty()) hints->fabric_attr->prov_name = strdup(chosen.c_str());
  fi_info* list = nullptr;
  const int rc = lib->getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &list);
  lib->freeinfo(hints);
  if (rc != 0 || list == nullptr) {
    if (!chosen.empty())
      throwInvalidUsage("GROVE_NET_PROVIDER=" + chosen + ": no such libfabric provider with "
                        "reliable datagrams and one-sided writes here (" + net::fabricError("fi_getinfo", rc) + ")");
    GROVE_INFO(log::kNet, "net transport unavailable: no libfabric provider with reliable "
                          "datagrams and one-sided writes");
    return nullptr;
  }
  struct Free {
    const net::FabricLib* lib;
    fi_info* list;
    ~Free() { lib->freeinfo(list); }
  } freeList{lib, list};
  // The fastest provider present: the first RDMA one in libfabric's order, else tcp.
  std::string provider;
  for (const fi_info* i = list; i != nullptr && provider.empty(); i = i->next)
    if (rdmaProvider(i->fabric_attr->prov_name)) provider = i->fabric_attr->prov_name;
  if (provider.empty())
    for (const fi_info* i = list; i != nullptr && provider.empty(); i = i->next)
      if (std::string(i->fabric_attr->prov_name).find("tcp") != std::string::npos)
        provider = i->fabric_attr->prov_name;
  if (provider.empty()) provider = list->fabric_attr->prov_name;
  if (!rdmaProvider(provider) && !args.named && chosen.empty()) {
    GROVE_INFO(log::kNet, "net transport: only %s here; the socket transport serves TCP "
                          "(GROVE_TRANSPORT=net uses it anyway)", provider.c_str());
    return nullptr;
  }
  std::vector<const fi_info*> domains = domainsOf(list, provider);
  if (!rdmaProvider(provider)) {
    // Software providers: one NIC, the interface the socket transport picks.
    const std::string iface = ::grove::net::pickInterface().name;
    std::vector<const fi_info*> pick;
    for (const fi_info* d : domains)
      if (d->domain_attr->name != nullptr && iface == d->domain_attr->name) pick.push_back(d);
    if (!pick.empty()) domains = pick;
    domains.resize(std::min<size_t>(domains.size(), 1));
  }
  int want = static_cast<int>(config::getInt("GROVE_NET_NICS"));
  if (want <= 0) want = kMaxNics;
  if (static_cast<int>(domains.size()) > want) domains.resize(want);
  auto ep = std::make_unique<NetEndpoint>();
  ep->provider = provider.substr(0, kProviderChars - 1);
  for (const fi_info* d : domains) ep->nics.push_back(std::make_unique<Nic>(*lib, d));
  if (ep->nics.empty()) return nullptr;
  std::string names;
  for (const auto& n : ep->nics) names += (names.empty() ? "" : ", ") + n->name();
  GROVE_INFO(log::kNet, "net transport: %zu NIC(s): %s", ep->nics.size(), names.c_str());
  return ep;
}

std::unique_ptr<Transport> makeNetTransport(const Context& ctx, std::unique_ptr<Endpoint> endpoint) {
  auto* ep = dynamic_cast<NetEndpoint*>(endpoint.get());
  if (ep == nullptr) throwInternalError("net transport made without its endpoint");
  return std::make_unique<NetTransport>(ctx, *ep);
}

NetStats netStats(const Transport& t) {
  auto* n = dynamic_cast<const NetTransport*>(&t);
  if (n == nullptr) throwInvalidArgument("netStats: not a net transport");
  return n->stats();
}

}  // namespace grove::transport
