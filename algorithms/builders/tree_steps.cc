// Tree steps (tree_steps.h): a rank's node, the channels of a set of trees,
// and the fan-out / fan-in steps of one chunk. The "how it works" of these
// steps is tree.cc's.
#include "algorithms/builders/tree_steps.h"

#include <algorithm>
#include <cmath>

#include "algorithms/builders/builder_util.h"
#include "algorithms/builders/builders.h"
#include "algorithms/planner/topo_plans.h"
#include "base/error.h"

namespace grove::plan::detail {

namespace {

/// Destinations of one fan-out step.
constexpr size_t kFanOut = kMaxMoreSendPeers + 1;

/// Makes `s` send to children [first, first + kFanOut) (those that exist).
void setDestinations(Step& s, const std::vector<int>& children, size_t first) {
  s.sendPeer = children[first];
  for (size_t i = 1; i < kFanOut && first + i < children.size(); ++i)
    s.moreSendPeers[i - 1] = children[first + i];
}

/// Sources of one fan-in step.
constexpr size_t kFanIn = kMaxMoreRecvPeers + 1;

/// Makes `s` reduce children [first, first + kFanIn) (those that exist).
void setSources(Step& s, const std::vector<int>& children, size_t first) {
  s.recvPeer = children[first];
  for (size_t i = 1; i < kFanIn && first + i < children.size(); ++i)
    s.moreRecvPeers[i - 1] = children[first + i];
}

/// Route of a tree edge as planned (`routes` is Tree::down or Tree::up),
/// empty when the plan left it to the widest route.
const std::vector<int>& plannedRoute(const std::vector<std::vector<int>>& routes, int rank) {
  static const std::vector<int> kNone;
  return static_cast<size_t>(rank) < routes.size() ? routes[static_cast<size_t>(rank)] : kNone;
}

/// Checks that `t` is a spanning arborescence over `n` ranks (rooted at
/// `wantRoot` unless it is -1) and returns rank's node.
Node nodeOf(const Tree& t, int n, int rank, int wantRoot, const std::string& who) {
  if (static_cast<int>(t.parent.size()) != n)
    throwInvalidArgument(who + ": tree has " + std::to_string(t.parent.size()) +
                         " parent entries for " + std::to_string(n) + " ranks");
  if (t.root < 0 || t.root >= n || t.parent[t.root] != -1)
    throwInvalidArgument(who + ": tree root " + std::to_string(t.root) +
                         " is out of range or has a parent");
  if (wantRoot >= 0 && t.root != wantRoot)
    throwInvalidArgument(who + ": tree rooted at " + std::to_string(t.root) +
                         " but the call's root is " + std::to_string(wantRoot));
  for (int v = 0; v < n; ++v) {
    int u = v, hops = 0;
    while (u != t.root) {
      const int p = t.parent[u];
      if (p < 0 || p >= n || p == u || ++hops > n)
        throwInvalidArgument(who + ": rank " + std::to_string(v) +
                             " does not reach the tree root (bad parent " + std::to_string(p) +
                             " of rank " + std::to_string(u) + ")");
      u = p;
    }
  }
  Node node;
  node.rank = rank;
  node.parent = t.parent[rank];
  for (int v = 0; v < n; ++v)
    if (v != t.root && t.parent[v] == rank) node.children.push_back(v);
  return node;
}

/// Channels (parts) of each tree. Several trees are parallel streams
/// already, so sub-channels only make up the difference to `nChannels`; and
/// since streams that meet on a link share it about equally (TCP, and the
/// flow simulator), a tree gets channels in proportion to its rate -- else a
/// heavy tree that shares a link with a light one would get half of it and
/// finish last. At most `slots` channels in all (this bounds the connections).
std::vector<int> channelsPerTree(const std::vector<double>& rates, int nChannels, int slots) {
  const int nt = static_cast<int>(rates.size());
  const int base = std::max(1, std::min(nChannels / nt, slots / nt));
  double least = 0;
  for (double r : rates)
    if (r > 0 && (least == 0 || r < least)) least = r;
  std::vector<int> subs(rates.size(), base);
  if (least == 0) return subs;
  // Shrink the proportional counts until they fit (or the scale drops below
  // one channel for the lightest tree); if even that is too many, base each.
  int total = 0;
  for (double scale = base;; scale *= 0.75) {
    total = 0;
    for (size_t t = 0; t < rates.size(); ++t) {
      subs[t] = std::max(1, static_cast<int>(std::lround(scale * rates[t] / least)));
      total += subs[t];
    }
    if (total <= std::max(slots / 2, nt * base) || scale < 1) break;
  }
  if (total > slots) subs.assign(rates.size(), base);
  return subs;
}

/// The channels the planner gave the trees (Tree::channels), or empty when
/// it gave none or more than `slots` in all.
std::vector<int> plannedChannels(const std::vector<Tree>& trees, int slots) {
  std::vector<int> subs;
  int total = 0;
  for (const Tree& t : trees) {
    if (t.channels <= 0) return {};
    subs.push_back(t.channels);
    total += t.channels;
  }
  return total <= slots ? subs : std::vector<int>{};
}

/// Hops from the root to the deepest rank of a (checked) tree.
int depthOf(const Tree& t) {
  int deepest = 1;
  for (size_t v = 0; v < t.parent.size(); ++v) {
    int hops = 0;
    for (int u = static_cast<int>(v); t.parent[static_cast<size_t>(u)] >= 0;
         u = t.parent[static_cast<size_t>(u)])
      ++hops;
    deepest = std::max(deepest, hops);
  }
  return deepest;
}

}  // namespace

Setup makeSetup(const CollArgs& a, const PlanParams& p, const std::vector<Tree>& trees, uint64_t es,
                TreeUse use, const std::string& who, const std::vector<uint64_t>* blocks) {
  if (trees.empty()) throwInvalidArgument(who + ": no trees");
  const int slots = kP2PChannel / (use == TreeUse::kAllReduce ? 2 : 1);
  if (static_cast<int>(trees.size()) > slots)
    throwInvalidArgument(who + ": " + std::to_string(trees.size()) + " trees need more than the " +
                         std::to_string(kP2PChannel) + " channels available (at most " +
                         std::to_string(slots) + " trees)");
  const bool rooted = use == TreeUse::kRooted;
  Setup s;
  std::vector<double> rates;
  for (const Tree& t : trees) {
    s.nodes.push_back(nodeOf(t, a.nranks, a.rank, rooted ? a.root : -1, who));
    if (use != TreeUse::kAllReduce && !t.upParent.empty())
      throwInvalidArgument(who + ": a tree pair (separate reduce tree) serves all-reduce only");
    if (use == TreeUse::kAllReduce) {  // the reduce tree: the same one, or a second into the root
      Tree in;
      in.root = t.root;
      in.parent = t.upParent.empty() ? t.parent : t.upParent;
      s.upNodes.push_back(nodeOf(in, a.nranks, a.rank, t.root, who + " (reduce tree)"));
    }
    rates.push_back(t.rate);
  }
  if (use != TreeUse::kForest) {
    s.shares = rateSplit(a.count, rates, who.c_str());
  } else {
    // Each root's block over its own trees, in the order they come.
    s.shares.resize(trees.size());
    for (int r = 0; r < a.nranks; ++r) {
      std::vector<size_t> mine;
      std::vector<double> mineRates;
      for (size_t t = 0; t < trees.size(); ++t)
        if (trees[t].root == r) mine.push_back(t), mineRates.push_back(trees[t].rate);
      if (mine.empty())
        throwInvalidArgument(who + ": no tree is rooted at rank " + std::to_string(r) +
                             " (a forest needs trees rooted at every rank)");
      const uint64_t block = blocks ? blocks->at(static_cast<size_t>(r)) : a.count;
      const std::vector<Span> split = rateSplit(block, mineRates, who.c_str());
      for (size_t i = 0; i < mine.size(); ++i) s.shares[mine[i]] = split[i];
    }
  }
  s.subs = plannedChannels(trees, slots);
  if (s.subs.empty()) {
    s.subs = channelsPerTree(rates, p.nChannels, slots);
  } else {
    // The planner gives the fewest streams that reach the trees' rates; a
    // transport that wants more (a GPU: a thread block per channel) gets
    // them in the same proportions.
    int total = 0;
    for (int k : s.subs) total += k;
    const int times = std::min(p.nChannels / total, slots / total);
    if (times > 1)
      for (int& k : s.subs) k *= times;
  }
  int next = 0;
  for (int k : s.subs) s.first.push_back(next), next += k;
  s.es = es;
  s.chunks.assign(trees.size(), chunkElems(p, es));
  if (use == TreeUse::kForest) {
    // A part crosses its tree in (chunks + depth - 1) chunk times: chunks
    // of a quarter of a part per hop of depth keep the fill under a fifth,
    // down to a 32nd of the full chunk (each step has its cost too).
    const uint64_t least = std::max<uint64_t>(1, s.chunks[0] / 32);
    for (size_t t = 0; t < trees.size(); ++t) {
      const uint64_t part = s.shares[t].count / static_cast<uint64_t>(s.subs[t]);
      const uint64_t want = part / (4 * static_cast<uint64_t>(depthOf(trees[t])));
      s.chunks[t] = std::min(s.chunks[t], std::max(least, want));
    }
  }
  return s;
}

Node inTurn(const Node& n, int sub) {
  static_assert(kFanOut == kFanIn, "one rotation serves both directions");
  Node r = n;
  const size_t k = r.children.size();
  if (k > kFanOut && sub > 0)
    std::rotate(
        r.children.begin(),
        r.children.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(sub) * kFanOut) % k),
        r.children.end());
  return r;
}

