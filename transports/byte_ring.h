// ByteRing: a single-producer single-consumer ring of bytes over any memory
// (a shared-memory segment, or the heap for in-process loopback).
//
// How it works: the producer owns `head` (bytes ever committed) and the
// consumer owns `tail` (bytes ever consumed); both only grow. Free space is
// capacity - (head - tail); positions map into the data area modulo the
// capacity. Each side keeps a cached copy of the other's counter and re-reads
// the shared one only when the cache shows fewer than kRefreshBelow bytes of
// room / data, so a steady stream costs one shared-cache-line read per batch,
// not per call. (Refreshing below 16 bytes rather than at 0 matters: a caller
// that needs a whole element or the rest of a 16-byte step pad must never be
// shown a stale sliver smaller than that forever.) Release stores publish
// the data; acquire loads see it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace grove::transport {

/// Shared control block of a ring (lives beside the data, e.g. in shm).
struct RingControl {
  alignas(64) std::atomic<uint64_t> head{0};    ///< written by the producer
  alignas(64) std::atomic<uint64_t> tail{0};    ///< written by the consumer
  alignas(64) std::atomic<uint32_t> closed{0};  ///< set by either side when it goes away
};

/// One side's view of a ring (producer or consumer; use one object per side).
class ByteRing {
 public:
  ByteRing() = default;
  /// `capacity` must be a multiple of 64.
  ByteRing(RingControl* control, uint8_t* data, size_t capacity)
      : ctl_(control), data_(data), cap_(capacity) {}

  size_t capacity() const { return cap_; }

  /// A cached view showing less than this many bytes is refreshed.
  static constexpr size_t kRefreshBelow = 16;

  /// Producer: contiguous free bytes at the write position (0 when full).
  size_t reserve(void** ptr) {
    uint64_t head = ctl_->head.load(std::memory_order_relaxed);
    if (cap_ - static_cast<size_t>(head - tailCache_) < kRefreshBelow) {
      tailCache_ = ctl_->tail.load(std::memory_order_acquire);
    }
    size_t freeBytes = cap_ - static_cast<size_t>(head - tailCache_);
    size_t idx = static_cast<size_t>(head % cap_);
    size_t contiguous = cap_ - idx;
    *ptr = data_ + idx;
    return freeBytes < contiguous ? freeBytes : contiguous;
  }
  /// Producer: publishes n reserved bytes.
  void commit(size_t n) {
    ctl_->head.store(ctl_->head.load(std::memory_order_relaxed) + n, std::memory_order_release);
  }
  /// Consumer: contiguous readable bytes at the read position (0 when empty).
  size_t peek(const void** ptr) {
    uint64_t tail = ctl_->tail.load(std::memory_order_relaxed);
    if (static_cast<size_t>(headCache_ - tail) < kRefreshBelow) {
      headCache_ = ctl_->head.load(std::memory_order_acquire);
    }
    size_t avail = static_cast<size_t>(headCache_ - tail);
    size_t idx = static_cast<size_t>(tail % cap_);
    size_t contiguous = cap_ - idx;
    *ptr = data_ + idx;
    return avail < contiguous ? avail : contiguous;
  }
  /// Consumer: releases n bytes.
  void consume(size_t n) {
    ctl_->tail.store(ctl_->tail.load(std::memory_order_relaxed) + n, std::memory_order_release);
  }
  /// True when the producer has committed nothing that the consumer has not consumed.
  bool empty() const {
    return ctl_->head.load(std::memory_order_acquire) == ctl_->tail.load(std::memory_order_acquire);
  }
  RingControl* control() const { return ctl_; }

 private:
  RingControl* ctl_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t cap_ = 0;
  uint64_t tailCache_ = 0;  // producer's cached copy of tail
  uint64_t headCache_ = 0;  // consumer's cached copy of head
};

}  // namespace grove::transport
