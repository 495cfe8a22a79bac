// Ring search: the best set of rings (searchRings) and what an NCCL-like
// search would pick (ncclLikeRings).
//
// How it works: a ring is a Hamiltonian cycle over the ranks; each hop
// order[i] -> order[i+1] follows a route of the plan graph and the ring puts
// its rate on every link of every hop (a link crossed by two hops carries
// twice the rate).
//
// searchRings packs rings like tree packing packs trees: multiplicative
// weights over link prices, the oracle being the cheapest Hamiltonian cycle
// where hop u->v costs the price of the cheapest route u->v. The oracle is
// exact for up to 12 ranks (Held-Karp dynamic programming over subsets) and
// heuristic beyond (nearest neighbour from every start, then relocating single
// ranks while the tour gets cheaper). Every cycle found, and its reverse
// (the same ranks the other way round, over the reverse links), is a
// candidate; the packing LP (packing_lp.cc) gives the best weights of the
// candidates and the set is cut to maxRings, keeping 97% of the optimum.
//
// ncclLikeRings mimics NCCL's search: rings over one link class only, all
// found greedily -- the widest ring on the residual capacities, added at its
// bottleneck rate, again and again (which yields the reverse direction too
// when the links allow). Hops inside a machine may use NVLink (and NVSwitch)
// only when an NVLink ring exists among the ranks, else only the PCIe / host
// path; hops between machines use any link (NIC, network), as NCCL does.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "algorithms/planner/planner_internal.h"
#include "base/error.h"

namespace grove::plan::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kExactMax = 12;

// Cheapest Hamiltonian cycle by Held-Karp (n <= kExactMax); empty when none.
std::vector<int> exactTour(int n, const std::vector<double>& c) {
  const int full = 1 << (n - 1);
  std::vector<double> dp(static_cast<size_t>(full) * n, kInf);
  std::vector<int> from(static_cast<size_t>(full) * n, -1);
  auto at = [&](int mask, int v) -> size_t { return static_cast<size_t>(mask) * n + v; };
  for (int v = 1; v < n; ++v) dp[at(1 << (v - 1), v)] = c[static_cast<size_t>(v)];
  for (int mask = 1; mask < full; ++mask)
    for (int v = 1; v < n; ++v) {
      const double d = dp[at(mask, v)];
      if (!(mask & (1 << (v - 1))) || d == kInf) continue;
      for (int w = 1; w < n; ++w) {
        if (mask & (1 << (w - 1))) continue;
        const int next = mask | (1 << (w - 1));
        const double nd = d + c[static_cast<size_t>(v) * n + w];
        if (nd < dp[at(next, w)]) {
          dp[at(next, w)] = nd;
          from[at(next, w)] = v;
        }
      }
    }
  int last = -1;
  double best = kInf;
  for (int v = 1; v < n; ++v) {
    const double d = dp[at(full - 1, v)] + c[static_cast<size_t>(v) * n];
    if (d < best) {
      best = d;
      last = v;
    }
  }
  if (last < 0) return {};
  std::vector<int> tour;
  for (int mask = full - 1, v = last; v > 0;) {
    tour.push_back(v);
    const int p = from[at(mask, v)];
    mask &= ~(1 << (v - 1));
    v = p;
  }
  tour.push_back(0);
  std::reverse(tour.begin(), tour.end());
  return tour;
}

double tourCost(const std::vector<int>& t, int n, const std::vector<double>& c) {
  double s = 0;
  for (size_t i = 0; i < t.size(); ++i)
    s += c[static_cast<size_t>(t[i]) * n + t[(i + 1) % t.size()]];
  return s;
}

