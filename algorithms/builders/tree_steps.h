// The steps of one rank's node in a spanning tree, shared by the tree
// builders (tree.cc: broadcast, reduce, all-reduce) and the forest builders
// (forest.cc: all-gather, reduce-scatter): the node's parent and children,
// the channels of each tree, the fan-out and fan-in steps of one chunk, and
// the planned routes of the node's links. Internal to algorithms/builders.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/builders/builder_util.h"
#include "ir/schedule.h"

namespace grove::plan {
struct Tree;
}

namespace grove::plan::detail {

/// One rank's node in one tree.
struct Node {
  int rank = 0;
  int parent = -1;            ///< -1 at the root
  std::vector<int> children;  ///< ascending
};

/// How a builder uses its trees.
enum class TreeUse {
  kRooted,     ///< broadcast / reduce: every tree rooted at the call's root, one direction
  kAllReduce,  ///< any roots, reduce up and broadcast down (two channels per part)
  kForest,     ///< all-gather / reduce-scatter: any roots, each root's block split over its trees
};

/// What every emitter needs about the call.
struct Setup {
  std::vector<Node> nodes;    ///< this rank's node in each tree (all-reduce: the broadcast tree)
  std::vector<Node> upNodes;  ///< all-reduce: this rank's node in each reduce tree
  /// Each tree's elements: of the message, or (kForest) of its root's block.
  std::vector<Span> shares;
  std::vector<int> subs;   ///< parts (channels) of each tree, per direction
  std::vector<int> first;  ///< each tree's first channel index
  uint64_t es = 1;
  /// Elements per chunk, by tree: params.chunkBytes, and for a forest less
  /// where a tree's parts are short against its depth (see forest.cc).
  std::vector<uint64_t> chunks;
};

/// Checks the trees for the call and splits the data over them: by rate
/// (kForest: each root's block over that root's trees, every rank rooting
/// at least one; a block is a.count elements, or blocks[root] when given),
/// each tree into its planned channels (scaled up to params.nChannels) or
/// channels in proportion to the rates. Throws Error(groveInvalidArgument)
/// naming `who`.
Setup makeSetup(const CollArgs& a, const PlanParams& p, const std::vector<Tree>& trees, uint64_t es,
                TreeUse use, const std::string& who, const std::vector<uint64_t>* blocks = nullptr);

/// Node `n` as part `sub` of its tree serves its children: rotated by `sub`
/// steps' worth of children. A node with more children than one step serves
/// (fan-out / fan-in) takes them in groups, one after another, and its parts
/// run on lanes of their own at once: in one order, every part would leave
/// the same links idle at the same time (a NIC child in the second group
/// waits while the first group's NVLink children are served); rotated, the
/// parts serve different groups at a time and every link stays busy.
Node inTurn(const Node& n, int sub);

/// Calls body(tree, channelIndex, part) for every non-empty part of every
/// tree's share; channelIndex = first[tree] + sub.
template <typename Body>
void forEachPart(const Setup& s, Body body) {
  for (size_t t = 0; t < s.shares.size(); ++t)
    for (int sub = 0; sub < s.subs[t]; ++sub) {
      Span part = evenSplit(s.shares[t].count, s.subs[t], sub);
      part.offset += s.shares[t].offset;
      if (part.count > 0) body(t, s.first[t] + sub, part);
    }
}

/// Calls body(byteOffset, bytes) for each chunk of a part of tree t: the
/// fewest chunks of at most s.chunks[t] elements, near-equal (a short last
/// chunk would cost a whole step for a sliver, and end its tree's pipeline
/// out of step with the others).
template <typename Body>
void forEachChunk(const Setup& s, size_t t, Span part, Body body) {
  const uint64_t n = (part.count + s.chunks[t] - 1) / s.chunks[t];
  if (n == 0) return;
  const uint64_t base = part.count / n, longer = part.count % n;
  uint64_t off = 0;
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t count = base + (k < longer ? 1 : 0);
    body((part.offset + off) * s.es, count * s.es);
    off += count;
  }
}

/// Bytes of a fold slot for a part of tree t (emitUp's accumulator).
inline uint64_t foldSlotBytes(const Setup& s, size_t t, Span part) {
  return std::min(s.chunks[t], part.count) * s.es;
}

/// Down steps of one chunk: the root sends `rootSrc`; others receive into
/// the output at `outOff` and forward it; every step serves up to four
/// children at once (fan-out).
void emitDown(Lane& lane, const Node& n, int ch, BufRef rootSrc, uint64_t outOff, uint64_t bytes);
/// Up steps of one chunk: fold the children's contributions to the input
/// chunk at `inOff`, up to four per step, into `acc` (the root into the
/// output at `outOff`, final at the last group), then pass the result to
/// the parent (with the last group).
void emitUp(Lane& lane, const Node& n, int ch, uint64_t inOff, uint64_t outOff, uint64_t bytes,
            BufRef acc);
/// The root of an all-reduce tree in one step per chunk: receives its
/// children's contributions (node `up`), reduces them into the output at
/// `outOff` (final) and sends the result on to its children (node `down`) as
/// it comes, all on channel `ch`. False (nothing emitted) when either side
/// has more children than one step serves.
bool emitRootThrough(Lane& lane, const Node& up, const Node& down, int ch, uint64_t inOff,
                     uint64_t outOff, uint64_t bytes);
/// Whether a node needs an accumulator of its own for emitUp: a middle rank
/// with more children than one fan-in step takes.
bool needsFoldSlot(const Node& n);

/// Records the planned routes of this rank's links in tree `t`: down (to
/// its children, from its parent, in node `n`) on channel `downCh`, up (to
/// its parent, from its children, in node `u` of the reduce tree) on
/// `upCh`; -1: that direction is not used.
void addTreeRoutes(Program& prog, const Tree& t, const Node& n, const Node& u, int downCh,
                   int upCh);

}  // namespace grove::plan::detail
