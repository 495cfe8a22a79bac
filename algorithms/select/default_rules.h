// The default selection rules, as data (UCC's selection tables): which
// algorithm a collective runs when nothing overrides it, keyed by what the
// selector knows of the links (their LinkTraits, sorted into three link
// classes), the rank count, whether the host is crowded, and the message
// size. grove-info prints the table; the Selector evaluates it.
//
// How it works. A call falls in one of two bands: the latency band (total
// message bytes at most the communicator's direct limit, GROVE_DIRECT_MAX_BYTES)
// and the bandwidth band (above it). In its band the first row whose
// conditions hold and whose algorithm the overrides allow wins; the last
// rows of each band match everything (direct for latency, ring for
// bandwidth). When the overrides leave a collective without the ring or
// without its latency algorithm, the Selector instead takes the first
// allowed of ring, the latency algorithm, direct, doubling, halving, tree,
// hier. Each row says why it is there: the measurement that put it there.
//
// Adding a rule: one row in default_rules.cc, above the catch-all row of its
// band; selector_test checks the choices it should change.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "algorithms/select/selector.h"
#include "base/link_traits.h"

namespace grove::plan {

/// The links as the rules see them (from LinkTraits).
enum class LinkClass : uint8_t {
  kAny,           ///< a rule for every class
  kNetwork,       ///< every message pays system calls or a round trip (LinkTraits::network())
  kSharedMemory,  ///< host ranks sharing memory (neither network nor device rings)
  kDevice,        ///< device rings driven by GPU kernels
};
/// The class of `links`: kDevice, kNetwork or kSharedMemory.
LinkClass linkClassOf(const LinkTraits& links);
/// "any", "network", "shared memory", "device".
const char* linkClassName(LinkClass c);

/// Which size band a rule chooses for.
enum class Band : uint8_t {
  kLatency,    ///< message bytes <= the direct limit
  kBandwidth,  ///< message bytes > the direct limit
};

/// What the rules are evaluated against (fixed per communicator).
struct RuleContext {
  LinkClass links = LinkClass::kSharedMemory;
  int nranks = 1;
  /// More ranks than the one host's CPUs, host memory (not GPU lanes).
  bool crowdedHost = false;
};

/// One row.
struct DefaultRule {
  unsigned colls;  ///< bit c: applies to Coll c
  Band band;
  LinkClass links;
  Algo algo;  ///< what it picks
  int minRanks = 1;
  int maxRanks = std::numeric_limits<int>::max();
  bool pow2 = false;         ///< the rank count must be a power of two
  bool crowdedHost = false;  ///< only on a crowded host (RuleContext::crowdedHost)
  /// Bandwidth rows only: the message sizes it covers, [minBytes, maxBytes]
  /// or (minBytes, maxBytes] when minInclusive is false.
  uint64_t minBytes = 0;
  bool minInclusive = true;
  uint64_t maxBytes = std::numeric_limits<uint64_t>::max();
  const char* why = "";  ///< the measurement behind it
};

/// Every rule, in the order they are tried.
const std::vector<DefaultRule>& defaultRules();

/// True if `rule` applies to `coll` in `ctx` for a message of `bytes` (bytes
/// are only checked on bandwidth rows).
bool ruleApplies(const DefaultRule& rule, Coll coll, const RuleContext& ctx, uint64_t bytes);

/// The first rule of `band` that applies and whose algorithm is in
/// `allowed` (bit i = Algo i): its algorithm, else the band's fallback
/// (direct, ring).
Algo firstRuleAlgo(Band band, Coll coll, const RuleContext& ctx, uint64_t bytes, unsigned allowed);

/// One line per rule: collectives, band, links, ranks, sizes, algorithm, why
/// (grove-info).
std::vector<std::string> describeRules();

}  // namespace grove::plan