/// Down steps of one chunk: the root sends `rootSrc`; others receive into the
/// output and forward it; every step serves up to kFanOut children at once.
void emitDown(Lane& lane, const Node& n, int ch, BufRef rootSrc, uint64_t outOff, uint64_t bytes) {
  const BufRef out = ref(Buf::kOutput, outOff);
  if (n.parent >= 0 && n.children.empty()) {
    lane.steps.push_back(netStep(StepKind::kRecv, n.parent, -1, ch, {}, out, bytes));
    return;
  }
  size_t next = 0;
  BufRef src = rootSrc;
  if (n.parent >= 0) {
    Step fwd = netStep(StepKind::kRecvCopySend, n.parent, n.children[0], ch, {}, out, bytes);
    setDestinations(fwd, n.children, 0);
    lane.steps.push_back(fwd);
    next = kFanOut;
    src = out;
  }
  for (; next < n.children.size(); next += kFanOut) {
    Step send = netStep(StepKind::kSend, -1, n.children[next], ch, src, {}, bytes);
    setDestinations(send, n.children, next);
    lane.steps.push_back(send);
  }
}

/// Up steps of one chunk: fold the children, up to kFanIn per step, into
/// `acc` (the root into the output, final at the last group), then pass the
/// result to the parent (with the last group).
void emitUp(Lane& lane, const Node& n, int ch, uint64_t inOff, uint64_t outOff, uint64_t bytes,
            BufRef acc) {
  BufRef src = ref(Buf::kInput, inOff);
  const size_t k = n.children.size();
  if (n.parent >= 0 && k == 0) {
    lane.steps.push_back(netStep(StepKind::kSend, -1, n.parent, ch, src, {}, bytes));
    return;
  }
  if (n.parent < 0) acc = ref(Buf::kOutput, outOff);
  for (size_t first = 0; first < k; first += kFanIn) {
    const bool lastGroup = first + kFanIn >= k;
    Step step;
    if (lastGroup && n.parent >= 0) {
      step = netStep(StepKind::kRecvReduceSend, -1, n.parent, ch, src, {}, bytes);
    } else {
      step = netStep(StepKind::kRecvReduce, -1, -1, ch, src, acc, bytes,
                     /*final=*/lastGroup);
    }
    setSources(step, n.children, first);
    lane.steps.push_back(step);
    src = acc;
  }
}

