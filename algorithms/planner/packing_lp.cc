// The packing LP: optimal weights for a set of candidate rings or trees.
//
// How it works: MWU (ring_search.cc, tree_pack.cc) produces candidates and
// rough weights. Given the candidates, the best weights solve the LP
//   max sum_t x_t  subject to  sum_t use_t(l) x_t <= cap(l) for every link l,
//   x >= 0,
// where use_t(l) counts how often candidate t crosses link l. The origin is
// feasible (caps >= 0), so the plain primal simplex in dictionary form
// (m x n tableau of constraints x candidates, basic and non-basic variables
// swapped at each pivot) needs no phase 1. Entering variable: the largest
// reduced gain (Bland's rule after many pivots, against cycling); leaving
// variable: Harris' ratio test (of the rows tied within a tolerance, the
// largest pivot: these LPs are very degenerate, and taking tiny pivots among
// ties lost the tableau's accuracy on 16 ranks). At the optimum the reduced
// gains of the slacks are minus the dual prices of the rows, which column
// generation reads. Links that no candidate uses, and unbounded
// ports, are left out of the rows. weightAndReduce() then drops candidates (of
// the few lightest, the one whose loss costs least) and re-solves: always while more than `maxKeep` remain, and
// further while the rate stays >= keep * the optimum over all candidates.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "algorithms/planner/concurrent.h"
#include "algorithms/planner/planner_internal.h"

namespace grove::plan::detail {

namespace {
constexpr double kTol = 1e-9;
constexpr double kPivot = 1e-7;  // smallest pivot element taken

/// row -= f * pivot over the pivot row's nonzero columns `nz` (the others
/// would subtract 0): the pivot's inner loop. The tableaus are sparse (a
/// tree crosses few of the links), and most of a pivot row stays 0.
void subtractScaled(double* row, const double* pivot, const std::vector<int>& nz, double f) {
  for (int k : nz) row[k] -= f * pivot[k];
}

/// row -= f * pivot over all n columns, two at a time (each element as it
/// would be alone: the same results).
void subtractScaledDense(double* row, const double* pivot, size_t n, double f) {
  typedef double Pair __attribute__((vector_size(16)));
  const Pair ff = {f, f};
  size_t k = 0;
  for (; k + 2 <= n; k += 2) {
    Pair r, p;
    std::memcpy(&r, row + k, sizeof r);
    std::memcpy(&p, pivot + k, sizeof p);
    r -= ff * p;
    std::memcpy(row + k, &r, sizeof r);
  }
  for (; k < n; ++k) row[k] -= f * pivot[k];
}
}  // namespace

std::vector<double> solvePackingLp(int rows, int cols, const std::vector<double>& a,
                                   const std::vector<double>& b, std::vector<double>* duals,
                                   const std::vector<double>* gain) {
  const size_t m = static_cast<size_t>(rows), n = static_cast<size_t>(cols);
  std::vector<double> t(a), rhs(b), c = gain ? *gain : std::vector<double>(n, 1.0);
  std::vector<int> basic(m), nonbasic(n);  // labels: 0..n-1 structural, n.. slacks
  for (size_t i = 0; i < m; ++i) basic[i] = static_cast<int>(n + i);
  for (size_t j = 0; j < n; ++j) nonbasic[j] = static_cast<int>(j);
  const int maxPivots = 50 * static_cast<int>(m + n) + 100;
  double scale = 1;
  for (double v : b) scale = std::max(scale, v);
  const double feasTol = 1e-10 * scale;
  std::vector<int> nz;  // the pivot row's nonzero columns
  for (int pivot = 0; pivot < maxPivots; ++pivot) {
    const bool bland = pivot > 10 * static_cast<int>(m + n);
    size_t e = n;
    for (size_t j = 0; j < n; ++j) {
      if (c[j] <= kTol) continue;
      if (e == n || (bland ? nonbasic[j] < nonbasic[e] : c[j] > c[e])) e = j;
    }
    if (e == n) break;  // optimal
    // Harris' ratio test: the largest pivot among the rows whose ratio is
    // within the feasibility tolerance of the smallest (tiny pivots are what
    // loses accuracy in a dense tableau); Bland's smallest label when cycling.
    double theta = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < m; ++i)
      if (t[i * n + e] > kPivot) theta = std::min(theta, (rhs[i] + feasTol) / t[i * n + e]);
    size_t leave = m;
    for (size_t i = 0; i < m; ++i) {
      const double aij = t[i * n + e];
      if (aij <= kPivot || rhs[i] / aij > theta) continue;
      if (leave == m || (bland ? basic[i] < basic[leave] : aij > t[leave * n + e])) leave = i;
    }
    if (leave == m) break;  // unbounded: cannot happen with caps on used links
    const double p = t[leave * n + e];
    double* const pivotRow = t.data() + leave * n;
    for (size_t k = 0; k < n; ++k) pivotRow[k] /= p;
    pivotRow[e] = 1.0 / p;
    rhs[leave] /= p;
    nz.clear();
    for (size_t k = 0; k < n; ++k)
      if (pivotRow[k] != 0) nz.push_back(static_cast<int>(k));
    for (size_t i = 0; i < m; ++i) {
      const double f = t[i * n + e];
      if (i == leave || f == 0) continue;
      if (nz.size() * 4 > n)
        subtractScaledDense(t.data() + i * n, pivotRow, n, f);
      else
        subtractScaled(t.data() + i * n, pivotRow, nz, f);
      t[i * n + e] = -f * pivotRow[e];
      rhs[i] = std::max(0.0, rhs[i] - f * rhs[leave]);
    }
    const double ce = c[e];
    subtractScaled(c.data(), pivotRow, nz, ce);
    c[e] = -ce * pivotRow[e];
    std::swap(basic[leave], nonbasic[e]);
  }
  std::vector<double> x(n, 0.0);
  for (size_t i = 0; i < m; ++i)
    if (basic[i] < static_cast<int>(n)) x[static_cast<size_t>(basic[i])] = rhs[i];
  if (duals) {  // the dual of row i is minus the reduced gain of its slack (0 while basic)
    duals->assign(m, 0.0);
    for (size_t j = 0; j < n; ++j)
      if (nonbasic[j] >= static_cast<int>(n))
        (*duals)[static_cast<size_t>(nonbasic[j]) - n] = std::max(0.0, -c[j]);
  }
  return x;
}

