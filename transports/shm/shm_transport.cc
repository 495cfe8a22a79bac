#include "transports/shm/shm_transport.h"

#include <unistd.h>

#include <cstdio>
#include <new>
#include <set>
#include <utility>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "transports/shm/shm_link.h"

namespace grove::transport {

using shm::kShmDataOffset;
using shm::kShmMagic;
using shm::kShmVersion;
using shm::ShmHeader;
using shm::ShmSegment;

/// One send link that establish() is still waiting for.
struct ShmTransport::PendingSend {
  LinkKey key;
  std::string path;
  ShmSegment seg;
  std::string problem = "does not exist yet";
  std::unique_ptr<SendHalf> half;
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
}

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
    uint64_t h = 1469598103934665603ull;
    for (char c : jobId) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
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
  for (const LinkKey& k : recvs) recvHalves.push_back(createRecv(k));
  std::vector<std::unique_ptr<SendHalf>> sendHalves = attachSends(sends);
  GROVE_INFO(log::kShm, "rank %d: %zu shm send and %zu receive links of %zu bytes established",
             ctx_.rank, sends.size(), recvs.size(), capacity_);
  outSends = std::move(sendHalves);
  outRecvs = std::move(recvHalves);
}

std::unique_ptr<RecvHalf> ShmTransport::createRecv(const LinkKey& key) {
  std::string path = segmentPath(key.peer, ctx_.rank, key.channel);
  bool replaced = false;
  ShmSegment seg = ShmSegment::create(path, kShmDataOffset + capacity_, &replaced);
  if (replaced)
    GROVE_WARN(log::kShm, "replaced stale shm segment %s (left by a job that crashed?)", path.c_str());
  seg.map(kShmDataOffset + capacity_);
  seg.closeFd();
  auto* h = new (seg.base()) ShmHeader();
  h->magic = kShmMagic;
  h->version = kShmVersion;
  h->dataOffset = static_cast<uint32_t>(kShmDataOffset);
  h->capacity = capacity_;
  h->creatorPid = static_cast<int32_t>(getpid());
  h->src = key.peer;
  h->dst = ctx_.rank;
  h->channel = key.channel;
  h->ready.store(1, std::memory_order_release);
  GROVE_TRACE(log::kShm, "created %s (%zu bytes)", path.c_str(), capacity_);
  return std::make_unique<shm::ShmRecvHalf>(std::move(seg), key.peer, key.channel,
                                            ctx_.peers[key.peer].pid);
}

std::vector<std::unique_ptr<SendHalf>> ShmTransport::attachSends(const std::vector<LinkKey>& sends) {
  std::vector<PendingSend> pending(sends.size());
  for (size_t i = 0; i < sends.size(); ++i) {
    pending[i].key = sends[i];
    pending[i].path = segmentPath(ctx_.rank, sends[i].peer, sends[i].channel);
  }
  size_t left = pending.size();
  Waiter waiter(ctx_.wait, "waiting for peers to create their shm segments");
  while (left > 0) {
    bool moved = false;
    for (PendingSend& p : pending) {
      if (p.half == nullptr && tryAttach(p)) {
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
        if (p.half != nullptr) continue;
        throw Error(e.code(), std::string(e.what()) + "; " + std::to_string(left) +
                                  " link(s) missing, e.g. to rank " + std::to_string(p.key.peer) +
                                  " channel " + std::to_string(p.key.channel) + ": " + p.path +
                                  " " + p.problem);
      }
      throw;
    }
  }
  std::vector<std::unique_ptr<SendHalf>> halves;
  halves.reserve(pending.size());
  for (PendingSend& p : pending) halves.push_back(std::move(p.half));
  return halves;
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
  int32_t expectPid = ctx_.peers[p.key.peer].pid;
  if (expectPid > 0 && h->creatorPid != expectPid)
    return retryLater("was made by pid " + std::to_string(h->creatorPid) + ", not by rank " +
                      std::to_string(p.key.peer) + " (pid " + std::to_string(expectPid) +
                      "): stale");
  if (!p.seg.linked()) return retryLater("was removed (replaced by a newer one?)");
  // Made by the right process: from here on, anything odd is an error, not a wait.
  std::string where = "shm segment " + p.path + " of rank " + std::to_string(p.key.peer);
  if (h->version != kShmVersion)
    throw Error(groveSystemError, where + " has layout version " + std::to_string(h->version) +
                                      ", this build uses " + std::to_string(kShmVersion) +
                                      " (mixed grove builds on one host?)");
  if (h->src != ctx_.rank || h->dst != p.key.peer || h->channel != p.key.channel)
    throw Error(groveSystemError, where + " is for link " + std::to_string(h->src) + "->" +
                                      std::to_string(h->dst) + " channel " +
                                      std::to_string(h->channel) + ", not this one");
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
  p.half = std::make_unique<shm::ShmSendHalf>(std::move(p.seg), p.key.peer, p.key.channel,
                                              creatorPid);
  return true;
}

}  // namespace grove::transport
