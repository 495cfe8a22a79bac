// Fair shares: the rate each tree of a packing gets when its streams share
// the links, and the channels that bring those rates closest to the packing.
//
// How it works: the packing LP gives every tree a rate, and those rates fill
// the links exactly -- if each tree's data moved at its rate. But the
// executor runs a tree as streams (channels), and streams that meet on a link
// share it about equally (a GPU's copy engines and thread blocks, TCP, and
// the flow simulator all do). A heavy tree that shares a link with a light
// one then gets half of it, falls behind, and finishes last while links it
// alone uses stand idle: a 16-tree packing of a DGX-1 V100 at 93.8 GB/s ran
// (simulated) at 72.
//
// So the planner hands the data out by what each tree will get, not by what
// the LP gave it. fairRates computes that by water-filling: every stream's
// rate rises together; when a link fills, the trees crossing it keep the
// rate they have (a tree crossing a link twice, or with more streams, takes
// its part of the link that many times); the others rise on. The result is
// the max-min fair rate of each tree given its channels. Splitting the
// message in proportion to those rates makes every tree finish together, so
// every link it fills stays busy to the end.
//
// The channels decide how close that is to the LP: with as many streams per
// tree as its LP rate calls for, the fair rates are the LP's. But every
// stream costs the executor too (a connection, a lane and its steps: on the
// emulated fabrics 30 streams for three equal trees ran a broadcast at 60 %
// of the rate 3 streams reach), so shareFairly looks for the fewest: of the
// splits in proportion to the LP rates with 1, 2, .. kMaxTreeChannels
// streams in all, the smallest within 1 % of the best; then the next stream
// goes to the tree that raises the total fair rate most, while that gains
// at least 1 % too. (Each step is a water-fill per tree, microseconds.)
// Fewer streams also simulate faster where they cost nothing but fill: the
// DGX-1 V100 all-gather forest at 256 MiB runs 181.6 GB/s on them, 166.9
// with a stream more wherever it gains 0.2 %. A forest (all-gather,
// reduce-scatter: trees rooted at every rank, each root's block split over
// its own trees) finishes when its slowest root does, so there "the rate"
// is the smallest of the roots' summed rates.
#include <algorithm>
#include <limits>

#include "algorithms/planner/planner_internal.h"

