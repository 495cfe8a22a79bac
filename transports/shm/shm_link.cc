#include "transports/shm/shm_link.h"

#include <string>
#include <utility>

#include "base/error.h"
#include "base/log.h"

namespace grove::transport::shm {
namespace {
constexpr auto kCheckInterval = std::chrono::milliseconds(100);
}  // namespace

ShmLinkBase::ShmLinkBase(ShmSegment seg, int peerRank, int channel, int peerPid, uint32_t closedBit)
    : seg_(std::move(seg)),
      watch_(peerPid),
      peer_(peerRank),
      channel_(channel),
      closedBit_(closedBit),
      lastCheck_(std::chrono::steady_clock::now()) {
  ShmHeader* h = header();
  ring_ = ByteRing(&h->ring, seg_.base() + h->dataOffset, h->capacity);
  if (!watch_.enabled() && peerPid > 0)
    GROVE_INFO(log::kShm,
               "rank %d (pid %d) is not visible from this process; shm link channel %d "
               "relies on the timeout to notice its death",
               peerRank, peerPid, channel);
}

ShmLinkBase::~ShmLinkBase() {
  if (seg_.base() != nullptr) header()->ring.closed.fetch_or(closedBit_, std::memory_order_release);
}

void ShmLinkBase::checkPeer() {
  auto now = std::chrono::steady_clock::now();
  if (now - lastCheck_ < kCheckInterval) return;
  lastCheck_ = now;
  uint32_t closed = header()->ring.closed.load(std::memory_order_acquire) & ~closedBit_;
  const std::string link = channel_ == kSlotChannel
                               ? std::string("shm slot link")
                               : "shm link channel " + std::to_string(channel_);
  // A receiver may still read what a closed sender left; a sender is done once its reader went.
  if (closed != 0 && (closedBit_ == kSenderClosed || ring_.empty()))
    throwRemoteError("rank " + std::to_string(peer_) + " closed its end of the " + link);
  if (!watch_.alive())
    throwRemoteError("rank " + std::to_string(peer_) + " (pid " + std::to_string(watch_.pid()) +
                     ") on this host died (" + link + ")");
}

ShmSendHalf::ShmSendHalf(ShmSegment seg, int peerRank, int channel, int peerPid)
    : ShmLinkBase(std::move(seg), peerRank, channel, peerPid, kSenderClosed) {}

ShmRecvHalf::ShmRecvHalf(ShmSegment seg, int peerRank, int channel, int peerPid)
    : ShmLinkBase(std::move(seg), peerRank, channel, peerPid, kReceiverClosed) {}

ShmRecvHalf::~ShmRecvHalf() {
  // Normally the sender removed the name when it attached; if it never came
  // (or died before it could), do it here. unlink() leaves a newer file alone.
  seg_.unlink();
}

}  // namespace grove::transport::shm
