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
// Phase 1 reduces shard r of every input up the reduce-scatter forest's
// trees rooted at r into rank r's output at the shard's offset (final: avg
// divides there); phase 2 sends it down the all-gather forest's trees
// rooted at r into every output at that offset. The phases run one after
// the other: the all-gather of a shard waits for its whole reduction.
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
  const Setup rs = detail::makeSetup(a, p, reduceScatterTrees, es, TreeUse::kForest,
                                     "forest allreduce (reduce-scatter)", &shards);
  const Setup ag = detail::makeSetup(a, p, allGatherTrees, es, TreeUse::kForest,
                                     "forest allreduce (all-gather)", &shards);
  Phase reduce, gather;
  addUpLanes(reduce, prog, rs, reduceScatterTrees, shardAt, shardAt);
  addDownLanes(gather, prog, ag, allGatherTrees, Buf::kOutput, shardAt, shardAt);
  detail::addPhase(prog, std::move(reduce));
  detail::addPhase(prog, std::move(gather));
  return prog;
}

}  // namespace grove::plan