namespace {

/// The packing LP over the candidates `which`: their optimal weights, in
/// the order of `which` (and the links' dual prices when asked).
std::vector<double> subsetWeights(const std::vector<Candidate>& cands,
                                  const std::vector<int>& which, const std::vector<double>& cap,
                                  std::vector<double>* linkPrice) {
  // One row per bounded link some candidate loads, in link order.
  std::vector<int> links;
  std::vector<int> rowOf(cap.size(), -1);
  for (int k : which)
    for (auto [link, times] : cands[static_cast<size_t>(k)].use)
      if (rowOf[static_cast<size_t>(link)] < 0 &&
          cap[static_cast<size_t>(link)] < PlanGraph::kUnbounded / 2) {
        rowOf[static_cast<size_t>(link)] = 0;
        links.push_back(link);
      }
  std::sort(links.begin(), links.end());
  for (size_t i = 0; i < links.size(); ++i)
    rowOf[static_cast<size_t>(links[i])] = static_cast<int>(i);
  const int r = static_cast<int>(links.size());
  const int cols = static_cast<int>(which.size());
  std::vector<double> a(static_cast<size_t>(r) * static_cast<size_t>(cols), 0.0),
      b(static_cast<size_t>(r));
  for (size_t i = 0; i < links.size(); ++i) b[i] = cap[static_cast<size_t>(links[i])];
  for (int j = 0; j < cols; ++j)
    for (auto [link, times] : cands[static_cast<size_t>(which[static_cast<size_t>(j)])].use) {
      const int row = rowOf[static_cast<size_t>(link)];
      if (row >= 0)
        a[static_cast<size_t>(row) * static_cast<size_t>(cols) + static_cast<size_t>(j)] += times;
    }
  std::vector<double> rowPrice;
  std::vector<double> x = solvePackingLp(r, cols, a, b, linkPrice ? &rowPrice : nullptr);
  if (linkPrice) {
    linkPrice->assign(cap.size(), 0.0);
    for (size_t i = 0; i < links.size(); ++i)
      (*linkPrice)[static_cast<size_t>(links[i])] = rowPrice[i];
  }
  return x;
}

double sumOf(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x) sum += v;
  return sum;
}

}  // namespace

