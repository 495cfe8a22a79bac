// Hand-written schedule steps for tests of the lowering and the device
// interpreter: step(...) and the buffer references in(), out(), scratch(), extra().
#pragma once

#include <cstdint>

#include "ir/schedule.h"

namespace grove::plan::testing {

/// A step on `channel`; `final` marks the last reduction.
inline Step step(StepKind kind, int sendPeer, int recvPeer, int channel, BufRef src, BufRef dst,
                 uint64_t bytes, bool final = false) {
  Step s;
  s.kind = kind;
  s.sendPeer = sendPeer;
  s.recvPeer = recvPeer;
  s.channel = channel;
  s.src = src;
  s.dst = dst;
  s.bytes = bytes;
  s.final = final;
  return s;
}

/// A step on channel 0.
inline Step step(StepKind kind, int sendPeer, int recvPeer, BufRef src, BufRef dst,
                 uint64_t bytes) {
  return step(kind, sendPeer, recvPeer, 0, src, dst, bytes);
}

/// Offsets into the input, output, scratch and extra buffers.
inline BufRef in(uint64_t off) { return BufRef{Buf::kInput, 0, off}; }
inline BufRef out(uint64_t off) { return BufRef{Buf::kOutput, 0, off}; }
inline BufRef scratch(uint64_t off) { return BufRef{Buf::kScratch, 0, off}; }
inline BufRef extra(uint32_t i, uint64_t off) { return BufRef{Buf::kExtra, i, off}; }

}  // namespace grove::plan::testing
