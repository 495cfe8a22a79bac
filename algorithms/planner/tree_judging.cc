// The tree judge's verdicts: which of several tree sets runs a call
// fastest, by the cost model's simulation (see planner_internal.h).
//
// How it works:
//
// Every candidate set (a variant) is simulated once by the first judge (the
// judge's own call size), on several threads at once; the fastest wins,
// ties going by each variant's `winsTies` (a set's fair shares win a tie
// against its LP weights, a set of fewer trees against one of more, the
// joint packing against the split). Each judge of larger calls then judges
// again only the variants within kLargerMargin of that winner, at most the
// kLargerMost fastest of them: a set that far behind at the first size does
// not win at a few times it, and each verdict is a simulation. When the
// winner alone is near, it wins the larger calls too, unsimulated.
//
// The margin, measured: over the survey's 152 larger verdicts
// (docs/planning.md, every set within 30 % weighed), the larger judge's
// winner was within 0.3 % of the first size's winner in all but one, and
// 3.1 % behind there (a DGX-1 V100's six GPUs, broadcast: five split trees
// win at 64 MiB); it was at most the fourth fastest. With 4 % and the
// four fastest the survey's choices are those of 30 %.
//
// TopoPlans::jointOrSplit packs the joint packing and the split without
// larger judges: each packer hands on its near sets with their times
// (Verdict::near, TreePlan::contenders), and the larger judges weigh those
// of both in one pool, so the longest simulations of the planning run side
// by side.
//
// Verdicts are remembered per set (rememberingJudge): the packer, the
// split and the choice between them ask about the same sets, and only the
// first asking simulates.
//
// A quick judge (the cost model's judges simulate coarser: their events
// merge where none is late by more than 2 % of its own transfer's time,
// which moves a set's time by up to about half a percent and takes 4x fewer
// events) has its near ties settled by the exact one: when several sets
// come within kAmbiguous (1 %) of the fastest, the exact judge judges those
// again and its times stand (settleNearTies). On the fixtures that keeps
// every choice a full simulation makes; a tie that close is where the
// quick judge alone flipped one (the NCCL-dump DGX-1's broadcast at
// 32 MiB).
#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "algorithms/planner/concurrent.h"
#include "algorithms/planner/planner_internal.h"
#include "base/error.h"

namespace grove::plan::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLargerMargin = 1.04;
constexpr size_t kLargerMost = 4;

/// The index of the fastest of `t` (infinity: cannot be built), ties by
/// winsTies; t.size() when none can be built.
size_t fastest(const std::vector<JudgedSet>& sets, const std::vector<double>& t) {
  size_t best = t.size();
  for (size_t i = 0; i < t.size(); ++i) {
    const double margin = sets[i].winsTies ? 1 + 1e-9 : 1 - 1e-9;
    if (t[i] < kInf && (best == t.size() || t[i] <= t[best] * margin)) best = i;
  }
  return best;
}

/// A quick judge's near ties settled: when several of the sets `among`
/// (indices into `sets`) lie within kAmbiguous of the fastest by `t`, the
/// exact judge judges those again and its times replace theirs.
void settleNearTies(const TreeJudge& exact, const std::vector<JudgedSet>& sets,
                    const std::vector<size_t>& among, bool allReduce, int root,
                    std::vector<double>& t) {
  if (!exact) return;
  double best = kInf;
  for (size_t i : among) best = std::min(best, t[i]);
  std::vector<size_t> tied;
  for (size_t i : among)
    if (t[i] < kInf && t[i] <= best * (1 + kAmbiguous)) tied.push_back(i);
  if (tied.size() < 2) return;
  forEachConcurrently(tied.size(), planThreads(), [&](size_t k) {
    t[tied[k]] = judgeSeconds(exact, *sets[tied[k]].trees, allReduce, root);
  });
}

}  // namespace

double judgeSeconds(const TreeJudge& judge, const std::vector<Tree>& trees, bool allReduce,
                    int root) {
  try {
    return judge(trees, allReduce, root);
  } catch (const Error&) {
    return kInf;
  }
}

