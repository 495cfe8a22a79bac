// Tree algorithms: broadcast, reduce and all-reduce over a set of weighted
// spanning trees (the output of tree packing, or any hand-made trees).
//
// How it works:
//
// The message is split into one contiguous share per tree, proportional to
// the tree's rate (rateSplit; empty shares are skipped). Each share is split
// again into `subs` near-equal parts, one per sub-channel: the channels the
// planner gave the tree (Tree::channels, by rate, so that streams sharing a
// link share it by rate), else params.nChannels / (number of trees), at
// least 1 (trees are parallel streams already), in proportion to the rates
// where they fit, limited so that every tree and direction has its own
// channels below kP2PChannel. Each (tree, part) is processed in chunks of at
// most params.chunkBytes, and each rank emits the steps of its own node of
// the tree. Children are served in ascending rank order.
//
// A step may send to up to four peers (fan-out, see Step::moreSendPeers) and
// a reducing receive may take up to four sources (fan-in, see
// Step::moreRecvPeers), so a node with k children moves a chunk as:
//
//   down (broadcast):  one RecvCopySend parent -> output -> children 1..4,
//                      all at once, then for children 5.. further fan-out
//                      Sends of the output chunk, four children each (a leaf
//                      just Recvs; the root Sends its input to groups of four);
//   up (reduce):       one RecvReduceSend of children 1..4 at once (input op
//                      c1 op c2 ...) to the parent; for children 5.. first
//                      fan-in RecvReduce steps of four children each fold
//                      them into an accumulator, the last group then goes
//                      with the RecvReduceSend (a leaf just Sends its input;
//                      the root RecvReduces its groups into the output, the
//                      last one final: avg divides there).
//
// So the children of a node stream into it concurrently, each on its own
// link, instead of one after another. The accumulator is the output chunk
// where the rank has an output of the full size (all-reduce, and the root of
// reduce: the broadcast that follows overwrites it anyway), else a chunk-sized
// scratch slot per lane (only a middle rank with more than four children
// needs one).
//
// Broadcast and reduce: one lane per (tree, part) on channel t*subs+s. The
// trees are acyclic and each lane only waits on its parent (broadcast) or
// its children (reduce), so any chunk size is deadlock free; chunks let the
// children of a node receive in turn instead of one after another.
//
// All-reduce (every tree may have its own root): each tree reduces its share
// up to its root and broadcasts it back down, pipelined by chunks. A tree
// pair (Tree::upParent) reduces up one tree and broadcasts down another with
// the same root; nothing else changes, since the lanes of the two directions
// are separate already. A non-root
// rank runs two lanes per (tree, part): the up lane on channel 2c and the
// down lane on channel 2c+1 (c = t*subs+s), so the two directions between a
// parent and a child never share a stream or a lane.
//
// Routes: a planned tree edge may travel a route other than the widest one
// (Tree::down / Tree::up, e.g. part of the traffic between NVLink neighbours
// over PCIe). Since every tree has channels of its own, the program records
// the route of each of its send links (Program::routes): the simulator
// follows it and the communicator opens that link over the route's ends. The root runs one lane:
// per chunk, reduce the children's contributions (final), then send the
// result down. Lanes depend on one another only leaf -> root -> leaf, so the
// pipeline cannot deadlock whatever the link buffer; in place is safe because
// an output chunk is overwritten by the down lane only after the root has
// received -- so this rank has finished reading -- the same input chunk.
#include <algorithm>
#include <cmath>
#include <string>

#include "algorithms/builders/builder_util.h"
#include "algorithms/builders/builders.h"
#include "algorithms/planner/topo_plans.h"
#include "base/error.h"

