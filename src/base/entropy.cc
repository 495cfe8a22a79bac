// randomBytes and randomU64 (entropy.h).
#include "base/entropy.h"

#include <sys/random.h>

#include <random>

namespace grove {

bool randomBytes(void* out, size_t len) {
  auto* p = static_cast<uint8_t*>(out);
  while (len > 0) {
    const ssize_t got = getrandom(p, len, 0);
    if (got <= 0) return false;
    p += got;
    len -= static_cast<size_t>(got);
  }
  return true;
}

uint64_t randomU64() {
  uint64_t v = 0;
  if (randomBytes(&v, sizeof v)) return v;
  std::random_device rd;  // still non-deterministic on Linux
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace grove