TreeJudge rememberingJudge(TreeJudge judge) {
  if (!judge) return judge;
  // Judges run on several threads at once (concurrent.h): the verdicts are
  // shared under a lock, the simulations run outside it (two threads may
  // judge the same set; the verdict is the same).
  struct Verdicts {
    std::mutex mu;
    std::map<std::string, double> seconds;
  };
  auto seen = std::make_shared<Verdicts>();
  return
      [judge = std::move(judge), seen](const std::vector<Tree>& trees, bool allReduce, int root) {
        std::ostringstream os;
        os << allReduce << '/' << root;
        for (const Tree& t : trees)
          os << '/' << keyOf(t) << std::hexfloat << t.rate << 'x' << t.channels;
        const std::string key = os.str();
        {
          std::lock_guard<std::mutex> lock(seen->mu);
          auto it = seen->seconds.find(key);
          if (it != seen->seconds.end()) return it->second;
        }
        const double seconds = judge(trees, allReduce, root);
        std::lock_guard<std::mutex> lock(seen->mu);
        return seen->seconds.emplace(key, seconds).first->second;
      };
}

Verdict judgeSets(const PackOptions& o, const std::vector<JudgedSet>& sets, bool allReduce,
                  int root) {
  Verdict v;
  v.chosen = sets.size();
  if (sets.empty() || !o.judge) return v;
  const int threads = planThreads();
  v.first.assign(sets.size(), kInf);
  forEachConcurrently(sets.size(), threads, [&](size_t i) {
    v.first[i] = sets[i].knownSeconds > 0 ? sets[i].knownSeconds
                                          : judgeSeconds(o.judge, *sets[i].trees, allReduce, root);
  });
  std::vector<size_t> all(sets.size());
  for (size_t i = 0; i < sets.size(); ++i) all[i] = i;
  settleNearTies(o.exactJudge, sets, all, allReduce, root, v.first);
  v.chosen = fastest(sets, v.first);
  if (v.chosen == sets.size()) return v;
  v.seconds = v.first[v.chosen];
  for (size_t i = 0; i < sets.size(); ++i)
    if (v.first[i] <= v.seconds * kLargerMargin) v.near.push_back(i);
  // The larger judges weigh the kLargerMost fastest of those, the sets of
  // more trees first (they take longest, and the threads then end
  // together).
  std::vector<size_t> order = v.near;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return v.first[a] < v.first[b]; });
  if (order.size() > kLargerMost) order.resize(kLargerMost);
  if (std::find(order.begin(), order.end(), v.chosen) == order.end()) order.back() = v.chosen;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return sets[a].trees->size() > sets[b].trees->size();
  });
  for (const SizeJudge& band : o.largerJudges) {
    if (order.size() == 1) {
      v.larger.push_back(v.chosen);
      continue;
    }
    std::vector<double> t(sets.size(), kInf);
    forEachConcurrently(order.size(), threads, [&](size_t k) {
      t[order[k]] = judgeSeconds(band.judge, *sets[order[k]].trees, allReduce, root);
    });
    settleNearTies(band.exact, sets, order, allReduce, root, t);
    v.larger.push_back(fastest(sets, t));
  }
  return v;
}

std::vector<SizedTrees> largerSets(const PackOptions& o, const Verdict& v,
                                   const std::vector<JudgedSet>& sets) {
  std::vector<SizedTrees> out;
  for (size_t k = 0; k < v.larger.size(); ++k) {
    if (v.larger[k] == sets.size()) continue;
    SizedTrees sized{o.largerJudges[k].fromBytes, *sets[v.larger[k]].trees, 0};
    for (const Tree& t : sized.trees) sized.rate += t.rate;
    out.push_back(std::move(sized));
  }
  return out;
}

std::vector<JudgedTrees> contendersOf(const Verdict& v, const std::vector<JudgedSet>& sets) {
  std::vector<JudgedTrees> out;
  for (size_t i : v.near) out.push_back({*sets[i].trees, v.first[i], sets[i].winsTies});
  return out;
}

}  // namespace grove::plan::detail
