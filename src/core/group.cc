#include "core/group.h"

#include <algorithm>
#include <cerrno>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "core/concurrent_run.h"

namespace grove::core {
namespace {

// Objects held by open groups of every thread, with counts.
struct Holds {
  std::mutex mu;
  std::unordered_map<const void*, int> count;
};

Holds& holds() {
  static Holds* h = new Holds();  // never destroyed: groups may end during static teardown
  return *h;
}

// Releases what a group held when its groupEnd is over, however it ends.
struct ReleaseHolds {
  std::vector<const void*> objects;
  ~ReleaseHolds() {
    std::lock_guard<std::mutex> lock(holds().mu);
    for (const void* o : objects) {
      auto it = holds().count.find(o);
      if (it != holds().count.end() && --it->second == 0) holds().count.erase(it);
    }
  }
};

struct GroupState {
  int depth = 0;
  std::vector<GroupOp> ops;
  std::vector<GroupInit> inits;
  groveResult_t refused = groveSuccess;  ///< the first call refused in the open group
  std::string refusedText;
  std::vector<Comm*> refusedComms;  ///< the communicators of refused calls (held)
  std::vector<const void*> held;    ///< what this thread's open group holds (with repeats)
  // A thread that ends inside a group: what it recorded never runs (no
  // ticket was taken for it), and its holds go, so the communicators it
  // used can still be destroyed.
  ~GroupState() {
    if (depth > 0 && (!ops.empty() || !inits.empty()))
      GROVE_WARN(log::kColl,
                 "a thread ended inside a group (no groveGroupEnd): its %zu recorded calls and %zu "
                 "inits were dropped",
                 ops.size(), inits.size());
    ReleaseHolds release{std::move(held)};
  }
};

GroupState& state() {
  thread_local GroupState s;
  return s;
}

void hold(const void* object) {
  if (object == nullptr) return;
  state().held.push_back(object);
  std::lock_guard<std::mutex> lock(holds().mu);
  ++holds().count[object];
}

// Runs a share's one-sided puts (waits == false) or waits (true).
void runOneSided(const std::vector<GroupOp>& ops, bool waits) {
  for (const GroupOp& op : ops)
    if (op.oneSided && op.oneSidedWait == waits) op.oneSided();
}

// The work of one communicator's share of a group.
std::function<void()> commWork(Comm* comm, std::vector<GroupOp> ops) {
  if (comm->isDevice())
    return [comm, ops = std::move(ops)] {
      runOneSided(ops, false);
      std::vector<Comm::DeviceCollective> colls;
      std::vector<P2PCall> p2p;
      for (const GroupOp& op : ops) {
        if (op.oneSided)
          continue;
        else if (op.isP2P)
          p2p.push_back(op.p2p);
        else
          colls.push_back({op.args, op.sendbuff, op.recvbuff});
      }
      if (!colls.empty() || !p2p.empty()) comm->deviceGroup(colls, p2p, ops.front().deviceStream);
      runOneSided(ops, true);
    };
  return [comm, ops = std::move(ops)] {
    runOneSided(ops, false);
    std::vector<P2PCall> p2p;
    for (const GroupOp& op : ops) {
      if (op.oneSided)
        continue;
      else if (op.isP2P)
        p2p.push_back(op.p2p);
      else
        comm->collective(op.args, op.sendbuff, op.recvbuff);
    }
    if (!p2p.empty()) comm->pointToPoint(p2p, groveUint8);
    runOneSided(ops, true);
  };
}

// Why a group's end that could not start its threads failed communicator c.
std::string cancelledText(const Comm& c,
                          const char* why = "could not start a thread for each of its shares") {
  return "rank " + std::to_string(c.rank()) + ": a group's end " + why +
         ", so its communicators were failed (not all of their shares ran)";
}

[[noreturn]] void throwCancelled(size_t n, const char* what) {
  throwSystemError("a group's end could not start a thread for each of its " + std::to_string(n) +
                       " " + what + ", so none ran",
                   EAGAIN);
}

}  // namespace

std::vector<const void*> groupHeld() { return state().held; }

bool groupActive() { return state().depth > 0; }

void groupStart() { ++state().depth; }

void groupRecord(GroupOp op) {
  hold(op.comm);
  hold(op.stream);
  state().ops.push_back(std::move(op));
}

void groupRecordInit(GroupInit init, const void* handle, const void* also) {
  hold(handle);
  hold(also);
  state().inits.push_back(std::move(init));
}

// Idempotent: grove's NCCL library reports a refusal of a grove call again
// (grove recorded it, then the library's queued() calls groveGroupFail);
// the first refusal's code and text stay, and a communicator is held once.
void groupRefused(groveResult_t code, const std::string& text, Comm* comm) {
  GroupState& s = state();
  if (s.depth == 0) return;
  if (s.refused == groveSuccess) {
    s.refused = code;
    s.refusedText = text;
  }
  if (comm != nullptr &&
      std::find(s.refusedComms.begin(), s.refusedComms.end(), comm) == s.refusedComms.end()) {
    hold(comm);
    s.refusedComms.push_back(comm);
  }
}

bool heldByOpenGroup(const void* object) {
  std::lock_guard<std::mutex> lock(holds().mu);
  return holds().count.count(object) != 0;
}

void enqueueTicket(Comm& comm, HostStream& stream, uint64_t ticket, std::function<void()> work) {
  Comm* c = &comm;
  // The queued work holds the Comm (when a handle owns it): a destroy that
  // stops waiting for it (its timeout passed while another communicator's
  // work ran ahead on the stream) leaves the Comm closed, not freed; this
  // work then fails at once on it, and frees it.
  std::shared_ptr<Comm> keep = comm.weak_from_this().lock();
  stream.enqueue([c, keep = std::move(keep), ticket, work = std::move(work)] {
    c->sequencer().run(ticket, work);
  });
}

void groupEnd() {
  GroupState& s = state();
  if (s.depth == 0) throwInvalidUsage("groveGroupEnd without a matching groveGroupStart");
  if (--s.depth > 0) return;
  ReleaseHolds release{std::move(s.held)};
  std::vector<GroupOp> ops = std::move(s.ops);
  std::vector<GroupInit> inits = std::move(s.inits);
  const groveResult_t refused = s.refused;
  const std::string refusedText = std::move(s.refusedText);
  s.ops.clear();
  s.inits.clear();
  s.held.clear();
  s.refused = groveSuccess;
  s.refusedText.clear();
  s.refusedComms.clear();  // held: released with the rest
  auto cancelInit = [&](size_t i) {
    try {
      inits[i](true);  // fails its handle
    } catch (...) {}
  };
  // The group's communicators, each once, failed on every rank.
  auto failAll = [&](const std::function<std::string(const Comm&)>& why) {
    std::vector<Comm*> failed;
    for (const GroupOp& op : ops)
      if (std::find(failed.begin(), failed.end(), op.comm) == failed.end())
        failed.push_back(op.comm);
    for (Comm* c : failed) c->failEverywhere(why(*c));
  };
  if (refused != groveSuccess) {
    // A call of the group was refused: none runs, and the deferred inits
    // fail their handles (NCCL's group error). The communicators stay as
    // they were, as after a refused call outside a group.
    for (size_t i = 0; i < inits.size(); ++i) cancelInit(i);
    throw Error(refused, "a call of this group was refused, so none of the group's calls ran: " +
                             refusedText);
  }
  std::optional<Concurrent> initRunner;
  try {
    initRunner.emplace(inits.size());
  } catch (...) {  // no memory: no handle may stay "initialising"
    for (size_t i = 0; i < inits.size(); ++i) cancelInit(i);
    throw;
  }
  if (!initRunner->run([&](size_t i) { inits[i](false); }, cancelInit)) {
    // The group's other calls do not run either: their communicators fail
    // (see the shares below).
    failAll([](const Comm& c) { return cancelledText(c); });
    throwCancelled(inits.size(), "communicator creations");
  }

  // Split per communicator, in order of first use.
  std::vector<Comm*> comms;
  std::vector<std::vector<GroupOp>> perComm;
  for (GroupOp& op : ops) {
    size_t i = 0;
    while (i < comms.size() && comms[i] != op.comm) ++i;
    if (i == comms.size()) {
      comms.push_back(op.comm);
      perComm.emplace_back();
    } else if (perComm[i].front().stream != op.stream ||
               perComm[i].front().deviceStream != op.deviceStream) {
      throwInvalidUsage("all operations of one communicator in a group must use the same stream");
    }
    perComm[i].push_back(std::move(op));
  }
  // Every share's sends to self must pair with its receives from self:
  // checked before any share's work starts, so a refusal sends nothing and
  // leaves every communicator as it was.
  for (size_t i = 0; i < comms.size(); ++i) {
    std::vector<P2PCall> p2p;
    for (const GroupOp& op : perComm[i])
      if (op.isP2P && !op.oneSided) p2p.push_back(op.p2p);
    checkSelfPairs(p2p, comms[i]->rank());
  }
  std::vector<HostStream*> streams;
  std::vector<std::function<void()>> works;
  for (size_t i = 0; i < comms.size(); ++i) {
    streams.push_back(perComm[i].front().stream);
    works.push_back(commWork(comms[i], std::move(perComm[i])));
  }
  // The shares without a stream run here, each as its own ticket. Nothing
  // may throw between taking a ticket and running it (the vector is
  // reserved, the move cannot throw), and a share whose queuing fails (out
  // of memory) ends the tickets taken before it as no-ops: a ticket never
  // run would stop its communicator for good. This rank's shares then did
  // not all run while other processes' may have: as when a thread cannot
  // start (below), every communicator of the group fails everywhere.
  struct Blocking {
    Comm* comm;
    uint64_t ticket;
    std::function<void()> work;
  };
  std::vector<Blocking> blocking;
  blocking.reserve(comms.size());
  Concurrent runner(static_cast<size_t>(std::count(streams.begin(), streams.end(), nullptr)));
  try {
    for (size_t i = 0; i < comms.size(); ++i) {
      if (streams[i] != nullptr)
        submit(*comms[i], streams[i], std::move(works[i]));
      else
        blocking.push_back({comms[i], comms[i]->sequencer().issue(), std::move(works[i])});
    }
  } catch (...) {
    for (Blocking& b : blocking) b.comm->sequencer().run(b.ticket, [] {});
    for (Comm* c : comms) c->failEverywhere(cancelledText(*c, "could not queue all of its shares"));
    throw;
  }
  // Cancelled (a thread could not start): this rank's shares of the group
  // did not run, while other processes' may have; every communicator of
  // the group fails, here and on its other ranks, so that none waits for
  // them and no later call pairs with what they sent.
  const bool ran = runner.run(
      [&](size_t i) { blocking[i].comm->sequencer().run(blocking[i].ticket, blocking[i].work); },
      [&](size_t i) {
        Comm* c = blocking[i].comm;
        c->sequencer().run(blocking[i].ticket, [&] { c->failEverywhere(cancelledText(*c)); });
      });
  if (ran) return;
  for (size_t i = 0; i < comms.size(); ++i)
    if (streams[i] != nullptr) comms[i]->failEverywhere(cancelledText(*comms[i]));
  throwCancelled(blocking.size(), "shares");
}

}  // namespace grove::core
