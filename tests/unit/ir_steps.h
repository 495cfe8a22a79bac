// Hand-written schedule steps for tests of the lowering, the device
// interpreter and the host executor: step(...) and the shorthands of each
// kind (send, recv, fused, local, fanOut), the buffer references in(),
// out(), scratch(), extra(), a program from phases of lanes, and a byte
// pattern to fill buffers with.
#pragma once

#include <cstdint>
#include <vector>

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
inline BufRef in(uint64_t off = 0) { return BufRef{Buf::kInput, 0, off}; }
inline BufRef out(uint64_t off = 0) { return BufRef{Buf::kOutput, 0, off}; }
inline BufRef scratch(uint64_t off = 0) { return BufRef{Buf::kScratch, 0, off}; }
inline BufRef extra(uint32_t i, uint64_t off = 0) { return BufRef{Buf::kExtra, i, off}; }

/// Sends `bytes` of src to `peer`.
inline Step send(int peer, BufRef src, uint64_t bytes, int ch = 0) {
  return step(StepKind::kSend, peer, -1, ch, src, {}, bytes);
}
/// Receives `bytes` from `peer` into dst.
inline Step recv(int peer, BufRef dst, uint64_t bytes, int ch = 0) {
  return step(StepKind::kRecv, -1, peer, ch, {}, dst, bytes);
}
/// A step of a kind that receives from `from` and sends to `to`.
inline Step fused(StepKind kind, int from, int to, BufRef src, BufRef dst, uint64_t bytes,
                  int ch = 0, bool final = false) {
  return step(kind, to, from, ch, src, dst, bytes, final);
}
/// A local copy or reduce.
inline Step local(StepKind kind, BufRef src, BufRef dst, uint64_t bytes, bool final = false) {
  return step(kind, -1, -1, 0, src, dst, bytes, final);
}
/// `s` with further destinations (fan-out).
inline Step fanOut(Step s, std::vector<int> more) {
  for (size_t i = 0; i < more.size(); ++i) s.moreSendPeers[i] = more[i];
  return s;
}

/// A program from phases of lanes of steps.
inline Program program(std::vector<std::vector<std::vector<Step>>> phases,
                       uint64_t scratchBytes = 0) {
  Program p;
  for (auto& lanes : phases) {
    Phase ph;
    for (auto& steps : lanes) ph.lanes.push_back(Lane{steps});
    p.phases.push_back(ph);
  }
  p.scratchBytes = scratchBytes;
  p.algo = "test";
  return p;
}

/// n pseudo-random bytes, the same for the same seed.
inline std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

/// x rounded up to the wire's 16-byte boundary.
inline uint64_t align16(uint64_t x) { return (x + 15) / 16 * 16; }

}  // namespace grove::plan::testing
