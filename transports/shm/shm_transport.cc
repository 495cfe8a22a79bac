#include "transports/shm/shm_transport.h"

#include <unistd.h>

#include <cstdio>
#include <new>
#include <set>
#include <utility>

#include "base/config.h"
#include "base/entropy.h"
#include "base/error.h"
#include "base/log.h"
#include "base/siphash.h"
#include "transports/shm/shm_link.h"
#include "transports/shm/shm_slots.h"

namespace grove::transport {

using shm::kShmDataOffset;
using shm::kShmMagic;
using shm::kShmVersion;
using shm::ShmHeader;

/// What a link's segment must be: byte ring (slots == 0) or slot link.
struct ShmTransport::SegmentSpec {
  int src = -1, dst = -1;
  int32_t channel = 0;  ///< kSlotChannel for a slot link
  size_t capacity = 0;  ///< bytes of the data area
  uint32_t slots = 0;
  uint32_t slotStride = 0;
};

/// One send segment that attachAll() is still waiting for.
struct ShmTransport::PendingSend {
  SegmentSpec spec;
  std::string path;
  ShmSegment seg;
  std::string problem = "does not exist yet";
  bool attached = false;
  int32_t creatorPid = 0;
};

ShmTransport::ShmTransport(Context ctx) : ctx_(std::move(ctx)) {
  if (ctx_.nranks < 1 || ctx_.rank < 0 || ctx_.rank >= ctx_.nranks)
    throwInvalidArgument("shm transport: rank " + std::to_string(ctx_.rank) + " out of range for " +
                         std::to_string(ctx_.nranks) + " ranks");
  if (static_cast<int>(ctx_.peers.size()) != ctx_.nranks)
    throwInvalidArgument("shm transport: peers has " + std::to_string(ctx_.peers.size()) +
                         " entries for " + std::to_string(ctx_.nranks) + " ranks");
  if (ctx_.jobId.empty()) throwInvalidArgument("shm transport: empty jobId");
  if (ctx_.bufferBytes == 0) throwInvalidArgument("shm transport: bufferBytes is 0");
  capacity_ = (ctx_.bufferBytes + 63) / 64 * 64;
  dir_ = config::getString("GROVE_SHM_DIR");
  if (dir_.empty()) dir_ = "/dev/shm";
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  runTag_ = runTagOf(ctx_.secret);
}

uint64_t ShmTransport::runTagOf(uint64_t secret) {
  if (secret == 0) return 0;
  static constexpr char kWhat[] = "grove shm run";
  return sipHash24(SipKey{secret, 0x73686d2d72756e00ull}, kWhat, sizeof kWhat - 1);
}

size_t ShmTransport::slotStride(size_t maxBytes) const { return shm::slotStrideFor(maxBytes); }

bool ShmTransport::canConnect(int peer) const {
  if (peer < 0 || peer >= ctx_.nranks || peer == ctx_.rank) return false;
  return ctx_.peers[peer].hostHash == ctx_.peers[ctx_.rank].hostHash;
}

std::string ShmTransport::segmentName(const std::string& jobId, int src, int dst, int channel) {
  std::string id;
  id.reserve(jobId.size());
  for (char c : jobId) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.';
    id += ok ? c : '_';
  }
  if (id.size() > 160) {  // keep names well under NAME_MAX: hash long ids (FNV-1a)
    const uint64_t h = fnv1a64(jobId.data(), jobId.size());
    char hex[17];
    snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
    id = id.substr(0, 100) + "_" + hex;
  }
  return "grove-" + id + "-" + std::to_string(src) + "-" + std::to_string(dst) + "-" +
         std::to_string(channel);
}

std::string ShmTransport::segmentPath(int src, int dst, int channel) const {
  return dir_ + "/" + segmentName(ctx_.jobId, src, dst, channel);
}

std::string ShmTransport::pathOf(const SegmentSpec& spec) const {
  if (spec.channel != shm::kSlotChannel) return segmentPath(spec.src, spec.dst, spec.channel);
  return dir_ + "/" + segmentName(ctx_.jobId, spec.src, spec.dst, 0) + "-slots";
}

void ShmTransport::checkLinks(const std::vector<LinkKey>& links, const char* kind) const {
  std::set<LinkKey> seen;
  for (const LinkKey& k : links) {
    if (!canConnect(k.peer))
      throwInvalidArgument(std::string("shm transport: cannot ") + kind + " rank " +
                           std::to_string(k.peer) + " from rank " + std::to_string(ctx_.rank) +
                           " (not another rank on this host)");
    if (k.channel < 0) throwInvalidArgument("shm transport: negative channel");
    if (!seen.insert(k).second)
      throwInvalidArgument(std::string("shm transport: link to ") + kind + " rank " +
                           std::to_string(k.peer) + " channel " + std::to_string(k.channel) +
                           " requested twice");
  }
}

