// Random bits from the kernel, and the FNV-1a hash: the one place grove
// makes secrets and nonces and hashes short byte strings into names.
#pragma once

#include <cstddef>
#include <cstdint>

namespace grove {

/// Fills `len` bytes from getrandom(2); false if the kernel could not.
bool randomBytes(void* out, size_t len);

/// 64 random bits from the kernel (std::random_device if getrandom fails).
uint64_t randomU64();

/// FNV-1a offset basis: the `h` of fnv1a64 for a fresh hash.
inline constexpr uint64_t kFnvOffset = 14695981039346656037ull;

/// FNV-1a 64-bit hash of `len` bytes, continuing from `h` (not a MAC: use
/// sipHash24 where an attacker chooses the bytes).
inline uint64_t fnv1a64(const void* data, size_t len, uint64_t h = kFnvOffset) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < len; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace grove
