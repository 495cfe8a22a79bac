// Topology-aware planning: the graph the planners work on, the rings and
// trees they produce, and the planner entry points. This header is the
// contract between the planners (plan_graph.cc, ring_search.cc,
// tree_pack.cc, ...), the lowering to the schedule IR (tree builders,
// ordered-ring builders), the cost model / simulator, grove-plan and the
// communicator, which plans once at init from its CommTopology.
//
// Units: capacities and rates are GB/s (1e9 bytes/s) per direction,
// latencies microseconds.
//
// Rates: a Ring's or a Tree's `rate` is the bytes per second of the
// collective's message that it carries; its share of a message is
// rate / sum of rates. For broadcast/reduce trees, a tree edge parent->child
// carries `rate` on every link of the route parent->child (broadcast) or
// child->parent (reduce). For all-reduce trees (reduce up, broadcast down,
// pipelined), every edge carries `rate` in both directions at once; for a
// tree pair (Tree::upParent set) the reduce tree's edges carry it child ->
// parent and the broadcast tree's parent -> child.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "topology/comm_topology.h"
#include "topology/graph.h"

namespace grove::plan {

/// A ring: order[i] sends to order[(i+1) % n]. Holds every rank once.
struct Ring {
  std::vector<int> order;
  double rate = 0;  ///< GB/s of message data this ring carries
  /// routes[i]: plan-graph links of the hop order[i] -> order[(i+1) % n], as
  /// planned; empty (or missing) means PlanGraph::widestRoute of that hop.
  std::vector<std::vector<int>> routes;
};

/// A spanning arborescence over the ranks, rooted at `root`.
/// Streams a set of trees runs on at most, per direction (the channels the
/// planner hands out in fair_share.cc; the builders have at least as many).
constexpr int kMaxTreeChannels = 32;
/// Streams a forest (all-gather, reduce-scatter: one direction) runs on at
/// most: every channel below the send/recv channels.
constexpr int kMaxForestChannels = 64;

struct Tree {
  int root = 0;
  std::vector<int> parent;  ///< by rank; -1 for the root
  double rate = 0;          ///< GB/s of message data this tree carries
  /// Streams (channels per direction) the tree runs on; 0: the builder's
  /// choice from the rates. Set by the planner with `rate` the tree's share
  /// when every stream on a link gets the same part of it (fair_share.cc).
  int channels = 0;
  /// down[r]: plan-graph links of the route parent[r] -> r, as planned; empty
  /// (or missing) means PlanGraph::widestRoute(parent[r], r).
  std::vector<std::vector<int>> down;
  /// up[r]: links of the route r -> upParentOf(r) (reduce / all-reduce);
  /// empty (or missing) means PlanGraph::widestRoute(r, upParentOf(r)).
  std::vector<std::vector<int>> up;
  /// All-reduce only: the parents of the reduce tree (an in-tree into the
  /// same root) when it is not `parent` -- a tree pair: the share is reduced
  /// up one tree and broadcast down another. Empty: the same tree both ways.
  std::vector<int> upParent;
  /// A tree pair: the reduce tree differs from the broadcast tree.
  bool isPair() const { return !upParent.empty() && upParent != parent; }
  /// The rank r sends its reduction to (-1 at the root).
  int upParentOf(int r) const {
    return upParent.empty() ? parent.at(static_cast<size_t>(r))
                            : upParent.at(static_cast<size_t>(r));
  }
};

/// One direction of a link the planners may load.
struct PlanLink {
  int from = -1;   ///< plan-graph vertex
  int to = -1;     ///< plan-graph vertex
  double cap = 0;  ///< GB/s
  double latencyUs = 0;
  topo::LinkKind kind = topo::LinkKind::kPcie;
  int topoLink = -1;  ///< index in the topo::Graph, -1 for a rank's virtual port
};

/// Knobs of the plan graph.
struct PlanGraphOptions {
  /// Capacity (GB/s per direction) of the virtual port joining a rank to its
  /// topology node when several ranks share that node (host communicators:
  /// ranks on one CPU; several ranks per GPU). 0 = the node attribute
  /// "mem_bw" when present, else 10.
  double sharedPortBw = 0;
};

/// The planners' graph: the machine graph's nodes and directed links plus one
/// vertex per rank, joined to the rank's topology node by a virtual port (of
/// unbounded capacity when the rank is alone on its node). Routes between
/// ranks never relay through another rank's vertex nor through any GPU node
/// (a GPU does not forward NVLink/PCIe traffic for others), cross a NIC only
/// between its PCIe and network sides, and use network links only between
/// different machines -- the rules of topo::pathBetween().
class PlanGraph {
 public:
  /// Builds the graph of a communicator's topology.
  static PlanGraph fromTopology(const topo::CommTopology& topology,
                                const PlanGraphOptions& options = {});

