#include "base/siphash.h"

#include <cstring>

namespace grove {
namespace {

inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct State {
  uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }
  void absorb(uint64_t m) {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
};

// Little-endian load of 8 bytes.
uint64_t load64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

uint64_t sipHash24(const SipKey& key, const void* data, size_t len) {
  State s{0x736f6d6570736575ull ^ key.k0, 0x646f72616e646f6dull ^ key.k1,
          0x6c7967656e657261ull ^ key.k0, 0x7465646279746573ull ^ key.k1};
  const auto* p = static_cast<const uint8_t*>(data);
  const size_t whole = len - len % 8;
  for (size_t i = 0; i < whole; i += 8) s.absorb(load64(p + i));
  uint64_t last = static_cast<uint64_t>(len & 0xff) << 56;
  for (size_t i = 0; i < len % 8; ++i) last |= static_cast<uint64_t>(p[whole + i]) << (8 * i);
  s.absorb(last);
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

}  // namespace grove
