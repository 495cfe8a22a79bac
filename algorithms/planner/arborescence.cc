// The spanning-tree oracles of tree packing.
//
// How it works: minArborescence() is Chu-Liu/Edmonds on a dense weight
// matrix. Every vertex but the root takes its cheapest incoming edge; when
// those edges form no cycle they are the answer. Otherwise one cycle is
// contracted into a single vertex: an edge u->v entering the cycle costs
// w(u,v) - w(pre(v), v) (what replacing v's cycle edge costs), an edge
// leaving it keeps its weight; the contracted problem is solved recursively
// and expanded (the cycle keeps its edges except at the vertex where the
// chosen entering edge lands). O(n^3) for n vertices, which is what the
// planners need for tens of ranks. minSpanningTree() is Prim's algorithm on
// a dense symmetric matrix (all-reduce trees load both directions of every
// edge, so their weights are symmetric and any root gives the same cost).
#include <limits>
#include <vector>

#include "algorithms/planner/planner_internal.h"

namespace grove::plan::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Vertices of one cycle of the `pre` edges, or empty.
std::vector<int> findCycle(int n, int root, const std::vector<int>& pre) {
  std::vector<int> mark(static_cast<size_t>(n), -1);
  for (int s = 0; s < n; ++s) {
    int v = s;
    while (v != root && mark[static_cast<size_t>(v)] < 0) {
      mark[static_cast<size_t>(v)] = s;
      v = pre[static_cast<size_t>(v)];
    }
    if (v == root || mark[static_cast<size_t>(v)] != s) continue;
    std::vector<int> cycle{v};
    for (int u = pre[static_cast<size_t>(v)]; u != v; u = pre[static_cast<size_t>(u)])
      cycle.push_back(u);
    return cycle;
  }
  return {};
}

}  // namespace

std::vector<int> minArborescence(int n, int root, const std::vector<double>& w) {
  auto W = [&](int u, int v) { return w[static_cast<size_t>(u) * n + v]; };
  std::vector<int> pre(static_cast<size_t>(n), -1);
  for (int v = 0; v < n; ++v) {
    if (v == root) continue;
    double best = kInf;
    for (int u = 0; u < n; ++u)
      if (u != v && W(u, v) < best) {
        best = W(u, v);
        pre[static_cast<size_t>(v)] = u;
      }
    if (pre[static_cast<size_t>(v)] < 0) return {};
  }
  std::vector<int> cycle = findCycle(n, root, pre);
  if (cycle.empty()) return pre;
  // Contract: vertices outside the cycle keep an index, the cycle becomes `c`.
  std::vector<char> inCycle(static_cast<size_t>(n), 0);
  for (int v : cycle) inCycle[static_cast<size_t>(v)] = 1;
  std::vector<int> newIndex(static_cast<size_t>(n), -1), orig;
  for (int v = 0; v < n; ++v)
    if (!inCycle[static_cast<size_t>(v)]) {
      newIndex[static_cast<size_t>(v)] = static_cast<int>(orig.size());
      orig.push_back(v);
    }
  const int c = static_cast<int>(orig.size());
  const int nn = c + 1;
  for (int v : cycle) newIndex[static_cast<size_t>(v)] = c;
  std::vector<double> w2(static_cast<size_t>(nn) * nn, kInf);
  std::vector<int> enterVia(static_cast<size_t>(nn), -1), leaveVia(static_cast<size_t>(nn), -1);
  for (int u = 0; u < n; ++u)
    for (int v = 0; v < n; ++v) {
      if (u == v || W(u, v) == kInf) continue;
      const int a = newIndex[static_cast<size_t>(u)], b = newIndex[static_cast<size_t>(v)];
      if (a == c && b == c) continue;
      double val = W(u, v);
      if (b == c) val -= W(pre[static_cast<size_t>(v)], v);
      double& slot = w2[static_cast<size_t>(a) * nn + b];
      if (val < slot) {
        slot = val;
        if (b == c) enterVia[static_cast<size_t>(a)] = v;
        if (a == c) leaveVia[static_cast<size_t>(b)] = u;
      }
    }
  std::vector<int> par2 = minArborescence(nn, newIndex[static_cast<size_t>(root)], w2);
  if (par2.empty()) return {};
  std::vector<int> parent(static_cast<size_t>(n), -1);
  for (int i = 0; i < c; ++i) {
    const int p2 = par2[static_cast<size_t>(i)];
    if (p2 < 0) continue;
    parent[static_cast<size_t>(orig[static_cast<size_t>(i)])] =
        p2 == c ? leaveVia[static_cast<size_t>(i)] : orig[static_cast<size_t>(p2)];
  }
  for (int v : cycle) parent[static_cast<size_t>(v)] = pre[static_cast<size_t>(v)];
  const int from = par2[static_cast<size_t>(c)];
  parent[static_cast<size_t>(enterVia[static_cast<size_t>(from)])] =
      orig[static_cast<size_t>(from)];
  return parent;
}

std::vector<int> minSpanningTree(int n, const std::vector<double>& w) {
  std::vector<int> parent(static_cast<size_t>(n), -1);
  std::vector<double> key(static_cast<size_t>(n), kInf);
  std::vector<char> in(static_cast<size_t>(n), 0);
  key[0] = 0;
  for (int step = 0; step < n; ++step) {
    int u = -1;
    for (int v = 0; v < n; ++v)
      if (!in[static_cast<size_t>(v)] &&
          (u < 0 || key[static_cast<size_t>(v)] < key[static_cast<size_t>(u)]))
        u = v;
    if (key[static_cast<size_t>(u)] == kInf) return {};
    in[static_cast<size_t>(u)] = 1;
    for (int v = 0; v < n; ++v) {
      const double x = w[static_cast<size_t>(u) * n + v];
      if (!in[static_cast<size_t>(v)] && x < key[static_cast<size_t>(v)]) {
        key[static_cast<size_t>(v)] = x;
        parent[static_cast<size_t>(v)] = u;
      }
    }
  }
  return parent;
}

}  // namespace grove::plan::detail
