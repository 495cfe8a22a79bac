// The host executor: runs one rank's Program on host buffers over transport
// links, progressing every lane of a phase in one thread.
//
// How it works: each lane points at its current step and how many of the
// step's bytes are done. One pass over the lanes asks each to move what it
// can right now (limited by received bytes, free space in the outgoing
// buffer, and element boundaries), using the halves' zero-copy views so a
// fused step reduces straight from the incoming buffer into the outgoing one.
// When a pass moves nothing, the executor waits (spin, yield, sleep; see
// base/wait.h), which also enforces the timeout and the abort flag. A phase
// ends when all its lanes are done; the program ends when every send half
// has flushed.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "base/wait.h"
#include "exec/call_tag.h"
#include "ir/schedule.h"
#include "transports/transport.h"

namespace grove::exec {

/// A sending half plus this side's stream position (for the 16-byte step alignment).
struct SendLink {
  std::unique_ptr<transport::SendHalf> half;
  uint64_t position = 0;
  // Call tags (call_tag.h): set when a tagged call starts, cleared when its tag is out.
  bool tagPending = false;
  uint32_t tagDone = 0;   ///< tag bytes committed so far
  uint64_t tagBytes = 0;  ///< the call's bytes on this link (a send/recv step's)
};
/// A receiving half plus this side's stream position.
struct RecvLink {
  std::unique_ptr<transport::RecvHalf> half;
  uint64_t position = 0;
  bool tagPending = false;
  uint32_t tagDone = 0;   ///< tag bytes received so far (into tagIn)
  uint64_t tagBytes = 0;  ///< the call's bytes expected on this link (a send/recv step's)
  CallTag tagIn;
};

/// Where the executor finds the halves a program uses (already established).
class LinkTable {
 public:
  virtual ~LinkTable() = default;
  /// The sending link to key.peer on key.channel; throws if not established.
  virtual SendLink& sendLink(const transport::LinkKey& key) = 0;
  /// The receiving link from key.peer on key.channel; throws if not established.
  virtual RecvLink& recvLink(const transport::LinkKey& key) = 0;
};

/// Simple map-backed LinkTable.
class MapLinkTable : public LinkTable {
 public:
  SendLink& sendLink(const transport::LinkKey& key) override;
  RecvLink& recvLink(const transport::LinkKey& key) override;
  bool hasSend(const transport::LinkKey& key) const { return sends_.count(key) != 0; }
  bool hasRecv(const transport::LinkKey& key) const { return recvs_.count(key) != 0; }
  void addSend(const transport::LinkKey& key, std::unique_ptr<transport::SendHalf> half);
  void addRecv(const transport::LinkKey& key, std::unique_ptr<transport::RecvHalf> half);
  void clear() {
    sends_.clear();
    recvs_.clear();
  }

 private:
  std::map<transport::LinkKey, SendLink> sends_;
  std::map<transport::LinkKey, RecvLink> recvs_;
};

/// Local buffers bound to a program's symbolic buffers.
struct Buffers {
  const void* input = nullptr;
  void* output = nullptr;
  void* scratch = nullptr;   ///< at least Program::scratchBytes bytes
  std::vector<void*> extra;  ///< Buf::kExtra buffers, by BufRef::index
};

/// Element type and reduction of a call.
struct ReduceSpec {
  groveDataType_t dtype = groveFloat32;
  groveRedOp_t op = groveSum;
  int nranks = 1;  ///< divisor of avg
};

/// Every (peer, channel) the program sends to and receives from.
void collectLinks(const plan::Program& program, std::vector<transport::LinkKey>& sends,
                  std::vector<transport::LinkKey>& recvs);

namespace detail {
class Runner;
}

/// What runProgram works out once per (program, link table, data type): the
/// steps with their links, the lanes and phases, checked. Passed again with
/// the same program and table, a call only binds its buffers to it (a small
/// collective's setup then costs a copy instead of link lookups and checks).
/// Keep one per program beside the table it ran on; the program must outlive
/// it. Empty until a call with it completes.
class LoweredProgram {
 public:
  LoweredProgram();
  ~LoweredProgram();
  LoweredProgram(LoweredProgram&&) noexcept;
  LoweredProgram& operator=(LoweredProgram&&) noexcept;

 private:
  friend class detail::Runner;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Runs the program to completion. Throws grove::Error on timeout, abort, or
/// a broken link. `lowered` (optional) is the program's LoweredProgram for
/// `links`: reused when it holds the call's data type, refilled otherwise.
/// `tag` (optional) is this rank's call: each link the program uses starts
/// with a CallTag, and a peer's that does not match throws groveInvalidUsage
/// (call_tag.h). Every rank sharing the links must tag alike.
void runProgram(const plan::Program& program, const Buffers& buffers, const ReduceSpec& spec,
                LinkTable& links, const WaitContext& wait, LoweredProgram* lowered = nullptr,
                const CallTag* tag = nullptr);

}  // namespace grove::exec