// Nearest neighbour from every start, then single-rank relocation.
std::vector<int> heuristicTour(int n, const std::vector<double>& c) {
  auto C = [&](int a, int b) { return c[static_cast<size_t>(a) * n + b]; };
  std::vector<int> best;
  double bestCost = kInf;
  for (int s = 0; s < n; ++s) {
    std::vector<int> t{s};
    std::vector<char> used(static_cast<size_t>(n), 0);
    used[static_cast<size_t>(s)] = 1;
    while (static_cast<int>(t.size()) < n) {
      int nx = -1;
      for (int v = 0; v < n; ++v)
        if (!used[static_cast<size_t>(v)] && (nx < 0 || C(t.back(), v) < C(t.back(), nx))) nx = v;
      used[static_cast<size_t>(nx)] = 1;
      t.push_back(nx);
    }
    for (int pass = 0; pass < 20; ++pass) {
      bool improved = false;
      for (int i = 0; i < n && n > 3; ++i) {
        const int p = t[static_cast<size_t>((i + n - 1) % n)], x = t[static_cast<size_t>(i)];
        const int q = t[static_cast<size_t>((i + 1) % n)];
        const double gain = C(p, x) + C(x, q) - C(p, q);
        std::vector<int> rest(t);
        rest.erase(rest.begin() + i);
        for (int j = 0; j < n - 1; ++j) {
          const int a = rest[static_cast<size_t>(j)],
                    b = rest[static_cast<size_t>((j + 1) % (n - 1))];
          if (C(a, x) + C(x, b) - C(a, b) < gain - 1e-12 * std::abs(gain)) {
            rest.insert(rest.begin() + j + 1, x);
            t = rest;
            improved = true;
            break;
          }
        }
      }
      if (!improved) break;
    }
    const double cost = tourCost(t, n, c);
    if (cost < bestCost) {
      bestCost = cost;
      best = t;
    }
  }
  return bestCost < kInf ? best : std::vector<int>{};
}

std::vector<int> cheapestTour(int n, const std::vector<double>& c) {
  if (n == 2) return c[1] < kInf && c[2] < kInf ? std::vector<int>{0, 1} : std::vector<int>{};
  return n <= kExactMax ? exactTour(n, c) : heuristicTour(n, c);
}

std::map<int, int> useOf(const Ring& r) {
  std::map<int, int> use;
  for (const std::vector<int>& route : r.routes)
    for (int li : route) ++use[li];
  return use;
}

Ring ringFromTour(const std::vector<int>& tour, const RouteTable& table) {
  Ring r;
  r.order = tour;
  for (size_t i = 0; i < tour.size(); ++i)
    r.routes.push_back(table.route(tour[i], tour[(i + 1) % tour.size()]));
  return r;
}

// The same ranks the other way round: reverse links where usable, else the table's routes.
Ring reverseRing(const PlanGraph& g, const Ring& r, const RouteTable& table,
                 const std::vector<double>& cap) {
  Ring back;
  back.order.assign(r.order.rbegin(), r.order.rend());
  const size_t n = r.order.size();
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int>& fwd =
        r.routes[n - 1 - ((i + 1) % n)];  // hop back[i+1] -> back[i] forward
    std::vector<int> rev;
    for (auto it = fwd.rbegin(); it != fwd.rend(); ++it) {
      const int l = g.reverseLink(*it);
      if (l < 0 || !(cap[static_cast<size_t>(l)] > 0)) {
        rev.clear();
        break;
      }
      rev.push_back(l);
    }
    back.routes.push_back(rev.empty() ? table.route(back.order[i], back.order[(i + 1) % n]) : rev);
  }
  return back;
}

std::string keyOf(const Ring& r) {
  // Rotate so that the smallest rank leads; the routes rotate with it.
  const size_t n = r.order.size();
  const size_t s =
      static_cast<size_t>(std::min_element(r.order.begin(), r.order.end()) - r.order.begin());
  std::string key;
  for (size_t i = 0; i < n; ++i) {
    appendKey(key, r.order[(s + i) % n], ':');
    for (int li : r.routes[(s + i) % n]) appendKey(key, li, ',');
    key.push_back(';');
  }
  return key;
}

