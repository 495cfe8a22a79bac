// The contents of a groveUniqueId and how it is made.
//
// How it works: a groveUniqueId is 128 opaque bytes. Grove writes into it a
// magic number, a format version, the root server's address (family, port,
// 16 address bytes, IPv6 scope), a random secret that ranks must present to
// the root, a random nonce that tells communicators apart, and a checksum.
// makeUniqueId either starts a bootstrap root server in this process on the
// chosen interface (the usual case), or, when GROVE_COMM_ID=host:port is set,
// only names that address: then every rank computes the same id from the
// environment and rank 0 starts the root during init.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/entropy.h"
#include "grove/grove.h"

namespace grove::core {

/// What a groveUniqueId holds (encoded into its 128 bytes with a magic + version).
struct UniqueIdData {
  sockaddr_storage root{};  ///< the bootstrap root's address
  uint64_t secret = 0;      ///< ranks present it in their hello
  uint64_t nonce = 0;       ///< tells communicators apart (jobIdOf)
  bool fromEnv = false;     ///< made from GROVE_COMM_ID: rank 0 starts the root
};

/// Writes `d` into the 128 bytes of `out`.
void encodeUniqueId(const UniqueIdData& d, groveUniqueId* out);
/// Reads an id; throws Error(groveInvalidArgument) on bad magic, version or checksum.
UniqueIdData decodeUniqueId(const groveUniqueId& id);

/// groveGetUniqueId: if GROVE_COMM_ID=host:port is set (and !ignoreEnv), returns
/// an id naming that address (fromEnv=true, secret from GROVE_COMM_SECRET or
/// derived from the GROVE_COMM_ID text, nonce derived likewise so every rank
/// computes the same id); otherwise picks the interface, starts a bootstrap
/// root server listening on a free port (a detached background thread that
/// lives until every rank of the job has left or died, then exits), with a
/// random secret and random nonce, and returns its id. Pass ignoreEnv=true to
/// always start a fresh root (groveCommInitAll, groveCommSplit).
UniqueIdData makeUniqueId(bool ignoreEnv = false);

/// Hex text unique per communicator (from nonce+secret-derived hash), used e.g. to name shm segments.
std::string jobIdOf(const UniqueIdData& d);

/// The key of this run's data links: the id's secret mixed (SipHash) with
/// `salts`, every rank's random value of this run in rank order. Two runs
/// of one GROVE_COMM_ID and secret get different keys, so no link hello
/// recorded in one is accepted in the other; the salts need no secrecy.
uint64_t runLinkSecret(const UniqueIdData& d, const std::vector<uint8_t>& salts);

/// FNV-1a 64-bit hash of `len` bytes, continuing from `h` (base/entropy.h).
inline uint64_t hashBytes(const void* data, size_t len, uint64_t h = kFnvOffset) {
  return fnv1a64(data, len, h);
}

}  // namespace grove::core
