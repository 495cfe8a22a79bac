// Hierarchical all-reduce plan for several machines.
//
// How it works: ranks are grouped by machine (PlanGraph::machineOf). The
// plan has one channel per NIC of the busiest machine (the one with most
// ranks); channel c uses NIC c (modulo their count) of every machine, and
// the leader of a machine on channel c is its rank closest to that NIC
// (widest route, then fewest links, then a rank that leads no other channel
// yet, then the lowest rank). Data flows in three stages, pipelined: reduce
// inside each machine to the channel's leader, all-reduce among the leaders
// (a ring over the channel's NICs), broadcast inside each machine.
//
// Model of the predicted rate (all-reduce algbw, GB/s):
// - intra: R = the smallest, over machines, of the proven optimum of
//   all-reduce trees inside the machine (only its own links; every tree edge
//   carries the reduce upward and the broadcast downward at once, which is
//   what the pipelined reduce-to-leader + broadcast-from-leader does; the
//   loads do not depend on which rank is the root, so the leader can be; the
//   tree packer reaches this optimum within 1 %). The channels share the
//   machine's links, so each gets R / C.
// - inter: channel c's ring hop from machine m to the next one is limited
//   by the leader-to-NIC route on either side and by the NICs' network
//   links; a ring all-reduce over M machines whose narrowest hop is b runs
//   at b * M / (2 (M - 1)).
// - rate = sum over channels of min(R / C, inter_c); with one machine it is
//   R (no network stage).
// The model ignores that a leader's own links carry both its machine's tree
// traffic and the ring's, so it is optimistic when leaders' links are tight.
#include <algorithm>
#include <limits>
#include <map>

#include "algorithms/planner/planner_internal.h"
#include "base/error.h"

namespace grove::plan {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// NIC vertices (PCIe side: those with network links out) of each machine, in vertex order.
std::vector<std::vector<int>> nicsByMachine(const PlanGraph& g) {
  std::vector<std::vector<int>> nics(static_cast<size_t>(std::max(1, g.numMachines())));
  for (int v = 0; v < g.numVertices(); ++v) {
    if (g.machineOfVertex(v) < 0) continue;
    for (int li : g.outLinks(v))
      if (g.links()[static_cast<size_t>(li)].kind == topo::LinkKind::kNet) {
        nics[static_cast<size_t>(g.machineOfVertex(v))].push_back(v);
        break;
      }
  }
  return nics;
}

// Network capacity out of a NIC (out = true) or into it.
double netCap(const PlanGraph& g, int nic, bool out) {
  double s = 0;
  for (int li : g.outLinks(nic)) {
    const PlanLink& l = g.links()[static_cast<size_t>(li)];
    if (l.kind != topo::LinkKind::kNet) continue;
    if (out)
      s += l.cap;
    else if (g.reverseLink(li) >= 0)
      s += g.links()[static_cast<size_t>(g.reverseLink(li))].cap;
  }
  return s;
}

// The all-reduce rate inside one machine: the proven optimum of trees over
// its own links (the packer reaches it within 1 %; packing them here again
// would cost a tree packing per machine for a prediction).
double intraRate(const PlanGraph& g, const std::vector<int>& ranks, int machine) {
  if (ranks.size() < 2) return kInf;
  PlanGraph sub = detail::subsetOfRanks(g, ranks);
  std::vector<double> cap = g.capacities();
  for (size_t l = 0; l < cap.size(); ++l) {
    const PlanLink& link = g.links()[l];
    if (g.machineOfVertex(link.from) != machine || g.machineOfVertex(link.to) != machine)
      cap[l] = 0;
  }
  return detail::allReduceBoundCapped(sub, cap);
}

}  // namespace

HierPlan planHierarchical(const PlanGraph& g) {
  HierPlan plan;
  const int n = g.nranks();
  if (n == 0) return plan;
  std::vector<std::vector<int>> byMachine(static_cast<size_t>(std::max(1, g.numMachines())));
  for (int r = 0; r < n; ++r) byMachine[static_cast<size_t>(g.machineOf(r))].push_back(r);
  std::vector<int> machineIds;  // machines with ranks
  for (size_t m = 0; m < byMachine.size(); ++m)
    if (!byMachine[m].empty()) {
      plan.machines.push_back(byMachine[m]);
      machineIds.push_back(static_cast<int>(m));
    }
  const size_t M = plan.machines.size();
  size_t busiest = 0;
  for (size_t i = 0; i < M; ++i)
    if (plan.machines[i].size() > plan.machines[busiest].size()) busiest = i;
  std::vector<std::vector<int>> nics = nicsByMachine(g);
  const std::vector<double> cap = g.capacities();
  const size_t channels =
      M > 1 ? std::max<size_t>(1, nics[static_cast<size_t>(machineIds[busiest])].size()) : 1;
  std::vector<std::vector<double>> toNicBw(channels, std::vector<double>(M, kInf));
  for (size_t c = 0; c < channels; ++c) {
    std::vector<int> leaders;
    for (size_t i = 0; i < M; ++i) {
      const std::vector<int>& mn = nics[static_cast<size_t>(machineIds[i])];
      const std::vector<int>& ranks = plan.machines[i];
      int best = ranks.front();
      if (M > 1 && !mn.empty()) {
        const int nic = mn[c % mn.size()];
        std::tuple<double, size_t, bool, int> bestKey{-1, 0, false, 0};
        for (int r : ranks) {
          std::vector<int> route = detail::widestRouteCapped(g, r, r, cap, nic);
          if (route.empty()) continue;
          bool taken = false;
          for (const std::vector<int>& prev : plan.leaders) taken = taken || prev[i] == r;
          std::tuple<double, size_t, bool, int> key{g.bottleneck(route), route.size(), taken, r};
          auto better = [](const auto& a, const auto& b) {
            if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) > std::get<0>(b);
            if (std::get<1>(a) != std::get<1>(b)) return std::get<1>(a) < std::get<1>(b);
            if (std::get<2>(a) != std::get<2>(b)) return !std::get<2>(a);
            return std::get<3>(a) < std::get<3>(b);
          };
          if (std::get<0>(bestKey) < 0 || better(key, bestKey)) {
            bestKey = key;
            best = r;
          }
        }
        toNicBw[c][i] = std::min({std::get<0>(bestKey) < 0 ? 0.0 : std::get<0>(bestKey),
                                  netCap(g, nic, true), netCap(g, nic, false)});
      }
      leaders.push_back(best);
    }
    plan.leaders.push_back(leaders);
  }
  double intra = kInf;
  for (size_t i = 0; i < M; ++i)
    intra = std::min(intra, intraRate(g, plan.machines[i], machineIds[i]));
  if (M == 1) {
    plan.rate = intra == kInf ? 0 : intra;
    return plan;
  }
  for (size_t c = 0; c < channels; ++c) {
    double hop = kInf;
    for (size_t i = 0; i < M; ++i) hop = std::min(hop, toNicBw[c][i]);
    const double inter = hop * static_cast<double>(M) / (2.0 * static_cast<double>(M - 1));
    plan.rate += std::min(intra / static_cast<double>(channels), inter);
  }
  return plan;
}

}  // namespace grove::plan
