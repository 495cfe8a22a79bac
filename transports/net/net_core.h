// The state the net transport's halves and its one-sided access share
// (net_transport.cc, net_one_sided.cc): the NICs, the send and receive
// links, the control messages and their MACs, progress. Internal to
// transports/net; see net_transport.h for how the transport works.
#pragma once

#include <rdma/fabric.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/entropy.h"
#include "base/error.h"
#include "base/log.h"
#include "base/siphash.h"
#include "base/socket.h"
#include "transports/net/net_endpoint.h"
#include "transports/net/nic.h"
#include "transports/transport.h"

namespace grove::transport::net {
inline constexpr uint32_t kControlMagic = 0x4e455443;  // "CTEN"
inline constexpr uint32_t kLinkBits = 12;              // link ids in a signal's high bits
inline constexpr uint32_t kByteBits = 20;              // the write's bytes in its low bits
inline constexpr uint32_t kMaxLinks = (1u << kLinkBits) - 1;
inline constexpr int kOpsPerLink = 64;  // writes in flight per send link

enum ControlKind : uint32_t { kSendOffer = 1, kRingOffer = 2, kCredit = 3, kClose = 4 };

inline void* alignedBuffer(size_t bytes) {
  void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (p == nullptr) throw Error(groveSystemError, "net transport: out of memory");
  std::memset(p, 0, bytes);
  return p;
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, FreeDeleter>;

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
    bool closed = false;  // the receiver closed its half
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
    bool closed = false;  // the sender closed its half
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
        for (const auto& addr : b.nics)
          peerAddrs_[i][r].push_back(nics_[i]->insert(addr.data(), addr.size()));
      }
    }
  }

  bool reaches(int peer) const { return peer >= 0 && peer < ctx_.nranks && peerNics_[peer] > 0; }

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
    } catch (...) {}
  }
  void close(RecvLink& r) noexcept {
    try {
      r.closed = true;
      tryControl(kClose, r.key, r.peerLink, 1, r.nic, r.dst);
    } catch (...) {}
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
        if (it == recvs_.end())
          throw Error(groveRemoteError, "net transport: a write for an unknown link");
        it->second->arrived += e.signal & ((1u << kByteBits) - 1);
        return;
      }
      case NicEvent::kWriteDone: {
        if (e.op->owner == nullptr) {      // a one-sided put
          if (!e.failed) e.op->bytes = 0;  // done (a failed one stays undone: done() throws)
          if (e.op->sourceNic != nullptr) e.op->sourceNic->unref(e.op->sourceKey);
          e.op->sourceNic = nullptr;
          return;
        }
        if (e.failed) return;  // a link's write: its link fails with the transport
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
      if (c.kind == kCredit)
        it->second->credited = std::max(it->second->credited, c.value);
      else
        it->second->closed = true;
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
  std::vector<std::vector<std::string>> peerHosts_;        // [peer][peer nic]: IP host ("" if none)
  std::vector<std::string> localHosts_;                    // [nic]
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

/// The transport's one-sided access over `core` (net_one_sided.cc).
std::unique_ptr<OneSided> makeNetOneSided(NetCore& core);

}  // namespace grove::transport::net
