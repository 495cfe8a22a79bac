// The analytic model and the selection table; see cost_model.h.
//
// How it works: a prediction builds the program of every rank with the
// planned algorithm (build(algo, args, params, &plans): planned rings, packed
// trees, the hierarchical plan) and runs the flow simulator over the plan
// graph, each transfer on the widest route between its two ranks. Tuning
// predicts, at each size of a x4 ladder from 1 KiB to 1 GiB, every algorithm
// the selector allows for a collective and keeps the fastest; consecutive
// sizes with the same winner merge into one rule whose boundary lies at twice
// the run's last size, the geometric middle between two ladder steps.
// Pipelined programs have a step count linear in the size and a fill and
// drain that do not grow with it, so above 256 MiB the time is extended
// along the line through the 64 MiB and 256 MiB predictions (the ladder's
// own points): t(S) = t256 + (S - 256M) * (t256 - t64) / 192M. Scaling the
// 256 MiB time in proportion instead charges the fill again for every
// 256 MiB. The line's points must lie where the program is a pipeline
// already: from 16 and 64 MiB it overshot forests and large tree sets by up
// to 12 % at 256 MiB; from 64 and 256 MiB it meets the 1 GiB simulation
// within 1.1 % on the DGX-1 V100 (rings 0.0 %, forest all-gather 1.1 %).
#include "algorithms/cost/cost_model.h"

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "algorithms/builders/builders.h"
#include "base/error.h"
#include "base/log.h"

