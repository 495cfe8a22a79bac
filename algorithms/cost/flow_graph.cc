// Building the transfer graph; see flow_graph.h and flow_sim.cc's "how it
// works" (Matching, Copies).
#include "algorithms/cost/flow_graph.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "base/error.h"
#include "ir/step_traits.h"

namespace grove::plan::flow {

int FlowGraph::phaseEnd(const std::vector<Program>& progs, int r, size_t ph) const {
  const auto& lanes = laneStart[r][ph];
  const Lane& last = progs[r].phases[ph].lanes.back();
  return lanes.back() + static_cast<int>(last.steps.size());
}

namespace {

class Builder {
 public:
  Builder(const FlowNet& net, const std::vector<Program>& progs, const SimParams& p)
      : net_(net), progs_(progs), p_(p), nranks_(static_cast<int>(progs.size())) {}

  FlowGraph build() {
    flattenSteps();
    matchTransfers();
    mergeCopies();
    findPaths();
    return std::move(g_);
  }

 private:
  void flattenSteps() {
    g_.laneStart.resize(nranks_);
    for (int r = 0; r < nranks_; ++r) {
      for (const Phase& ph : progs_[r].phases) {
        auto& lanes = g_.laneStart[r].emplace_back();
        for (const Lane& lane : ph.lanes) {
          lanes.push_back(static_cast<int>(g_.steps.size()));
          const int end = static_cast<int>(g_.steps.size() + lane.steps.size());
          for (const Step& s : lane.steps) {
            checkPeers(r, s);
            g_.steps.push_back(SimStep{&s, r, end, {}, 0, {}});
          }
        }
      }
    }
  }

  void checkPeers(int r, const Step& s) const {
    auto bad = [&](int peer) { return peer < 0 || peer >= nranks_ || peer == r; };
    bool badSend = false;
    forEachSendPeer(s, [&](int peer) { badSend = badSend || bad(peer); });
    forEachRecvPeer(s, [&](int peer) { badSend = badSend || bad(peer); });
    if (badSend)
      throwInvalidArgument("simulate: rank " + std::to_string(r) +
                           " has a step with an invalid peer: " + describe(s));
  }

  void matchTransfers() {
    using Key = std::tuple<int, int, int>;
    std::map<Key, std::pair<std::vector<int>, std::vector<int>>> byLink;
    for (int id = 0; id < static_cast<int>(g_.steps.size()); ++id) {
      const Step& s = *g_.steps[id].step;
      if (s.bytes == 0) continue;
      const int r = g_.steps[id].rank;
      forEachSendPeer(s, [&](int peer) { byLink[{r, peer, s.channel}].first.push_back(id); });
      forEachRecvPeer(s, [&](int peer) { byLink[{peer, r, s.channel}].second.push_back(id); });
    }
    // Route ids: one per pair for the widest route (channel -1), one per
    // (pair, channel) whose sender planned its own route (Program::routes).
    std::map<Key, int> routeIds;
    for (const auto& [key, ends] : byLink) {
      const auto [src, dst, ch] = key;
      // (only an error's text: most connections are fine)
      const auto where = [s = src, d = dst, c = ch] {
        return "connection " + std::to_string(s) + "->" + std::to_string(d) + " channel " +
               std::to_string(c);
      };
      if (ends.first.size() != ends.second.size())
        throwInvalidArgument("simulate: " + where() + " has " + std::to_string(ends.first.size()) +
                             " sending steps but " + std::to_string(ends.second.size()) +
                             " receiving steps");
      const std::vector<int>* planned = plannedRoute(src, dst, ch);
      auto [it, added] =
          routeIds.try_emplace({src, dst, planned ? ch : -1}, static_cast<int>(g_.routes.size()));
      if (added) addRoute(src, dst, planned);
      for (size_t k = 0; k < ends.first.size(); ++k) {
        SimStep& snd = g_.steps[ends.first[k]];
        SimStep& rcv = g_.steps[ends.second[k]];
        if (snd.step->bytes != rcv.step->bytes)
          throwInvalidArgument("simulate: " + where() + " transfer " + std::to_string(k) + ": " +
                               std::to_string(snd.step->bytes) + " B sent but " +
                               std::to_string(rcv.step->bytes) + " B received");
        Transfer t;
        t.bytes = static_cast<double>(snd.step->bytes);
        t.route = it->second;
        t.delay = g_.routeDelay[t.route];
        t.flight = t.delay - p_.stepOverheadUs * 1e-6;
        t.sender = ends.first[k];
        t.receiver = ends.second[k];
        snd.outs.push_back(static_cast<int>(g_.xfers.size()));
        ++snd.outsLeft;
        rcv.ins.push_back(snd.outs.back());
        ++rcv.insLeft;
        g_.xfers.push_back(t);
      }
    }
    for (Transfer& t : g_.xfers) {
      const std::vector<int>& ins = g_.steps[t.sender].ins;
      t.upBegin = static_cast<int>(g_.ups.size());
      g_.ups.insert(g_.ups.end(), ins.begin(), ins.end());
      t.upEnd = static_cast<int>(g_.ups.size());
      t.upstreamsLeft = t.upEnd - t.upBegin;
    }
  }

