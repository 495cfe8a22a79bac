// p2p.h - point-to-point of the torch backend, as gloo offers it: sends and
// receives posted in any order, in both directions at once, any number in
// flight, of any size, with tags and receives from any source.
//
// How it works: each direction between two ranks (a -> b) gets its own
// two-rank grove communicator, made on first use, and one thread at each
// end. The sender's thread sends each message as a 16-byte header (tag,
// bytes) and then the payload, in posting order. The receiver's thread runs
// only while a posted receive could take a message from that direction (one
// from that source, or from any source): it receives the next header, then
// the payload straight into the oldest posted receive whose source and tag
// match or, when none does, into a buffer that a later receive will take (an
// unexpected message, in MPI's words). So no send waits for a receive of
// another direction, a receive from any source takes the first message to
// arrive, and the collectives on the group's main communicator are never
// held up by a send nor hold one up.
//
// The two ends of a direction meet through the c10d store: the sender makes
// the unique id and publishes it under grove/p2p/<a>-><b>; the receiver
// polls for it while it has a receive to serve. A direction's grove timeout
// is long (it may idle for hours); torch's op timeout bounds each Work, and
// when it runs out the whole process group is aborted, directions included.
#pragma once

#include "staging.h"
#include "work.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace grove::pytorch {

/// The point-to-point engine of one process group.
class P2P {
 public:
  P2P(c10::intrusive_ptr<::c10d::Store> store, int rank, int size,
      std::chrono::milliseconds shutdownGrace);
  /// stop().
  ~P2P();
  /// What the direction threads share (p2p.cc).
  struct State;
  P2P(const P2P&) = delete;
  P2P& operator=(const P2P&) = delete;

  /// Queues a send of data's bytes to dst; work completes when grove took them.
  void send(c10::intrusive_ptr<GroveWork> work, Staged data, int dst, int tag);
  /// Posts a receive from src (-1: any source); work completes when data holds
  /// the message (its source is the work's sourceRank()).
  void recv(c10::intrusive_ptr<GroveWork> work, Staged data, int src, int tag);
  /// Withdraws a receive that has not started to take a message (it fails
  /// with "cancelled"); false if it is already being filled or done.
  bool cancel(const c10::intrusive_ptr<GroveWork>& work);
  /// Fails everything pending and aborts every direction (any thread).
  void abort(const std::string& why);
  /// Lets queued sends finish (at most the grace period), fails posted
  /// receives, and joins the threads.
  void stop();

 private:
  std::shared_ptr<State> state_;  ///< shared with the direction threads
};

}  // namespace grove::pytorch
