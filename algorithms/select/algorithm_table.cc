// The algorithm table (algorithm_table.h).
#include "algorithms/select/algorithm_table.h"

#include <initializer_list>
#include <utility>

#include "algorithms/builders/builders.h"

namespace grove::plan {
namespace {

constexpr unsigned bit(Coll c) { return 1u << static_cast<unsigned>(c); }

AlgoInfo row(Algo id, const char* name, const char* description, bool needsPlans,
             std::initializer_list<std::pair<Coll, BuildFn>> builders, unsigned moreColls = 0) {
  AlgoInfo info{id, name, description, needsPlans, moreColls, {}};
  for (const auto& [coll, fn] : builders) {
    info.colls |= bit(coll);
    info.builders[static_cast<size_t>(coll)] = fn;
  }
  return info;
}

std::array<AlgoInfo, kNumAlgos> makeTable() {
  std::array<AlgoInfo, kNumAlgos> t{
      row(Algo::kRing, "ring",
          "rings for the bandwidth collectives, chains for broadcast and reduce", false,
          {{Coll::kAllReduce, buildRingAllReduce},
           {Coll::kBroadcast, buildChainBroadcast},
           {Coll::kReduce, buildChainReduce},
           {Coll::kAllGather, buildRingAllGather},
           {Coll::kReduceScatter, buildRingReduceScatter}}),
      row(Algo::kDirect, "direct",
          "one hop to every peer (latency); the only gather, scatter, "
          "all-to-all and send/recv",
          false,
          {{Coll::kAllReduce, buildDirectAllReduce},
           {Coll::kBroadcast, buildDirectBroadcast},
           {Coll::kReduce, buildDirectReduce},
           {Coll::kAllGather, buildDirectAllGather},
           {Coll::kReduceScatter, buildDirectReduceScatter},
           {Coll::kGather, buildGather},
           {Coll::kScatter, buildScatter},
           {Coll::kAlltoAll, buildAlltoAll}},
          bit(Coll::kSendRecv)),  // send/recv: buildP2P
      row(Algo::kTree, "tree",
          "spanning trees packed over the topology (reduce + broadcast; a forest rooted at "
          "every rank for all-gather and reduce-scatter)",
          true, {},
          bit(Coll::kAllReduce) | bit(Coll::kBroadcast) | bit(Coll::kReduce) |
              bit(Coll::kAllGather) | bit(Coll::kReduceScatter)),
      row(Algo::kHier, "hier", "hierarchical: within machines, then across them", true, {},
          bit(Coll::kAllReduce)),
      row(Algo::kDoubling, "doubling", "recursive doubling (binomial tree for broadcast)", false,
          {{Coll::kAllReduce, buildDoublingAllReduce},
           {Coll::kAllGather, buildDoublingAllGather},
           {Coll::kBroadcast, buildDoublingBroadcast}}),
      row(Algo::kHalving, "halving", "recursive halving (Rabenseifner all-reduce)", false,
          {{Coll::kAllReduce, buildHalvingAllReduce}}),
      row(Algo::kForest, "forest",
          "all-reduce as reduce-scatter then all-gather over the forests packed for those "
          "(ForestColl), a shard per rank",
          true, {}, bit(Coll::kAllReduce)),
  };
  return t;
}

}  // namespace

const std::array<AlgoInfo, kNumAlgos>& algorithmTable() {
  static const std::array<AlgoInfo, kNumAlgos> table = makeTable();
  return table;
}

const AlgoInfo& algoInfo(Algo a) { return algorithmTable().at(static_cast<size_t>(a)); }

std::vector<AlgoCombo> builtCombos() {
  std::vector<AlgoCombo> out;
  for (const AlgoInfo& a : algorithmTable())
    for (int c = 0; c < kNumColls; ++c)
      if (a.builders[c] != nullptr) out.push_back({static_cast<Coll>(c), a.id});
  return out;
}

}  // namespace grove::plan
