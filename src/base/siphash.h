// SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed pseudo-random function
// for short messages. Grove uses it to prove knowledge of a job's secret
// without sending it: a hello carries SipHash(key, what it says), which only
// a holder of the key can make, and from which the key cannot be recovered.
#pragma once

#include <cstddef>
#include <cstdint>

namespace grove {

/// A 128-bit SipHash key.
struct SipKey {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
};

/// SipHash-2-4 of `len` bytes under `key` (the reference algorithm's output).
uint64_t sipHash24(const SipKey& key, const void* data, size_t len);

}  // namespace grove
