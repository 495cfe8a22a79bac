// Plans as text, checked on the way back in, and the fingerprint that names
// them (plan_store.h).
//
// The text is a sequence of words: a header ("grove-rings 1"), then each
// field's name and value; doubles are C99 hexadecimal floats ("%a"), so a
// plan read back is bit for bit the plan written, and every rank that reads
// it shares the exact chunk splits of the rank that planned it. Routes are
// lists of plan-graph link indices, written as their length then the links.
//
// Nothing read is trusted: every count is bounded by the graph, every rank
// and link index is in range, every ring visits each rank once, every tree
// reaches its root from every rank without a cycle, and every route is a
// chain of links from the hop's sender to its receiver.
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "algorithms/planner/plan_store.h"
#include "base/siphash.h"
#include "grove/grove.h"

namespace grove::plan {

namespace {

/// Bump when the planners' output for the same graph changes, so that plans
/// stored by an older planner are not taken for this one's.
constexpr int kPlanFormat = 4;

struct Bad : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string hexDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

/// Writes words separated by spaces.
class Writer {
 public:
  Writer& word(const std::string& w) {
    if (!text_.empty()) text_ += ' ';
    text_ += w;
    return *this;
  }
  Writer& num(long long v) { return word(std::to_string(v)); }
  Writer& real(double v) { return word(hexDouble(v)); }
  Writer& ranks(const std::vector<int>& v) {
    num(static_cast<long long>(v.size()));
    for (int x : v) num(x);
    return *this;
  }
  Writer& routes(const std::vector<std::vector<int>>& rs) {
    num(static_cast<long long>(rs.size()));
    for (const auto& r : rs) ranks(r);
    return *this;
  }
  std::string text() const { return text_ + "\n"; }

