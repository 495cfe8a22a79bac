// Forest algorithms: all-gather and reduce-scatter over spanning trees
// rooted at every rank (the output of forest packing, ForestColl-style, or
// any hand-made forest).
//
// How it works:
//
// All-gather: block r (rank r's input) has to reach every rank's output at
// offset r * block. Rank r's block is split into one contiguous share per
// tree rooted at r, proportional to the tree's rate, and each share goes
// down its tree exactly as a tree broadcast's share does (tree.cc): split
// into the tree's channels, pipelined in chunks, the root sending from its
// input, every other rank receiving into its output at the block's offset
// and forwarding to up to four children per step. Trees of different roots
// run at once, each on channels of its own, so every link carries the
// blocks of all the trees that cross it. The own block is copied from input
// to output locally (nothing in place, where the input is that block).
//
// Reduce-scatter: the mirror image. Block r of every rank's input is reduced
// into rank r's output up the in-trees into r: each share is split and
// chunked the same way, a leaf sends its input chunk, a middle rank folds
// its children's chunks into its own (up to four per step) and sends the
// sum to its parent, and r folds its children's into its output (final:
// avg divides there). A middle rank with more than four children folds
// into a chunk-sized scratch slot per lane. Tree::parent is the rank a node
// sends to, and the routes are Tree::up.
//
// All-reduce over forests: reduce-scatter, then all-gather, each at its cut
// bound (ForestColl), together at the all-reduce bound 1 / (1/RS + 1/AG).
// Rank r owns shard r of the message (evenSplit: count / nranks elements,
// one more for the first count % nranks ranks, none when count < nranks).
// Pipelined where it can be: shard r is split by the rates of the
// reduce-scatter trees rooted at r and again by those of the all-gather
// trees rooted at r; cut wherever either split cuts, each piece goes up
// one reduce-scatter tree and down one all-gather tree -- a tree pair
// rooted at r, run by the tree all-reduce (tree.cc), so a chunk goes down
// as soon as its root has reduced it and the two forests' links work at
// once. That takes at most 32 pieces (a pair takes two channels).
// Otherwise two phases: phase 1 reduces shard r of every input up the
// reduce-scatter forest's trees rooted at r into rank r's output at the
// shard's offset (final: avg divides there); phase 2 sends it down the
// all-gather forest's trees rooted at r into every output at that offset,
// once the whole reduction is done. On the survey's two 8-GPU boxes with
// four NICs the pipelined form predicts 170.5 GB/s busbw against 157.1 in
// two phases (the bound is 187.5). On the DGX A100, whose forests are
// stars (a root of seven children folds and sends in groups, and a pair's
// root on one lane then runs both forests' groups one after another), it
// predicts 229.5 against 252.0; the trees there predict 297.4, so neither
// runs.
//
// Every lane waits only on its parent (all-gather) or its children
// (reduce-scatter), and trees are acyclic, so any chunk size is deadlock
// free. In place, reduce-scatter reads input block r at rank r while it
// writes the output -- the same memory, chunk by chunk, each read before it
// is written by the same step; in the all-reduce, rank r writes only shard
// r in phase 1 (which no other lane of it reads) and the other shards in
// phase 2, after every read of its input.
#include <algorithm>
#include <vector>

#include "algorithms/builders/builder_util.h"
#include "algorithms/builders/builders.h"
#include "algorithms/builders/tree_steps.h"
#include "algorithms/planner/topo_plans.h"