  int nranks() const { return nranks_; }
  int numVertices() const { return static_cast<int>(names_.size()); }
  /// Vertex of a rank.
  int rankVertex(int rank) const { return rankVertex_.at(static_cast<size_t>(rank)); }
  /// Every directed link.
  const std::vector<PlanLink>& links() const { return links_; }
  /// Links leaving vertex v.
  const std::vector<int>& outLinks(int v) const { return out_.at(static_cast<size_t>(v)); }
  /// Readable vertex name ("rank3", "host/gpu2", "host/pci1").
  const std::string& vertexName(int v) const { return names_.at(static_cast<size_t>(v)); }
  /// Machine index (0-based, graph order) of a rank.
  int machineOf(int rank) const { return machineOf_.at(static_cast<size_t>(rank)); }
  /// Number of machines of the topology (graph order, with or without ranks).
  int numMachines() const { return numMachines_; }
  /// Vertex of the topology node a rank sits on (its port's far end).
  int rankNode(int rank) const { return rankNode_.at(static_cast<size_t>(rank)); }
  /// Rank of a rank vertex, -1 for any other vertex.
  int rankOfVertex(int v) const { return vertexRank_.at(static_cast<size_t>(v)); }
  /// Whether routes may cross vertex v (false for ranks and GPUs; a route
  /// still leaves its source's node and enters its destination's node).
  bool mayRelay(int v) const { return relay_.at(static_cast<size_t>(v)); }
  /// Machine index of a vertex; -1 for network nodes.
  int machineOfVertex(int v) const { return vertexMachine_.at(static_cast<size_t>(v)); }
  /// The link in the opposite direction (same endpoints, same kind), or -1.
  int reverseLink(int link) const { return reverse_.at(static_cast<size_t>(link)); }
  /// Every link's capacity, by link index.
  std::vector<double> capacities() const;
  /// Capacity given to a virtual port that no other rank shares: unbounded
  /// in effect, finite so that arithmetic stays exact.
  static constexpr double kUnbounded = 1e9;

  /// Cheapest route (link indices) from rank a to rank b when link i costs
  /// price[i] (every price > 0); empty when b is unreachable or a == b.
  std::vector<int> cheapestRoute(int a, int b, const std::vector<double>& price) const;
  /// Widest route from rank a to rank b (bottleneck capacity, then fewest
  /// links); empty when unreachable or a == b.
  std::vector<int> widestRoute(int a, int b) const;
  /// Smallest capacity along a route (0 for an empty route).
  double bottleneck(const std::vector<int>& route) const;
  /// Summed latency along a route.
  double latencyUs(const std::vector<int>& route) const;