namespace grove::plan::detail {

namespace {

/// Links crossed by the trees: for each, (tree, times crossed).
struct Crossings {
  std::vector<int> links;                                ///< bounded links crossed at all
  std::vector<std::vector<std::pair<int, int>>> trees;   ///< per entry of links
  std::vector<std::vector<std::pair<int, int>>> byTree;  ///< per tree: (entry, times)
};

Crossings crossingsOf(const std::vector<std::map<int, int>>& uses, const std::vector<double>& cap) {
  Crossings c;
  std::map<int, int> entry;
  c.byTree.resize(uses.size());
  for (size_t t = 0; t < uses.size(); ++t)
    for (auto [l, times] : uses[t]) {
      if (!(cap[static_cast<size_t>(l)] < PlanGraph::kUnbounded / 2)) continue;
      auto [it, added] = entry.try_emplace(l, static_cast<int>(c.links.size()));
      if (added) {
        c.links.push_back(l);
        c.trees.emplace_back();
      }
      c.trees[static_cast<size_t>(it->second)].emplace_back(static_cast<int>(t), times);
      c.byTree[t].emplace_back(it->second, times);
    }
  return c;
}

std::vector<double> waterFill(const Crossings& c, const std::vector<int>& channels,
                              const std::vector<double>& cap) {
  const size_t nt = channels.size(), ne = c.links.size();
  std::vector<double> rate(nt, 0.0), frozenLoad(ne, 0.0), fillAt(ne);
  // Streams of the trees still rising on each link (crossings x channels:
  // whole numbers, kept exactly as trees freeze).
  std::vector<long long> streams(ne, 0);
  for (size_t e = 0; e < ne; ++e)
    for (auto [t, times] : c.trees[e])
      streams[e] += static_cast<long long>(times) * channels[static_cast<size_t>(t)];
  std::vector<bool> active(nt, true);
  size_t left = nt;
  while (left > 0) {
    // The stream rate at which the next link fills.
    double level = std::numeric_limits<double>::infinity();
    for (size_t e = 0; e < ne; ++e) {
      fillAt[e] = std::numeric_limits<double>::infinity();
      if (streams[e] <= 0) continue;
      fillAt[e] = std::max(0.0, cap[static_cast<size_t>(c.links[e])] - frozenLoad[e]) /
                  static_cast<double>(streams[e]);
      level = std::min(level, fillAt[e]);
    }
    if (!(level < std::numeric_limits<double>::infinity())) {
      // The rest cross no bounded link: they run at the ports' rate.
      for (size_t t = 0; t < nt; ++t)
        if (active[t]) rate[t] = PlanGraph::kUnbounded;
      break;
    }
    for (size_t e = 0; e < ne; ++e) {
      if (fillAt[e] > level * (1 + 1e-12)) continue;
      for (auto [t, times] : c.trees[e]) {
        const size_t ti = static_cast<size_t>(t);
        if (!active[ti]) continue;
        active[ti] = false;
        --left;
        rate[ti] = level * channels[ti];
        for (auto [e2, times2] : c.byTree[ti]) {
          frozenLoad[static_cast<size_t>(e2)] += times2 * rate[ti];
          streams[static_cast<size_t>(e2)] -= static_cast<long long>(times2) * channels[ti];
        }
      }
    }
  }
  return rate;
}

/// Channels in proportion to the trees' (LP) rates, at least one each and
/// `most` in all at most (the scale shrinks until they fit).
std::vector<int> proportionalChannels(const std::vector<Tree>& trees, int most) {
  double total = 0;
  for (const Tree& t : trees) total += std::max(0.0, t.rate);
  std::vector<int> channels(trees.size(), 1);
  if (!(total > 0)) return channels;
  for (int budget = most; budget > 0; --budget) {
    int given = 0;
    for (size_t t = 0; t < trees.size(); ++t) {
      channels[t] = std::max(1, static_cast<int>(budget * trees[t].rate / total));
      given += channels[t];
    }
    if (given <= most) return channels;
  }
  channels.assign(trees.size(), 1);
  return channels;
}

/// A split with more streams, or one stream more, has to gain this much rate.
constexpr double kEnough = 0.01;

/// The slowest group's summed rate (one group: the total).
double slowestGroup(const std::vector<double>& rates, const std::vector<int>& groups) {
  std::vector<double> sums;
  for (size_t t = 0; t < rates.size(); ++t) {
    const size_t g = static_cast<size_t>(groups[t]);
    if (sums.size() <= g) sums.resize(g + 1, 0.0);
    sums[g] += rates[t];
  }
  double least = std::numeric_limits<double>::infinity();
  for (double s : sums) least = std::min(least, s);
  return sums.empty() ? 0.0 : least;
}

}  // namespace

std::vector<double> fairRates(const std::vector<std::map<int, int>>& uses,
                              const std::vector<int>& channels, const std::vector<double>& cap) {
  return waterFill(crossingsOf(uses, cap), channels, cap);
}

double shareFairly(std::vector<Tree>& trees, const std::vector<std::map<int, int>>& uses,
                   const std::vector<int>& groups, const std::vector<double>& cap, int most) {
  double packed = 0;
  for (const Tree& t : trees) packed += t.rate;
  if (trees.empty() || trees.size() > static_cast<size_t>(most)) return packed;
  const Crossings c = crossingsOf(uses, cap);
  auto valueOf = [&](const std::vector<int>& ch) {
    return slowestGroup(waterFill(c, ch, cap), groups);
  };
  // The fewest channels in proportion to the rates that come within
  // kEnough of the best such split: every stream costs the executor (a
  // connection, a lane, its steps), so none is added for less.
  std::vector<std::vector<int>> splits;
  std::vector<double> values;
  double best = 0;
  for (int budget = static_cast<int>(trees.size()); budget <= most; ++budget) {
    splits.push_back(proportionalChannels(trees, budget));
    values.push_back(valueOf(splits.back()));
    best = std::max(best, values.back());
  }
  size_t pick = 0;
  while (values[pick] < best * (1 - kEnough)) ++pick;
  std::vector<int> channels = splits[pick];
  double value = values[pick];
  int given = 0;
  for (int k : channels) given += k;
  // Then one more stream at a time where it raises the rate most, while
  // that is worth a stream.
  for (; given < most; ++given) {
    int bestTree = -1;
    double bestValue = value * (1 + kEnough);
    for (size_t t = 0; t < trees.size(); ++t) {
      ++channels[t];
      const double v = valueOf(channels);
      --channels[t];
      if (v > bestValue) bestValue = v, bestTree = static_cast<int>(t);
    }
    if (bestTree < 0) break;
    ++channels[static_cast<size_t>(bestTree)];
    value = bestValue;
  }
  const std::vector<double> rates = waterFill(c, channels, cap);
  for (size_t t = 0; t < trees.size(); ++t) {
    trees[t].channels = channels[t];
    trees[t].rate = rates[t];
  }
  return slowestGroup(rates, groups);
}

double shareFairly(std::vector<Tree>& trees, bool allReduce, const std::vector<double>& cap) {
  std::vector<std::map<int, int>> uses;
  for (const Tree& t : trees) uses.push_back(useOf(t, allReduce));
  return shareFairly(trees, uses, std::vector<int>(trees.size(), 0), cap, kMaxTreeChannels);
}

}  // namespace grove::plan::detail