namespace grove::plan {

namespace {

constexpr uint64_t kMinTuneBytes = 1u << 10;
constexpr uint64_t kMaxTuneBytes = 1ull << 30;
// Above 256 MiB a call is predicted by the line through its 64 and 256 MiB
// simulations. At 16 and 64 MiB a forest or tree set's time is not yet a
// pipeline's (its fill still shrinks relative to the call): the line through
// those two put a DGX-1 V100 forest all-gather of 256 MiB at 181.6 GB/s
// where every chunk simulated gives 162.2, and the table chose it over
// rings predicted at 166.7.
constexpr uint64_t kExtrapolateAbove = 256ull << 20;
constexpr uint64_t kExtrapolateFrom = 64ull << 20;  // the line's other point

/// The collectives with a per-size table.
constexpr Coll kTunedColls[] = {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather,
                                Coll::kReduceScatter};

std::vector<Algo> candidates(const Selector& sel, Coll coll) {
  std::vector<Algo> out;
  for (int i = 0; i < kNumAlgos; ++i) {
    const Algo a = static_cast<Algo>(i);
    if ((sel.allowedMask(coll) & (1u << i)) && algoSupports(a, coll)) out.push_back(a);
  }
  return out;
}

}  // namespace

CollArgs argsFor(Coll coll, uint64_t bytes, int nranks) {
  CollArgs a;
  a.coll = coll;
  a.nranks = nranks;
  a.dtype = groveFloat32;
  // messageBytes() says how many message bytes one element of count is.
  a.count = 1;
  a.count = std::max<uint64_t>(1, bytes / messageBytes(a));
  return a;
}

FlowNet flowNetOf(const PlanGraph& g) {
  FlowNet n;
  for (const PlanLink& l : g.links()) {
    n.capGBps.push_back(l.cap);
    n.latencyUs.push_back(l.latencyUs);
  }
  auto cache = std::make_shared<std::map<std::pair<int, int>, std::vector<int>>>();
  const PlanGraph* graph = &g;
  n.route = [graph, cache](int a, int b) {
    auto [it, added] = cache->try_emplace({a, b});
    if (added) it->second = graph->widestRoute(a, b);
    return it->second;
  };
  return n;
}

FlowSimResult simulate(const PlanGraph& g, const std::vector<Program>& programs,
                       const SimParams& p) {
  if (static_cast<int>(programs.size()) != g.nranks())
    throwInvalidArgument("simulate: " + std::to_string(programs.size()) +
                         " programs for a plan graph of " + std::to_string(g.nranks()) + " ranks");
  return simulate(flowNetOf(g), programs, p);
}

SimParams simParamsFor(const LinkTraits& links) {
  SimParams p;
  p.stepOverheadUs = links.stepOverheadUs;
  return p;
}

double busBwFactor(Coll coll, int nranks) {
  const double n = nranks;
  switch (coll) {
    case Coll::kAllReduce: return nranks > 1 ? 2 * (n - 1) / n : 1;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAlltoAll: return nranks > 1 ? (n - 1) / n : 1;
    default: return 1;
  }
}

FlowSimResult predict(TopoPlans& plans, Algo algo, const CollArgs& args, const PlanParams& params,
                      const SimParams& p, SimMemo* memo) {
  if (args.nranks != plans.graph().nranks())
    throwInvalidArgument("predict: the plans cover " + std::to_string(plans.graph().nranks()) +
                         " ranks, the call " + std::to_string(args.nranks));
  if (memo && &memo->graph() != &plans.graph())
    throwInvalidArgument("predict: the memo is over another plan graph");
  std::vector<Program> progs;
  progs.reserve(static_cast<size_t>(args.nranks));
  CollArgs a = args;
  for (int r = 0; r < args.nranks; ++r) {
    a.rank = r;
    progs.push_back(build(algo, a, params, &plans));
  }
  return memo ? memo->simulate(progs, p) : simulate(plans.graph(), progs, p);
}

namespace {

/// The seconds of every rank's program built by `build` for call `a` (its
/// rank set by rank), simulated over `g` (through `memo` when given).
double simulatedSeconds(const PlanGraph& g, const SimParams& p, CollArgs a,
                        const std::function<Program(const CollArgs&)>& build,
                        SimMemo* memo = nullptr) {
  std::vector<Program> progs;
  for (int r = 0; r < g.nranks(); ++r) {
    a.rank = r;
    progs.push_back(build(a));
  }
  return (memo ? memo->simulate(progs, p) : simulate(g, progs, p)).seconds;
}

}  // namespace

TreeJudge treeJudge(const PlanGraph& g, const Selector& sel, const SimParams& p, uint64_t bytes,
                    std::shared_ptr<SimMemo> memo) {
  if (memo && &memo->graph() != &g)
    throwInvalidArgument("treeJudge: the memo is over another graph");
  const PlanParams arParams = sel.select(Coll::kAllReduce, bytes).params;
  const PlanParams bcParams = sel.select(Coll::kBroadcast, bytes).params;
  return [&g, arParams, bcParams, p, bytes, memo](const std::vector<Tree>& trees, bool allReduce,
                                                  int root) {
    CollArgs a = argsFor(allReduce ? Coll::kAllReduce : Coll::kBroadcast, bytes, g.nranks());
    a.root = root;
    return simulatedSeconds(
        g, p, a,
        [&](const CollArgs& at) {
          return allReduce ? buildTreeAllReduce(at, arParams, trees)
                           : buildTreeBroadcast(at, bcParams, trees);
        },
        memo.get());
  };
}

ForestJudge forestJudge(const PlanGraph& g, const Selector& sel, const SimParams& p,
                        uint64_t bytes) {
  const PlanParams agParams = sel.select(Coll::kAllGather, bytes).params;
  const PlanParams rsParams = sel.select(Coll::kReduceScatter, bytes).params;
  return [&g, agParams, rsParams, p, bytes](const std::vector<Tree>& trees, bool gather) {
    const CollArgs a = argsFor(gather ? Coll::kAllGather : Coll::kReduceScatter, bytes, g.nranks());
    return simulatedSeconds(g, p, a, [&](const CollArgs& at) {
      return gather ? buildTreeAllGather(at, agParams, trees)
                    : buildTreeReduceScatter(at, rsParams, trees);
    });
  };
}

std::string treeJudgeKey(const Selector& sel, const SimParams& p, uint64_t bytes) {
  std::string key = "judge:" + std::to_string(bytes);
  for (Coll c : {Coll::kAllReduce, Coll::kBroadcast, Coll::kAllGather, Coll::kReduceScatter}) {
    const PlanParams params = sel.select(c, bytes).params;
    key += std::string(":") + collName(c) + std::to_string(params.nChannels) + "/" +
           std::to_string(params.chunkBytes);
  }
  char sim[120];
  std::snprintf(sim, sizeof sim, ":step%a:local%a:merge%a", p.stepOverheadUs, p.localGBps,
                p.mergeShare);
  return key + sim;
}

namespace {
// The judges' SimParams::mergeShare. Measured against exact simulations:
// the DGX-1 V100's 16 all-reduce tree sets move by at most 0.5 % at
// 32 MiB (their order kept), the DGX A100's forests by up to 2 %, while
// the judges simulate 4.4x fewer events (32,398 -> 7,428 for the DGX-1's
// planning). 0.05 moves the sets by up to 1 %, 0.1 by up to 4 %.
constexpr double kJudgeMergeShare = 0.02;
}  // namespace

SimParams judgeSimParams(const SimParams& p) {
  SimParams judged = p;
  judged.mergeShare = kJudgeMergeShare;
  return judged;
}

void installTreeJudges(TopoPlans& plans, const Selector& sel, const SimParams& exact,
                       uint64_t bytes) {
  // The tree judges simulate coarser, their near ties settled by full
  // simulations (PackOptions::exactJudge); the forest judge, which weighs
  // two forests of very different shapes, simulates fully.
  // The full simulations share a memo: the sets that tie often make the
  // same programs (fair shares and LP weights alike). The quick ones are
  // cheaper than the memo's hashing of their programs.
  const SimParams p = judgeSimParams(exact);
  const PlanGraph& g = plans.graph();
  auto memo = std::make_shared<SimMemo>(g);
  const uint64_t large = 2 * bytes;
  // The geometric middle of the two sizes: a call is judged by the nearer.
  const auto from = static_cast<uint64_t>(static_cast<double>(bytes) * 1.4142135623730951);
  plans.setTreeJudge(
      treeJudge(g, sel, p, bytes),
      treeJudgeKey(sel, p, bytes) + "+from" + std::to_string(from) + ":" +
          treeJudgeKey(sel, p, large),
      {SizeJudge{from, treeJudge(g, sel, p, large), treeJudge(g, sel, exact, large, memo)}},
      treeJudge(g, sel, exact, bytes, memo));
  plans.setForestJudge(forestJudge(g, sel, exact, bytes));
}

double predictSeconds(TopoPlans& plans, Algo algo, const CollArgs& args, const PlanParams& params,
                      const SimParams& p, SimMemo* memo) {
  return predict(plans, algo, args, params, p, memo).seconds;
}

double extendedSeconds(double tFrom, double tAbove, uint64_t bytes) {
  const double span = static_cast<double>(kExtrapolateAbove - kExtrapolateFrom);
  const double beyond = static_cast<double>(bytes) - static_cast<double>(kExtrapolateAbove);
  const double slope = (tAbove - tFrom) / span;
  // A program whose time does not grow with its size is not a pipeline:
  // scale in proportion (the safe side) instead.
  if (!(slope > 0) || tFrom < 0)
    return tAbove * static_cast<double>(bytes) / static_cast<double>(kExtrapolateAbove);
  return tAbove + slope * beyond;
}

double secondsBySize(uint64_t bytes, const std::function<double(uint64_t)>& secondsAt) {
  if (bytes <= kExtrapolateAbove) return secondsAt(bytes);
  const double tFrom = secondsAt(kExtrapolateFrom);
  return extendedSeconds(tFrom, secondsAt(kExtrapolateAbove), bytes);
}

std::vector<uint64_t> tuneSizes() {
  std::vector<uint64_t> sizes;
  for (uint64_t b = kMinTuneBytes; b <= kMaxTuneBytes; b *= 4) sizes.push_back(b);
  return sizes;
}

std::vector<TuneRow> tuneCollective(const Selector& sel, TopoPlans& plans, Coll coll, int nranks,
                                    const SimParams& p, SimMemo* memo) {
  const std::vector<Algo> algos = candidates(sel, coll);
  std::vector<TuneRow> rows;
  std::map<uint64_t, size_t> rowOf;
  for (uint64_t bytes : tuneSizes()) {
    TuneRow row;
    row.bytes = bytes;
    row.seconds.assign(kNumAlgos, -1);
    const Selection base = sel.select(coll, bytes);
    for (Algo a : algos) {
      double& t = row.seconds[static_cast<int>(a)];
      if (bytes > kExtrapolateAbove && a == Algo::kTree) {
        // A tree plan may hold a set of its own for this size: the line's
        // two points simulate that set.
        try {
          PlanParams at = base.params;
          at.planBytes = bytes;
          const double tFrom =
              predictSeconds(plans, a, argsFor(coll, kExtrapolateFrom, nranks), at, p, memo);
          t = extendedSeconds(
              tFrom,
              predictSeconds(plans, a, argsFor(coll, kExtrapolateAbove, nranks), at, p, memo),
              bytes);
        } catch (const Error&) {}
        continue;
      }
      if (bytes > kExtrapolateAbove) {
        const double tAbove = rows[rowOf.at(kExtrapolateAbove)].seconds[static_cast<int>(a)];
        const double tFrom = rows[rowOf.at(kExtrapolateFrom)].seconds[static_cast<int>(a)];
        if (tAbove >= 0) t = extendedSeconds(tFrom, tAbove, bytes);
        continue;
      }
      try {
        t = predictSeconds(plans, a, argsFor(coll, bytes, nranks), base.params, p, memo);
      } catch (const Error& e) {
        GROVE_INFO(log::kPlan, "cost model: %s %s cannot run here (%s)", algoName(a),
                   collName(coll), e.what());
      }
    }
    row.winner = base.algo;
    double best = -1;
    for (Algo a : algos) {
      const double t = row.seconds[static_cast<int>(a)];
      if (t >= 0 && (best < 0 || t < best)) best = t, row.winner = a;
    }
    // The table never picks what it predicts slower; on a tie the
    // transport's default stays.
    const double baseT = row.seconds[static_cast<int>(base.algo)];
    if (baseT >= 0 && baseT <= best) row.winner = base.algo;
    rowOf[bytes] = rows.size();
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<SizeRule> sizeRulesOf(const std::vector<TuneRow>& rows) {
  std::vector<SizeRule> rules;
  for (size_t i = 0; i < rows.size(); ++i) {
    const bool last = i + 1 == rows.size();
    if (!last && rows[i + 1].winner == rows[i].winner) continue;
    rules.push_back(SizeRule{last ? UINT64_MAX : rows[i].bytes * 2, rows[i].winner});
  }
  return rules;
}

void tuneSelector(Selector& sel, TopoPlans& plans, int nranks, const SimParams& p) {
  if (nranks != plans.graph().nranks())
    throwInvalidArgument("tuneSelector: the plans cover " + std::to_string(plans.graph().nranks()) +
                         " ranks, the communicator " + std::to_string(nranks));
  if (nranks < 2) return;  // nothing moves: every algorithm only copies
  SimMemo memo(plans.graph());
  for (Coll coll : kTunedColls) {
    if (candidates(sel, coll).size() < 2) continue;
    const std::vector<SizeRule> rules =
        sizeRulesOf(tuneCollective(sel, plans, coll, nranks, p, &memo));
    std::string text;
    for (const SizeRule& r : rules)
      text += std::string(algoName(r.algo)) +
              (r.maxBytes == UINT64_MAX ? "" : " <= " + std::to_string(r.maxBytes) + " B < ");
    GROVE_INFO(log::kPlan, "cost model: %s %s", collName(coll), text.c_str());
    sel.setSizeTable(coll, rules);
  }
  GROVE_INFO(log::kPlan, "cost model: %d simulations, %d more calls answered by the same programs",
             memo.misses(), memo.hits());
}

}  // namespace grove::plan