 private:
  std::string text_;
};

/// Reads the words back; throws Bad on anything unexpected.
class Reader {
 public:
  explicit Reader(const std::string& text) : in_(text) {}
  std::string word() {
    std::string w;
    if (!(in_ >> w)) throw Bad("the text ends early");
    return w;
  }
  void expect(const std::string& w) {
    const std::string got = word();
    if (got != w) throw Bad("expected '" + w + "', found '" + got.substr(0, 40) + "'");
  }
  long long num(long long lo, long long hi) {
    const std::string w = word();
    char* end = nullptr;
    const long long v = std::strtoll(w.c_str(), &end, 10);
    if (w.empty() || *end != '\0') throw Bad("'" + w.substr(0, 40) + "' is not an integer");
    if (v < lo || v > hi)
      throw Bad(std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
    return v;
  }
  double real() {
    const std::string w = word();
    char* end = nullptr;
    const double v = std::strtod(w.c_str(), &end);
    if (w.empty() || *end != '\0' || !std::isfinite(v) || v < 0)
      throw Bad("'" + w.substr(0, 40) + "' is not a finite non-negative number");
    return v;
  }
  std::vector<int> ranks(size_t maxLen, int lo, int hi) {
    const size_t n = static_cast<size_t>(num(0, static_cast<long long>(maxLen)));
    std::vector<int> v(n);
    for (int& x : v) x = static_cast<int>(num(lo, hi));
    return v;
  }
  std::vector<std::vector<int>> routes(const PlanGraph& g, size_t maxCount) {
    const size_t n = static_cast<size_t>(num(0, static_cast<long long>(maxCount)));
    const int links = static_cast<int>(g.links().size());
    std::vector<std::vector<int>> rs(n);
    for (auto& r : rs) r = ranks(static_cast<size_t>(links), 0, links - 1);
    return rs;
  }
  /// A plan's first words: its kind and this format's version.
  void header(const char* kind) {
    expect(kind);
    num(kPlanFormat, kPlanFormat);
  }
  /// A named non-negative number ("rate 0x1p+4").
  double realField(const char* name) {
    expect(name);
    return real();
  }
  /// A named integer in [lo, hi].
  long long numField(const char* name, long long lo, long long hi) {
    expect(name);
    return num(lo, hi);
  }
  void end() {
    std::string extra;
    if (in_ >> extra) throw Bad("unexpected '" + extra.substr(0, 40) + "' after the plan");
  }

 private:
  std::istringstream in_;
};

/// A route must be empty (the widest route stands in) or a chain of links
/// from rank a's vertex to rank b's.
void checkRoute(const PlanGraph& g, const std::vector<int>& route, int a, int b, const char* what) {
  if (route.empty()) return;
  int at = g.rankVertex(a);
  for (int l : route) {
    const PlanLink& link = g.links()[static_cast<size_t>(l)];
    if (link.from != at)
      throw Bad(std::string(what) + " route from rank " + std::to_string(a) + " to rank " +
                std::to_string(b) + " is not a chain of links");
    at = link.to;
  }
  if (at != g.rankVertex(b))
    throw Bad(std::string(what) + " route from rank " + std::to_string(a) + " ends short of rank " +
              std::to_string(b));
}

/// Every rank reaches `root` through `parent` without a cycle.
void checkArborescence(const std::vector<int>& parent, int root, const char* what) {
  const int n = static_cast<int>(parent.size());
  if (parent[static_cast<size_t>(root)] != -1)
    throw Bad(std::string(what) + ": the root has a parent");
  for (int v = 0; v < n; ++v) {
    int at = v;
    for (int hops = 0; at != root; ++hops) {
      if (hops >= n)
        throw Bad(std::string(what) + ": rank " + std::to_string(v) + " is on a cycle");
      at = parent[static_cast<size_t>(at)];
      if (at < 0) throw Bad(std::string(what) + ": rank " + std::to_string(v) + " misses the root");
    }
  }
}

void checkPermutation(const std::vector<int>& order, int n, const char* what) {
  if (static_cast<int>(order.size()) != n)
    throw Bad(std::string(what) + " does not hold every rank");
  std::vector<char> seen(static_cast<size_t>(n), 0);
  for (int r : order) {
    if (seen[static_cast<size_t>(r)]) throw Bad(std::string(what) + " visits a rank twice");
    seen[static_cast<size_t>(r)] = 1;
  }
}

template <typename Plan, typename Parse>
bool decodeWith(const std::string& text, Plan* out, std::string* why, Parse parse) {
  try {
    Reader in(text);
    Plan plan;
    parse(in, plan);
    in.end();
    *out = std::move(plan);
    return true;
  } catch (const Bad& e) {
    if (why) *why = e.what();
  } catch (const std::exception& e) {  // e.g. a rank the graph does not have
    if (why) *why = std::string("not a plan of this graph (") + e.what() + ")";
  }
  return false;
}

}  // namespace

std::string planFingerprint(const PlanGraph& g, const PackOptions& options,
                            const std::string& judgeKey) {
  Writer w;
  w.word("grove-plans").num(kPlanFormat).num(GROVE_VERSION_CODE);
  w.word("pack").real(options.epsilon).num(options.maxRounds).num(options.maxTrees);
  w.real(options.keep)
      .num(options.fairShares ? 1 : 0)
      .num(options.fanTrees)
      .word("judge")
      .word(judgeKey.empty() ? "-" : judgeKey);
  w.word("graph").num(g.nranks()).num(g.numVertices()).num(g.numMachines());
  for (int v = 0; v < g.numVertices(); ++v)
    w.word(g.vertexName(v)).num(g.mayRelay(v)).num(g.machineOfVertex(v)).num(g.rankOfVertex(v));
  for (size_t i = 0; i < g.links().size(); ++i) {
    const PlanLink& l = g.links()[i];
    w.num(l.from).num(l.to).real(l.cap).real(l.latencyUs).num(static_cast<int>(l.kind));
    w.num(l.topoLink).num(g.reverseLink(static_cast<int>(i)));
  }
  for (int r = 0; r < g.nranks(); ++r)
    w.num(g.rankVertex(r)).num(g.machineOf(r)).num(g.rankNode(r));
  const std::string text = w.text();
  // Fixed keys: the fingerprint names plans, it proves nothing.
  const uint64_t a = sipHash24(SipKey{0x67726f7665ull, 0x706c616e73ull}, text.data(), text.size());
  const uint64_t b = sipHash24(SipKey{0x706c616e73ull, 0x67726f7665ull}, text.data(), text.size());
  char out[40];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return out;
}

std::string encodeRings(const RingPlan& plan) {
  Writer w;
  w.word("grove-rings").num(kPlanFormat).word("rate").real(plan.rate);
  w.word("class").word(plan.linkClass.empty() ? "-" : plan.linkClass);
  w.word("rings").num(static_cast<long long>(plan.rings.size()));
  for (const Ring& r : plan.rings) w.word("ring").real(r.rate).ranks(r.order).routes(r.routes);
  return w.text();
}

bool decodeRings(const std::string& text, const PlanGraph& g, RingPlan* out, std::string* why) {
  return decodeWith(text, out, why, [&](Reader& in, RingPlan& plan) {
    const int n = g.nranks();
    in.header("grove-rings");
    plan.rate = in.realField("rate");
    in.expect("class");
    plan.linkClass = in.word();
    if (plan.linkClass == "-") plan.linkClass.clear();
    plan.rings.resize(static_cast<size_t>(in.numField("rings", 0, 4096)));
    for (Ring& r : plan.rings) {
      in.expect("ring");
      r.rate = in.real();
      r.order = in.ranks(static_cast<size_t>(n), 0, n - 1);
      checkPermutation(r.order, n, "a ring");
      r.routes = in.routes(g, static_cast<size_t>(n));
      if (!r.routes.empty() && static_cast<int>(r.routes.size()) != n)
        throw Bad("a ring has routes for some hops only");
      for (size_t i = 0; i < r.routes.size(); ++i)
        checkRoute(g, r.routes[i], r.order[i], r.order[(i + 1) % r.order.size()], "a ring hop's");
    }
  });
}

namespace {

void writeTrees(Writer& w, const std::vector<Tree>& trees) {
  w.word("trees").num(static_cast<long long>(trees.size()));
  for (const Tree& t : trees) {
    w.word("tree").num(t.root).real(t.rate).num(t.channels).ranks(t.parent).ranks(t.upParent);
    w.routes(t.down).routes(t.up);
  }
}

/// A set of trees: "trees N" and a "tree ..." line per tree (writeTrees),
/// each checked against the graph.
std::vector<Tree> readTrees(Reader& in, const PlanGraph& g) {
  std::vector<Tree> trees(static_cast<size_t>(in.numField("trees", 0, 4096)));
  const int n = g.nranks();
  for (Tree& t : trees) {
    in.expect("tree");
    t.root = static_cast<int>(in.num(0, n - 1));
    t.rate = in.real();
    t.channels = static_cast<int>(in.num(0, kMaxForestChannels));
    t.parent = in.ranks(static_cast<size_t>(n), -1, n - 1);
    if (static_cast<int>(t.parent.size()) != n) throw Bad("a tree does not hold every rank");
    checkArborescence(t.parent, t.root, "a tree");
    t.upParent = in.ranks(static_cast<size_t>(n), -1, n - 1);
    if (!t.upParent.empty()) {
      if (static_cast<int>(t.upParent.size()) != n)
        throw Bad("a reduce tree does not hold every rank");
      checkArborescence(t.upParent, t.root, "a reduce tree");
    }
    t.down = in.routes(g, static_cast<size_t>(n));
    t.up = in.routes(g, static_cast<size_t>(n));
    for (const auto* routes : {&t.down, &t.up})
      if (!routes->empty() && static_cast<int>(routes->size()) != n)
        throw Bad("a tree has routes for some ranks only");
    for (int r = 0; r < n && !t.down.empty(); ++r) {
      if (r == t.root) {
        if (!t.down[static_cast<size_t>(r)].empty()) throw Bad("a tree's root has a route in");
        continue;
      }
      checkRoute(g, t.down[static_cast<size_t>(r)], t.parent[static_cast<size_t>(r)], r,
                 "a tree edge's");
    }
    for (int r = 0; r < n && !t.up.empty(); ++r) {
      if (r == t.root) {
        if (!t.up[static_cast<size_t>(r)].empty()) throw Bad("a tree's root has a route out");
        continue;
      }
      checkRoute(g, t.up[static_cast<size_t>(r)], r, t.upParentOf(r), "a reduction's");
    }
  }
  return trees;
}

}  // namespace

std::string encodeTrees(const TreePlan& plan) {
  Writer w;
  w.word("grove-trees").num(kPlanFormat).word("rate").real(plan.rate);
  w.word("packed").real(plan.packedRate);
  w.word("bound").real(plan.bound).word("optimum").real(plan.optimum);
  w.word("pricing").num(plan.pricingRounds).word("judged").num(plan.judged);
  w.word("judged-seconds").real(plan.judgedSeconds).word("rounds").num(plan.rounds);
  w.word("mwu-trees").num(plan.mwuTrees).word("split").num(plan.split ? 1 : 0);
  writeTrees(w, plan.trees);
  w.word("larger").num(static_cast<long long>(plan.larger.size()));
  for (const SizedTrees& s : plan.larger) {
    w.word("from").num(static_cast<long long>(s.fromBytes)).word("rate").real(s.rate);
    writeTrees(w, s.trees);
  }
  return w.text();
}

bool decodeTrees(const std::string& text, const PlanGraph& g, TreePlan* out, std::string* why) {
  return decodeWith(text, out, why, [&](Reader& in, TreePlan& plan) {
    const long long big = 1ll << 40;
    in.header("grove-trees");
    plan.rate = in.realField("rate");
    plan.packedRate = in.realField("packed");
    plan.bound = in.realField("bound");
    plan.optimum = in.realField("optimum");
    plan.pricingRounds = static_cast<int>(in.numField("pricing", 0, big));
    plan.judged = static_cast<int>(in.numField("judged", 0, big));
    plan.judgedSeconds = in.realField("judged-seconds");
    plan.rounds = static_cast<int>(in.numField("rounds", 0, big));
    plan.mwuTrees = static_cast<int>(in.numField("mwu-trees", 0, big));
    plan.split = in.numField("split", 0, 1) == 1;
    plan.trees = readTrees(in, g);
    plan.larger.resize(static_cast<size_t>(in.numField("larger", 0, 64)));
    uint64_t from = 0;
    for (SizedTrees& sized : plan.larger) {
      sized.fromBytes = static_cast<uint64_t>(in.numField("from", 1, big));
      if (sized.fromBytes <= from) throw Bad("the larger sets are not in ascending order");
      from = sized.fromBytes;
      sized.rate = in.realField("rate");
      sized.trees = readTrees(in, g);
    }
  });
}

std::string encodeHier(const HierPlan& plan) {
  Writer w;
  w.word("grove-hier").num(kPlanFormat).word("rate").real(plan.rate);
  w.word("machines").num(static_cast<long long>(plan.machines.size()));
  for (const auto& m : plan.machines) w.ranks(m);
  w.word("leaders").num(static_cast<long long>(plan.leaders.size()));
  for (const auto& c : plan.leaders) w.ranks(c);
  return w.text();
}

bool decodeHier(const std::string& text, const PlanGraph& g, HierPlan* out, std::string* why) {
  return decodeWith(text, out, why, [&](Reader& in, HierPlan& plan) {
    const int n = g.nranks();
    in.header("grove-hier");
    plan.rate = in.realField("rate");
    plan.machines.resize(static_cast<size_t>(in.numField("machines", 0, n)));
    std::vector<int> all;
    std::vector<int> machineOf(static_cast<size_t>(n), -1);
    for (size_t m = 0; m < plan.machines.size(); ++m) {
      plan.machines[m] = in.ranks(static_cast<size_t>(n), 0, n - 1);
      for (int r : plan.machines[m]) {
        all.push_back(r);
        machineOf[static_cast<size_t>(r)] = static_cast<int>(m);
      }
    }
    if (!plan.machines.empty()) checkPermutation(all, n, "the machines");
    plan.leaders.resize(static_cast<size_t>(in.numField("leaders", 0, 4096)));
    for (auto& channel : plan.leaders) {
      channel = in.ranks(plan.machines.size(), 0, n - 1);
      if (channel.size() != plan.machines.size())
        throw Bad("a channel has no leader on some machine");
      for (size_t m = 0; m < channel.size(); ++m)
        if (machineOf[static_cast<size_t>(channel[m])] != static_cast<int>(m))
          throw Bad("a leader is not on its machine");
    }
  });
}

}  // namespace grove::plan