 private:
  int nranks_ = 0;
  std::vector<std::string> names_;
  std::vector<PlanLink> links_;
  std::vector<std::vector<int>> out_;
  std::vector<int> rankVertex_;
  std::vector<int> machineOf_;
  std::vector<bool> relay_;  ///< may a route cross this vertex
  int numMachines_ = 0;
  std::vector<int> rankNode_;       ///< by rank: vertex of its topology node
  std::vector<int> vertexRank_;     ///< by vertex: rank, or -1
  std::vector<int> vertexMachine_;  ///< by vertex: machine index, or -1
  std::vector<int> reverse_;        ///< by link: the opposite link, or -1
  friend struct PlanGraphBuilder;
};

/// Maximum flow (GB/s) from rank a to rank b over the plan graph's link
/// capacities, with the same relay rules as routes.
double maxFlow(const PlanGraph& g, int fromRank, int toRank);
/// The best broadcast rate from `root` (Edmonds): min over ranks v != root of
/// the max flow root -> v where, as in a tree, every rank may receive and
/// send on (maxFlow() with ranks as relays; GPUs still relay only through a
/// rank on them). No packing of trees can exceed it.
double broadcastBound(const PlanGraph& g, int root);
/// The all-reduce bound (GB/s of message): the optimum of the all-reduce
/// tree LP (every packing of tree pairs -- a reduce tree and a broadcast
/// tree of one root; a tree used both ways is one), proved by column
/// generation, or reduce-scatter + all-gather 1 / (1/RS + 1/AG) when that
/// is higher; capped by the per-rank, summed and per-machine flow bounds
/// true of every all-reduce. Beyond 16 ranks column generation gets a few
/// rounds over trees used both ways (no pairs), and its dual bound (or, if
/// none, the flow bounds) stands in.
double allReduceBound(const PlanGraph& g);

/// A bound with the cut that proves it.
struct CutBound {
  double rate = 0;          ///< GB/s of message (algbw)
  std::vector<int> inside;  ///< the ranks inside the cut
  double crossing = 0;      ///< GB/s of links into (all-gather) or out of (reduce-scatter) the cut
};
/// The all-gather bound (ForestColl): n * min over cuts S holding some but
/// not all ranks of B_in(S) / (ranks outside S). True of every all-gather;
/// ForestColl's per-rank broadcast trees reach it where routes may relay
/// freely (with GPUs that do not forward, it can be out of reach).
CutBound allGatherBound(const PlanGraph& g);
/// The reduce-scatter optimum: the same over the links leaving S.
CutBound reduceScatterBound(const PlanGraph& g);

/// A partition of the ranks that proves an all-reduce tree rate: every
/// spanning tree crosses between parts at least parts-1 times each way, so
/// no packing beats crossing / (2 (parts - 1)).
struct PartitionBound {
  double rate = 0;                      ///< crossing / (2 (parts - 1))
  std::vector<std::vector<int>> parts;  ///< ranks of each part
  double crossing = 0;                  ///< GB/s of links between parts, both directions
};
/// The partition read off the tree LP's dual: vertices joined by links the
/// dual leaves unpriced. Its rate equals the optimum when the dual is a
/// partition (as on graphs without switches); otherwise it is only a bound.
PartitionBound allReducePartition(const PlanGraph& g);

/// Load a set of rings or trees puts on every link (GB/s), by link index.
std::vector<double> linkLoad(const PlanGraph& g, const std::vector<Ring>& rings);
/// Same for trees; `bothDirections` for all-reduce trees.
std::vector<double> linkLoad(const PlanGraph& g, const std::vector<Tree>& trees,
                             bool bothDirections);

/// Same for a forest (packAllGatherTrees: the down routes, `gather`;
/// packReduceScatterTrees: the up routes).
std::vector<double> forestLoad(const PlanGraph& g, const std::vector<Tree>& trees, bool gather);

/// What a ring search found.
struct RingPlan {
  std::vector<Ring> rings;
  double rate = 0;        ///< sum of the rings' rates
  std::string linkClass;  ///< "nvlink", "pcie", "mixed", ... (what the rings run over)
  double planMs = 0;      ///< planning time
};

/// The best set of rings: several rings in parallel, in both directions when
/// the links allow, each loading a link at most up to its capacity.
RingPlan searchRings(const PlanGraph& g, int maxRings = 16);
/// What an NCCL-like search picks: rings over one link class only (NVLink
/// when an NVLink ring exists, else the PCIe/host path), no mixing.
RingPlan ncclLikeRings(const PlanGraph& g);

/// Judges a candidate set of trees for a collective (all-reduce, or
/// broadcast from `root`): the predicted seconds of a call over them, lower
/// is better. The cost model makes one (treeJudge in cost_model.h).
using TreeJudge = std::function<double(const std::vector<Tree>& trees, bool allReduce, int root)>;
/// Judges a candidate forest (all-gather trees when `gather`, else
/// reduce-scatter in-trees, rooted at every rank): the predicted seconds of
/// a call over it. The cost model makes one (forestJudge in cost_model.h).
using ForestJudge = std::function<double(const std::vector<Tree>& trees, bool gather)>;
/// A judge for the calls from `fromBytes` up: the plan keeps the set it
/// finds fastest for those (TreePlan::larger).
struct SizeJudge {
  uint64_t fromBytes = 0;
  TreeJudge judge;
  TreeJudge exact = {};  ///< optional: as PackOptions::exactJudge, at this size
};
/// The judge runs up to this many ranks (each candidate is a simulation of
/// every rank's program); beyond, the packer's rule stands.
constexpr int kMaxJudgeRanks = 16;
/// Sets within this share of a quick judge's fastest are judged again by
/// the exact one (PackOptions::exactJudge).
constexpr double kAmbiguous = 0.01;

/// Knobs of tree packing.
struct PackOptions {
  double epsilon = 0.05;  ///< MWU accuracy
  int maxRounds = 2000;   ///< MWU rounds at most
  int maxTrees = 24;      ///< trees kept after reduction (fewer when they suffice)
  double keep = 0.99;     ///< reduced packing keeps at least this fraction of the LP optimum
  /// When set, the number of trees is the judge's choice: the reduction
  /// above and smaller ones (keeping 97 and 93 % of the optimum, and at most
  /// 8 and 4 trees keeping 90 and 85 %) are judged and the fastest
  /// kept; TopoPlans then also judges the heterogeneous split against it.
  TreeJudge judge;
  /// Judges of larger calls (ascending fromBytes): the same candidates are
  /// judged again at each one's size, and the plan keeps each one's
  /// fastest as a set of its own (a large call can afford more trees'
  /// fill than a bucket-sized one). Only with `judge`.
  std::vector<SizeJudge> largerJudges;
  /// Optional, with a quick `judge` (one that simulates coarser, within
  /// about half a percent): when several sets come within kAmbiguous of
  /// the quick judge's fastest, this one judges them again and its verdict
  /// stands, so a near tie goes as a full simulation has it.
  TreeJudge exactJudge;
  /// Where no judge decides, split the data by the trees' fair shares (the
  /// rates their streams get when they meet on links, fair_share.cc);
  /// false: by the packing LP's weights. With a judge, both are judged.
  bool fairShares = true;
  /// With a judge, all-reduce trees are also packed from a second LP
  /// vertex, its column generation seeded with fan trees of this fan-out
  /// (tree_candidates.cc), and the judge weighs that one's sets too; 0:
  /// one vertex.
  int fanTrees = 4;
  /// When set (and up to kMaxJudgeRanks ranks), the forest packed class by
  /// class (forest_pack.cc's split) is judged against the joint one and the
  /// faster kept; without it the joint forest stands.
  ForestJudge forestJudge;
};

/// A tree set for calls from `fromBytes` up.
struct SizedTrees {
  uint64_t fromBytes = 0;
  std::vector<Tree> trees;
  double rate = 0;  ///< sum of the trees' rates
};

/// A tree set and its time at the judge's size (PackOptions::judge).
struct JudgedTrees {
  std::vector<Tree> trees;
  double seconds = 0;
  bool winsTies = true;  ///< against the sets listed before it
};

/// What tree packing found.
struct TreePlan {
  std::vector<Tree> trees;  ///< the set for every call below larger's first fromBytes
  /// Sets the judges of larger calls chose (ascending fromBytes; empty: one
  /// set for every size).
  std::vector<SizedTrees> larger;
  /// The set a call of `bytes` message bytes runs on.
  const std::vector<Tree>& treesFor(uint64_t bytes) const {
    const std::vector<Tree>* set = &trees;
    for (const SizedTrees& s : larger)
      if (bytes >= s.fromBytes && !s.trees.empty()) set = &s.trees;
    return *set;
  }
  double rate = 0;        ///< sum of the trees' rates (what they run at, links shared fairly)
  double packedRate = 0;  ///< the packing LP's rate of the trees kept by the packer's rule
  double bound = 0;       ///< the matching upper bound (broadcastBound / allReduceBound)
  double optimum =
      0;  ///< the tree LP's optimum, proved by column generation (no such packing beats it);
          ///< beyond 16 ranks the dual bound reached in a few rounds; 0 when none was proved
  int pricingRounds = 0;     ///< column generation's pricing rounds
  int judged = 0;            ///< reductions the judge compared (0: no judge)
  double judgedSeconds = 0;  ///< the judge's time for the trees kept (0: not judged)
  /// Planning only (never stored): when judged without larger judges, the
  /// sets near the kept one at the judge's size, each with its time, for a
  /// caller that judges larger calls over several packings at once
  /// (TopoPlans::jointOrSplit); empty otherwise.
  std::vector<JudgedTrees> contenders;
  int rounds = 0;    ///< MWU rounds run
  int mwuTrees = 0;  ///< distinct trees before reduction
  /// Forests: packed class by class (a forest over the NVLinks, then one
  /// over the other links) rather than over the whole graph at once.
  bool split = false;
  double planMs = 0;  ///< planning time
};

/// Broadcast / reduce trees rooted at `root` (fractional packing by MWU,
/// then reduced to few trees).
TreePlan packTrees(const PlanGraph& g, int root, const PackOptions& options = {});
/// All-reduce trees (each edge loaded in both directions), roots chosen by
/// the packer; each tree reduces its share up to its root and broadcasts it
/// back down.
TreePlan packAllReduceTrees(const PlanGraph& g, const PackOptions& options = {});
/// Forests (all-gather and reduce-scatter trees) are planned up to this
/// many ranks: each rank roots at least one tree, and every tree needs a
/// channel of its own.
constexpr int kMaxForestRanks = 32;
/// All-gather forest (ForestColl): broadcast trees rooted at every rank,
/// each carrying `rate` GB/s of its root's block; the plan's `rate`,
/// `packedRate` and `optimum` are the call's algbw (ranks x the slowest
/// root's summed rate, with fair shares and as packed), `bound` the cut
/// bound allGatherBound(). Empty beyond kMaxForestRanks ranks.
TreePlan packAllGatherTrees(const PlanGraph& g, const PackOptions& options = {});
/// Reduce-scatter forest: in-trees into every rank (Tree::parent is the
/// rank each one sends its partial reduction to, over Tree::up), each
/// reducing `rate` GB/s of its root's block; rates as packAllGatherTrees,
/// `bound` reduceScatterBound().
TreePlan packReduceScatterTrees(const PlanGraph& g, const PackOptions& options = {});
/// Heterogeneous split: packs the fast class (NVLink / NVSwitch) and the
/// rest (PCIe, host, network) separately and returns both sets of trees in
/// one plan, rates as packed, so each class carries data in proportion to
/// its rate and both finish together. `allReduce` picks the tree kind. No
/// trees (only the bound) where either class alone cannot span the ranks:
/// the other class alone is a packing packAllReduceTrees / packTrees cover.
TreePlan packHetero(const PlanGraph& g, int root, bool allReduce, const PackOptions& options = {});

/// Hierarchical plan for several machines: reduce inside each machine to a
/// leader per channel, all-reduce among the leaders across machines (one ring
/// per NIC), broadcast inside each machine.
struct HierPlan {
  std::vector<std::vector<int>> machines;  ///< ranks of each machine (ascending)
  std::vector<std::vector<int>> leaders;   ///< per channel: the leader rank of each machine
  double rate = 0;                         ///< predicted all-reduce algbw (GB/s)
  double planMs = 0;                       ///< planning time
};
/// The hierarchical plan (one channel per NIC of the busiest machine).
HierPlan planHierarchical(const PlanGraph& g);

class PlanStore;

/// A communicator's plans: built lazily on first use, then cached; with a
/// store (useStore), taken from it when a communicator of the same
/// topology made them before, and left there for the next.
class TopoPlans {
 public:
  /// Takes the graph the plans are made for and the packing knobs.
  explicit TopoPlans(PlanGraph graph, PackOptions options = {});
  /// Lets `judge` choose the number of trees of the tree plans not yet
  /// built (PackOptions::judge). It may refer to graph(): TopoPlans is not
  /// movable. `larger` judges larger calls (PackOptions::largerJudges).
  /// `key` names everything the judges' verdicts depend on (their sizes,
  /// parameters, link costs: treeJudgeKey in cost_model.h); a judge
  /// without a key keeps the plans out of the store. `exact`, when `judge`
  /// is a quick one, settles its near ties (PackOptions::exactJudge).
  void setTreeJudge(TreeJudge judge, std::string key = "", std::vector<SizeJudge> larger = {},
                    TreeJudge exact = {});
  /// Sets PackOptions::forestJudge (before the forests are planned; its
  /// identity belongs in setTreeJudge's key).
  void setForestJudge(ForestJudge judge) { options_.forestJudge = std::move(judge); }
  /// Takes plans from `store` and leaves new ones there (plan_store.h);
  /// `dir`: the store's directory for these plans ("" = memory only).
  void useStore(PlanStore* store, std::string dir = "") {
    store_ = store;
    storeDir_ = std::move(dir);
  }
  TopoPlans(const TopoPlans&) = delete;
  TopoPlans& operator=(const TopoPlans&) = delete;
  /// The plan graph.
  const PlanGraph& graph() const { return graph_; }
  const RingPlan& rings();      ///< searchRings (cached)
  const RingPlan& ncclRings();  ///< ncclLikeRings (cached)
  const TreePlan&
  allReduceTrees();  ///< packAllReduceTrees, or packHetero when that is faster (cached)
  const TreePlan& rootedTrees(
      int root);  ///< packTrees / packHetero for broadcast & reduce (cached per root)
  const TreePlan& allGatherTrees();      ///< packAllGatherTrees (cached)
  const TreePlan& reduceScatterTrees();  ///< packReduceScatterTrees (cached)
  const HierPlan& hierarchical();        ///< planHierarchical (cached)
  /// Plans at once what an all-reduce may run on (both ring plans, the
  /// all-reduce trees, the hierarchical plan): what the cost model weighs
  /// when it chooses among them. The trees take longest and use threads of
  /// their own; the rest plan beside them.
  void planAllReduce();

