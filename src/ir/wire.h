// The wire rule, the one constant every party to a link agrees on: each step
// starts at a kWireAlign-aligned position of every stream it touches (the
// sender pads, the receiver skips the padding), so no element straddles a
// buffer wrap. The host executor, the device interpreter, the deadlock
// simulator and the socket transport's staging rings all read it from here.
// Plain C++ with no other include: device code reads it too.
#pragma once

#include <cstdint>

namespace grove::plan {

/// Every step starts at a multiple of this many bytes of each stream.
inline constexpr uint64_t kWireAlign = 16;

/// `position` rounded up to the wire alignment.
constexpr uint64_t wireAlignUp(uint64_t position) {
  return (position + kWireAlign - 1) / kWireAlign * kWireAlign;
}

/// Padding bytes from `position` to the next aligned position.
constexpr uint64_t wirePad(uint64_t position) {
  return (kWireAlign - position % kWireAlign) % kWireAlign;
}

}  // namespace grove::plan
