// DevRing: the plain handle of one directed device link -- a single-producer
// single-consumer byte ring that a GPU thread block (or, in the host
// emulation, a CPU thread) drives directly, with no CPU in the data path.
//
// How it works: the ring's memory (control words + data) lives with the
// receiver. The sender writes data at `head % capacity` and then publishes
// by raising `*head` (release, system scope); the receiver sees the bytes
// after an acquire load of `*head`, reads or reduces them in place, and
// frees the space by raising `*tail`. Both counters only grow (bytes ever
// committed / consumed), so each side's counter is also its stream position
// across launches (the 16-byte wire rule of ir/schedule.h aligns it).
// `*closed` is set by either side when it goes away; the other side turns it
// into an error instead of waiting forever.
//
// The layout of the control words equals transports/byte_ring.h's
// RingControl (head at +0, tail at +64, closed at +128), so a ring can live
// in a shared-memory segment that a host ByteRing also understands (the
// network proxy pumps such rings into host transports). Where the memory
// sits is the transport's business:
//   cuda_p2p     device memory of the receiver, mapped into the sender by CUDA IPC
//   host_staged  pinned host shared memory, mapped into both GPUs' address spaces
//   proxy        pinned host memory of this rank, drained / filled by a proxy thread
//   emulation    plain host memory (unit and multi-process tests without a GPU)
#pragma once

#include <cstddef>
#include <cstdint>

namespace grove::transport {

/// Bytes of the control block that precedes the data of a ring (head, tail,
/// closed, each on its own 64-byte line; same layout as RingControl).
inline constexpr size_t kRingControlBytes = 192;
/// Byte offsets of the control words inside the control block.
inline constexpr size_t kRingHeadOffset = 0;
inline constexpr size_t kRingTailOffset = 64;
inline constexpr size_t kRingClosedOffset = 128;
/// A ring's capacity is a multiple of this (keeps 16-byte steps unsplit by a wrap).
inline constexpr size_t kRingCapacityAlign = 64;

/// One directed link as a device (or emulating host thread) sees it. Plain
/// data: copied into device memory as is. All pointers are valid in the
/// address space of the side that uses the handle (the sender's mapping of
/// the receiver's memory on the sending side).
struct DevRing {
  uint8_t* data = nullptr;     ///< capacity bytes
  uint64_t* head = nullptr;    ///< bytes ever committed (written by the sender)
  uint64_t* tail = nullptr;    ///< bytes ever consumed (written by the receiver)
  uint32_t* closed = nullptr;  ///< nonzero once either side went away
  uint64_t capacity = 0;       ///< a multiple of kRingCapacityAlign
};

/// A DevRing over one block of memory laid out as control block then data
/// (`base` points at kRingControlBytes + capacity bytes).
inline DevRing ringAt(void* base, uint64_t capacity) {
  auto* b = static_cast<uint8_t*>(base);
  DevRing r;
  r.head = reinterpret_cast<uint64_t*>(b + kRingHeadOffset);
  r.tail = reinterpret_cast<uint64_t*>(b + kRingTailOffset);
  r.closed = reinterpret_cast<uint32_t*>(b + kRingClosedOffset);
  r.data = b + kRingControlBytes;
  r.capacity = capacity;
  return r;
}

/// Bytes of memory a ring of `capacity` needs (control block + data).
inline constexpr size_t ringBytes(uint64_t capacity) { return kRingControlBytes + capacity; }

}  // namespace grove::transport
