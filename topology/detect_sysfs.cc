// sysfs detection (Linux): NUMA nodes, the PCIe tree of GPUs and NICs, NIC
// speeds; plus the shared helpers that turn found PCI devices into nodes.
// Every read is optional: a missing file means a missing fact, never an error.
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "base/log.h"
#include "topology/detect.h"
#include "topology/json.h"

namespace grove::topo::detail {
namespace {

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

std::vector<std::string> listDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* d = opendir(path.c_str());
  if (!d) return names;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

const std::regex& busIdPattern() {
  static const std::regex re("[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-9a-fA-F]");
  return re;
}

void linkFacts(const std::string& dir, int* gen, int* width) {
  std::string speed = readLine(dir + "/current_link_speed");
  if (speed.empty() || speed.find("Unknown") != std::string::npos)
    speed = readLine(dir + "/max_link_speed");
  std::string w = readLine(dir + "/current_link_width");
  if (w.empty() || w == "0") w = readLine(dir + "/max_link_width");
  *gen = pciGenFromSpeed(speed);
  *width = std::atoi(w.c_str());
}

}  // namespace

void sysfsLinkFacts(const std::string& sysRoot, const std::string& busId, int* gen, int* width) {
  linkFacts(sysRoot + "/bus/pci/devices/" + busId, gen, width);
}

int pciGenFromSpeed(const std::string& text) {
  double gts = std::atof(text.c_str());
  if (gts >= 60) return 6;
  if (gts >= 30) return 5;
  if (gts >= 15) return 4;
  if (gts >= 7) return 3;
  if (gts >= 4) return 2;
  return gts > 0 ? 1 : 0;
}

void addCpus(Graph& g, NodeId machine, const std::vector<int>& numaIds,
             const std::vector<std::map<std::string, std::string>>& attrs) {
  std::vector<NodeId> cpus;
  for (size_t i = 0; i < numaIds.size(); ++i) {
    Node n;
    n.kind = NodeKind::kCpu;
    n.name = "cpu" + std::to_string(numaIds[i]);
    n.machine = machine;
    n.index = numaIds[i];
    if (i < attrs.size()) n.attrs = attrs[i];
    cpus.push_back(g.addNode(std::move(n)));
  }
  for (size_t i = 0; i < cpus.size(); ++i)
    for (size_t j = i + 1; j < cpus.size(); ++j) {
      Link l;
      l.from = cpus[i], l.to = cpus[j], l.kind = LinkKind::kSmp;
      l.bw = 10;  // NCCL's Skylake-class UPI figure; fix with a topology file when it matters
      l.latencyUs = defaultLatencyUs(LinkKind::kSmp);
      g.addBidi(l);
    }
}

void addPciDevices(Graph& g, NodeId machine, const std::vector<PciDevice>& devices) {
  std::map<std::string, NodeId> switches;
  std::vector<PciDevice> sorted = devices;
  std::sort(sorted.begin(), sorted.end(),
            [](const PciDevice& a, const PciDevice& b) { return a.busId < b.busId; });
  int gpus = 0, nics = 0;
  std::vector<NodeId> cpus = g.nodesOfKind(NodeKind::kCpu, machine);
  if (cpus.empty()) return;
  auto pcie = [&](NodeId a, NodeId b, int gen, int width) {
    Link l;
    l.from = a, l.to = b, l.kind = LinkKind::kPcie, l.pciGen = gen, l.pciWidth = width;
    l.bw = pcieBw(gen ? gen : 3, width ? width : 16);
    l.latencyUs = defaultLatencyUs(LinkKind::kPcie);
    g.addBidi(l);
  };
  for (const PciDevice& d : sorted) {
    NodeId parent = g.find(machine, "cpu" + std::to_string(d.numa < 0 ? 0 : d.numa));
    if (parent < 0) parent = cpus[0];
    // bridges[0] is the root port (folded into the CPU); then upstream/downstream
    // port pairs: one switch node per upstream port.
    for (size_t i = 1; i < d.bridges.size(); i += 2) {
      const PciHop& hop = d.bridges[i];
      auto it = switches.find(hop.busId);
      if (it == switches.end()) {
        Node n;
        n.kind = NodeKind::kPciSwitch;
        n.name = "pci" + std::to_string(switches.size());
        n.machine = machine;
        n.busId = hop.busId;
        NodeId id = g.addNode(std::move(n));
        pcie(parent, id, hop.gen, hop.width);
        it = switches.emplace(hop.busId, id).first;
      }
      parent = it->second;
    }
    Node n;
    n.kind = d.kind;
    n.machine = machine;
    n.busId = d.busId;
    n.attrs = d.attrs;
    n.index = d.kind == NodeKind::kGpu ? gpus++ : nics++;
    n.name = !d.name.empty() ? d.name
                             : (d.kind == NodeKind::kGpu ? "gpu" : "nic") + std::to_string(n.index);
    NodeId id = g.addNode(std::move(n));
    pcie(parent, id, d.gen, d.width);
  }
}

bool detectSysfsTree(Graph& g, NodeId machine, const DetectOptions& o) {
  std::vector<int> numa;
  std::vector<std::map<std::string, std::string>> attrs;
  std::string nodeDir = o.sysRoot + "/devices/system/node";
  for (const std::string& name : listDir(nodeDir)) {
    if (name.rfind("node", 0) != 0 || name.size() < 5 ||
        !isdigit(static_cast<unsigned char>(name[4])))
      continue;
    numa.push_back(std::atoi(name.c_str() + 4));
    attrs.push_back({{"cpus", readLine(nodeDir + "/" + name + "/cpulist")}});
  }
  if (numa.empty()) {
    GROVE_INFO(log::kTopo, "sysfs: no NUMA nodes under %s; assuming one CPU node", nodeDir.c_str());
    numa.push_back(0);
    attrs.emplace_back();
  }
  addCpus(g, machine, numa, attrs);

  std::vector<PciDevice> found;
  std::string pciDir = o.sysRoot + "/bus/pci/devices";
  for (const std::string& bus : listDir(pciDir)) {
    std::string dir = pciDir + "/" + bus;
    std::string cls = readLine(dir + "/class"), vendor = readLine(dir + "/vendor");
    bool gpu = vendor == "0x10de" && (cls.rfind("0x0300", 0) == 0 || cls.rfind("0x0302", 0) == 0);
    bool nic = cls.rfind("0x02", 0) == 0;
    if (!gpu && !nic) continue;
    PciDevice d;
    d.kind = gpu ? NodeKind::kGpu : NodeKind::kNic;
    d.busId = bus;
    std::string numaText = readLine(dir + "/numa_node");
    d.numa = numaText.empty() ? -1 : std::atoi(numaText.c_str());
    linkFacts(dir, &d.gen, &d.width);
    d.attrs["vendor"] = vendor;
    d.attrs["pci_device"] = readLine(dir + "/device");
    if (nic) {
      std::vector<std::string> nets = listDir(dir + "/net"), ibs = listDir(dir + "/infiniband");
      if (!nets.empty()) d.attrs["netdev"] = nets[0];
      if (!ibs.empty()) d.attrs["device"] = ibs[0];
    }
    char real[PATH_MAX];
    if (realpath(dir.c_str(), real)) {
      std::string path = real;
      for (std::sregex_iterator it(path.begin(), path.end(), busIdPattern()), end; it != end;
           ++it) {
        std::string hop = it->str();
        if (hop == bus) break;
        PciHop h;
        h.busId = hop;
        linkFacts(pciDir + "/" + hop, &h.gen, &h.width);
        d.bridges.push_back(h);
      }
    }
    found.push_back(std::move(d));
  }
  if (found.empty()) GROVE_INFO(log::kTopo, "sysfs: no GPU or NIC found under %s", pciDir.c_str());
  addPciDevices(g, machine, found);
  return true;
}

void detectSysfsNetSpeeds(Graph& g, NodeId machine, const DetectOptions& o) {
  for (NodeId id : g.nodesOfKind(NodeKind::kNic, machine)) {
    Node& n = g.node(id);
    bool ib = !n.attr("device").empty();
    double gbps = std::atof(n.attr("speed_gbps", "0").c_str());
    if (!(gbps > 0) && ib) {  // "100 Gb/sec (4X EDR)"
      std::string dir = o.sysRoot + "/class/infiniband/" + n.attr("device") + "/ports";
      for (const std::string& port : listDir(dir)) {
        double rate = std::atof(readLine(dir + "/" + port + "/rate").c_str());
        if (rate > gbps) gbps = rate, n.attrs["port"] = port;
      }
    }
    if (!(gbps > 0) && !n.attr("netdev").empty()) {
      long mbps =
          std::atol(readLine(o.sysRoot + "/class/net/" + n.attr("netdev") + "/speed").c_str());
      if (mbps > 0) gbps = static_cast<double>(mbps) / 1000.0;
    }
    if (!(gbps > 0)) {
      GROVE_INFO(log::kTopo, "sysfs: speed of NIC %s unknown; assuming 10 Gb/s", n.name.c_str());
      gbps = 10;
      n.attrs["speed_source"] = "assumed";
    }
    n.attrs["speed_gbps"] = json::formatNumber(gbps);
    std::string netName = ib ? "ib" : "eth";
    NodeId net = g.find(-1, netName);
    if (net < 0) {
      Node nn;
      nn.kind = NodeKind::kNet;
      nn.name = netName;
      net = g.addNode(std::move(nn));
    }
    if (g.findLink(id, net, LinkKind::kNet) >= 0) continue;
    Link l;
    l.from = id, l.to = net, l.kind = LinkKind::kNet, l.bw = gbps / 8;
    l.latencyUs = ib ? 2.0 : 20.0;
    g.addBidi(l);
  }
}

}  // namespace grove::topo::detail
