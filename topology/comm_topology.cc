#include "topology/comm_topology.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "topology/detect.h"
#include "topology/json.h"
#include "topology/topo_file.h"

namespace grove::topo {

LocalView makeLocalView(const Graph& local, DeviceKind device, int cudaDevice) {
  LocalView v;
  v.graphJson = toJson(local);
  std::vector<NodeId> machines = local.machines();
  v.host = machines.size() == 1 ? local.node(machines[0]).name : localHostName();
  v.device = device;
  v.cudaDevice = cudaDevice;
  v.numa = currentNumaNode();
  v.placement = parseNodeList(config::getString("GROVE_TOPO_RANKS"));
  if (device == DeviceKind::kCuda && machines.size() == 1)
    for (NodeId id : local.nodesOfKind(NodeKind::kGpu))
      if (local.node(id).index == cudaDevice) v.gpuBusId = local.node(id).busId;
  return v;
}

std::string encodeLocalView(const LocalView& view) {
  json::Value v = json::Value::makeObject();
  v.set("host", json::Value::makeString(view.host));
  v.set("device", json::Value::makeString(view.device == DeviceKind::kCuda ? "cuda" : "host"));
  v.set("cuda_device", json::Value::makeNumber(view.cudaDevice));
  v.set("gpu_bus_id", json::Value::makeString(view.gpuBusId));
  v.set("numa", json::Value::makeNumber(view.numa));
  v.set("graph", json::Value::makeString(view.graphJson));
  std::string placement;
  for (const std::string& name : view.placement) placement += (placement.empty() ? "" : ",") + name;
  v.set("placement", json::Value::makeString(placement));
  return json::write(v, /*pretty=*/false);
}

LocalView decodeLocalView(const std::string& text, const std::string& source) {
  json::Value v = json::parse(text, source);
  auto str = [&](const char* key) {
    const json::Value* f = v.get(key);
    if (!f || !f->isString()) throwInvalidArgument(source + ": view has no \"" + key + "\"");
    return f->text;
  };
  auto num = [&](const char* key) {
    const json::Value* f = v.get(key);
    if (!f || !f->isNumber() || !(f->number >= -1 && f->number <= (1 << 20)) ||
        f->number != std::floor(f->number))
      throwInvalidArgument(source + ": view has no whole \"" + key + "\" in [-1, 2^20]");
    return static_cast<int>(f->number);
  };
  LocalView out;
  out.host = str("host");
  out.device = str("device") == "cuda" ? DeviceKind::kCuda : DeviceKind::kHost;
  out.cudaDevice = num("cuda_device");
  out.gpuBusId = str("gpu_bus_id");
  out.numa = num("numa");
  out.graphJson = str("graph");
  out.placement = parseNodeList(str("placement"));
  return out;
}

namespace {

NodeId placeOnMachine(const Graph& g, NodeId m, const LocalView& v, int localRank, int rank) {
  if (v.device == DeviceKind::kCuda) {
    std::vector<NodeId> gpus = g.nodesOfKind(NodeKind::kGpu, m);
    for (NodeId id : gpus)
      if (!v.gpuBusId.empty() && g.node(id).busId == v.gpuBusId) return id;
    for (NodeId id : gpus)
      if (v.cudaDevice >= 0 && g.node(id).index == v.cudaDevice) return id;
    if (gpus.empty())
      throwInvalidArgument("topology: rank " + std::to_string(rank) + " uses CUDA but machine '" +
                           g.node(m).name + "' has no GPU in its topology");
    return gpus[static_cast<size_t>(localRank) % gpus.size()];
  }
  std::vector<NodeId> cpus = g.nodesOfKind(NodeKind::kCpu, m);
  for (NodeId id : cpus)
    if (v.numa >= 0 && g.node(id).index == v.numa) return id;
  if (cpus.empty())
    throwInvalidArgument("topology: machine '" + g.node(m).name + "' has no CPU node");
  return cpus[static_cast<size_t>(localRank) % cpus.size()];
}

void fillByMachine(CommTopology& t) {
  std::vector<NodeId> machines = t.graph.machines();
  t.ranksByMachine.assign(machines.size(), {});
  for (size_t r = 0; r < t.ranks.size(); ++r) {
    size_t mi = std::find(machines.begin(), machines.end(), t.ranks[r].machine) - machines.begin();
    t.ranks[r].localRank = static_cast<int>(t.ranksByMachine.at(mi).size());
    t.ranksByMachine[mi].push_back(static_cast<int>(r));
  }
}

// The GROVE_TOPO_RANKS list every rank must agree on (empty: automatic placement).
const std::vector<std::string>& agreedPlacement(const std::vector<LocalView>& views) {
  for (size_t r = 1; r < views.size(); ++r)
    if (views[r].placement != views[0].placement) {
      auto text = [](const std::vector<std::string>& names) {
        std::string s;
        for (const std::string& n : names) s += (s.empty() ? "" : ",") + n;
        return "'" + s + "'";
      };
      throwInvalidArgument("topology: GROVE_TOPO_RANKS differs between rank 0 (" +
                           text(views[0].placement) + ") and rank " + std::to_string(r) + " (" +
                           text(views[r].placement) + "); set the same value on every rank");
    }
  return views[0].placement;
}

// Views that all carry the same multi-machine graph: a cluster file on one box.
bool emulatedCluster(const std::vector<LocalView>& views, Graph* out) {
  Graph first = fromJson(views[0].graphJson, "rank 0 topology view");
  if (first.machines().size() <= 1) return false;
  for (const LocalView& v : views)
    if (v.graphJson != views[0].graphJson)
      throwInvalidArgument(
          "topology: ranks describe different multi-machine graphs (GROVE_TOPO_FILE "
          "must be the same file on every rank)");
  *out = std::move(first);
  return true;
}

}  // namespace

CommTopology buildCommTopology(const std::vector<LocalView>& views) {
  CommTopology t;
  int n = static_cast<int>(views.size());
  if (n == 0) throwInvalidArgument("topology: no rank views to merge");
  t.ranks.resize(views.size());
  const std::vector<std::string>& names = agreedPlacement(views);
  const bool emulated = emulatedCluster(views, &t.graph);
  if (emulated) {
    std::vector<NodeId> machines = t.graph.machines();
    int nm = static_cast<int>(machines.size());
    for (int r = 0; r < n; ++r) {
      int mi = static_cast<int>(static_cast<int64_t>(r) * nm / n);
      int first = static_cast<int>((static_cast<int64_t>(mi) * n + nm - 1) / nm);
      LocalView v = views[r];
      v.gpuBusId.clear(), v.cudaDevice = -1, v.numa = -1;  // the box's devices say nothing here
      t.ranks[r].machine = machines[mi];
      if (names.empty()) t.ranks[r].node = placeOnMachine(t.graph, machines[mi], v, r - first, r);
    }
  } else {
    std::map<std::string, NodeId> hostMachine;
    for (int r = 0; r < n; ++r) {
      const LocalView& v = views[r];
      auto it = hostMachine.find(v.host);
      if (it == hostMachine.end()) {
        Graph g = fromJson(v.graphJson, "rank " + std::to_string(r) + " topology view");
        NodeId src = g.findMachine(v.host);
        if (src < 0)
          throwInvalidArgument("topology: rank " + std::to_string(r) + "'s view has no machine '" +
                               v.host + "'");
        it = hostMachine.emplace(v.host, t.graph.appendMachine(g, src, v.host)).first;
      }
      t.ranks[r].machine = it->second;
    }
    std::map<std::string, int> firstRank;
    for (int r = 0; r < n; ++r) {
      auto [it, inserted] = firstRank.emplace(views[r].host, r);
      if (!inserted && views[r].graphJson != views[it->second].graphJson)
        GROVE_WARN(log::kTopo,
                   "ranks %d and %d on host %s see different topologies; using rank %d's",
                   it->second, r, views[r].host.c_str(), it->second);
    }
    fillByMachine(t);
    for (int r = 0; r < n && names.empty(); ++r)
      t.ranks[r].node =
          placeOnMachine(t.graph, t.ranks[r].machine, views[r], t.ranks[r].localRank, r);
  }
  fillByMachine(t);  // (again for the emulated case; idempotent)
  if (!names.empty()) applyPlacement(t, names, /*allowOtherMachine=*/emulated, "GROVE_TOPO_RANKS");
  if (log::enabled(log::Level::kInfo, log::kTopo)) {
    std::istringstream lines(t.describe());
    for (std::string line; std::getline(lines, line);) GROVE_INFO(log::kTopo, "%s", line.c_str());
  }
  return t;
}

CommTopology buildCommTopology(const std::vector<std::string>& encodedViews) {
  std::vector<LocalView> views;
  for (size_t r = 0; r < encodedViews.size(); ++r)
    views.push_back(
        decodeLocalView(encodedViews[r], "rank " + std::to_string(r) + " topology view"));
  return buildCommTopology(views);
}

CommTopology exchangeCommTopology(const LocalView& mine, int nranks, const AllGatherFn& allGather) {
  std::string blob = encodeLocalView(mine);
  uint64_t size = blob.size();
  std::vector<uint8_t> sizes = allGather(&size, sizeof(size));
  if (sizes.size() != sizeof(uint64_t) * static_cast<size_t>(nranks))
    throwInternalError("topology exchange: all-gather returned the wrong size");
  uint64_t maxSize = 0;
  for (int r = 0; r < nranks; ++r) {
    uint64_t s;
    std::memcpy(&s, sizes.data() + r * sizeof(s), sizeof(s));
    maxSize = std::max(maxSize, s);
  }
  blob.resize(maxSize, '\0');
  std::vector<uint8_t> all = allGather(blob.data(), maxSize);
  std::vector<std::string> views;
  for (int r = 0; r < nranks; ++r) {
    uint64_t s;
    std::memcpy(&s, sizes.data() + r * sizeof(s), sizeof(s));
    views.emplace_back(reinterpret_cast<const char*>(all.data()) + r * maxSize, s);
  }
  return buildCommTopology(views);
}

std::vector<std::string> parseNodeList(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    std::string name = text.substr(start, comma == std::string::npos ? comma : comma - start);
    const size_t b = name.find_first_not_of(" \t"), e = name.find_last_not_of(" \t");
    name = b == std::string::npos ? "" : name.substr(b, e - b + 1);
    if (name.empty())
      throwInvalidArgument("topology: empty node name in the rank placement list '" + text + "'");
    out.push_back(name);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

NodeId resolveRankNode(const Graph& g, const std::string& name, NodeId machine,
                       const std::string& what) {
  NodeId id = -1;
  if (name.find('/') != std::string::npos) {
    id = g.findQualified(name);
  } else if (machine >= 0 && g.find(machine, name) >= 0) {
    id = g.find(machine, name);
  } else {
    std::vector<NodeId> found;
    for (NodeId m : g.machines())
      if (g.find(m, name) >= 0) found.push_back(g.find(m, name));
    if (found.size() > 1)
      throwInvalidArgument("topology: " + what + ": node '" + name + "' exists on " +
                           std::to_string(found.size()) + " machines; qualify it as host/" + name);
    if (!found.empty()) id = found[0];
  }
  if (id < 0)
    throwInvalidArgument("topology: " + what + ": no node '" + name + "' in the topology");
  const NodeKind kind = g.node(id).kind;
  if (kind == NodeKind::kMachine || kind == NodeKind::kNet)
    throwInvalidArgument("topology: " + what + ": '" + name + "' is a " + kindName(kind) +
                         " node, not a place for a rank");
  return id;
}

void applyPlacement(CommTopology& t, const std::vector<std::string>& names, bool allowOtherMachine,
                    const std::string& source) {
  if (names.size() != t.ranks.size())
    throwInvalidArgument("topology: " + source + " names " + std::to_string(names.size()) +
                         " node(s) for " + std::to_string(t.ranks.size()) +
                         " rank(s); give one node per rank");
  for (size_t r = 0; r < names.size(); ++r) {
    RankPlacement& p = t.ranks[r];
    const std::string what = source + " entry " + std::to_string(r) + " ('" + names[r] + "')";
    const NodeId id = resolveRankNode(t.graph, names[r], p.machine, what);
    const NodeId m = t.graph.node(id).machine;
    if (!allowOtherMachine && p.machine >= 0 && m != p.machine)
      throwInvalidArgument("topology: " + what + " is on machine '" + t.graph.node(m).name +
                           "' but rank " + std::to_string(r) + " runs on '" +
                           t.graph.node(p.machine).name + "'");
    p.node = id;
    p.machine = m;
  }
  fillByMachine(t);
}

CommTopology placeRanksOn(const Graph& g, const std::vector<std::string>& names,
                          const std::string& source) {
  if (names.empty()) throwInvalidArgument("placeRanksOn: no node names");
  CommTopology t;
  t.graph = g;
  t.ranks.resize(names.size());
  applyPlacement(t, names, /*allowOtherMachine=*/true, source);
  return t;
}

CommTopology placeRanks(const Graph& g, int nranks, int ranksPerMachine, DeviceKind device) {
  CommTopology t;
  t.graph = g;
  std::vector<NodeId> machines = g.machines();
  if (machines.empty() || nranks <= 0) throwInvalidArgument("placeRanks: no machines or no ranks");
  int nm = static_cast<int>(machines.size());
  t.ranks.resize(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    int mi = ranksPerMachine > 0 ? r / ranksPerMachine
                                 : static_cast<int>(static_cast<int64_t>(r) * nm / nranks);
    if (mi >= nm)
      throwInvalidArgument("placeRanks: " + std::to_string(nranks) + " ranks at " +
                           std::to_string(ranksPerMachine) + " per machine need more than " +
                           std::to_string(nm) + " machines");
    t.ranks[r].machine = machines[mi];
  }
  fillByMachine(t);
  LocalView v;
  v.device = device;
  for (int r = 0; r < nranks; ++r)
    t.ranks[r].node = placeOnMachine(t.graph, t.ranks[r].machine, v, t.ranks[r].localRank, r);
  return t;
}

std::string CommTopology::describe() const {
  std::ostringstream os;
  std::vector<NodeId> machines = graph.machines();
  for (size_t mi = 0; mi < machines.size() && mi < ranksByMachine.size(); ++mi) {
    os << "machine " << graph.node(machines[mi]).name << ": " << ranksByMachine[mi].size()
       << " rank(s)";
    for (int r : ranksByMachine[mi]) os << "  " << r << "->" << graph.node(ranks[r].node).name;
    os << '\n';
  }
  return os.str();
}

}  // namespace grove::topo
