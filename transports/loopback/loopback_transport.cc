// LoopbackTransport (see loopback_transport.h for how it works).
#include "transports/loopback/loopback_transport.h"

#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "base/error.h"
#include "transports/byte_ring.h"

namespace grove::transport {
namespace {

constexpr uint32_t kSenderClosed = 1;
constexpr uint32_t kReceiverClosed = 2;

/// One heap ring shared by the two halves of a link.
struct SharedRing {
  explicit SharedRing(size_t capacity)
      : data(static_cast<uint8_t*>(std::aligned_alloc(64, capacity))), cap(capacity) {
    if (data == nullptr) throwSystemError("loopback: allocating a ring", ENOMEM);
  }
  ~SharedRing() { std::free(data); }
  SharedRing(const SharedRing&) = delete;
  SharedRing& operator=(const SharedRing&) = delete;

  RingControl control;
  uint8_t* data;
  size_t cap;
  int src = 0, dst = 0, channel = 0;
};

// A ring is one run's (Context::secret, fresh per run): a communicator
// that failed while a link was half open leaves its ring here, and a new
// run of the same communicator id (the same jobId) must not meet on it.
// Such a ring stays until the process ends (a sender may have written into
// it before its receiver came, so nothing takes it away early).
struct RegistryKey {
  std::string jobId;
  uint64_t run;
  int src, dst, channel;
  bool operator<(const RegistryKey& o) const {
    return std::tie(jobId, run, src, dst, channel) <
           std::tie(o.jobId, o.run, o.src, o.dst, o.channel);
  }
};

/// A ring that one side has taken and the other has not yet.
struct Pending {
  std::shared_ptr<SharedRing> ring;
  bool sendTaken = false;
  bool recvTaken = false;
};

std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}

std::map<RegistryKey, Pending>& registry() {
  static auto* r = new std::map<RegistryKey, Pending>();  // never destroyed: safe at exit
  return *r;
}

// Returns the ring of `key` for one side, creating it if this side is first.
std::shared_ptr<SharedRing> takeRing(const RegistryKey& key, bool sender, size_t capacity) {
  std::lock_guard<std::mutex> lock(registryMutex());
  auto& reg = registry();
  auto it = reg.find(key);
  if (it == reg.end()) {
    auto ring = std::make_shared<SharedRing>(capacity);
    ring->src = key.src;
    ring->dst = key.dst;
    ring->channel = key.channel;
    it = reg.emplace(key, Pending{std::move(ring)}).first;
  }
  Pending& p = it->second;
  bool& taken = sender ? p.sendTaken : p.recvTaken;
  if (taken) {
    throwInvalidUsage("loopback: link " + std::to_string(key.src) + "->" + std::to_string(key.dst) +
                      " channel " + std::to_string(key.channel) + " of job " + key.jobId +
                      " established twice on the " + (sender ? "sending" : "receiving") + " side");
  }
  taken = true;
  std::shared_ptr<SharedRing> ring = p.ring;
  if (p.sendTaken && p.recvTaken) reg.erase(it);
  return ring;
}

class LoopbackSendHalf : public SendHalf {
 public:
  explicit LoopbackSendHalf(std::shared_ptr<SharedRing> ring)
      : ring_(std::move(ring)), view_(&ring_->control, ring_->data, ring_->cap) {}
  ~LoopbackSendHalf() override {
    ring_->control.closed.fetch_or(kSenderClosed, std::memory_order_acq_rel);
  }
  size_t reserve(void** ptr) override {
    size_t n = view_.reserve(ptr);
    if (n == 0 && (ring_->control.closed.load(std::memory_order_acquire) & kReceiverClosed)) {
      throwRemoteError("loopback: rank " + std::to_string(ring_->dst) +
                       " closed its receiving half of channel " + std::to_string(ring_->channel) +
                       " while rank " + std::to_string(ring_->src) + " still sends");
    }
    return n;
  }
  void commit(size_t n) override { view_.commit(n); }

 private:
  std::shared_ptr<SharedRing> ring_;
  ByteRing view_;
};

class LoopbackRecvHalf : public RecvHalf {
 public:
  explicit LoopbackRecvHalf(std::shared_ptr<SharedRing> ring)
      : ring_(std::move(ring)), view_(&ring_->control, ring_->data, ring_->cap) {}
  ~LoopbackRecvHalf() override {
    ring_->control.closed.fetch_or(kReceiverClosed, std::memory_order_acq_rel);
  }
  size_t peek(const void** ptr) override {
    size_t n = view_.peek(ptr);
    if (n == 0 && (ring_->control.closed.load(std::memory_order_acquire) & kSenderClosed)) {
      n = view_.peek(ptr);  // the sender's last commit happened before it closed
      if (n == 0) {
        throwRemoteError("loopback: rank " + std::to_string(ring_->src) +
                         " closed its sending half of channel " + std::to_string(ring_->channel) +
                         " while rank " + std::to_string(ring_->dst) + " still expects bytes");
      }
    }
    return n;
  }
  void consume(size_t n) override { view_.consume(n); }

 private:
  std::shared_ptr<SharedRing> ring_;
  ByteRing view_;
};

}  // namespace

LoopbackTransport::LoopbackTransport(Context ctx) : ctx_(std::move(ctx)) {}

bool LoopbackTransport::canConnect(int peer) const { return peer >= 0 && peer < ctx_.nranks; }

void LoopbackTransport::establish(const std::vector<LinkKey>& sends,
                                  const std::vector<LinkKey>& recvs,
                                  std::vector<std::unique_ptr<SendHalf>>& outSends,
                                  std::vector<std::unique_ptr<RecvHalf>>& outRecvs) {
  size_t cap = ctx_.bufferBytes < 64 ? 64 : (ctx_.bufferBytes + 63) / 64 * 64;
  for (const auto* keys : {&sends, &recvs}) {
    for (const LinkKey& k : *keys) {
      if (!canConnect(k.peer)) {
        throwInvalidArgument("loopback: peer " + std::to_string(k.peer) + " out of range [0," +
                             std::to_string(ctx_.nranks) + ")");
      }
    }
  }
  outSends.clear();
  outRecvs.clear();
  for (const LinkKey& k : sends) {
    RegistryKey key{ctx_.jobId, ctx_.secret, ctx_.rank, k.peer, k.channel};
    outSends.push_back(std::make_unique<LoopbackSendHalf>(takeRing(key, true, cap)));
  }
  for (const LinkKey& k : recvs) {
    RegistryKey key{ctx_.jobId, ctx_.secret, k.peer, ctx_.rank, k.channel};
    outRecvs.push_back(std::make_unique<LoopbackRecvHalf>(takeRing(key, false, cap)));
  }
}

size_t LoopbackTransport::pendingRings() {
  std::lock_guard<std::mutex> lock(registryMutex());
  return registry().size();
}

}  // namespace grove::transport