  /// Merges copies. The transfers tie lanes into closed parts of the call
  /// (a channel's lanes on every rank; a tree part's up and down lanes). A
  /// part that repeats another exactly -- the same ranks, phases, step kinds,
  /// peers and routes, on channels of its own, and byte counts within
  /// kCopyBytes (parts of one share differ by an element) -- runs as one:
  /// the first copy is simulated, counting as many times as there are
  /// copies where links are shared (FairFill), and the others never start.
  /// Identical streams get identical rates and events, so every time is the
  /// same; a tree's parts and a ring's channels over one ring are copies,
  /// and a 32-channel program simulates as its few distinct parts.
  void mergeCopies() {
    g_.copies.assign(g_.xfers.size(), 1);
    // Lanes, by their first step; laneOf: by step.
    std::vector<int> laneFirst, lanePhase, laneOf(g_.steps.size(), -1);
    for (int r = 0; r < nranks_; ++r)
      for (size_t ph = 0; ph < g_.laneStart[r].size(); ++ph) {
        const auto& lanes = g_.laneStart[r][ph];
        for (size_t l = 0; l < lanes.size(); ++l) {
          const int end = l + 1 < lanes.size() ? lanes[l + 1] : g_.phaseEnd(progs_, r, ph);
          if (lanes[l] == end) continue;
          for (int id = lanes[l]; id < end; ++id) laneOf[id] = static_cast<int>(laneFirst.size());
          laneFirst.push_back(lanes[l]);
          lanePhase.push_back(static_cast<int>(ph));
        }
      }
    if (laneFirst.size() < 2) return;
    std::vector<int> parent(laneFirst.size());
    for (size_t i = 0; i < parent.size(); ++i) parent[i] = static_cast<int>(i);
    auto find = [&](int a) {
      while (parent[a] != a) a = parent[a] = parent[parent[a]];
      return a;
    };
    for (const Transfer& t : g_.xfers) {
      const int a = find(laneOf[t.sender]), b = find(laneOf[t.receiver]);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);
    }
    std::vector<std::vector<int>> parts(laneFirst.size());  // by root: its lanes in order
    for (size_t i = 0; i < laneFirst.size(); ++i) parts[find(static_cast<int>(i))].push_back(i);
    // Each route as the id of its link list, so that copies' routes compare
    // (a route planned per channel has an id of its own).
    std::vector<long long> routeKey;
    {
      std::map<std::vector<int>, long long> ids;
      for (const std::vector<int>& r : g_.routes)
        routeKey.push_back(ids.try_emplace(r, static_cast<long long>(ids.size())).first->second);
    }
    auto shapeOf = [&](const std::vector<int>& lanes) {
      std::vector<long long> key;
      std::map<int, int> channel;  // the part's channels, in order of use
      for (int lane : lanes) {
        const int first = laneFirst[lane];
        key.push_back(g_.steps[first].rank);
        key.push_back(lanePhase[lane]);
        key.push_back(static_cast<long long>(laneEnd(first) - first));
        for (int id = first; id < laneEnd(first); ++id) {
          const Step& st = *g_.steps[id].step;
          key.insert(key.end(), {static_cast<long long>(st.kind), st.sendPeer, st.recvPeer,
                                 st.moreSendPeers[0], st.moreSendPeers[1], st.moreSendPeers[2],
                                 st.moreRecvPeers[0], st.moreRecvPeers[1], st.moreRecvPeers[2]});
          key.push_back(
              channel.try_emplace(st.channel, static_cast<int>(channel.size())).first->second);
          for (int x : g_.steps[id].outs) key.push_back(routeKey[g_.xfers[x].route]);
        }
      }
      return key;
    };
    auto sameBytes = [&](const std::vector<int>& a, const std::vector<int>& b) {
      for (size_t i = 0; i < a.size(); ++i)
        for (int p = laneFirst[a[i]], q = laneFirst[b[i]]; p < laneEnd(laneFirst[a[i]]); ++p, ++q) {
          const uint64_t x = g_.steps[p].step->bytes, y = g_.steps[q].step->bytes;
          if ((x > y ? x - y : y - x) > kCopyBytes) return false;
        }
      return true;
    };
    std::map<std::vector<long long>, std::vector<int>> firsts;  // by shape: parts kept
    for (size_t root = 0; root < parts.size(); ++root) {
      if (parts[root].empty()) continue;
      std::vector<int>& kept = firsts[shapeOf(parts[root])];
      int into = -1;
      for (int k : kept)
        if (sameBytes(parts[k], parts[root])) into = k;
      if (into < 0) {
        kept.push_back(static_cast<int>(root));
        continue;
      }
      for (int lane : parts[root])
        for (int id = laneFirst[lane]; id < laneEnd(laneFirst[lane]); ++id) {
          g_.steps[id].merged = true;
          for (int x : g_.steps[id].outs) g_.copies[x] = 0;
        }
      for (int lane : parts[into])
        for (int id = laneFirst[lane]; id < laneEnd(laneFirst[lane]); ++id)
          for (int x : g_.steps[id].outs) ++g_.copies[x];
    }
  }