// Class of what the rings run over (hops inside machines by link kind, "+net" across machines).
std::string classOf(const PlanGraph& g, const std::vector<Ring>& rings) {
  bool nv = false, pci = false, net = false;
  for (const Ring& r : rings)
    for (size_t i = 0; i < r.routes.size(); ++i) {
      if (g.machineOf(r.order[i]) != g.machineOf(r.order[(i + 1) % r.order.size()])) {
        net = true;
        continue;
      }
      for (int li : r.routes[i]) {
        const PlanLink& l = g.links()[static_cast<size_t>(li)];
        if (l.topoLink < 0) continue;
        (l.kind == topo::LinkKind::kNvLink ? nv : pci) = true;
      }
    }
  std::string s = nv && pci ? "mixed" : nv ? "nvlink" : pci ? "pcie" : net ? "" : "host";
  if (net) s += s.empty() ? "net" : "+net";
  return s;
}

}  // namespace

RingPlan packRings(const PlanGraph& g, const std::vector<double>& cap, int maxRings, int rounds) {
  const auto start = std::chrono::steady_clock::now();
  RingPlan plan;
  const int n = g.nranks();
  if (n < 2) return plan;
  const size_t m = g.links().size();
  std::vector<double> price(m), load(m, 0.0);
  for (size_t l = 0; l < m; ++l) price[l] = cap[l] > 0 ? 1.0 / cap[l] : kInf;
  std::map<std::string, std::pair<Ring, double>> found;
  double total = 0, bestScaled = 0;
  int sinceBetter = 0;
  for (int round = 0; round < rounds; ++round) {
    RouteTable table = cheapestRoutes(g, price, cap);
    std::vector<int> tour = cheapestTour(n, table.cost);
    if (tour.empty()) break;
    Ring ring = ringFromTour(tour, table);
    std::map<int, int> use = useOf(ring);
    double f = kInf;
    for (auto [l, times] : use) f = std::min(f, cap[static_cast<size_t>(l)] / times);
    for (auto [l, times] : use) {
      load[static_cast<size_t>(l)] += f * times;
      price[static_cast<size_t>(l)] *= std::exp(0.05 * f * times / cap[static_cast<size_t>(l)]);
    }
    total += f;
    Ring back = reverseRing(g, ring, table, cap);
    found[keyOf(ring)].first = ring;
    found[keyOf(ring)].second += f;
    found.emplace(keyOf(back), std::make_pair(back, 0.0));
    double over = 0;
    for (size_t l = 0; l < m; ++l)
      if (load[l] > 0 && cap[l] < PlanGraph::kUnbounded / 2)
        over = std::max(over, load[l] / cap[l]);
    const double scaled = over > 0 ? total / over : total;
    if (scaled > bestScaled * (1 + 1e-3))
      sinceBetter = 0;
    else if (++sinceBetter >= 30)
      break;
    bestScaled = std::max(bestScaled, scaled);
  }
  std::vector<Ring> rings;
  std::vector<Candidate> cands;
  for (auto& [key, entry] : found) {
    std::map<int, int> use = useOf(entry.first);
    cands.push_back(Candidate{{use.begin(), use.end()}, entry.second});
    rings.push_back(entry.first);
  }
  if (cands.size() > 96) {  // the LP over the heaviest candidates only
    std::vector<size_t> idx(cands.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(),
              [&](size_t a, size_t b) { return cands[a].weight > cands[b].weight; });
    idx.resize(96);
    std::vector<Candidate> c2;
    std::vector<Ring> r2;
    for (size_t i : idx) {
      c2.push_back(cands[i]);
      r2.push_back(rings[i]);
    }
    cands.swap(c2);
    rings.swap(r2);
  }
  for (int k : weightAndReduce(cands, cap, std::max(1, maxRings), 0.97)) {
    Ring r = rings[static_cast<size_t>(k)];
    r.rate = cands[static_cast<size_t>(k)].weight;
    plan.rate += r.rate;
    plan.rings.push_back(std::move(r));
  }
  std::sort(plan.rings.begin(), plan.rings.end(),
            [](const Ring& a, const Ring& b) { return a.rate > b.rate; });
  plan.linkClass = classOf(g, plan.rings);
  plan.planMs = msSince(start);
  return plan;
}

