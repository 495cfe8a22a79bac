// Import of NCCL topology XML (as written by NCCL_TOPO_DUMP_FILE).
//
// How it works: the <system> element holds one <cpu> per NUMA node. Under a
// <cpu>, <pci> elements nest like the PCIe tree: a <pci> whose class is a
// bridge (0x0604xx) or that has <pci> children becomes a PCIe switch node;
// a <pci> holding a <gpu> becomes that GPU (its bus id is the GPU's), one
// holding a <nic> becomes one NIC per <net> child. Each <pci> is linked to
// its parent with the generation / width parsed from link_speed ("8.0 GT/s
// PCIe" = gen3) and link_width. After the tree, every <nvlink target=..
// count=.. tclass=..> of a GPU adds a directed NVLink to the GPU with that
// bus id, or to the (single, merged) NVSwitch node when the target class is
// a bridge (0x068000), as NCCL itself does. CPUs are joined pairwise by an
// SMP link whose bandwidth follows NCCL's per-CPU-family values.
#include <cerrno>
#include <cstdlib>
#include <map>

#include "base/error.h"
#include "base/log.h"
#include "topology/json.h"
#include "topology/topo_file.h"
#include "topology/xml.h"

namespace grove::topo {
namespace {

using xml::Element;

struct Importer {
  Graph& g;
  NodeId machine;
  const std::string& source;
  std::map<std::string, NodeId> gpuByBus;
  std::vector<std::pair<NodeId, const Element*>> gpuElems;
  int pciCount = 0;

  [[noreturn]] void fail(const Element& e, const std::string& what) const {
    throwInvalidArgument(source + ":" + std::to_string(e.line) + ": <" + e.name + ">: " + what);
  }

  std::string need(const Element& e, const std::string& key) const {
    const std::string* v = e.attr(key);
    if (!v || v->empty()) fail(e, "missing attribute '" + key + "'");
    return *v;
  }

  long number(const Element& e, const std::string& key, long def) const {
    const std::string* v = e.attr(key);
    if (!v) return def;
    char* end = nullptr;
    errno = 0;
    long n = std::strtol(v->c_str(), &end, 0);
    if (v->empty() || *end != '\0') fail(e, "attribute " + key + "=\"" + *v + "\" is not a number");
    if (errno == ERANGE || n < -(1L << 30) || n > (1L << 30))  // every caller keeps it in an int
      fail(e, "attribute " + key + "=\"" + *v + "\" is out of range");
    return n;
  }

  NodeId add(NodeKind kind, const std::string& name, int index, const std::string& bus) {
    Node n;
    n.kind = kind;
    n.name = name;
    n.machine = machine;
    n.index = index;
    n.busId = bus;
    return g.addNode(std::move(n));
  }

  static int pciGen(const std::string& speed) {
    double gts = std::atof(speed.c_str());
    if (gts >= 60) return 6;
    if (gts >= 30) return 5;
    if (gts >= 15) return 4;
    if (gts >= 7) return 3;
    if (gts >= 4) return 2;
    return gts > 0 ? 1 : 0;
  }

  void pcieLink(NodeId parent, NodeId child, const Element& pci) {
    Link l;
    l.from = parent, l.to = child, l.kind = LinkKind::kPcie;
    const std::string* speed = pci.attr("link_speed");
    l.pciGen = speed ? pciGen(*speed) : 0;
    l.pciWidth = static_cast<int>(number(pci, "link_width", 0));
    l.bw = pcieBw(l.pciGen ? l.pciGen : 3, l.pciWidth ? l.pciWidth : 16);
    l.latencyUs = defaultLatencyUs(LinkKind::kPcie);
    g.addBidi(l);
  }

  void addNics(NodeId parent, const Element& nic, const std::string& bus, const Element* pci) {
    for (const Element& net : nic.children) {
      if (net.name != "net") continue;
      std::string devName = need(net, "name");
      int dev = static_cast<int>(number(net, "dev", -1));
      std::string name = dev >= 0 ? "nic" + std::to_string(dev) : devName;
      NodeId id = add(NodeKind::kNic, name, dev, bus);
      Node& n = g.node(id);
      n.attrs["device"] = devName;
      for (const char* key : {"port", "guid", "gdr", "maxconn", "coll"})
        if (const std::string* v = net.attr(key)) n.attrs[key] = *v;
      long mbps = number(net, "speed", 0);
      if (mbps <= 0) fail(net, "missing or zero 'speed' (Mb/s)");
      n.attrs["speed_gbps"] = json::formatNumber(static_cast<double>(mbps) / 1000.0);
      if (pci)
        pcieLink(parent, id, *pci);
      else {  // a NIC directly under a CPU: no PCIe facts, assume gen3 x16
        Link l;
        l.from = parent, l.to = id, l.kind = LinkKind::kPcie, l.bw = pcieBw(3, 16);
        l.latencyUs = defaultLatencyUs(LinkKind::kPcie);
        g.addBidi(l);
      }
      Node netNode;
      netNode.kind = NodeKind::kNet;
      netNode.name = "net";
      NodeId nid = g.find(-1, "net");
      if (nid < 0) nid = g.addNode(netNode);
      Link l;
      l.from = id, l.to = nid, l.kind = LinkKind::kNet, l.bw = mbps / 8000.0;
      l.latencyUs = defaultLatencyUs(LinkKind::kNet);
      g.addBidi(l);
    }
  }

