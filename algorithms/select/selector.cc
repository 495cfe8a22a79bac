#include "algorithms/select/selector.h"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <limits>

#include "algorithms/builders/builders.h"
#include "algorithms/select/algorithm_table.h"
#include "algorithms/select/default_rules.h"
#include "base/config.h"
#include "base/error.h"
#include "base/log.h"

namespace grove::plan {

namespace {

constexpr unsigned bit(Algo a) { return 1u << static_cast<unsigned>(a); }
constexpr unsigned kAllAlgos = (1u << kNumAlgos) - 1;

unsigned supportedMask(Coll c) {
  unsigned m = 0;
  for (int i = 0; i < kNumAlgos; ++i)
    if (algoSupports(static_cast<Algo>(i), c)) m |= 1u << i;
  return m;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n\r"), e = s.find_last_not_of(" \t\n\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t at = s.find(sep, pos);
    out.push_back(trim(s.substr(pos, at == std::string::npos ? std::string::npos : at - pos)));
    if (at == std::string::npos) return out;
    pos = at + 1;
  }
}

std::string validAlgoNames() {
  std::string s;
  for (int i = 0; i < kNumAlgos; ++i)
    s += std::string(i ? ", " : "") + algoName(static_cast<Algo>(i));
  return s;
}

std::string validCollNames() {
  std::string s;
  for (int i = 0; i < kNumColls; ++i)
    s += std::string(i ? ", " : "") + collName(static_cast<Coll>(i));
  return s;
}

/// Parses "ring,direct" or "^direct" into a mask of algorithms.
unsigned parseAlgoList(const std::string& list, const std::string& text) {
  const bool exclude = !list.empty() && list[0] == '^';
  unsigned mask = 0;
  for (const std::string& name : split(exclude ? list.substr(1) : list, ',')) {
    std::optional<Algo> a = parseAlgo(name);
    if (!a)
      throwInvalidArgument("algorithm override '" + text + "': unknown algorithm '" + name +
                           "' (valid: " + validAlgoNames() + ")");
    mask |= bit(*a);
  }
  return exclude ? (kAllAlgos & ~mask) : mask;
}

int autoChannels(const LinkTraits& links, int nranks, int hostCpus) {
  // The host executor drives all lanes from one thread: more channels only
  // help where each connection has its own latency to hide (sockets, GPUs).
  // Two ranks on one host are the exception: one stream each way, whose
  // cost is all CPU work in the kernel; a second socket only adds calls
  // (2 ranks on loopback TCP, 5 interleaved launches, medians, two channels
  // against one: broadcast 4 MiB 1.05 against 0.96 ms, 16 MiB 4.31 against
  // 4.11; all-gather 8 MiB 1.52 against 1.33, 32 MiB 5.87 against 5.66).
  if (links.network() && nranks == 2 && hostCpus > 0) return 1;
  return (links.network() || links.deviceRings) ? 2 : 1;
}

// Automatic latency threshold: a socket step costs system calls and a
// network round trip, so the one-step direct algorithms pay off up to larger
// messages than over shared memory (measured on loopback TCP, 4 ranks).
uint64_t autoDirectMaxBytes(const LinkTraits& links) {
  return links.network() ? (64u << 10) : (16u << 10);
}

// The automatic eager limit (see the file comment of selector.h).
uint64_t autoEagerMaxBytes(int nranks) {
  const uint64_t share = (16u << 10) / static_cast<uint64_t>(std::max(nranks - 1, 1)) / 64 * 64;
  return std::max<uint64_t>(64, std::min<uint64_t>(8u << 10, share));
}

// Below this many bytes extra channels only add steps (automatic channels only).
constexpr uint64_t kMultiChannelMinBytes = 1u << 20;

// On the host, gather, scatter and all-to-all keep one channel: a second
// socket per peer made them slower (4 ranks on loopback TCP, 64 MiB: gather
// 8.8 against 7.3 ms, all-to-all 35.6 against 32.7 ms).
bool isExchange(Coll coll) {
  return coll == Coll::kGather || coll == Coll::kScatter || coll == Coll::kAlltoAll;
}

int gpuChannels(uint64_t bytes) {
  return static_cast<int>(std::clamp<uint64_t>(bytes / kGpuBytesPerChannel, 1, kGpuMaxChannels));
}

}  // namespace

