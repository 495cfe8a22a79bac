#include "transports/shm/shm_slots.h"

#include <string>
#include <utility>

#include "base/error.h"

namespace grove::transport::shm {

ShmSlotLinkBase::ShmSlotLinkBase(ShmSegment seg, int peerRank, int peerPid, uint32_t closedBit)
    : ShmLinkBase(std::move(seg), peerRank, kSlotChannel, peerPid, closedBit) {
  const ShmHeader* h = header();
  data_ = seg_.base() + h->dataOffset;
  slots_ = h->slots;
  stride_ = h->slotStride;
  maxBytes_ = stride_ - kSlotPayloadOffset;
}

ShmSlotReceiver::~ShmSlotReceiver() { seg_.unlink(); }

void ShmSlotReceiver::badSize(size_t n) const {
  throw Error(groveSystemError, "slot link from rank " + std::to_string(peer()) + " holds a " +
                                    std::to_string(n) + "-byte message in a slot of " +
                                    std::to_string(maxBytes_) + " bytes (corrupted segment)");
}

}  // namespace grove::transport::shm