  void walkPci(NodeId parent, const Element& pci) {
    std::string bus = need(pci, "busid");
    const Element* gpu = nullptr;
    const Element* nic = nullptr;
    bool hasPci = false;
    for (const Element& c : pci.children) {
      if (c.name == "gpu") gpu = &c;
      if (c.name == "nic") nic = &c;
      hasPci = hasPci || c.name == "pci";
    }
    const std::string* cls = pci.attr("class");
    bool bridge = hasPci || (cls && cls->rfind("0x0604", 0) == 0);
    if (gpu) {
      int dev = static_cast<int>(number(*gpu, "dev", -1));
      if (dev < 0) fail(*gpu, "missing attribute 'dev'");
      NodeId id = add(NodeKind::kGpu, "gpu" + std::to_string(dev), dev, bus);
      for (const char* key : {"sm", "rank", "gdr"})
        if (const std::string* v = gpu->attr(key)) g.node(id).attrs[key] = *v;
      if (const std::string* v = pci.attr("device")) g.node(id).attrs["pci_device"] = *v;
      pcieLink(parent, id, pci);
      gpuByBus[bus] = id;
      gpuElems.emplace_back(id, gpu);
    } else if (nic) {
      addNics(parent, *nic, bus, &pci);
    } else if (bridge) {
      NodeId id = add(NodeKind::kPciSwitch, "pci" + std::to_string(pciCount++), -1, bus);
      for (const char* key : {"vendor", "device"})
        if (const std::string* v = pci.attr(key)) g.node(id).attrs[key] = *v;
      pcieLink(parent, id, pci);
      for (const Element& c : pci.children)
        if (c.name == "pci") walkPci(id, c);
    }
    // Other PCI functions (NVMe, ...) do not take part in communication.
  }

  static double smpBw(const Node& cpu) {
    // NCCL's effective inter-socket bandwidths (GB/s) per CPU family.
    std::string arch = cpu.attr("arch"), vendor = cpu.attr("vendor");
    long model = std::strtol(cpu.attr("modelid", "0").c_str(), nullptr, 0);
    if (arch == "ppc64") return 32;
    if (arch == "arm64") return 6;
    if (vendor == "AuthenticAMD") return 16;
    if (vendor == "GenuineIntel") return model >= 0x8F ? 22 : (model >= 0x55 ? 10 : 6);
    return 10;
  }

  void nvlinks() {
    NodeId nvs = -1;
    for (auto [gpu, elem] : gpuElems) {
      long sm = std::strtol(g.node(gpu).attr("sm", "70").c_str(), nullptr, 10);
      for (const Element& nv : elem->children) {
        if (nv.name != "nvlink") continue;
        std::string target = need(nv, "target");
        int count = static_cast<int>(number(nv, "count", 1));
        if (count < 1) fail(nv, "'count' must be at least 1");
        std::string tclass = nv.attr("tclass") ? *nv.attr("tclass") : "0x030200";
        Link l;
        l.from = gpu, l.kind = LinkKind::kNvLink, l.count = count;
        l.bw = count * nvlinkBwPerLink(sm < 70 ? 1 : 2);
        l.latencyUs = defaultLatencyUs(LinkKind::kNvLink);
        if (tclass.rfind("0x0680", 0) == 0) {  // NVSwitch: all merged into one node
          if (nvs < 0) nvs = add(NodeKind::kNvSwitch, "nvs0", -1, "");
          l.to = nvs;
          g.addBidi(l);
          continue;
        }
        auto it = gpuByBus.find(target);
        if (it == gpuByBus.end()) {
          GROVE_INFO(log::kTopo, "%s:%d: nvlink to %s (class %s) ignored: not a GPU of this file",
                     source.c_str(), nv.line, target.c_str(), tclass.c_str());
          continue;
        }
        l.to = it->second;
        g.addLink(l);
      }
    }
  }

  void run(const Element& root) {
    if (root.name != "system") fail(root, "the root element must be <system>");
    std::vector<NodeId> cpus;
    for (const Element& cpu : root.children) {
      if (cpu.name != "cpu") continue;
      int numa = static_cast<int>(number(cpu, "numaid", static_cast<long>(cpus.size())));
      NodeId id = add(NodeKind::kCpu, "cpu" + std::to_string(numa), numa, "");
      for (const char* key : {"arch", "vendor", "familyid", "modelid", "affinity"})
        if (const std::string* v = cpu.attr(key)) g.node(id).attrs[key] = *v;
      cpus.push_back(id);
      for (const Element& c : cpu.children) {
        if (c.name == "pci")
          walkPci(id, c);
        else if (c.name == "nic")
          addNics(id, c, "", nullptr);
      }
    }
    if (cpus.empty()) fail(root, "no <cpu> element: the file describes nothing");
    for (size_t i = 0; i < cpus.size(); ++i)
      for (size_t j = i + 1; j < cpus.size(); ++j) {
        Link l;
        l.from = cpus[i], l.to = cpus[j], l.kind = LinkKind::kSmp;
        l.bw = smpBw(g.node(cpus[i]));
        l.latencyUs = defaultLatencyUs(LinkKind::kSmp);
        g.addBidi(l);
      }
    nvlinks();
  }
};

}  // namespace

Graph fromNcclXml(const std::string& text, const std::string& source, const std::string& host) {
  Element root = xml::parse(text, source);
  Graph g;
  NodeId m = g.addMachine(host.empty() ? "host0" : host);
  Importer imp{g, m, source, {}, {}, 0};
  try {
    imp.run(root);
  } catch (const Error& e) {
    std::string what = e.what();
    if (what.rfind(source, 0) == 0) throw;
    throwInvalidArgument(source + ": " + what);
  }
  return g;
}

}  // namespace grove::topo