const char* algoName(Algo a) {
  const auto i = static_cast<size_t>(a);
  return i < algorithmTable().size() ? algorithmTable()[i].name : "invalid";
}

std::optional<Algo> parseAlgo(const std::string& name) {
  if (strcasecmp(name.c_str(), "trees") == 0) return Algo::kTree;
  for (int i = 0; i < kNumAlgos; ++i)
    if (strcasecmp(name.c_str(), algoName(static_cast<Algo>(i))) == 0) return static_cast<Algo>(i);
  return std::nullopt;
}

std::optional<Coll> parseColl(const std::string& name) {
  std::string n;
  for (char ch : name)
    if (ch != '_') n += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (int i = 0; i < kNumColls; ++i)
    if (n == collName(static_cast<Coll>(i))) return static_cast<Coll>(i);
  return std::nullopt;
}

bool algoSupports(Algo algo, Coll coll) {
  const auto i = static_cast<size_t>(algo);
  return i < algorithmTable().size() &&
         (algorithmTable()[i].colls >> static_cast<unsigned>(coll)) & 1u;
}

Program build(Algo algo, const CollArgs& args, const PlanParams& params) {
  if (!algoSupports(algo, args.coll) || args.coll == Coll::kSendRecv)
    throwInvalidArgument(std::string("algorithm ") + algoName(algo) + " cannot build " +
                         collName(args.coll) +
                         (args.coll == Coll::kSendRecv ? " (use buildP2P)" : ""));
  const AlgoInfo& info = algoInfo(algo);
  if (info.needsPlans)
    throwInvalidArgument(std::string("algorithm ") + algoName(algo) +
                         " needs the communicator's topology plans");
  const BuildFn fn = info.builders[static_cast<size_t>(args.coll)];
  if (fn == nullptr) throwInvalidArgument("build: invalid collective");
  return fn(args, params);
}

Program eagerProgram(const CollArgs& args) {
  PlanParams one;
  one.nChannels = 1;
  Program prog = build(Algo::kDirect, args, one);
  prog.algo = "eager";
  return prog;
}

SelectorConfig SelectorConfig::fromRegistry(const char* algoOverride, int nChannels) {
  SelectorConfig c;
  c.algo = (algoOverride != nullptr && *algoOverride != '\0') ? std::string(algoOverride)
                                                              : config::getString("GROVE_ALGO");
  c.directMaxBytes = config::getSize("GROVE_DIRECT_MAX_BYTES");
  c.eager = config::getBool("GROVE_EAGER");
  c.eagerMaxBytes = config::getSize("GROVE_EAGER_MAX_BYTES");
  c.chunkBytes = config::getSize("GROVE_CHUNKSIZE");
  c.bufferBytes = config::getSize("GROVE_BUFFSIZE");
  c.nChannels = nChannels > 0 ? nChannels : static_cast<int>(config::getInt("GROVE_NCHANNELS"));
  return c;
}

Selector::Selector(int nranks, const LinkTraits& links, const SelectorConfig& cfg)
    : nranks_(nranks),
      links_(links),
      directMaxBytes_(cfg.directMaxBytes > 0 ? cfg.directMaxBytes : autoDirectMaxBytes(links)),
      eagerMaxBytes_(links.slotLinks && nranks >= 2 && cfg.eager
                         ? (cfg.eagerMaxBytes > 0 ? cfg.eagerMaxBytes : autoEagerMaxBytes(nranks))
                         : 0),
      autoChannels_(cfg.nChannels <= 0),
      gpuLanes_(cfg.gpuLanes),
      hostCpus_(cfg.hostCpus) {
  params_.nChannels = cfg.nChannels > 0 ? std::min(cfg.nChannels, kP2PChannel)
                                        : autoChannels(links, nranks, cfg.hostCpus);
  const uint64_t buffer = std::max<uint64_t>(cfg.bufferBytes, 64);
  uint64_t chunk = cfg.chunkBytes > 0 ? cfg.chunkBytes : buffer / 2;
  if (chunk + 16 > buffer) {
    GROVE_WARN(log::kPlan,
               "GROVE_CHUNKSIZE %llu B does not fit the %llu B connection buffer; using %llu B",
               static_cast<unsigned long long>(chunk), static_cast<unsigned long long>(buffer),
               static_cast<unsigned long long>(buffer / 2));
    chunk = buffer / 2;
  }
  params_.chunkBytes = std::max<uint64_t>(16, chunk / 16 * 16);
  allowed_.fill(kAllAlgos);
  parseOverrides(cfg.algo);
}