  /// One past the last step of the lane whose first step is `first`.
  int laneEnd(int first) const { return g_.steps[first].laneEnd; }

  /// The route src's program planned for its link to dst on channel ch, or null.
  const std::vector<int>* plannedRoute(int src, int dst, int ch) const {
    for (const LinkRoute& r : progs_[static_cast<size_t>(src)].routes)
      if (r.send && r.peer == dst && r.channel == ch && !r.links.empty()) return &r.links;
    return nullptr;
  }

  void addRoute(int src, int dst, const std::vector<int>* planned) {
    std::vector<int> route = planned      ? *planned
                             : net_.route ? net_.route(src, dst)
                                          : std::vector<int>{};
    if (route.empty())
      throwInvalidArgument("simulate: no route from rank " + std::to_string(src) + " to rank " +
                           std::to_string(dst));
    double lat = p_.stepOverheadUs;
    for (int l : route) {
      if (l < 0 || l >= static_cast<int>(net_.capGBps.size()))
        throwInvalidArgument("simulate: route " + std::to_string(src) + "->" + std::to_string(dst) +
                             " names link " + std::to_string(l) + ", which does not exist");
      lat += net_.latencyUs[l];
    }
    g_.routes.push_back(std::move(route));
    g_.routeDelay.push_back(lat * 1e-6);
  }

  void findPaths() {
    std::map<std::vector<int>, int> ids;
    for (const Transfer& t : g_.xfers) {
      std::vector<int> links;
      for (int l : g_.routes[t.route])
        if (net_.capGBps[l] < PlanGraph::kUnbounded / 2) links.push_back(l);
      auto [it, added] = ids.try_emplace(links, static_cast<int>(g_.paths.size()));
      if (added) g_.paths.push_back(std::move(links));
      g_.pathOf.push_back(it->second);
    }
  }

  const FlowNet& net_;
  const std::vector<Program>& progs_;
  const SimParams& p_;
  const int nranks_;
  FlowGraph g_;
};

}  // namespace

FlowGraph buildFlowGraph(const FlowNet& net, const std::vector<Program>& progs,
                         const SimParams& p) {
  return Builder(net, progs, p).build();
}

}  // namespace grove::plan::flow
