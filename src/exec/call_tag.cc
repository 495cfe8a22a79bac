#include "exec/call_tag.h"

#include "base/dtype.h"
#include "base/error.h"

namespace grove::exec {
namespace {

using plan::Coll;

bool validColl(uint8_t c) { return c <= static_cast<uint8_t>(Coll::kSendRecv); }

bool usesOp(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}

bool usesRoot(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
}

// An eager tag as the CallTag of `rank`.
CallTag fromEager(const EagerTag& e, int rank) {
  CallTag t;
  t.magic = kCallTagMagic;
  t.coll = e.coll;
  t.dtype = e.dtype;
  t.op = e.op;
  t.seq = e.seq;
  t.root = e.root;
  t.rank = rank;
  t.count = e.count;
  return t;
}

const char* kRule =
    ": every rank must call the same collectives in the same order, with the same count, data "
    "type, op and root";

// "allreduce(count 4, float, sum), its collective #3".
std::string numbered(const CallTag& tag) {
  return describeCall(tag) + ", its collective #" + std::to_string(tag.seq);
}

// Throws when `got` comes from another of its sender's collectives than
// `mine` (calls that sameCall found alike). Send/recv batches are not
// compared: a group may run its collectives before its sends and receives,
// so a receive can meet, in its place, a send that the peer made before a
// collective (NCCL runs both), and stale bytes between two batches are
// caught by their sizes.
void checkSameNumber(const CallTag& got, const CallTag& mine) {
  if (got.seq == mine.seq || static_cast<Coll>(mine.coll) == Coll::kSendRecv) return;
  throwInvalidUsage("call out of step: rank " + std::to_string(got.rank) + " sent these bytes in " +
                    numbered(got) + ", while rank " + std::to_string(mine.rank) +
                    " takes them in " + numbered(mine) +
                    " (numbered modulo 256): an earlier call left bytes on this link that no "
                    "call of the receiver took (did the ranks name different roots of a "
                    "broadcast, scatter, reduce or gather?), or the ranks ran different numbers "
                    "of collectives");
}

}  // namespace

bool sameCall(const CallTag& a, const CallTag& b) {
  if (a.coll != b.coll || !validColl(a.coll)) return false;
  const auto c = static_cast<Coll>(a.coll);
  if (c == Coll::kSendRecv)
    return a.dtype == kMixedTypes || b.dtype == kMixedTypes || a.dtype == b.dtype;
  return a.count == b.count && a.dtype == b.dtype && (!usesOp(c) || a.op == b.op) &&
         (!usesRoot(c) || a.root == b.root);
}

CallTag callTagOf(const plan::CollArgs& args, int rank) {
  CallTag t;
  t.magic = kCallTagMagic;
  t.coll = static_cast<uint8_t>(args.coll);
  t.dtype = static_cast<uint8_t>(args.dtype);
  t.op = static_cast<uint8_t>(args.op);
  t.root = args.root;
  t.rank = rank;
  t.count = args.count;
  return t;
}

CallTag p2pTagOf(int rank, uint8_t dtype) {
  CallTag t;
  t.magic = kCallTagMagic;
  t.coll = static_cast<uint8_t>(Coll::kSendRecv);
  t.dtype = dtype;
  t.rank = rank;
  return t;
}

CallTag linkTag(const CallTag& tag, uint64_t linkBytes) {
  CallTag t = tag;
  t.linkBytes = linkBytes;
  return t;
}

EagerTag eagerTagOf(const plan::CollArgs& args, uint8_t seq) {
  EagerTag t;
  t.coll = static_cast<uint8_t>(args.coll);
  t.dtype = static_cast<uint8_t>(args.dtype);
  t.op = static_cast<uint8_t>(args.op);
  t.seq = seq;
  t.root = args.root;
  t.count = args.count;
  return t;
}

std::string describeCall(const CallTag& tag) {
  if (!validColl(tag.coll)) return "an unknown call";
  const auto c = static_cast<Coll>(tag.coll);
  if (c == Coll::kSendRecv)
    return tag.dtype == kMixedTypes
               ? "send/recv"
               : "send/recv(" + std::string(dtypeName(static_cast<groveDataType_t>(tag.dtype))) +
                     ")";
  std::string text = std::string(plan::collName(c)) + "(count " + std::to_string(tag.count) + ", " +
                     dtypeName(static_cast<groveDataType_t>(tag.dtype));
  if (usesOp(c)) text += std::string(", ") + opName(static_cast<groveRedOp_t>(tag.op));
  if (usesRoot(c)) text += ", root " + std::to_string(tag.root);
  return text + ")";
}

std::string callMismatchText(const CallTag& theirs, const CallTag& mine) {
  const bool p2p = static_cast<Coll>(mine.coll) == Coll::kSendRecv &&
                   static_cast<Coll>(theirs.coll) == Coll::kSendRecv;
  return "call mismatch: rank " + std::to_string(theirs.rank) + " runs " + describeCall(theirs) +
         " while rank " + std::to_string(mine.rank) + " runs " + describeCall(mine) +
         (p2p ? ": a receive must use the data type of its send" : kRule);
}

std::string p2pSizeMismatchText(int sender, uint64_t sent, int receiver, uint64_t received) {
  const std::string from = "rank " + std::to_string(sender),
                    to = "rank " + std::to_string(receiver);
  return "send/recv size mismatch: " + from + " sends " + std::to_string(sent) + " bytes to " + to +
         ", which receives " + std::to_string(received) + " bytes from " + from +
         ": a receive must be as large as its send";
}

void checkCallTag(const CallTag& got, const CallTag& mine) {
  const std::string me = "rank " + std::to_string(mine.rank);
  if (got.magic != kCallTagMagic || !validColl(got.coll))
    throwInvalidUsage(me +
                      " read no call tag where a call of its peer begins: the ranks' streams "
                      "are out of step (do the ranks use the same GROVE_CHECK?)");
  const std::string peer = "rank " + std::to_string(got.rank);
  if (!sameCall(got, mine)) throwInvalidUsage(callMismatchText(got, mine));
  checkSameNumber(got, mine);
  const bool p2p = static_cast<Coll>(mine.coll) == Coll::kSendRecv;
  if (got.linkBytes == mine.linkBytes) return;
  if (p2p)
    throwInvalidUsage(p2pSizeMismatchText(got.rank, got.linkBytes, mine.rank, mine.linkBytes));
  throwInvalidUsage("schedule mismatch in " + describeCall(mine) + ": " + peer + " sends " +
                    std::to_string(got.linkBytes) + " bytes to " + me + ", which expects " +
                    std::to_string(mine.linkBytes) +
                    ": the ranks' settings gave them different schedules");
}

void checkEagerTag(const EagerTag& got, const EagerTag& mine, int peer, int rank) {
  const CallTag g = fromEager(got, peer), m = fromEager(mine, rank);
  if (!sameCall(g, m)) throwInvalidUsage(callMismatchText(g, m));
  checkSameNumber(g, m);
}

}  // namespace grove::exec