void ShmTransport::establish(const std::vector<LinkKey>& sends, const std::vector<LinkKey>& recvs,
                             std::vector<std::unique_ptr<SendHalf>>& outSends,
                             std::vector<std::unique_ptr<RecvHalf>>& outRecvs) {
  checkLinks(sends, "send to");
  checkLinks(recvs, "receive from");
  // Phase 1 never waits; phase 2 waits only for segments that phase 1 of the
  // peers makes. On an error the halves made so far are destroyed (unlinked).
  std::vector<std::unique_ptr<RecvHalf>> recvHalves;
  recvHalves.reserve(recvs.size());
  for (const LinkKey& k : recvs) {
    SegmentSpec spec{k.peer, ctx_.rank, k.channel, capacity_};
    recvHalves.push_back(std::make_unique<shm::ShmRecvHalf>(createSegment(spec), k.peer, k.channel,
                                                            ctx_.peers[k.peer].pid));
  }
  std::vector<PendingSend> pending(sends.size());
  for (size_t i = 0; i < sends.size(); ++i)
    pending[i].spec = {ctx_.rank, sends[i].peer, sends[i].channel, capacity_};
  attachAll(pending);
  std::vector<std::unique_ptr<SendHalf>> sendHalves;
  sendHalves.reserve(pending.size());
  for (PendingSend& p : pending)
    sendHalves.push_back(std::make_unique<shm::ShmSendHalf>(std::move(p.seg), p.spec.dst,
                                                            p.spec.channel, p.creatorPid));
  GROVE_INFO(log::kShm, "rank %d: %zu shm send and %zu receive links of %zu bytes established",
             ctx_.rank, sends.size(), recvs.size(), capacity_);
  outSends = std::move(sendHalves);
  outRecvs = std::move(recvHalves);
}

bool ShmTransport::establishSlots(const std::vector<int>& peers, size_t maxBytes, int slots,
                                  std::vector<std::unique_ptr<SlotSender>>& outSends,
                                  std::vector<std::unique_ptr<SlotReceiver>>& outRecvs) {
  std::vector<LinkKey> keys;
  for (int peer : peers) keys.push_back({peer, 0});
  checkLinks(keys, "open a slot link with");
  if (slots < 1 || maxBytes == 0 || maxBytes > (1u << 24))
    throwInvalidArgument("shm transport: slot links need at least one slot of 1 B to 16 MiB, not " +
                         std::to_string(slots) + " of " + std::to_string(maxBytes) + " B");
  const size_t stride = shm::slotStrideFor(maxBytes);
  auto specOf = [&](int src, int dst) {
    return SegmentSpec{src,
                       dst,
                       shm::kSlotChannel,
                       stride * static_cast<size_t>(slots),
                       static_cast<uint32_t>(slots),
                       static_cast<uint32_t>(stride)};
  };
  std::vector<std::unique_ptr<SlotReceiver>> receivers;
  for (int peer : peers)
    receivers.push_back(std::make_unique<shm::ShmSlotReceiver>(
        createSegment(specOf(peer, ctx_.rank)), peer, ctx_.peers[peer].pid));
  std::vector<PendingSend> pending(peers.size());
  for (size_t i = 0; i < peers.size(); ++i) pending[i].spec = specOf(ctx_.rank, peers[i]);
  attachAll(pending);
  std::vector<std::unique_ptr<SlotSender>> senders;
  for (PendingSend& p : pending)
    senders.push_back(
        std::make_unique<shm::ShmSlotSender>(std::move(p.seg), p.spec.dst, p.creatorPid));
  GROVE_INFO(log::kShm, "rank %d: slot links with %zu peers established (%d slots of %zu B)",
             ctx_.rank, peers.size(), slots, maxBytes);
  outSends = std::move(senders);
  outRecvs = std::move(receivers);
  return true;
}

ShmSegment ShmTransport::createSegment(const SegmentSpec& spec) {
  std::string path = pathOf(spec);
  bool replaced = false;
  ShmSegment seg = ShmSegment::create(path, kShmDataOffset + spec.capacity, &replaced);
  if (replaced)
    GROVE_WARN(log::kShm, "replaced stale shm segment %s (left by a job that crashed?)",
               path.c_str());
  seg.map(kShmDataOffset + spec.capacity);
  seg.closeFd();
  auto* h = new (seg.base()) ShmHeader();
  h->magic = kShmMagic;
  h->version = kShmVersion;
  h->dataOffset = static_cast<uint32_t>(kShmDataOffset);
  h->capacity = spec.capacity;
  h->creatorPid = static_cast<int32_t>(getpid());
  h->src = spec.src;
  h->dst = spec.dst;
  h->channel = spec.channel;
  h->slots = spec.slots;
  h->slotStride = spec.slotStride;
  h->run = runTag_;
  h->ready.store(1, std::memory_order_release);
  GROVE_TRACE(log::kShm, "created %s (%zu bytes)", path.c_str(), spec.capacity);
  return seg;
}

