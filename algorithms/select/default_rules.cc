// The default selection rules (default_rules.h). The measurements behind the
// rows were taken on one host, 2-8 ranks, loopback TCP for the network rows.
#include "algorithms/select/default_rules.h"

#include "algorithms/select/algorithm_table.h"

namespace grove::plan {
namespace {

constexpr unsigned bit(Coll c) { return 1u << static_cast<unsigned>(c); }
constexpr unsigned kAllColls = (1u << kNumColls) - 1;
constexpr uint64_t kKiB = 1024, kMiB = 1024 * kKiB;

DefaultRule latency(unsigned colls, LinkClass links, Algo algo, const char* why) {
  DefaultRule r{colls, Band::kLatency, links, algo};
  r.why = why;
  return r;
}

DefaultRule bandwidth(unsigned colls, LinkClass links, Algo algo, const char* why) {
  DefaultRule r{colls, Band::kBandwidth, links, algo};
  r.why = why;
  return r;
}

std::vector<DefaultRule> makeRules() {
  std::vector<DefaultRule> rules;
  // ---- latency band: message bytes <= the direct limit
  rules.push_back(latency(bit(Coll::kAllReduce), LinkClass::kNetwork, Algo::kDoubling,
                          "log2(n) rounds beat direct's one-hop exchange where every message "
                          "costs system calls"));
  {
    DefaultRule r = latency(bit(Coll::kAllReduce), LinkClass::kSharedMemory, Algo::kDoubling,
                            "with a power-of-two count no rank folds in, so log2(n) rounds "
                            "beat direct over shared memory too");
    r.pow2 = true;
    rules.push_back(r);
  }
  {
    DefaultRule r = latency(bit(Coll::kAllGather), LinkClass::kNetwork, Algo::kDoubling,
                            "direct's n(n-1) messages dominate over sockets");
    r.pow2 = true;
    rules.push_back(r);
  }
  {
    DefaultRule r = latency(bit(Coll::kBroadcast), LinkClass::kNetwork, Algo::kRing,
                            "the root's n-1 sends in a row are the cost; the chain sends once per "
                            "rank and pipelines calls (4 ranks: 5-8 us, binomial 8-10, direct "
                            "10-14)");
    r.minRanks = 3;
    r.maxRanks = 4;
    rules.push_back(r);
  }
  {
    DefaultRule r = latency(bit(Coll::kBroadcast), LinkClass::kNetwork, Algo::kDoubling,
                            "past 4 ranks the chain's n-1 hops cost an isolated call more than "
                            "the binomial tree's log2(n)");
    r.minRanks = 3;
    rules.push_back(r);
  }
  rules.push_back(latency(bit(Coll::kReduceScatter), LinkClass::kAny, Algo::kRing,
                          "direct's n(n-1) blocks gained nothing consistent: 4 ranks, 1-16 KiB, "
                          "ring against direct 8.4-11.6 against 9.2-20.2 us over shm (eager "
                          "off), 87-127 against 100-110 us over TCP, spread over runs"));
  rules.push_back(latency(kAllColls, LinkClass::kAny, Algo::kDirect,
                          "one step to every peer: the fewest steps, so the least latency"));

  // ---- bandwidth band: message bytes > the direct limit
  {
    // 2 log2(n) rounds that each wait on one partner, against 2(n-1) steps
    // that each wait on the whole ring. Below the band the ring's pipelined
    // single channel is as fast; above it the ring's pipelining wins, as each
    // halving round ends only when all its bytes have crossed.
    DefaultRule r = bandwidth(bit(Coll::kAllReduce), LinkClass::kNetwork, Algo::kHalving,
                              "4 ranks: 512 KiB 400 against the ring's 480 us, 2 MiB 1.74 against "
                              "1.93 ms, 8 MiB 9.0 against 9.8 ms");
    r.minRanks = 4;
    r.pow2 = true;
    r.minBytes = 256 * kKiB;
    r.minInclusive = false;
    r.maxBytes = 16 * kMiB;
    rules.push_back(r);
  }
  {
    // Both move n-1 copies of the message through the kernel, so the CPUs'
    // work is the same; the chain keeps every rank busy at once, two to a
    // CPU, and pays in switches, while the tree's rounds keep half of them
    // idle. With 3 ranks (the root sends twice) the chain wins; with a CPU
    // per rank the chain's pipeline should win, as it does across hosts.
    DefaultRule r = bandwidth(bit(Coll::kBroadcast), LinkClass::kNetwork, Algo::kDoubling,
                              "4 ranks on 2 CPUs, chain against binomial tree: 512 KiB 194 against "
                              "145 us, 16 MiB 8.9 against 7.7 ms, 64 MiB 33.7 against 30.5 ms; "
                              "8 ranks 1.1-1.4x");
    r.minRanks = 4;
    r.pow2 = true;
    r.crowdedHost = true;
    r.minBytes = 256 * kKiB;
    rules.push_back(r);
  }
  rules.push_back(bandwidth(kAllColls, LinkClass::kAny, Algo::kRing,
                            "every link busy at once, each byte crossing each link once "
                            "(chains for broadcast and reduce)"));
  return rules;
}

std::string sizeText(uint64_t bytes) {
  if (bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes % kKiB == 0) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + " B";
}

}  // namespace

LinkClass linkClassOf(const LinkTraits& links) {
  if (links.deviceRings) return LinkClass::kDevice;
  return links.network() ? LinkClass::kNetwork : LinkClass::kSharedMemory;
}

const char* linkClassName(LinkClass c) {
  switch (c) {
    case LinkClass::kAny: return "any";
    case LinkClass::kNetwork: return "network";
    case LinkClass::kSharedMemory: return "shared memory";
    case LinkClass::kDevice: return "device";
  }
  return "?";
}

const std::vector<DefaultRule>& defaultRules() {
  static const std::vector<DefaultRule> rules = makeRules();
  return rules;
}

bool ruleApplies(const DefaultRule& r, Coll coll, const RuleContext& ctx, uint64_t bytes) {
  if (!(r.colls & bit(coll))) return false;
  if (r.links != LinkClass::kAny && r.links != ctx.links) return false;
  if (ctx.nranks < r.minRanks || ctx.nranks > r.maxRanks) return false;
  if (r.pow2 && (ctx.nranks & (ctx.nranks - 1)) != 0) return false;
  if (r.crowdedHost && !ctx.crowdedHost) return false;
  if (r.band == Band::kBandwidth) {
    if (r.minInclusive ? bytes < r.minBytes : bytes <= r.minBytes) return false;
    if (bytes > r.maxBytes) return false;
  }
  return true;
}

Algo firstRuleAlgo(Band band, Coll coll, const RuleContext& ctx, uint64_t bytes, unsigned allowed) {
  for (const DefaultRule& r : defaultRules())
    if (r.band == band && ruleApplies(r, coll, ctx, bytes) &&
        (allowed & (1u << static_cast<unsigned>(r.algo))))
      return r.algo;
  return band == Band::kLatency ? Algo::kDirect : Algo::kRing;
}

std::vector<std::string> describeRules() {
  std::vector<std::string> lines;
  for (const DefaultRule& r : defaultRules()) {
    std::string colls;
    if (r.colls == kAllColls) {
      colls = "every collective";
    } else {
      for (int c = 0; c < kNumColls; ++c)
        if (r.colls & (1u << c))
          colls += std::string(colls.empty() ? "" : ",") + collName(static_cast<Coll>(c));
    }
    std::string when = std::string(r.band == Band::kLatency ? "latency" : "bandwidth") + " band, " +
                       linkClassName(r.links) + " links";
    if (r.minRanks > 1 || r.maxRanks != std::numeric_limits<int>::max()) {
      when += ", ranks " + std::to_string(r.minRanks);
      when +=
          r.maxRanks == std::numeric_limits<int>::max() ? "+" : "-" + std::to_string(r.maxRanks);
    }
    if (r.pow2) when += ", power-of-two ranks";
    if (r.crowdedHost) when += ", more ranks than CPUs";
    if (r.band == Band::kBandwidth && (r.minBytes > 0 || r.maxBytes != UINT64_MAX)) {
      when += ", " + sizeText(r.minBytes) + (r.minInclusive ? " <= size" : " < size");
      if (r.maxBytes != UINT64_MAX) when += " <= " + sizeText(r.maxBytes);
    }
    lines.push_back(colls + " -> " + algoName(r.algo) + "  [" + when + "]  " + r.why);
  }
  return lines;
}

}  // namespace grove::plan