// capIntra: what hops inside a machine may use (0: not usable); capAll: every link.
RingPlan greedyRings(const PlanGraph& g, const std::vector<double>& capIntra,
                     const std::vector<double>& capAll, int maxRings) {
  const auto start = std::chrono::steady_clock::now();
  RingPlan plan;
  const int n = g.nranks();
  if (n < 2) return plan;
  const size_t m = g.links().size();
  std::vector<double> residual(capAll);
  for (int k = 0; k < maxRings; ++k) {
    std::vector<double> intra(m), price(m);
    for (size_t l = 0; l < m; ++l) {
      intra[l] = capIntra[l] > 0 ? residual[l] : 0;
      price[l] = residual[l] > 1e-9 ? 1.0 / residual[l] : kInf;
    }
    RouteTable inside = cheapestRoutes(g, price, intra);
    RouteTable across = cheapestRoutes(g, price, residual);
    double widest = 1e-9;
    for (size_t l = 0; l < m; ++l)
      if (residual[l] < PlanGraph::kUnbounded / 2) widest = std::max(widest, residual[l]);
    RouteTable table;
    table.n = n;
    table.cost.assign(static_cast<size_t>(n) * n, kInf);
    table.routes.assign(static_cast<size_t>(n) * n, {});
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        const RouteTable& t = g.machineOf(a) == g.machineOf(b) ? inside : across;
        const size_t i = static_cast<size_t>(a) * n + b;
        table.routes[i] = t.route(a, b);
        if (a != b && !table.routes[i].empty()) {  // narrow hops cost far more: near a widest tour
          double w = kInf;
          for (int li : table.routes[i]) w = std::min(w, residual[static_cast<size_t>(li)]);
          table.cost[i] = w > 1e-9 ? std::pow(widest / w, 4) : kInf;
        }
      }
    std::vector<int> tour = cheapestTour(n, table.cost);
    if (tour.empty()) break;
    Ring ring = ringFromTour(tour, table);
    std::map<int, int> use = useOf(ring);
    double f = kInf;
    for (auto [l, times] : use) f = std::min(f, residual[static_cast<size_t>(l)] / times);
    if (!(f > 1e-6)) break;
    for (auto [l, times] : use)
      residual[static_cast<size_t>(l)] =
          std::max(0.0, residual[static_cast<size_t>(l)] - f * times);
    ring.rate = f;
    plan.rate += f;
    plan.rings.push_back(std::move(ring));
  }
  plan.linkClass = classOf(g, plan.rings);
  plan.planMs = msSince(start);
  return plan;
}

}  // namespace grove::plan::detail

namespace grove::plan {

RingPlan searchRings(const PlanGraph& g, int maxRings) {
  if (maxRings < 1) throwInvalidArgument("searchRings: maxRings must be >= 1");
  RingPlan plan = detail::packRings(g, g.capacities(), maxRings, g.nranks() <= 12 ? 200 : 60);
  if (g.nranks() > 1 && plan.rings.empty())
    throwInvalidUsage("searchRings: the ranks are not connected by a ring");
  return plan;
}

RingPlan ncclLikeRings(const PlanGraph& g) {
  const std::vector<double> cap = g.capacities();
  const size_t m = cap.size();
  std::vector<double> nvlink(m, 0), pcie(m, 0);
  for (size_t l = 0; l < m; ++l) {
    const PlanLink& link = g.links()[l];
    const bool port = link.topoLink < 0;
    if (port || link.kind == topo::LinkKind::kNvLink) nvlink[l] = cap[l];
    if (port || link.kind != topo::LinkKind::kNvLink) pcie[l] = cap[l];
  }
  const auto start = std::chrono::steady_clock::now();
  const int kMaxChannels = 16;
  RingPlan plan = detail::greedyRings(g, nvlink, cap, kMaxChannels);
  if (plan.rings.empty()) plan = detail::greedyRings(g, pcie, cap, kMaxChannels);
  if (g.nranks() > 1 && plan.rings.empty())
    throwInvalidUsage("ncclLikeRings: the ranks are not connected by a ring");
  plan.planMs = detail::msSince(start);
  return plan;
}

}  // namespace grove::plan
