// Call tags: every call's first bytes on each link (every send's, in a
// send/recv batch) say what the sender is doing, so a receiver whose own
// call differs fails with a clear error instead of reducing, copying or
// truncating mismatched bytes.
//
// How it works. With tags on (GROVE_CHECK=tags, the default, or calls), the
// host executor starts every call on each link it sends on with a 32-byte
// CallTag: the collective, count, data type, op, root, the sender's rank,
// its collective number and the number of bytes this call puts on that
// link. Before the first byte of a call is taken off a link, the receiver
// reads the tag and compares it with its own call: the fields that matter
// for the collective (op only for reductions, root only for rooted
// collectives; sends and receives compare the data type, when each side's
// batch uses one type, and bytes) and the link's byte count, which catches
// what the fields do not -- a receive shorter or longer than its send,
// ranks whose settings gave them different schedules. A send/recv batch
// tags each of its sends alone (each step on its link, with that step's
// bytes): the nth send to a peer meets the peer's nth receive whatever
// groups either side made, as NCCL pairs them, and each must be as large
// as the other. A collective's number (its
// low byte) catches bytes an earlier call left on a link that no call of
// the receiver took: ranks that named different roots of a broadcast all
// only send and return, and the next broadcast of the same shape would
// take the stale bytes as its own (the call board sees such calls only
// among the ranks of one host). Calls refused before they run are not
// numbered, so a call refused on one rank still loses nothing. A mismatch
// throws groveInvalidUsage naming both ranks' calls; the communicator
// passes it to every rank. The tag is 32 bytes, so the 16-byte wire rule
// still holds after it; it costs one extra commit per link per call (per
// send in a send/recv batch). Eager
// collectives carry the 16-byte EagerTag after each message's block
// instead (the link is per peer and the block's size is the message's).
#pragma once

#include <cstdint>
#include <string>

#include "ir/schedule.h"

namespace grove::exec {

/// What one rank's call puts on one link, first (host byte order).
struct CallTag {
  uint32_t magic = 0;  ///< kCallTagMagic
  uint8_t coll = 0;    ///< plan::Coll
  uint8_t dtype = 0;   ///< groveDataType_t
  uint8_t op = 0;      ///< groveRedOp_t
  /// The sender's collective number (collectives that ran on its
  /// communicator, this one included), its low byte; compared for
  /// collectives only (a send/recv batch carries the number of those
  /// before it, which no receiver compares: checkCallTag).
  uint8_t seq = 0;
  int32_t root = 0;
  int32_t rank = 0;        ///< the sender
  uint64_t count = 0;      ///< elements, as the caller gave them (0 for a send/recv batch)
  uint64_t linkBytes = 0;  ///< bytes of this call (a send/recv step) on this link, after the tag
};
static_assert(sizeof(CallTag) == 32, "the tag keeps streams 16-byte aligned");

/// The compact tag after an eager message's block (the sender is the link's peer).
struct EagerTag {
  uint8_t coll = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t seq = 0;  ///< as CallTag::seq
  int32_t root = 0;
  uint64_t count = 0;
};
static_assert(sizeof(EagerTag) == 16, "eager tags are 16 bytes");

constexpr uint32_t kCallTagMagic = 0x47544147;  // "GTAG"

/// The tag of `args` as sent by `rank` (linkBytes 0: filled per link; seq
/// 0: set once the call is numbered).
CallTag callTagOf(const plan::CollArgs& args, int rank);
/// The dtype of a send/recv batch whose calls use several data types: not compared.
constexpr uint8_t kMixedTypes = 0xff;
/// The tag of a send/recv batch as sent by `rank`: `dtype` is the data
/// type every send and receive of the batch uses (kMixedTypes if they differ).
CallTag p2pTagOf(int rank, uint8_t dtype = kMixedTypes);
/// `tag` as sent on one link: the call's bytes there (a send/recv batch's
/// step's, as each of its steps is tagged alone).
CallTag linkTag(const CallTag& tag, uint64_t linkBytes);
/// The eager tag of `args`, the `seq`-th collective.
EagerTag eagerTagOf(const plan::CollArgs& args, uint8_t seq);

/// True if the calls agree on what matters for their collective (count, type,
/// op for reductions, root for rooted ones; any two send/recv batches).
bool sameCall(const CallTag& a, const CallTag& b);

/// "allreduce(count 64, float32, sum)", "broadcast(count 8, int32, root 2)".
std::string describeCall(const CallTag& tag);

/// "call mismatch: rank 1 runs ... while rank 0 runs ...: <the rule>", for
/// calls that are not sameCall (`theirs` and `mine` name their ranks).
std::string callMismatchText(const CallTag& theirs, const CallTag& mine);
/// "send/recv size mismatch: rank <sender> sends <sent> bytes to rank
/// <receiver>, which receives <received> bytes ...".
std::string p2pSizeMismatchText(int sender, uint64_t sent, int receiver, uint64_t received);

/// Throws groveInvalidUsage when `got`, read from the link from its sender,
/// does not match `mine` (this rank's call; its linkBytes = the bytes this
/// call takes off that link), or comes from another of the sender's
/// collectives than mine's number.
void checkCallTag(const CallTag& got, const CallTag& mine);
/// The same for an eager message from `peer`.
void checkEagerTag(const EagerTag& got, const EagerTag& mine, int peer, int rank);

}  // namespace grove::exec