void ShmTransport::attachAll(std::vector<PendingSend>& pending) {
  for (PendingSend& p : pending) p.path = pathOf(p.spec);
  size_t left = pending.size();
  Waiter waiter(ctx_.wait, "waiting for peers to create their shm segments");
  while (left > 0) {
    bool moved = false;
    for (PendingSend& p : pending) {
      if (!p.attached && tryAttach(p)) {
        --left;
        moved = true;
      }
    }
    if (left == 0) break;
    if (moved) waiter.progressed();
    try {
      waiter.wait();
    } catch (const Error& e) {
      for (const PendingSend& p : pending) {
        if (p.attached) continue;
        throw Error(e.code(), std::string(e.what()) + "; " + std::to_string(left) +
                                  " link(s) missing, e.g. to rank " + std::to_string(p.spec.dst) +
                                  (p.spec.channel == shm::kSlotChannel
                                       ? std::string(" (slot link)")
                                       : " channel " + std::to_string(p.spec.channel)) +
                                  ": " + p.path + " " + p.problem);
      }
      throw;
    }
  }
}

bool ShmTransport::tryAttach(PendingSend& p) {
  auto retryLater = [&p](std::string problem) {
    p.problem = std::move(problem);
    p.seg = ShmSegment();  // drop a stale or half-made file; reopen by name next time
    return false;
  };
  if (!p.seg.valid()) {
    p.seg = ShmSegment::tryOpen(p.path);
    if (!p.seg.valid()) return retryLater("does not exist yet");
  }
  size_t size = p.seg.fileSize();
  if (size < kShmDataOffset)
    return retryLater("is only " + std::to_string(size) + " bytes (still being made?)");
  if (p.seg.base() == nullptr) p.seg.map(kShmDataOffset);
  auto* h = reinterpret_cast<ShmHeader*>(p.seg.base());
  if (h->ready.load(std::memory_order_acquire) != 1) return retryLater("is not marked ready yet");
  // Stale files (another job's, a crashed run's) are skipped until the peer replaces them.
  if (h->magic != kShmMagic) return retryLater("is not a grove shm segment (bad magic)");
  int32_t expectPid = ctx_.peers[p.spec.dst].pid;
  if (expectPid > 0 && h->creatorPid != expectPid)
    return retryLater("was made by pid " + std::to_string(h->creatorPid) + ", not by rank " +
                      std::to_string(p.spec.dst) + " (pid " + std::to_string(expectPid) +
                      "): stale");
  if (!p.seg.linked()) return retryLater("was removed (replaced by a newer one?)");
  // Made by the right process: from here on, anything odd is an error, not a wait.
  std::string where = "shm segment " + p.path + " of rank " + std::to_string(p.spec.dst);
  if (h->version != kShmVersion)
    throw Error(groveSystemError, where + " has layout version " + std::to_string(h->version) +
                                      ", this build uses " + std::to_string(kShmVersion) +
                                      " (mixed grove builds on one host?)");
  // The right pid and build, but another run's (a process of that pid in
  // another pid namespace, an earlier run of this communicator id): wait.
  if (h->run != runTag_)
    return retryLater("was made by pid " + std::to_string(h->creatorPid) +
                      " in another run of this communicator id: stale");
  if (h->src != p.spec.src || h->dst != p.spec.dst || h->channel != p.spec.channel ||
      h->slots != p.spec.slots || h->slotStride != p.spec.slotStride)
    throw Error(groveSystemError,
                where + " is for link " + std::to_string(h->src) + "->" + std::to_string(h->dst) +
                    " channel " + std::to_string(h->channel) + " (" + std::to_string(h->slots) +
                    " slots of " + std::to_string(h->slotStride) + " B), not this one");
  size_t need = static_cast<size_t>(h->dataOffset) + h->capacity;
  if (h->dataOffset < sizeof(ShmHeader) || h->dataOffset % 64 != 0 || h->capacity == 0 ||
      h->capacity % 64 != 0 || size < need)
    throw Error(groveSystemError, where + " is malformed or too short: " + std::to_string(size) +
                                      " bytes, header says data at " +
                                      std::to_string(h->dataOffset) + " + " +
                                      std::to_string(h->capacity) + " bytes");
  int32_t creatorPid = h->creatorPid;
  p.seg.map(need);  // remap the whole segment; h is stale from here
  h = reinterpret_cast<ShmHeader*>(p.seg.base());
  h->attacherPid.store(static_cast<int32_t>(getpid()), std::memory_order_relaxed);
  h->attached.store(1, std::memory_order_release);
  p.seg.unlink();  // both sides hold a mapping now: the name is no longer needed
  p.seg.closeFd();
  GROVE_TRACE(log::kShm, "attached %s", p.path.c_str());
  p.creatorPid = creatorPid;
  p.attached = true;
  return true;
}

}  // namespace grove::transport
