// Slot links over shared memory: the transport.h SlotSender / SlotReceiver
// for ranks on one host, used for small messages.
//
// How it works: a slot link is a shm segment like a byte-ring link (same
// header, same handshake, the receiver owns it; shm_link.h), but its data
// area is `slots` fixed slots of `slotStride` bytes. A slot starts with a
// SlotHead -- the message's number and size -- and the payload follows at
// kSlotPayloadOffset, in the same cache line, so a message of up to 48 bytes
// travels in the one line whose number the receiver polls.
//
// Messages are numbered 1, 2, 3, ... on each link; message m lives in slot
// (m - 1) % slots. The sender writes the payload and size, then stores the
// number (release); the receiver polls for the number it expects (acquire),
// reads, and on release() stores m in the ring's tail counter. The sender
// may fill slot (m - 1) % slots once the tail shows m - slots released; it
// keeps a cached copy of the tail and re-reads the shared one only when the
// cache says every slot is taken. The ring's head counter follows the
// messages posted, so the idle checks of ShmLinkBase (closed flag, dead
// peer) work as for a byte ring.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "transports/shm/shm_link.h"
#include "transports/transport.h"

namespace grove::transport::shm {

/// The start of every slot.
struct SlotHead {
  std::atomic<uint64_t> number{0};  ///< the message in the slot (0: none yet)
  uint64_t bytes = 0;               ///< its size
};
/// Where a slot's payload starts.
constexpr size_t kSlotPayloadOffset = 16;
static_assert(sizeof(SlotHead) <= kSlotPayloadOffset, "the slot head must fit before the payload");

/// Bytes from one slot to the next for payloads of up to maxBytes.
constexpr size_t slotStrideFor(size_t maxBytes) {
  return (kSlotPayloadOffset + maxBytes + 63) / 64 * 64;
}

/// What both halves of a slot link share: the slot geometry from the header.
class ShmSlotLinkBase : public ShmLinkBase {
 protected:
  ShmSlotLinkBase(ShmSegment seg, int peerRank, int peerPid, uint32_t closedBit);
  /// Start of the slot of message m (m >= 1).
  uint8_t* slot(uint64_t m) const { return data_ + (m - 1) % slots_ * stride_; }

  uint8_t* data_;
  uint64_t slots_;
  size_t stride_;
  size_t maxBytes_;
};

/// Sending half of a slot link.
class ShmSlotSender final : public SlotSender, public ShmSlotLinkBase {
 public:
  /// Takes a mapped, attached slot-link segment; `peerPid` is the receiver's pid.
  ShmSlotSender(ShmSegment seg, int peerRank, int peerPid)
      : ShmSlotLinkBase(std::move(seg), peerRank, peerPid, kSenderClosed) {}
  size_t maxBytes() const override { return maxBytes_; }
  void* acquire() override {
    if (next_ > releasedCache_ + slots_) {
      releasedCache_ = header()->ring.tail.load(std::memory_order_acquire);
      if (next_ > releasedCache_ + slots_) {
        onIdle();
        return nullptr;
      }
    }
    return slot(next_) + kSlotPayloadOffset;
  }
  void post(size_t n) override {
    auto* head = reinterpret_cast<SlotHead*>(slot(next_));
    head->bytes = n;
    head->number.store(next_, std::memory_order_release);
    header()->ring.head.store(next_, std::memory_order_release);
    ++next_;
  }

 private:
  uint64_t next_ = 1;           // number of the next message to post
  uint64_t releasedCache_ = 0;  // the receiver's tail as last read
};

/// Receiving half of a slot link.
class ShmSlotReceiver final : public SlotReceiver, public ShmSlotLinkBase {
 public:
  /// Takes the slot-link segment this rank created; `peerPid` is the sender's pid.
  ShmSlotReceiver(ShmSegment seg, int peerRank, int peerPid)
      : ShmSlotLinkBase(std::move(seg), peerRank, peerPid, kReceiverClosed) {}
  /// Also removes the segment's name if the sender never took it.
  ~ShmSlotReceiver() override;
  const void* poll(size_t* n) override {
    const auto* head = reinterpret_cast<const SlotHead*>(slot(next_));
    if (head->number.load(std::memory_order_acquire) != next_) {
      onIdle();
      return nullptr;
    }
    *n = head->bytes;
    if (*n > maxBytes_) badSize(*n);
    return slot(next_) + kSlotPayloadOffset;
  }
  void release() override {
    header()->ring.tail.store(next_, std::memory_order_release);
    ++next_;
  }

 private:
  [[noreturn]] void badSize(size_t n) const;

  uint64_t next_ = 1;  // number of the next message to receive
};

}  // namespace grove::transport::shm