void Selector::parseOverrides(const std::string& text) {
  for (const std::string& entry : split(text, ';')) {
    if (entry.empty()) continue;
    const size_t colon = entry.find(':');
    const std::string list = trim(colon == std::string::npos ? entry : entry.substr(colon + 1));
    if (list.empty() || list == "^")
      throwInvalidArgument("algorithm override '" + text + "': no algorithm named in '" + entry +
                           "' (valid: " + validAlgoNames() + ")");
    const unsigned mask = parseAlgoList(list, text);
    if (colon == std::string::npos) {
      allowed_.fill(mask);
      overridden_.fill(true);
      continue;
    }
    const std::string collText = trim(entry.substr(0, colon));
    std::optional<Coll> coll = parseColl(collText);
    if (!coll)
      throwInvalidArgument("algorithm override '" + text + "': unknown collective '" + collText +
                           "' (valid: " + validCollNames() + ")");
    allowed_[static_cast<int>(*coll)] = mask;
    overridden_[static_cast<int>(*coll)] = true;
  }
  for (int c = 0; c < kNumColls; ++c) {
    const Coll coll = static_cast<Coll>(c);
    if ((allowed_[c] & supportedMask(coll)) != 0) continue;
    GROVE_WARN(log::kPlan,
               "algorithm override '%s' leaves no supported algorithm for %s; using its default",
               text.c_str(), collName(coll));
    allowed_[c] = kAllAlgos;
    overridden_[c] = false;
  }
}

void Selector::setSizeTable(Coll coll, std::vector<SizeRule> rules) {
  const std::string w = std::string("size table of ") + collName(coll) + ": ";
  for (size_t i = 0; i < rules.size(); ++i) {
    if (!algoSupports(rules[i].algo, coll))
      throwInvalidArgument(w + algoName(rules[i].algo) + " cannot run " + collName(coll));
    if (i > 0 && rules[i].maxBytes <= rules[i - 1].maxBytes)
      throwInvalidArgument(w + "rows must have strictly ascending maxBytes");
  }
  if (!rules.empty() && rules.back().maxBytes != std::numeric_limits<uint64_t>::max())
    throwInvalidArgument(w + "the last row must cover every size (maxBytes UINT64_MAX)");
  tables_[static_cast<int>(coll)] = std::move(rules);
}

RuleContext Selector::ruleContext() const {
  RuleContext ctx;
  ctx.links = linkClassOf(links_);
  ctx.nranks = nranks_;
  ctx.crowdedHost = !gpuLanes_ && hostCpus_ > 0 && nranks_ > hostCpus_;
  return ctx;
}

Algo Selector::defaultAlgo(Coll coll, unsigned mask, uint64_t bytes) const {
  const RuleContext ctx = ruleContext();
  const Algo latency = firstRuleAlgo(Band::kLatency, coll, ctx, 0, mask);
  if ((mask & bit(Algo::kRing)) && (mask & bit(latency)))
    return bytes <= directMaxBytes_ ? latency
                                    : firstRuleAlgo(Band::kBandwidth, coll, ctx, bytes, mask);
  // Preference when the overrides leave one family: ring, the latency
  // algorithm, tree, hier.
  for (Algo a : {Algo::kRing, latency, Algo::kDirect, Algo::kDoubling, Algo::kHalving, Algo::kTree,
                 Algo::kHier})
    if (mask & bit(a)) return a;
  for (const AlgoInfo& a : algorithmTable())  // an algorithm added to the table
    if (mask & bit(a.id)) return a.id;
  return Algo::kDirect;
}