  /// A plan by its item name ("rings", "trees-root3", ...: the names the
  /// store files them under, after the fingerprint) and plan_codec's text.
  using NamedPlan = std::pair<std::string, std::string>;
  /// Every plan made (or taken from the store) so far.
  std::vector<NamedPlan> exportPlans() const;
  /// Takes plans that another TopoPlans over the same graph made
  /// (exportPlans, on another rank) instead of making them: each is checked
  /// against the graph as a stored plan is, and is kept in the store when
  /// `fingerprint` (the maker's sharingKey) is this one's. False, and why,
  /// at the first that is not a plan of this graph (those before it stay).
  bool importPlans(const std::vector<NamedPlan>& plans, const std::string& fingerprint,
                   std::string* why);
  /// What names these plans across processes (planFingerprint), "" when a
  /// judge without a key makes plans no fingerprint can tell apart.
  std::string sharingKey();

 private:
  /// The joint packing or the heterogeneous split (packed at once), whichever
  /// is faster by the judge when there is one, else of the higher rate; the
  /// split takes the joint packing's proven optimum and bound.
  TreePlan jointOrSplit(int root, bool allReduce) const;
  /// The plan named `item`: from the store when it holds a valid one,
  /// else made by `make` (and stored); its planMs is the time either took.
  template <typename Plan, typename Decode, typename Encode, typename Make>
  Plan planned(const std::string& item, Decode decode, Encode encode, Make make);
  /// Whether plans go to the store: a judge nobody named would make plans
  /// the fingerprint cannot tell apart.
  bool storing() const { return store_ != nullptr && nameable(); }
  /// The plans' name in the store (planFingerprint), made on first use.
  const std::string& fingerprint();
  /// Whether a fingerprint names the plans (storing() without a store).
  bool nameable() const { return (!options_.judge && !options_.forestJudge) || !judgeKey_.empty(); }
  /// Decodes `text` as item `item`'s plan into its member; false and why
  /// when it is not one (or `item` names no plan).
  bool take(const std::string& item, const std::string& text, std::string* why);

  PlanGraph graph_;
  PackOptions options_;
  std::string judgeKey_;
  PlanStore* store_ = nullptr;
  std::string storeDir_;
  std::string fingerprint_;  ///< fingerprint(), once made
  std::optional<RingPlan> rings_;
  std::optional<RingPlan> ncclRings_;
  std::optional<TreePlan> allReduceTrees_;
  std::map<int, TreePlan> rootedTrees_;
  std::optional<TreePlan> allGatherTrees_;
  std::optional<TreePlan> reduceScatterTrees_;
  std::optional<HierPlan> hierarchical_;
};

}  // namespace grove::plan
