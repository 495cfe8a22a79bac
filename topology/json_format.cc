// grove's JSON topology format: load, apply (override) and dump.
// The format itself is described in docs/topology-format.md.
#include <cmath>
#include <set>

#include "base/error.h"
#include "topology/json.h"
#include "topology/topo_file.h"

namespace grove::topo {
namespace {

using json::Value;

const std::set<std::string> kNodeKeys = {"name", "kind",   "index", "bus_id",
                                         "net",  "remove", "attrs"};
const std::set<std::string> kLinkKeys = {
    "a",       "b",   "from",  "to",     "kind",   "bw",     "latency_us", "count",
    "version", "gen", "width", "remove", "addr_a", "addr_b", "addr_from",  "addr_to"};

// Where we are, for error messages: "<file>:<line>: machine 'h' node 'x': ...".
struct Ctx {
  const std::string& source;
  std::string where;
  [[noreturn]] void fail(const Value& at, const std::string& what) const {
    throwInvalidArgument(source + ":" + std::to_string(at.line) + ": " + where + what);
  }
};

std::string scalarText(const Ctx& c, const Value& v, const std::string& key) {
  switch (v.type) {
    case Value::Type::kString: return v.text;
    case Value::Type::kNumber: return json::formatNumber(v.number);
    case Value::Type::kBool: return v.boolean ? "1" : "0";
    default: c.fail(v, "\"" + key + "\" must be a string, number or boolean");
  }
}

std::string needString(const Ctx& c, const Value& obj, const std::string& key) {
  const Value* v = obj.get(key);
  if (!v) c.fail(obj, "missing \"" + key + "\"");
  if (!v->isString() || v->text.empty()) c.fail(*v, "\"" + key + "\" must be a non-empty string");
  return v->text;
}

// A finite number, at least 0 (bandwidths, latencies).
double numberOr(const Ctx& c, const Value& obj, const std::string& key, double def) {
  const Value* v = obj.get(key);
  if (!v) return def;
  if (!v->isNumber() || !std::isfinite(v->number) || v->number < 0)
    c.fail(*v, "\"" + key + "\" must be a finite number >= 0");
  return v->number;
}

// A whole number in [lo, hi] (indices, counts, PCIe generations and widths).
int intOr(const Ctx& c, const Value& obj, const std::string& key, int def, int lo, int hi) {
  const Value* v = obj.get(key);
  if (!v) return def;
  if (!v->isNumber() || !(v->number >= lo && v->number <= hi) || v->number != std::floor(v->number))
    c.fail(*v, "\"" + key + "\" must be a whole number in [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "]");
  return static_cast<int>(v->number);
}

bool boolOr(const Ctx& c, const Value& obj, const std::string& key) {
  const Value* v = obj.get(key);
  if (!v) return false;
  if (v->type != Value::Type::kBool) c.fail(*v, "\"" + key + "\" must be true or false");
  return v->boolean;
}

NodeId netNode(Graph& g, const std::string& name) {
  NodeId id = g.find(-1, name);
  if (id >= 0) return id;
  Node n;
  n.kind = NodeKind::kNet;
  n.name = name;
  return g.addNode(std::move(n));
}

void applyNode(Graph& g, NodeId machine, const Value& obj, bool override, Ctx c) {
  if (!obj.isObject()) c.fail(obj, "a node must be an object");
  std::string name = needString(c, obj, "name");
  c.where += "node '" + name + "': ";
  NodeId id = g.find(machine, name);
  if (boolOr(c, obj, "remove")) {
    if (!override) c.fail(obj, "\"remove\" is only allowed in an override file");
    if (id < 0) c.fail(obj, "there is no such node to remove");
    g.removeNode(id);
    return;
  }
  const Value* kindV = obj.get("kind");
  std::optional<NodeKind> kind;
  if (kindV) {
    kind = kindV->isString() ? parseNodeKind(kindV->text) : std::nullopt;
    if (!kind || *kind == NodeKind::kMachine || *kind == NodeKind::kNet)
      c.fail(*kindV, "unknown node kind " + (kindV->isString() ? "'" + kindV->text + "'" : "") +
                         " (cpu, gpu, pci_switch, nic, nvswitch)");
  }
  if (id >= 0 && !override) c.fail(obj, "a second node with this name");
  if (id >= 0 && kind && g.node(id).kind != *kind)
    c.fail(*kindV, "an override cannot change a node's kind");
  if (id < 0) {
    if (!kind) c.fail(obj, "missing \"kind\"");
    Node n;
    n.kind = *kind;
    n.name = name;
    n.machine = machine;
    id = g.addNode(std::move(n));
  }
  Node& n = g.node(id);
  if (obj.get("index")) n.index = intOr(c, obj, "index", -1, -1, 1 << 20);
  if (const Value* v = obj.get("bus_id")) n.busId = scalarText(c, *v, "bus_id");
  for (const auto& [key, v] : obj.fields)
    if (!kNodeKeys.count(key)) n.attrs[key] = scalarText(c, v, key);
  if (const Value* attrs = obj.get("attrs")) {
    if (!attrs->isObject()) c.fail(*attrs, "\"attrs\" must be an object");
    for (const auto& [key, v] : attrs->fields) n.attrs[key] = scalarText(c, v, key);
  }
  if (const Value* net = obj.get("net")) {  // shorthand: NIC on network `net` at speed_gbps
    if (n.kind != NodeKind::kNic) c.fail(*net, "only a nic can have \"net\"");
    if (!net->isString() || net->text.empty()) c.fail(*net, "\"net\" must be a network name");
    double gbps = std::atof(n.attr("speed_gbps", "0").c_str());
    if (!(gbps > 0)) c.fail(obj, "a nic with \"net\" needs \"speed_gbps\" > 0");
    NodeId nid = netNode(g, net->text);
    g.removeLinks(id, nid, LinkKind::kNet);
    g.removeLinks(nid, id, LinkKind::kNet);
    Link l;
    l.from = id, l.to = nid, l.kind = LinkKind::kNet, l.bw = gbps / 8;
    l.latencyUs = defaultLatencyUs(LinkKind::kNet);
    g.addBidi(l);
  }
}

NodeId endpoint(Graph& g, NodeId machine, const Value& obj, const std::string& key, const Ctx& c) {
  std::string name = needString(c, obj, key);
  if (name.rfind("net:", 0) == 0 && name.size() > 4) return netNode(g, name.substr(4));
  NodeId id = g.find(machine, name);
  if (id < 0) c.fail(*obj.get(key), "unknown node '" + name + "'");
  return id;
}

double defaultBw(const Link& l, const Value& obj, const Ctx& c) {
  switch (l.kind) {
    case LinkKind::kNvLink: return l.count * nvlinkBwPerLink(intOr(c, obj, "version", 2, 1, 100));
    case LinkKind::kPcie: return pcieBw(l.pciGen ? l.pciGen : 3, l.pciWidth ? l.pciWidth : 16);
    default:
      c.fail(obj, std::string("a ") + kindName(l.kind) + " link needs \"bw\" (GB/s per direction)");
  }
}

// "addr_a"/"addr_b" ("addr_from"/"addr_to" for a one-way link): the IP
// address of each end, checked and made canonical.
void readAddresses(Link& l, const Value& obj, bool bidi, const Ctx& c) {
  std::string* dst[2] = {&l.srcAddr, &l.dstAddr};
  const char* keys[2] = {bidi ? "addr_a" : "addr_from", bidi ? "addr_b" : "addr_to"};
  for (const char* wrong : {bidi ? "addr_from" : "addr_a", bidi ? "addr_to" : "addr_b"})
    if (const Value* v = obj.get(wrong))
      c.fail(*v, std::string("\"") + wrong + "\" belongs to a " +
                     (bidi ? "\"from\"/\"to\"" : "\"a\"/\"b\"") + " link (use \"" + keys[0] +
                     "\"/\"" + keys[1] + "\")");
  for (int i = 0; i < 2; ++i) {
    const Value* v = obj.get(keys[i]);
    if (!v) continue;
    auto addr = v->isString() ? canonicalIpAddress(v->text) : std::nullopt;
    if (!addr)
      c.fail(*v, std::string("\"") + keys[i] + "\" " + (v->isString() ? "'" + v->text + "' " : "") +
                     "is not an IPv4 or IPv6 address");
    *dst[i] = *addr;
  }
  if (!l.srcAddr.empty() && !l.dstAddr.empty() &&
      (l.srcAddr.find(':') == std::string::npos) != (l.dstAddr.find(':') == std::string::npos))
    c.fail(obj, "the two end addresses are of different families (IPv4 and IPv6)");
}

void applyLink(Graph& g, NodeId machine, const Value& obj, bool override, Ctx c) {
  if (!obj.isObject()) c.fail(obj, "a link must be an object");
  for (const auto& [key, v] : obj.fields)
    if (!kLinkKeys.count(key)) c.fail(v, "unknown link field \"" + key + "\"");
  bool bidi = obj.get("a") != nullptr;
  if (!bidi && !obj.get("from"))
    c.fail(obj, "a link needs \"a\" and \"b\" (both ways) or \"from\" and \"to\"");
  Link l;
  l.from = endpoint(g, machine, obj, bidi ? "a" : "from", c);
  l.to = endpoint(g, machine, obj, bidi ? "b" : "to", c);
  c.where += "link " + g.node(l.from).name + (bidi ? " <-> " : " -> ") + g.node(l.to).name + ": ";
  if (l.from == l.to) c.fail(obj, "a link needs two different nodes");
  std::string kindText = needString(c, obj, "kind");
  auto kind = parseLinkKind(kindText);
  if (!kind)
    c.fail(*obj.get("kind"), "unknown link kind '" + kindText + "' (nvlink, pcie, smp, net)");
  l.kind = *kind;
  bool remove = boolOr(c, obj, "remove");
  if (remove && !override) c.fail(obj, "\"remove\" is only allowed in an override file");
  if (override || remove) {
    int n = g.removeLinks(l.from, l.to, l.kind) + (bidi ? g.removeLinks(l.to, l.from, l.kind) : 0);
    if (remove && n == 0) c.fail(obj, "there is no such link to remove");
    if (remove) return;
  }
  l.count = intOr(c, obj, "count", 1, 0, 1 << 16);
  l.pciGen = intOr(c, obj, "gen", 0, 0, 100);
  l.pciWidth = intOr(c, obj, "width", 0, 0, 1024);
  if (l.count < 1) c.fail(obj, "\"count\" must be at least 1");
  l.bw = obj.get("bw") ? numberOr(c, obj, "bw", 0) : defaultBw(l, obj, c);
  if (!(l.bw > 0)) c.fail(*obj.get("bw"), "\"bw\" must be positive (GB/s per direction)");
  l.latencyUs = numberOr(c, obj, "latency_us", defaultLatencyUs(l.kind));
  readAddresses(l, obj, bidi, c);
  if (bidi)
    g.addBidi(l);
  else
    g.addLink(l);
}

const Value& arrayField(const Ctx& c, const Value& obj, const std::string& key,
                        const Value& empty) {
  const Value* v = obj.get(key);
  if (!v) return empty;
  if (!v->isArray()) c.fail(*v, "\"" + key + "\" must be an array");
  return *v;
}

void applyMachine(Graph& g, NodeId m, const Value& obj, bool override, const Ctx& base) {
  Ctx c{base.source, "machine '" + g.node(m).name + "': "};
  static const Value kEmpty = Value::makeArray();
  for (const Value& n : arrayField(c, obj, "nodes", kEmpty).items) applyNode(g, m, n, override, c);
  for (const Value& l : arrayField(c, obj, "links", kEmpty).items) applyLink(g, m, l, override, c);
}

void applyDocument(Graph& g, const Value& doc, const Ctx& c) {
  if (!doc.isObject()) c.fail(doc, "the document must be a JSON object");
  const Value* version = doc.get("grove_topology");
  if (version && (!version->isNumber() || version->number != 1))
    c.fail(*version, "unsupported \"grove_topology\" version (this build reads version 1)");
  bool override = boolOr(c, doc, "override");
  static const Value kEmpty = Value::makeArray();
  for (const Value& net : arrayField(c, doc, "networks", kEmpty).items) {
    NodeId id = netNode(g, needString(c, net, "name"));
    for (const auto& [key, v] : net.fields)
      if (key != "name") g.node(id).attrs[key] = scalarText(c, v, key);
  }
  std::vector<const Value*> machines;
  if (const Value* ms = doc.get("machines")) {
    if (!ms->isArray()) c.fail(*ms, "\"machines\" must be an array");
    for (const Value& m : ms->items) machines.push_back(&m);
  } else if (doc.get("nodes") || doc.get("links")) {
    machines.push_back(&doc);  // one machine described at the top level
  } else if (!doc.get("networks")) {
    c.fail(doc, "the document has no \"machines\" (nor \"nodes\"/\"links\")");
  }
  for (size_t i = 0; i < machines.size(); ++i) {
    const Value& mv = *machines[i];
    if (!mv.isObject()) c.fail(mv, "a machine must be an object");
    std::string host = "host" + std::to_string(i);
    if (mv.get("host") != nullptr) host = needString(c, mv, "host");
    NodeId m = g.findMachine(host);
    if (override && (host == "*" || !mv.get("host"))) {
      for (NodeId each : g.machines()) applyMachine(g, each, mv, true, c);
      continue;
    }
    if (m >= 0 && !override) {
      g.removeMachine(m);
      m = -1;
    }
    if (m < 0) m = g.addMachine(host);
    applyMachine(g, m, mv, override, c);
  }
}

// ---------------------------------------------------------------- dump

bool sameParams(const Link& a, const Link& b) {
  return a.kind == b.kind && a.bw == b.bw && a.latencyUs == b.latencyUs && a.count == b.count &&
         a.pciGen == b.pciGen && a.pciWidth == b.pciWidth && a.srcAddr == b.dstAddr &&
         a.dstAddr == b.srcAddr;
}

std::string endpointName(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  return n.kind == NodeKind::kNet ? "net:" + n.name : n.name;
}

Value linkJson(const Graph& g, const Link& l, bool bidi) {
  Value v = Value::makeObject();
  v.set(bidi ? "a" : "from", Value::makeString(endpointName(g, l.from)));
  v.set(bidi ? "b" : "to", Value::makeString(endpointName(g, l.to)));
  v.set("kind", Value::makeString(kindName(l.kind)));
  v.set("bw", Value::makeNumber(l.bw));
  v.set("latency_us", Value::makeNumber(l.latencyUs));
  if (l.count != 1 || l.kind == LinkKind::kNvLink) v.set("count", Value::makeNumber(l.count));
  if (l.pciGen) v.set("gen", Value::makeNumber(l.pciGen));
  if (l.pciWidth) v.set("width", Value::makeNumber(l.pciWidth));
  if (!l.srcAddr.empty()) v.set(bidi ? "addr_a" : "addr_from", Value::makeString(l.srcAddr));
  if (!l.dstAddr.empty()) v.set(bidi ? "addr_b" : "addr_to", Value::makeString(l.dstAddr));
  return v;
}

Value nodeJson(const Node& n) {
  Value v = Value::makeObject();
  v.set("name", Value::makeString(n.name));
  v.set("kind", Value::makeString(kindName(n.kind)));
  if (n.index >= 0) v.set("index", Value::makeNumber(n.index));
  if (!n.busId.empty()) v.set("bus_id", Value::makeString(n.busId));
  Value attrs = Value::makeObject();
  for (const auto& [k, a] : n.attrs) {
    if (kNodeKeys.count(k))
      attrs.set(k, Value::makeString(a));
    else
      v.set(k, Value::makeString(a));
  }
  if (!attrs.fields.empty()) v.set("attrs", attrs);
  return v;
}

Value machineJson(const Graph& g, NodeId m) {
  Value mv = Value::makeObject();
  mv.set("host", Value::makeString(g.node(m).name));
  Value nodes = Value::makeArray();
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes().size()); ++id) {
    const Node& n = g.node(id);
    if (n.kind != NodeKind::kMachine && n.kind != NodeKind::kNet && n.machine == m)
      nodes.push(nodeJson(n));
  }
  Value links = Value::makeArray();
  const auto& all = g.links();
  std::vector<bool> used(all.size(), false);
  for (size_t i = 0; i < all.size(); ++i) {
    const Link& l = all[i];
    int home =
        g.node(l.from).kind == NodeKind::kNet ? g.node(l.to).machine : g.node(l.from).machine;
    if (used[i] || home != m) continue;
    used[i] = true;
    bool bidi = false;
    for (int j : g.outLinks(l.to))
      if (!used[j] && all[j].to == l.from && sameParams(l, all[j])) {
        used[j] = bidi = true;
        break;
      }
    links.push(linkJson(g, l, bidi));
  }
  mv.set("nodes", nodes);
  mv.set("links", links);
  return mv;
}

}  // namespace

std::string toJson(const Graph& g) {
  Value doc = Value::makeObject();
  doc.set("grove_topology", Value::makeNumber(1));
  Value nets = Value::makeArray();
  for (NodeId id : g.nodesOfKind(NodeKind::kNet)) {
    Value n = Value::makeObject();
    n.set("name", Value::makeString(g.node(id).name));
    for (const auto& [k, a] : g.node(id).attrs) n.set(k, Value::makeString(a));
    nets.push(n);
  }
  if (!nets.items.empty()) doc.set("networks", nets);
  Value machines = Value::makeArray();
  for (NodeId m : g.machines()) machines.push(machineJson(g, m));
  doc.set("machines", machines);
  return json::write(doc);
}

void applyJson(Graph& g, const std::string& text, const std::string& source) {
  Value doc = json::parse(text, source);
  Ctx c{source, ""};
  applyDocument(g, doc, c);
}

Graph fromJson(const std::string& text, const std::string& source) {
  Graph g;
  applyJson(g, text, source);
  return g;
}

bool isOverrideJson(const std::string& text, const std::string& source) {
  Value doc = json::parse(text, source);
  const Value* o = doc.get("override");
  return o && o->type == Value::Type::kBool && o->boolean;
}

}  // namespace grove::topo
