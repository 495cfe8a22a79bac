// Eager collectives: small collectives over slot links (transport.h), at
// most one message from each rank to each other rank, without a schedule.
//
// How it works. A collective of n ranks whose blocks (count x element size)
// fit a slot runs in three steps:
//   1. post: copy each outgoing block into a slot of the link to its rank
//      and publish it. A post waits only for a free slot, which the peer
//      frees when it finishes a call `slots` calls back -- never for
//      anything in this call, so ranks cannot wait on each other in a cycle;
//   2. gather: wait until every message this rank needs has arrived (each
//      must have the block's size: a different size means the ranks called
//      different collectives or counts, a clear error);
//   3. compute straight out of the slots, then release them.
// What each collective sends and computes:
//   all-reduce      every rank sends its input to every other rank; each
//                   reduces the n inputs in rank order 0, 1, ..., n-1 (the
//                   direct algorithm's order), so all get bitwise the same
//                   result;
//   reduce          every rank but the root sends its input to the root,
//                   which reduces them in rank order;
//   reduce-scatter  rank r sends block p of its input to rank p; each rank
//                   reduces its own block in rank order;
//   broadcast       the root sends its input to every rank;
//   all-gather      every rank sends its input to every other rank; each
//                   copies the blocks into place;
//   gather, scatter, all-to-all: block p goes to (or comes from) rank p.
// Each message is one slot; a message of up to 48 bytes is one cache line,
// so a two-rank all-reduce of a few values costs one line each way. With
// call tags (call_tag.h) every message carries the 16-byte EagerTag after
// its block, and a receiver compares it with its own call before it uses
// the block (so blocks of up to 32 bytes stay within one line). The
// in-place forms of the C API work: a rank's own block is read before its
// output is written, or copied aside first when the rank order would
// overwrite it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/wait.h"
#include "exec/call_tag.h"
#include "ir/schedule.h"
#include "transports/transport.h"

namespace grove::exec {

/// One rank's eager collectives over its slot links to every other rank.
class EagerCollectives {
 public:
  /// sends[p] / recvs[p]: the slot links to and from rank p (null for `rank`
  /// itself). Every link must hold messages of at least slotBytes(maxBytes, tags).
  /// With `tags` every message carries an EagerTag (every rank alike).
  EagerCollectives(int rank, int nranks, size_t maxBytes, bool tags,
                   std::vector<std::unique_ptr<transport::SlotSender>> sends,
                   std::vector<std::unique_ptr<transport::SlotReceiver>> recvs);
  ~EagerCollectives();

  /// The largest block a call may move.
  size_t maxBytes() const { return maxBytes_; }
  /// Whether messages carry call tags.
  bool tags() const { return tags_; }
  /// The slot size that blocks of maxBytes need (with their tag).
  static size_t slotBytes(size_t maxBytes, bool tags) {
    return maxBytes + (tags ? sizeof(EagerTag) : 0);
  }
  /// Bytes of each message of a call: its block, count x element size.
  static uint64_t blockBytes(const plan::CollArgs& args);
  /// Runs one collective (not send/recv) whose blockBytes fit maxBytes().
  /// Buffers as the C API takes them. Throws grove::Error: groveRemoteError
  /// when a peer is gone, the wait times out or the communicator is aborted;
  /// groveInvalidUsage when a peer's message does not match the call.
  /// `seq`: the call's collective number (CallTag::seq), in its tags.
  void run(const plan::CollArgs& args, const void* input, void* output, const WaitContext& wait,
           uint8_t seq);

 private:
  void post(int peer, const void* src, size_t bytes, Waiter& waiter);
  /// Posts the `bytes` at base + p * stride to every other rank p (stride 0:
  /// the same block to all).
  void postToEach(const uint8_t* base, size_t stride, size_t bytes, Waiter& waiter);
  /// Waits for the message of `peer` and copies it to `out`.
  void receiveFrom(int peer, void* out, size_t bytes, Waiter& waiter);
  /// Copies every arrived message of rank p to out + p * bytes.
  void placeArrived(uint8_t* out, size_t bytes);
  /// Waits for a block from every other rank; `own` is this rank's (or null).
  void awaitOthers(const void* own, size_t bytes, Waiter& waiter);
  void awaitAll(size_t bytes, Waiter& waiter);
  void releaseAll();
  void reduceInRankOrder(const plan::CollArgs& args, void* out, size_t bytes);

  int rank_;
  int nranks_;
  size_t maxBytes_;
  bool tags_;
  EagerTag tag_;  // the running call's tag
  std::vector<std::unique_ptr<transport::SlotSender>> sends_;
  std::vector<std::unique_ptr<transport::SlotReceiver>> recvs_;
  std::vector<const void*> source_;  // by rank: the block a step reads (a slot, or local)
  std::vector<int> expect_;          // the ranks whose message this call still waits for
  std::vector<int> arrived_;         // the ranks whose message this call holds
  std::vector<uint8_t> aside_;       // a rank's own block, copied aside (in place)
};

}  // namespace grove::exec
