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
// again only the variants within kLargerMargin of that winner: a set that
// far behind at the first size does not win at a few times it, and each
// verdict is a simulation. Over the survey's 152 choices (docs/planning.md)
// the larger judge's winner was at most 1.5 % behind at the first size; the
// margin is twice that. When the winner alone is within it, it wins the
// larger calls too, unsimulated.
//
// Verdicts are remembered per set (rememberingJudge): the packer, the
// split and the choice between them ask about the same sets, and only the
// first asking simulates.
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
constexpr double kLargerMargin = 1.03;

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
  std::vector<double> first(sets.size());
  forEachConcurrently(sets.size(), threads, [&](size_t i) {
    first[i] = sets[i].knownSeconds > 0 ? sets[i].knownSeconds
                                        : judgeSeconds(o.judge, *sets[i].trees, allReduce, root);
  });
  v.chosen = fastest(sets, first);
  if (v.chosen == sets.size()) return v;
  v.seconds = first[v.chosen];
  for (const SizeJudge& band : o.largerJudges) {
    std::vector<size_t> near;
    for (size_t i = 0; i < sets.size(); ++i)
      if (first[i] <= first[v.chosen] * kLargerMargin) near.push_back(i);
    if (near.size() == 1) {
      v.larger.push_back(v.chosen);
      continue;
    }
    std::vector<double> t(sets.size(), kInf);
    forEachConcurrently(near.size(), threads, [&](size_t k) {
      t[near[k]] = judgeSeconds(band.judge, *sets[near[k]].trees, allReduce, root);
    });
    v.larger.push_back(fastest(sets, t));
  }
  return v;
}

}  // namespace grove::plan::detail