bool emitRootThrough(Lane& lane, const Node& up, const Node& down, int ch, uint64_t inOff,
                     uint64_t outOff, uint64_t bytes) {
  if (up.parent >= 0 || down.parent >= 0 || up.children.empty() || down.children.empty() ||
      up.children.size() > kFanIn || down.children.size() > kFanOut)
    return false;
  Step st = netStep(StepKind::kRecvReduceCopySend, up.children[0], down.children[0], ch,
                    ref(Buf::kInput, inOff), ref(Buf::kOutput, outOff), bytes, /*final=*/true);
  setSources(st, up.children, 0);
  setDestinations(st, down.children, 0);
  lane.steps.push_back(st);
  return true;
}

/// Records the planned routes of this rank's links in tree `t`: down (to its
/// children, from its parent, in node `n`) on channel `downCh`, up (to its
/// parent, from its children, in node `u` of the reduce tree) on `upCh`;
/// -1: that direction is not used.
bool needsFoldSlot(const Node& n) { return n.parent >= 0 && n.children.size() > kFanIn; }

void addTreeRoutes(Program& prog, const Tree& t, const Node& n, const Node& u, int downCh,
                   int upCh) {
  if (downCh >= 0) {
    for (int c : n.children) detail::addRoute(prog, c, downCh, true, plannedRoute(t.down, c));
    if (n.parent >= 0)
      detail::addRoute(prog, n.parent, downCh, false, plannedRoute(t.down, n.rank));
  }
  if (upCh >= 0) {
    for (int c : u.children) detail::addRoute(prog, c, upCh, false, plannedRoute(t.up, c));
    if (u.parent >= 0) detail::addRoute(prog, u.parent, upCh, true, plannedRoute(t.up, u.rank));
  }
}

}  // namespace grove::plan::detail
