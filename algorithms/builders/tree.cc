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
// channels below kP2PChannel. Each (tree, part) is processed in the fewest
// near-equal chunks of at most params.chunkBytes, and each rank emits the
// steps of its own node of the tree. Children are served in ascending rank
// order, rotated by a step's worth of children per part (inTurn: a node
// with more than four children serves them in groups, and its parts,
// running at once, then take different groups at a time).
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
// up to its root and broadcasts it back down, pipelined by chunks. A non-root
// rank runs two lanes per (tree, part): the up lane (RecvReduceSend from its
// children to its parent) and the down lane (RecvCopySend from its parent
// to its children), which never wait on each other. The root streams: one
// RecvReduceCopySend per chunk receives its children's contributions,
// reduces them into the output (final) and sends the result straight back
// down as it comes, as NCCL's tree does. Run as two steps (reduce the chunk,
// then send it), the root would leave its links in one direction idle while
// it receives and in the other while it sends; each tree would then be
// drained by the root rather than by its links (a DGX-1 V100's trees ran at
// 0.92 of their rate in the simulator, at 0.97 streamed). A root with more
// children than one step serves (fan-in or fan-out over four) takes the two
// steps. Both lanes of a part use channel 2c (c = t*subs+s): the two
// directions of a tree edge are different streams anyway (up child ->
// parent, down parent -> child).
//
// A tree pair (Tree::upParent) reduces up one tree and broadcasts down
// another with the same root. There an edge may carry both directions' bytes
// the same way (a rank's up parent can be its down child), so the down lane
// takes channel 2c+1 and the root its two steps: one step has one channel.
//
// Routes: a planned tree edge may travel a route other than the widest one
// (Tree::down / Tree::up, e.g. part of the traffic between NVLink neighbours
// over PCIe). Since every tree has channels of its own, the program records
// the route of each of its send links (Program::routes): the simulator
// follows it and the communicator opens that link over the route's ends.
//
// The root runs one lane. Lanes depend on one another only leaf -> root ->
// leaf, so the pipeline cannot deadlock whatever the link buffer; in place
// is safe because output bytes reach a rank's down lane only after the root
// has received -- so this rank's up lane has finished reading -- the same
// input bytes.
#include <algorithm>
#include <cmath>
#include <string>

#include "algorithms/builders/builder_util.h"
#include "algorithms/builders/builders.h"
#include "algorithms/builders/tree_steps.h"
#include "algorithms/planner/topo_plans.h"
#include "base/error.h"

namespace grove::plan {

using detail::Node;
using detail::ref;
using detail::Setup;
using detail::Span;
using detail::TreeUse;

namespace {

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
  const Setup s = makeSetup(a, p, trees, es, TreeUse::kRooted, "tree broadcast");
  Program prog = treeProgram();
  Phase phase;
  forEachPart(s, [&](size_t t, int ch, Span part) {
    const Node n = inTurn(s.nodes[t], ch - s.first[t]);
    addTreeRoutes(prog, trees[t], n, n, ch, -1);
    Lane lane;
    forEachChunk(s, t, part, [&](uint64_t off, uint64_t b) {
      emitDown(lane, n, ch, ref(Buf::kInput, off), off, b);
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
  const Setup s = makeSetup(a, p, trees, es, TreeUse::kRooted, "tree reduce");
  Program prog = treeProgram();
  Phase phase;
  forEachPart(s, [&](size_t t, int ch, Span part) {
    const Node n = inTurn(s.nodes[t], ch - s.first[t]);
    addTreeRoutes(prog, trees[t], n, n, -1, ch);
    // A middle rank with more children than one step takes folds them into
    // its own scratch slot.
    BufRef slot = ref(Buf::kScratch, prog.scratchBytes);
    if (detail::needsFoldSlot(n)) prog.scratchBytes += detail::foldSlotBytes(s, t, part);
    Lane lane;
    forEachChunk(s, t, part,
                 [&](uint64_t off, uint64_t b) { emitUp(lane, n, ch, off, off, b, slot); });
    detail::addLane(phase, std::move(lane));
  });
  detail::addPhase(prog, std::move(phase));
  return prog;
}

Program buildTreeAllReduce(const CollArgs& a, const PlanParams& p, const std::vector<Tree>& trees) {
  const uint64_t es = detail::checkArgs(a, p, "tree allreduce");
  if (a.nranks == 1) return detail::selfCopyProgram(a, a.count * es, 0, 0, "tree");
  const Setup s = makeSetup(a, p, trees, es, TreeUse::kAllReduce, "tree allreduce");
  Program prog = treeProgram();
  Phase phase;
  forEachPart(s, [&](size_t t, int c, Span part) {
    const Node n = inTurn(s.nodes[t], c - s.first[t]);
    const Node u = inTurn(s.upNodes[t], c - s.first[t]);
    const bool pair = trees[t].isPair();
    const int up = 2 * c, down = pair ? 2 * c + 1 : up;
    addTreeRoutes(prog, trees[t], n, u, down, up);
    Lane upLane, downLane;
    forEachChunk(s, t, part, [&](uint64_t off, uint64_t b) {
      if (!pair && detail::emitRootThrough(upLane, u, n, up, off, off, b)) return;
      const BufRef out = ref(Buf::kOutput, off);
      emitUp(upLane, u, up, off, off, b, out);
      // A root in two steps sends the reduced chunk down from the same lane, after the reduction.
      emitDown(n.parent < 0 ? upLane : downLane, n, down, out, off, b);
    });
    detail::addLane(phase, std::move(upLane));
    detail::addLane(phase, std::move(downLane));
  });
  detail::addPhase(prog, std::move(phase));
  return prog;
}

}  // namespace grove::plan