double solveSubset(std::vector<Candidate>& cands, const std::vector<int>& which,
                   const std::vector<double>& cap, std::vector<double>* linkPrice) {
  const std::vector<double> x = subsetWeights(cands, which, cap, linkPrice);
  for (size_t j = 0; j < which.size(); ++j) cands[static_cast<size_t>(which[j])].weight = x[j];
  return sumOf(x);
}

std::vector<double> subsetRates(const std::vector<Candidate>& cands,
                                const std::vector<std::vector<int>>& trials,
                                const std::vector<double>& cap,
                                std::vector<std::vector<double>>* weights) {
  std::vector<double> rates(trials.size());
  if (weights) weights->assign(trials.size(), {});
  // Small LPs are not worth a thread each.
  size_t work = 0;
  for (const std::vector<int>& t : trials)
    for (int k : t) work += cands[static_cast<size_t>(k)].use.size();
  const int threads = work >= kConcurrentEntries ? planThreads() : 1;
  forEachConcurrently(trials.size(), threads, [&](size_t i) {
    std::vector<double> x = subsetWeights(cands, trials[i], cap, nullptr);
    rates[i] = sumOf(x);
    if (weights) (*weights)[i] = std::move(x);
  });
  return rates;
}

namespace {

/// Drops one candidate at a time (of the few lightest, the one whose loss
/// costs the least rate after re-solving). The path of drops is the same
/// whatever the goal; each goal stops where its set has at most maxKeep
/// candidates and the next drop would fall below keep * best. Returns each
/// goal's set.
std::vector<std::vector<int>> dropLightest(std::vector<Candidate>& cands,
                                           const std::vector<double>& cap,
                                           const std::vector<ReduceGoal>& goals, double best) {
  std::vector<int> kept;
  for (size_t k = 0; k < cands.size(); ++k) kept.push_back(static_cast<int>(k));
  solveSubset(cands, kept, cap);
  auto positive = [&](const std::vector<int>& set) {
    std::vector<int> out;
    for (int k : set)
      if (cands[static_cast<size_t>(k)].weight > kTol * std::max(1.0, best)) out.push_back(k);
    return out;
  };
  kept = positive(kept);
  std::vector<std::vector<int>> sets(goals.size());
  std::vector<bool> stopped(goals.size(), false);
  size_t open = goals.size();
  constexpr size_t kTry = 6;
  while (kept.size() > 1 && open > 0) {
    std::vector<int> byWeight(kept);
    std::sort(byWeight.begin(), byWeight.end(), [&](int x, int y) {
      return cands[static_cast<size_t>(x)].weight < cands[static_cast<size_t>(y)].weight;
    });
    std::vector<std::vector<int>> trials;
    for (size_t i = 0; i < std::min(kTry, byWeight.size()); ++i) {
      std::vector<int>& trial = trials.emplace_back();
      for (int k : kept)
        if (k != byWeight[i]) trial.push_back(k);
    }
    std::vector<std::vector<double>> weights;
    const std::vector<double> rates = subsetRates(cands, trials, cap, &weights);
    size_t bestTrial = 0;
    double bestRate = -1;
    for (size_t i = 0; i < trials.size(); ++i) {
      if (rates[i] > bestRate * (1 + 1e-12)) {
        bestRate = rates[i];
        bestTrial = i;
      }
    }
    for (size_t g = 0; g < goals.size(); ++g) {
      if (stopped[g] || static_cast<int>(kept.size()) > goals[g].maxKeep ||
          bestRate >= goals[g].keep * best)
        continue;
      stopped[g] = true, --open;
      sets[g] = kept;
    }
    if (open == 0) break;
    // The weights of the best trial, as solveSubset would write them.
    for (size_t j = 0; j < trials[bestTrial].size(); ++j)
      cands[static_cast<size_t>(trials[bestTrial][j])].weight = weights[bestTrial][j];
    kept = positive(trials[bestTrial]);
  }
  for (size_t g = 0; g < goals.size(); ++g)
    if (!stopped[g]) sets[g] = kept;
  return sets;
}

// Forward selection: add, one at a time, the candidate that raises the
// rate most, until maxKeep are chosen or the optimum is reached. A smaller
// maxKeep stops on the same path: the order is returned, to be cut.
std::vector<int> addBest(std::vector<Candidate>& cands, const std::vector<double>& cap, int maxKeep,
                         double best) {
  std::vector<int> chosen;
  double rate = 0;
  while (static_cast<int>(chosen.size()) < maxKeep && rate < best * (1 - 1e-9)) {
    std::vector<std::vector<int>> trials;
    std::vector<int> added;  // the candidate each trial adds
    for (size_t k = 0; k < cands.size(); ++k) {
      if (std::find(chosen.begin(), chosen.end(), static_cast<int>(k)) != chosen.end()) continue;
      trials.push_back(chosen);
      trials.back().push_back(static_cast<int>(k));
      added.push_back(static_cast<int>(k));
    }
    const std::vector<double> rates = subsetRates(cands, trials, cap);
    int pick = -1;
    double pickRate = rate;
    for (size_t i = 0; i < trials.size(); ++i) {
      if (rates[i] > pickRate * (1 + 1e-9) + 1e-12) {
        pickRate = rates[i];
        pick = added[i];
      }
    }
    if (pick < 0) break;
    chosen.push_back(pick);
    rate = pickRate;
  }
  return chosen;
}

}  // namespace