Selection Selector::select(Coll coll, uint64_t bytes) const {
  const unsigned mask = allowed_[static_cast<int>(coll)] & supportedMask(coll);
  Selection s;
  s.params = params_;
  if (autoChannels_ && gpuLanes_)
    s.params.nChannels = gpuChannels(bytes);
  else if (autoChannels_ && (bytes < kMultiChannelMinBytes || isExchange(coll)))
    s.params.nChannels = 1;
  s.algo = defaultAlgo(coll, mask, bytes);
  for (const SizeRule& rule : tables_[static_cast<int>(coll)]) {
    if (bytes > rule.maxBytes) continue;
    if (mask & bit(rule.algo)) s.algo = rule.algo;
    break;
  }
  return s;
}

P2PSplit Selector::p2pSplit() const {
  if (!gpuLanes_) return {};
  const int most = autoChannels_ ? kMaxP2PChannels : std::min(params_.nChannels, kMaxP2PChannels);
  return P2PSplit{kGpuBytesPerChannel, most};
}

Selection Selector::select(const CollArgs& args) const {
  return select(args.coll, messageBytes(args));
}

// The default choice over all sizes, e.g. "doubling <= 65536 B < ring <=
// 262144 B < halving <= 16777216 B < ring" or "ring < 262144 B <= doubling":
// the choice is evaluated just past every size where a rule's range or the
// direct limit ends, and a boundary is written the way its rule bounds it.
std::string Selector::describeDefault(Coll coll, unsigned mask) const {
  struct Edge {
    uint64_t last;  // the last size before the edge
    bool fromRule;  // an inclusive lower bound: written "a < last+1 B <= b"
  };
  std::vector<Edge> edges{{directMaxBytes_, false}};
  const RuleContext ctx = ruleContext();
  for (const DefaultRule& r : defaultRules()) {
    if (r.band != Band::kBandwidth ||
        !ruleApplies(r, coll, ctx, r.minInclusive ? r.minBytes : r.minBytes + 1))
      continue;
    if (r.minInclusive && r.minBytes > 0) edges.push_back({r.minBytes - 1, true});
    if (!r.minInclusive) edges.push_back({r.minBytes, false});
    if (r.maxBytes != std::numeric_limits<uint64_t>::max()) edges.push_back({r.maxBytes, false});
  }
  // Stable: at a tie the direct limit (first) decides how the edge is written.
  std::stable_sort(edges.begin(), edges.end(),
                   [](const Edge& a, const Edge& b) { return a.last < b.last; });
  Algo current = defaultAlgo(coll, mask, 0);
  std::string text = algoName(current);
  for (const Edge& e : edges) {
    if (e.last == std::numeric_limits<uint64_t>::max()) continue;
    const Algo next = defaultAlgo(coll, mask, e.last + 1);
    if (next == current) continue;
    text += e.fromRule ? " < " + std::to_string(e.last + 1) + " B <= "
                       : " <= " + std::to_string(e.last) + " B < ";
    text += algoName(next);
    current = next;
  }
  return text;
}

std::vector<std::string> Selector::describeTable() const {
  std::vector<std::string> lines;
  lines.push_back("nranks=" + std::to_string(nranks_) +
                  " channels=" + std::to_string(params_.nChannels) +
                  " chunk=" + std::to_string(params_.chunkBytes) +
                  " B direct<=" + std::to_string(directMaxBytes_) +
                  " B eager<=" + std::to_string(eagerMaxBytes_) + " B");
  for (int c = 0; c < kNumColls; ++c) {
    const Coll coll = static_cast<Coll>(c);
    const unsigned mask = allowed_[c] & supportedMask(coll);
    std::string name = collName(coll);
    name.resize(std::max<size_t>(name.size(), 14), ' ');
    std::string rule;
    if (!tables_[c].empty()) {
      for (const SizeRule& r : tables_[c]) {
        if (!rule.empty()) rule += " < ";
        rule += algoName(r.algo);
        if (r.maxBytes != std::numeric_limits<uint64_t>::max())
          rule += " <= " + std::to_string(r.maxBytes) + " B";
      }
      rule += "  (table)";
    } else {
      rule = describeDefault(coll, mask);
    }
    if (eagerMaxBytes_ != 0 && !overridden_[c] && coll != Coll::kSendRecv)
      rule = "eager <= " + std::to_string(eagerMaxBytes_) + " B/block < " + rule;
    if (overridden_[c]) rule += "  (override)";
    lines.push_back(name + " " + rule);
  }
  return lines;
}

}  // namespace grove::plan