namespace grove::plan {

using detail::Node;
using detail::ref;
using detail::Setup;
using detail::Span;
using detail::TreeUse;

namespace {

/// Byte offsets of each rank's block: r * blockBytes.
std::vector<uint64_t> blocksAt(int nranks, uint64_t blockBytes) {
  std::vector<uint64_t> at;
  for (int r = 0; r < nranks; ++r) at.push_back(static_cast<uint64_t>(r) * blockBytes);
  return at;
}

/// Adds to `phase` the lanes that send each root's block down its trees:
/// the root from `src` at srcAt[root], every other rank into its output at
/// outAt[root] (each plus the part's offset).
void addDownLanes(Phase& phase, Program& prog, const Setup& s, const std::vector<Tree>& trees,
                  Buf src, const std::vector<uint64_t>& srcAt, const std::vector<uint64_t>& outAt) {
  forEachPart(s, [&](size_t t, int ch, Span part) {
    const Node n = detail::inTurn(s.nodes[t], ch - s.first[t]);
    const size_t root = static_cast<size_t>(trees[t].root);
    detail::addTreeRoutes(prog, trees[t], n, n, ch, -1);
    Lane lane;
    forEachChunk(s, t, part, [&](uint64_t off, uint64_t b) {
      detail::emitDown(lane, n, ch, ref(src, srcAt[root] + off), outAt[root] + off, b);
    });
    detail::addLane(phase, std::move(lane));
  });
}

/// Adds to `phase` the lanes that reduce each root's block up its trees:
/// every rank folds its input at inAt[root], the root into its output at
/// outAt[root] (each plus the part's offset).
void addUpLanes(Phase& phase, Program& prog, const Setup& s, const std::vector<Tree>& trees,
                const std::vector<uint64_t>& inAt, const std::vector<uint64_t>& outAt) {
  forEachPart(s, [&](size_t t, int ch, Span part) {
    const Node n = detail::inTurn(s.nodes[t], ch - s.first[t]);
    const size_t root = static_cast<size_t>(trees[t].root);
    detail::addTreeRoutes(prog, trees[t], n, n, -1, ch);
    const BufRef slot = ref(Buf::kScratch, prog.scratchBytes);
    if (detail::needsFoldSlot(n)) prog.scratchBytes += detail::foldSlotBytes(s, t, part);
    Lane lane;
    forEachChunk(s, t, part, [&](uint64_t off, uint64_t b) {
      detail::emitUp(lane, n, ch, inAt[root] + off, outAt[root] + off, b, slot);
    });
    detail::addLane(phase, std::move(lane));
  });
}

/// The pieces of every shard as tree pairs (reduced up a reduce-scatter
/// tree, sent down an all-gather tree, rooted alike), each with its part of
/// the message as its rate; empty where the forests do not pipeline (see
/// above). The forests have trees rooted at every rank (makeSetup checked).
std::vector<Tree> pipelinedPairs(const std::vector<Tree>& rs, const std::vector<Tree>& ag,
                                 int nranks) {
  std::vector<Tree> pairs;
  for (int r = 0; r < nranks; ++r) {
    std::vector<const Tree*> up, down;
    double upTotal = 0, downTotal = 0;
    for (const Tree& t : rs)
      if (t.root == r && t.rate > 0) up.push_back(&t), upTotal += t.rate;
    for (const Tree& t : ag)
      if (t.root == r && t.rate > 0) down.push_back(&t), downTotal += t.rate;
    // Walk both splits of the shard (fractions of it) and cut at every end.
    size_t i = 0, j = 0;
    double at = 0;
    double upEnd = up.empty() ? 0 : up[0]->rate / upTotal;
    double downEnd = down.empty() ? 0 : down[0]->rate / downTotal;
    while (i < up.size() && j < down.size()) {
      const double end = std::min(upEnd, downEnd);
      if (end - at > 1e-9) {
        Tree pair = *down[j];
        pair.upParent = up[i]->parent;
        pair.up = up[i]->up;
        if (pair.upParent == pair.parent) pair.upParent.clear();
        pair.rate = (end - at) / nranks;
        pair.channels = 0;  // the builder's, by rate
        pairs.push_back(std::move(pair));
      }
      at = end;
      if (upEnd <= end + 1e-12 && ++i < up.size()) upEnd += up[i]->rate / upTotal;
      if (downEnd <= end + 1e-12 && ++j < down.size()) downEnd += down[j]->rate / downTotal;
    }
  }
  if (pairs.size() > static_cast<size_t>(kP2PChannel / 2)) return {};
  return pairs;
}

}  // namespace

Program buildTreeAllGather(const CollArgs& a, const PlanParams& p, const std::vector<Tree>& trees) {
  const uint64_t es = detail::checkArgs(a, p, "tree allgather");
  const uint64_t blockBytes = a.count * es;
  const uint64_t myBlock = static_cast<uint64_t>(a.rank) * blockBytes;
  Program prog;
  if (detail::trivialProgram(a, blockBytes, 0, myBlock, "tree", prog)) return prog;
  const Setup s = detail::makeSetup(a, p, trees, es, TreeUse::kForest, "tree allgather");
  Phase phase;
  addDownLanes(phase, prog, s, trees, Buf::kInput, std::vector<uint64_t>(a.nranks, 0),
               blocksAt(a.nranks, blockBytes));
  if (!a.inPlace)
    detail::addLane(phase,
                    detail::copyLane(ref(Buf::kInput, 0), ref(Buf::kOutput, myBlock), blockBytes));
  detail::addPhase(prog, std::move(phase));
  return prog;
}

Program buildTreeReduceScatter(const CollArgs& a, const PlanParams& p,
                               const std::vector<Tree>& trees) {
  const uint64_t es = detail::checkArgs(a, p, "tree reducescatter");
  const uint64_t blockBytes = a.count * es;
  Program prog;
  if (detail::trivialProgram(a, blockBytes, 0, 0, "tree", prog)) return prog;
  const Setup s = detail::makeSetup(a, p, trees, es, TreeUse::kForest, "tree reducescatter");
  Phase phase;
  addUpLanes(phase, prog, s, trees, blocksAt(a.nranks, blockBytes),
             std::vector<uint64_t>(a.nranks, 0));
  detail::addPhase(prog, std::move(phase));
  return prog;
}

Program buildForestAllReduce(const CollArgs& a, const PlanParams& p,
                             const std::vector<Tree>& reduceScatterTrees,
                             const std::vector<Tree>& allGatherTrees) {
  const uint64_t es = detail::checkArgs(a, p, "forest allreduce");
  Program prog;
  if (detail::trivialProgram(a, a.count * es, 0, 0, "forest", prog)) return prog;
  std::vector<uint64_t> shards;   // elements of each rank's shard
  std::vector<uint64_t> shardAt;  // and its byte offset in the message
  for (int r = 0; r < a.nranks; ++r) {
    const Span sh = detail::evenSplit(a.count, a.nranks, r);
    shards.push_back(sh.count);
    shardAt.push_back(sh.offset * es);
  }
  // Both forests are set up even when the pairs run: that is what checks
  // them (a root on every rank, at most 32 trees), so a bad forest is
  // refused whichever form would run; it costs a pass over the trees.
  const Setup rs = detail::makeSetup(a, p, reduceScatterTrees, es, TreeUse::kForest,
                                     "forest allreduce (reduce-scatter)", &shards);
  const Setup ag = detail::makeSetup(a, p, allGatherTrees, es, TreeUse::kForest,
                                     "forest allreduce (all-gather)", &shards);
  const std::vector<Tree> pairs = pipelinedPairs(reduceScatterTrees, allGatherTrees, a.nranks);
  if (!pairs.empty()) {
    prog = buildTreeAllReduce(a, p, pairs);
    prog.algo = "forest";
    return prog;
  }
  Phase reduce, gather;
  addUpLanes(reduce, prog, rs, reduceScatterTrees, shardAt, shardAt);
  addDownLanes(gather, prog, ag, allGatherTrees, Buf::kOutput, shardAt, shardAt);
  detail::addPhase(prog, std::move(reduce));
  detail::addPhase(prog, std::move(gather));
  return prog;
}

}  // namespace grove::plan