std::vector<std::vector<int>> weightAndReduceEach(std::vector<Candidate>& cands,
                                                  const std::vector<double>& cap,
                                                  const std::vector<ReduceGoal>& goals) {
  std::vector<int> all;
  for (size_t k = 0; k < cands.size(); ++k) all.push_back(static_cast<int>(k));
  const double best = solveSubset(cands, all, cap);
  // Two reductions, the better kept: dropping from the full set, and adding
  // to an empty one (which finds a few dominant trees, e.g. one long chain,
  // that the full LP's vertex spreads over many). Each walks its path once
  // for every goal.
  std::vector<ReduceGoal> targets;
  int most = 1;
  for (ReduceGoal goal : goals) {
    goal.maxKeep = std::max(1, goal.maxKeep);
    targets.push_back(goal);
    most = std::max(most, goal.maxKeep);
  }
  const std::vector<std::vector<int>> dropped = dropLightest(cands, cap, targets, best);
  const std::vector<int> order = addBest(cands, cap, most, best);
  std::vector<std::vector<int>> out;
  for (size_t g = 0; g < targets.size(); ++g) {
    const double droppedRate = solveSubset(cands, dropped[g], cap);
    const std::vector<int> added(
        order.begin(), order.begin() + std::min<std::ptrdiff_t>(targets[g].maxKeep, order.size()));
    const double addedRate = solveSubset(cands, added, cap);
    const bool useAdded =
        addedRate > droppedRate * (1 + 1e-9) ||
        (addedRate >= droppedRate * (1 - 1e-9) && added.size() < dropped[g].size());
    const std::vector<int>& kept = useAdded ? added : dropped[g];
    solveSubset(cands, kept, cap);
    std::vector<int>& set = out.emplace_back();
    for (int k : kept)
      if (cands[static_cast<size_t>(k)].weight > 1e-9 * std::max(1.0, best)) set.push_back(k);
  }
  return out;
}

std::vector<int> weightAndReduce(std::vector<Candidate>& cands, const std::vector<double>& cap,
                                 int maxKeep, double keep) {
  return weightAndReduceEach(cands, cap, {{maxKeep, keep}})[0];
}

}  // namespace grove::plan::detail
