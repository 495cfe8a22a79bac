// The algorithm builders: each returns one rank's Program for a collective
// call (CollArgs) and the planner's knobs (PlanParams). Every rank calls the
// same builder with the same arguments except `rank`, and the programs fit
// together: what one rank sends on a (peer, channel) link, in order, is what
// the peer receives on it.
//
// Families (one source file each, with a "how it works" block):
//   ring.cc     ring all-reduce, ring all-gather, ring reduce-scatter (rank
//               order, or any rings with data shares by rate)
//   tree.cc     broadcast, reduce, all-reduce over weighted spanning trees
//   forest.cc   all-gather, reduce-scatter over trees rooted at every rank
//   hier.cc     hierarchical all-reduce (machines, leaders, leader rings)
//   chain.cc    pipelined chain broadcast and chain reduce
//   direct.cc   latency ("direct") all-reduce, broadcast, all-gather, reduce
//   exchange.cc gather, scatter, all-to-all (direct to/from each peer)
//   p2p.cc      grouped send/recv
//
// All builders throw grove::Error(groveInvalidArgument) on bad arguments
// (rank/root out of range, invalid dtype, chunkBytes 0, nChannels < 1, ...).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/schedule.h"

namespace grove::plan {

struct Ring;
struct Tree;
struct HierPlan;

/// Connection channels of grouped send/recv: kP2PChannel .. kP2PChannel +
/// kMaxP2PChannels - 1, far above the collectives' channels 0..nChannels-1,
/// so p2p bytes never share a stream with them.
constexpr int kP2PChannel = 64;
constexpr int kMaxP2PChannels = 16;

/// Total message bytes of a call as NCCL counts them for algorithm
/// selection: count*size for all-reduce, broadcast, reduce; nranks*count*size
/// for all-gather, reduce-scatter, gather, scatter and all-to-all.
uint64_t messageBytes(const CollArgs& args);

/// Ring all-reduce (reduce-scatter then all-gather around rank order),
/// pipelined in chunks of at most params.chunkBytes over params.nChannels channels.
Program buildRingAllReduce(const CollArgs& args, const PlanParams& params);
/// Ring all-gather (rank order), chunks of at most params.chunkBytes.
Program buildRingAllGather(const CollArgs& args, const PlanParams& params);
/// Ring reduce-scatter (rank order), chunks of at most params.chunkBytes.
Program buildRingReduceScatter(const CollArgs& args, const PlanParams& params);

/// Ring all-reduce over rings in any order (topo_plan.h's Ring), several at
/// once: each ring carries a share of the message proportional to its rate
/// (all rates 0: equal shares) on channels of its own (params.nChannels / rings, at least 1).
/// Throws Error(groveInvalidArgument) when a ring is not a permutation of the ranks.
Program buildRingsAllReduce(const CollArgs& args, const PlanParams& params,
                            const std::vector<Ring>& rings);
/// Ring all-gather over rings in any order (shares of each block by rate).
Program buildRingsAllGather(const CollArgs& args, const PlanParams& params,
                            const std::vector<Ring>& rings);
/// Ring reduce-scatter over rings in any order (shares of each block by rate).
Program buildRingsReduceScatter(const CollArgs& args, const PlanParams& params,
                                const std::vector<Ring>& rings);

/// Broadcast down weighted spanning trees (topo_plan.h's Tree), every one
/// rooted at args.root; each tree carries a share of the message
/// proportional to its rate, pipelined in chunks of at most params.chunkBytes.
/// Throws Error(groveInvalidArgument) when a tree is not a spanning tree
/// rooted at args.root, or there are more trees than channels.
Program buildTreeBroadcast(const CollArgs& args, const PlanParams& params,
                           const std::vector<Tree>& trees);
/// Reduce up weighted spanning trees rooted at args.root (as buildTreeBroadcast).
Program buildTreeReduce(const CollArgs& args, const PlanParams& params,
                        const std::vector<Tree>& trees);
/// All-reduce over weighted spanning trees with any roots: each tree reduces
/// its share up to its root and broadcasts it back down, pipelined by chunks.
Program buildTreeAllReduce(const CollArgs& args, const PlanParams& params,
                           const std::vector<Tree>& trees);
/// All-gather over a forest: trees rooted at every rank (at least one each,
/// any shapes), rank r's block split over the trees rooted at r by rate and
/// broadcast down them, pipelined by chunks, each tree on channels of its
/// own. Throws Error(groveInvalidArgument) when a tree is not a spanning
/// tree, some rank roots no tree, or there are more trees than channels.
Program buildTreeAllGather(const CollArgs& args, const PlanParams& params,
                           const std::vector<Tree>& trees);
/// Reduce-scatter over a forest of in-trees (Tree::parent: where a rank
/// sends its partial sum): block r of every input is reduced up the trees
/// rooted at r into rank r's output, shares by rate (as buildTreeAllGather).
Program buildTreeReduceScatter(const CollArgs& args, const PlanParams& params,
                               const std::vector<Tree>& trees);
/// All-reduce over forests: rank r's shard (count / nranks elements, the
/// first count % nranks ranks one more) reduced up the reduce-scatter
/// forest into rank r (as buildTreeReduceScatter), then sent down the
/// all-gather forest to every rank (as buildTreeAllGather); two phases.
/// Throws Error(groveInvalidArgument) as those two do.
Program buildForestAllReduce(const CollArgs& args, const PlanParams& params,
                             const std::vector<Tree>& reduceScatterTrees,
                             const std::vector<Tree>& allGatherTrees);
/// Hierarchical all-reduce: per channel of the plan, reduce inside each
/// machine to its leader, ring all-reduce among the leaders, broadcast inside
/// each machine. Throws Error(groveInvalidArgument) when the plan does not
/// cover every rank exactly once or a leader is not on its machine.
Program buildHierAllReduce(const CollArgs& args, const PlanParams& params, const HierPlan& plan);

/// Chain broadcast root -> root+1 -> ... -> root-1 (ring order), one
/// streaming step per channel.
Program buildChainBroadcast(const CollArgs& args, const PlanParams& params);
/// Chain reduce root+1 -> root+2 -> ... -> root (ring order), one streaming
/// step per channel; the root applies the final reduction.
Program buildChainReduce(const CollArgs& args, const PlanParams& params);

/// Direct all-reduce: everyone sends everything to everyone, then each rank
/// reduces the nranks contributions in rank order (bitwise-identical results).
Program buildDirectAllReduce(const CollArgs& args, const PlanParams& params);
/// Direct broadcast: the root sends the message to each rank.
Program buildDirectBroadcast(const CollArgs& args, const PlanParams& params);
/// Direct all-gather: every rank sends its block to every other rank.
Program buildDirectAllGather(const CollArgs& args, const PlanParams& params);
/// Direct reduce: every rank sends to the root, which reduces in rank order.
Program buildDirectReduce(const CollArgs& args, const PlanParams& params);
/// Direct reduce-scatter: block p of every rank's input goes to rank p,
/// which reduces the copies in rank order.
Program buildDirectReduceScatter(const CollArgs& args, const PlanParams& params);
/// Recursive-doubling all-reduce: log2(nranks) pairwise exchange rounds
/// (other rank counts fold the extra ranks in first and out last).
Program buildDoublingAllReduce(const CollArgs& args, const PlanParams& params);
/// Recursive-doubling all-gather (power-of-two rank counts; others: direct).
Program buildDoublingAllGather(const CollArgs& args, const PlanParams& params);
/// Binomial-tree broadcast: ceil(log2(nranks)) hops, any rank count.
Program buildDoublingBroadcast(const CollArgs& args, const PlanParams& params);
/// Halving-doubling (Rabenseifner) all-reduce: a recursive-halving
/// reduce-scatter and a recursive-doubling all-gather, 2 log2(nranks) pairwise
/// rounds moving what the ring moves (other rank counts fold in as doubling's).
Program buildHalvingAllReduce(const CollArgs& args, const PlanParams& params);

/// Gather: every rank sends its block straight to the root.
Program buildGather(const CollArgs& args, const PlanParams& params);
/// Scatter: the root sends block r straight to rank r.
Program buildScatter(const CollArgs& args, const PlanParams& params);
/// All-to-all: one send lane and one receive lane per peer, plus the local block copy.
Program buildAlltoAll(const CollArgs& args, const PlanParams& params);

/// One operation of a send/recv group, from the calling rank's point of view.
struct P2POp {
  bool isSend = true;             ///< send (true) or receive (false)
  int peer = -1;                  ///< the other rank (may be the calling rank itself)
  uint64_t bytes = 0;             ///< bytes sent or received
  BufRef buf{Buf::kExtra, 0, 0};  ///< the user buffer, normally Buf::kExtra with its index
};

/// A send/recv group: all ops run concurrently in one phase, one lane per
/// (direction, peer, channel) holding that pair's ops (or their pieces on
/// that channel) in call order, so sends and receives between two ranks
/// match in call order when their byte counts match, as NCCL requires.
/// Sends to self are paired with receives from self in order and become local
/// copies (their byte counts must match). Zero-byte ops are dropped.
Program buildP2P(const std::vector<P2POp>& ops, int rank, int nranks, const P2PSplit& split = {});

}  // namespace grove::plan