namespace grove::plan {

using detail::ref;
using detail::Span;

namespace {

/// One rank's node in one tree.
struct Node {
  int rank = 0;
  int parent = -1;            ///< -1 at the root
  std::vector<int> children;  ///< ascending
};

/// Checks that `t` is a spanning arborescence over `n` ranks (rooted at
/// `wantRoot` unless it is -1) and returns rank's node.
Node nodeOf(const Tree& t, int n, int rank, int wantRoot, const std::string& who) {
  if (static_cast<int>(t.parent.size()) != n)
    throwInvalidArgument(who + ": tree has " + std::to_string(t.parent.size()) +
                         " parent entries for " + std::to_string(n) + " ranks");
  if (t.root < 0 || t.root >= n || t.parent[t.root] != -1)
    throwInvalidArgument(who + ": tree root " + std::to_string(t.root) +
                         " is out of range or has a parent");
  if (wantRoot >= 0 && t.root != wantRoot)
    throwInvalidArgument(who + ": tree rooted at " + std::to_string(t.root) +
                         " but the call's root is " + std::to_string(wantRoot));
  for (int v = 0; v < n; ++v) {
    int u = v, hops = 0;
    while (u != t.root) {
      const int p = t.parent[u];
      if (p < 0 || p >= n || p == u || ++hops > n)
        throwInvalidArgument(who + ": rank " + std::to_string(v) +
                             " does not reach the tree root (bad parent " + std::to_string(p) +
                             " of rank " + std::to_string(u) + ")");
      u = p;
    }
  }
  Node node;
  node.rank = rank;
  node.parent = t.parent[rank];
  for (int v = 0; v < n; ++v)
    if (v != t.root && t.parent[v] == rank) node.children.push_back(v);
  return node;
}

/// Channels (parts) of each tree. Several trees are parallel streams
/// already, so sub-channels only make up the difference to `nChannels`; and
/// since streams that meet on a link share it about equally (TCP, and the
/// flow simulator), a tree gets channels in proportion to its rate -- else a
/// heavy tree that shares a link with a light one would get half of it and
/// finish last. At most `slots` channels in all (this bounds the connections).
std::vector<int> channelsPerTree(const std::vector<double>& rates, int nChannels, int slots) {
  const int nt = static_cast<int>(rates.size());
  const int base = std::max(1, std::min(nChannels / nt, slots / nt));
  double least = 0;
  for (double r : rates)
    if (r > 0 && (least == 0 || r < least)) least = r;
  std::vector<int> subs(rates.size(), base);
  if (least == 0) return subs;
  // Shrink the proportional counts until they fit (or the scale drops below
  // one channel for the lightest tree); if even that is too many, base each.
  int total = 0;
  for (double scale = base;; scale *= 0.75) {
    total = 0;
    for (size_t t = 0; t < rates.size(); ++t) {
      subs[t] = std::max(1, static_cast<int>(std::lround(scale * rates[t] / least)));
      total += subs[t];
    }
    if (total <= std::max(slots / 2, nt * base) || scale < 1) break;
  }
  if (total > slots) subs.assign(rates.size(), base);
  return subs;
}

/// The channels the planner gave the trees (Tree::channels), or empty when
/// it gave none or more than `slots` in all.
std::vector<int> plannedChannels(const std::vector<Tree>& trees, int slots) {
  std::vector<int> subs;
  int total = 0;
  for (const Tree& t : trees) {
    if (t.channels <= 0) return {};
    subs.push_back(t.channels);
    total += t.channels;
  }
  return total <= slots ? subs : std::vector<int>{};
}

/// What every emitter needs about the call.
struct Setup {
  std::vector<Node> nodes;    ///< this rank's node in each tree (all-reduce: the broadcast tree)
  std::vector<Node> upNodes;  ///< all-reduce: this rank's node in each reduce tree
  std::vector<Span> shares;   ///< each tree's elements
  std::vector<int> subs;      ///< parts (channels) of each tree, per direction
  std::vector<int> first;     ///< each tree's first channel index
  uint64_t es = 1;
  uint64_t chunk = 1;  ///< elements per chunk
};

Setup makeSetup(const CollArgs& a, const PlanParams& p, const std::vector<Tree>& trees, uint64_t es,
                int dirs, bool rooted, const std::string& who) {
  if (trees.empty()) throwInvalidArgument(who + ": no trees");
  const int slots = kP2PChannel / dirs;
  if (static_cast<int>(trees.size()) > slots)
    throwInvalidArgument(who + ": " + std::to_string(trees.size()) + " trees need more than the " +
                         std::to_string(kP2PChannel) + " channels available (at most " +
                         std::to_string(slots) + " trees)");
  Setup s;
  std::vector<double> rates;
  for (const Tree& t : trees) {
    s.nodes.push_back(nodeOf(t, a.nranks, a.rank, rooted ? a.root : -1, who));
    if (rooted && !t.upParent.empty())
      throwInvalidArgument(who + ": a tree pair (separate reduce tree) serves all-reduce only");
    if (!rooted) {  // the reduce tree: the same one, or a second tree into the same root
      Tree in;
      in.root = t.root;
      in.parent = t.upParent.empty() ? t.parent : t.upParent;
      s.upNodes.push_back(nodeOf(in, a.nranks, a.rank, t.root, who + " (reduce tree)"));
    }
    rates.push_back(t.rate);
  }
  s.shares = detail::rateSplit(a.count, rates, who.c_str());
  s.subs = plannedChannels(trees, slots);
  if (s.subs.empty()) s.subs = channelsPerTree(rates, p.nChannels, slots);
  int next = 0;
  for (int k : s.subs) s.first.push_back(next), next += k;
  s.es = es;
  s.chunk = detail::chunkElems(p, es);
  return s;
}

/// Calls body(tree, channelIndex, part) for every non-empty part of every
/// tree's share; channelIndex = first[tree] + sub.
template <typename Body>
void forEachPart(const Setup& s, Body body) {
  for (size_t t = 0; t < s.shares.size(); ++t)
    for (int sub = 0; sub < s.subs[t]; ++sub) {
      Span part = detail::evenSplit(s.shares[t].count, s.subs[t], sub);
      part.offset += s.shares[t].offset;
      if (part.count > 0) body(t, s.first[t] + sub, part);
    }
}

/// Calls body(byteOffset, bytes) for each chunk of a part.
template <typename Body>
void forEachChunk(const Setup& s, Span part, Body body) {
  for (uint64_t off = 0; off < part.count; off += s.chunk)
    body((part.offset + off) * s.es, std::min(s.chunk, part.count - off) * s.es);
}

/// Destinations of one fan-out step.
constexpr size_t kFanOut = kMaxMoreSendPeers + 1;

/// Makes `s` send to children [first, first + kFanOut) (those that exist).
void setDestinations(Step& s, const std::vector<int>& children, size_t first) {
  s.sendPeer = children[first];
  for (size_t i = 1; i < kFanOut && first + i < children.size(); ++i)
    s.moreSendPeers[i - 1] = children[first + i];
}

/// Down steps of one chunk: the root sends `rootSrc`; others receive into the
/// output and forward it; every step serves up to kFanOut children at once.
void emitDown(Lane& lane, const Node& n, int ch, BufRef rootSrc, uint64_t off, uint64_t bytes) {
  const BufRef out = ref(Buf::kOutput, off);
  if (n.parent >= 0 && n.children.empty()) {
    lane.steps.push_back(detail::netStep(StepKind::kRecv, n.parent, -1, ch, {}, out, bytes));
    return;
  }
  size_t next = 0;
  BufRef src = rootSrc;
  if (n.parent >= 0) {
    Step fwd =
        detail::netStep(StepKind::kRecvCopySend, n.parent, n.children[0], ch, {}, out, bytes);
    setDestinations(fwd, n.children, 0);
    lane.steps.push_back(fwd);
    next = kFanOut;
    src = out;
  }
  for (; next < n.children.size(); next += kFanOut) {
    Step send = detail::netStep(StepKind::kSend, -1, n.children[next], ch, src, {}, bytes);
    setDestinations(send, n.children, next);
    lane.steps.push_back(send);
  }
}

/// Sources of one fan-in step.
constexpr size_t kFanIn = kMaxMoreRecvPeers + 1;

/// Makes `s` reduce children [first, first + kFanIn) (those that exist).
void setSources(Step& s, const std::vector<int>& children, size_t first) {
  s.recvPeer = children[first];
  for (size_t i = 1; i < kFanIn && first + i < children.size(); ++i)
    s.moreRecvPeers[i - 1] = children[first + i];
}

/// Up steps of one chunk: fold the children, up to kFanIn per step, into
/// `acc` (the root into the output, final at the last group), then pass the
/// result to the parent (with the last group).
void emitUp(Lane& lane, const Node& n, int ch, uint64_t off, uint64_t bytes, BufRef acc) {
  BufRef src = ref(Buf::kInput, off);
  const size_t k = n.children.size();
  if (n.parent >= 0 && k == 0) {
    lane.steps.push_back(detail::netStep(StepKind::kSend, -1, n.parent, ch, src, {}, bytes));
    return;
  }
  if (n.parent < 0) acc = ref(Buf::kOutput, off);
  for (size_t first = 0; first < k; first += kFanIn) {
    const bool lastGroup = first + kFanIn >= k;
    Step step;
    if (lastGroup && n.parent >= 0) {
      step = detail::netStep(StepKind::kRecvReduceSend, -1, n.parent, ch, src, {}, bytes);
    } else {
      step = detail::netStep(StepKind::kRecvReduce, -1, -1, ch, src, acc, bytes,
                             /*final=*/lastGroup);
    }
    setSources(step, n.children, first);
    lane.steps.push_back(step);
    src = acc;
  }
}

/// Route of a tree edge as planned (`routes` is Tree::down or Tree::up),
/// empty when the plan left it to the widest route.
const std::vector<int>& plannedRoute(const std::vector<std::vector<int>>& routes, int rank) {
  static const std::vector<int> kNone;
  return static_cast<size_t>(rank) < routes.size() ? routes[static_cast<size_t>(rank)] : kNone;
}

/// Records the planned routes of this rank's links in tree `t`: down (to its
/// children, from its parent, in node `n`) on channel `downCh`, up (to its
/// parent, from its children, in node `u` of the reduce tree) on `upCh`;
/// -1: that direction is not used.
void addTreeRoutes(Program& prog, const Tree& t, const Node& n, const Node& u, int downCh,
                   int upCh) {
  if (downCh >= 0) {
    for (int c : n.children) detail::addRoute(prog, c, downCh, true, plannedRoute(t.down, c));
    if (n.parent >= 0)
      detail::addRoute(prog, n.parent, downCh, false, plannedRoute(t.down, n.rank));
  }
  if (upCh >= 0) {
    for (int c : u.children) detail::addRoute(prog, c, upCh, false, plannedRoute(t.up, c));
    if (u.parent >= 0) detail::addRoute(prog, u.parent, upCh, true, plannedRoute(t.up, u.rank));
  }
}

Program treeProgram() {
  Program prog;
  prog.algo = "tree";
  return prog;
}

}  // namespace

Program buildTreeBroadcast(const CollArgs& a, const PlanParams& p, const std::vector<Tree>& trees) {
  const uint64_t es = detail::checkArgs(a, p, "tree broadcast");
  const uint64_t bytes = a.count * es;
  if (a.nranks == 1) return detail::selfCopyProgram(a, bytes, 0, 0, "tree");
  const Setup s = makeSetup(a, p, trees, es, 1, /*rooted=*/true, "tree broadcast");
  Program prog = treeProgram();
  Phase phase;
  forEachPart(s, [&](size_t t, int ch, Span part) {
    addTreeRoutes(prog, trees[t], s.nodes[t], s.nodes[t], ch, -1);
    Lane lane;
    forEachChunk(s, part, [&](uint64_t off, uint64_t b) {
      emitDown(lane, s.nodes[t], ch, ref(Buf::kInput, off), off, b);
    });
    detail::addLane(phase, std::move(lane));
  });
  if (a.rank == a.root && !a.inPlace && bytes > 0) {
    Lane local;
    local.steps.push_back(detail::copyStep(ref(Buf::kInput, 0), ref(Buf::kOutput, 0), bytes));
    detail::addLane(phase, std::move(local));
  }
  detail::addPhase(prog, std::move(phase));
  return prog;
}

Program buildTreeReduce(const CollArgs& a, const PlanParams& p, const std::vector<Tree>& trees) {
  const uint64_t es = detail::checkArgs(a, p, "tree reduce");
  if (a.nranks == 1) return detail::selfCopyProgram(a, a.count * es, 0, 0, "tree");
  const Setup s = makeSetup(a, p, trees, es, 1, /*rooted=*/true, "tree reduce");
  Program prog = treeProgram();
  Phase phase;
  forEachPart(s, [&](size_t t, int ch, Span part) {
    const Node& n = s.nodes[t];
    addTreeRoutes(prog, trees[t], n, n, -1, ch);
    // A middle rank with more children than one step takes folds them into
    // its own scratch slot.
    BufRef slot = ref(Buf::kScratch, prog.scratchBytes);
    if (n.parent >= 0 && n.children.size() > kFanIn)
      prog.scratchBytes += std::min(s.chunk, part.count) * es;
    Lane lane;
    forEachChunk(s, part, [&](uint64_t off, uint64_t b) { emitUp(lane, n, ch, off, b, slot); });
    detail::addLane(phase, std::move(lane));
  });
  detail::addPhase(prog, std::move(phase));
  return prog;
}

Program buildTreeAllReduce(const CollArgs& a, const PlanParams& p, const std::vector<Tree>& trees) {
  const uint64_t es = detail::checkArgs(a, p, "tree allreduce");
  if (a.nranks == 1) return detail::selfCopyProgram(a, a.count * es, 0, 0, "tree");
  const Setup s = makeSetup(a, p, trees, es, 2, /*rooted=*/false, "tree allreduce");
  Program prog = treeProgram();
  Phase phase;
  forEachPart(s, [&](size_t t, int c, Span part) {
    const Node& n = s.nodes[t];
    const Node& u = s.upNodes[t];
    const int up = 2 * c, down = 2 * c + 1;
    addTreeRoutes(prog, trees[t], n, u, down, up);
    Lane upLane, downLane;
    forEachChunk(s, part, [&](uint64_t off, uint64_t b) {
      const BufRef out = ref(Buf::kOutput, off);
      emitUp(upLane, u, up, off, b, out);
      // The root sends the reduced chunk down from the same lane, after the reduction.
      emitDown(n.parent < 0 ? upLane : downLane, n, down, out, off, b);
    });
    detail::addLane(phase, std::move(upLane));
    detail::addLane(phase, std::move(downLane));
  });
  detail::addPhase(prog, std::move(phase));
  return prog;
}

}  // namespace grove::plan
