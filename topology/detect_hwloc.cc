// hwloc detection: NUMA nodes and the PCIe tree of GPUs and NICs, with the
// NICs' OS names. Compiled to a stub when the build has no hwloc. PCIe link
// generation / width come from sysfs (hwloc gives only a GB/s figure).
#include "base/log.h"
#include "topology/detect.h"

#include "grove_build_info.h"

#if GROVE_HAVE_HWLOC
#include <hwloc.h>

#include <cstdio>
#endif

namespace grove::topo::detail {

#if GROVE_HAVE_HWLOC
namespace {

std::string busIdOf(unsigned domain, unsigned bus, unsigned dev, unsigned func) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", domain, bus, dev, func);
  return buf;
}

// The machine's hwloc topology, loaded once per process and kept: the
// hardware does not change under a running process, loading costs
// milliseconds, and hwloc's I/O plugins leak about 1 kB at every load, which
// a process that makes and destroys many communicators would feel. hwloc
// allows concurrent reads of a loaded topology. Null when hwloc failed.
hwloc_topology_t machineTopology() {
  static hwloc_topology_t topo = [] {
    hwloc_topology_t t = nullptr;
    if (hwloc_topology_init(&t) != 0) {
      GROVE_INFO(log::kTopo, "hwloc: init failed; using sysfs");
      return static_cast<hwloc_topology_t>(nullptr);
    }
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    // Only the PCIe tree and the NICs' OS devices are used (CUDA has its own
    // detector). hwloc's GPU-library plugins are left out: the "gl" one opens
    // X displays :0 to :N, each a "localhost" name lookup, which stalls init
    // for seconds where names resolve slowly (a root without /etc/hosts).
    for (const char* plugin : {"gl", "opencl", "cuda", "nvml", "rsmi", "levelzero"})
      hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, plugin);
    if (hwloc_topology_load(t) != 0) {
      GROVE_INFO(log::kTopo, "hwloc: load failed; using sysfs");
      hwloc_topology_destroy(t);
      return static_cast<hwloc_topology_t>(nullptr);
    }
    return t;
  }();
  return topo;
}

PciDevice deviceOf(hwloc_topology_t topo, hwloc_obj_t obj, bool gpu, const DetectOptions& o) {
  const auto& p = obj->attr->pcidev;
  PciDevice d;
  d.kind = gpu ? NodeKind::kGpu : NodeKind::kNic;
  d.busId = busIdOf(p.domain, p.bus, p.dev, p.func);
  sysfsLinkFacts(o.sysRoot, d.busId, &d.gen, &d.width);
  char hex[16];
  std::snprintf(hex, sizeof(hex), "0x%04x", p.vendor_id);
  d.attrs["vendor"] = hex;
  std::snprintf(hex, sizeof(hex), "0x%04x", p.device_id);
  d.attrs["pci_device"] = hex;
  for (hwloc_obj_t c = obj->io_first_child; c; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name) continue;
    if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK) d.attrs["netdev"] = c->name;
    if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) d.attrs["device"] = c->name;
  }
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, obj);
  d.numa = anc && anc->nodeset ? hwloc_bitmap_first(anc->nodeset) : -1;
  std::vector<PciHop> up;  // device's parents, nearest first
  for (hwloc_obj_t b = obj->parent; b && b->type == HWLOC_OBJ_BRIDGE; b = b->parent) {
    if (b->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) break;  // host bridge
    const auto& u = b->attr->bridge.upstream.pci;
    PciHop h;
    h.busId = busIdOf(u.domain, u.bus, u.dev, u.func);
    sysfsLinkFacts(o.sysRoot, h.busId, &h.gen, &h.width);
    up.push_back(h);
  }
  d.bridges.assign(up.rbegin(), up.rend());
  return d;
}

}  // namespace

bool detectHwloc(Graph& g, NodeId machine, const DetectOptions& o) {
  hwloc_topology_t topo = machineTopology();
  if (topo == nullptr) return false;
  std::vector<int> numa;
  std::vector<std::map<std::string, std::string>> attrs;
  int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    char cpus[512] = "";
    if (obj->cpuset) hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), obj->cpuset);
    numa.push_back(static_cast<int>(obj->os_index));
    attrs.push_back({{"cpus", cpus}});
  }
  if (numa.empty()) numa.push_back(0), attrs.emplace_back();
  addCpus(g, machine, numa, attrs);
  std::vector<PciDevice> found;
  for (hwloc_obj_t obj = hwloc_get_next_pcidev(topo, nullptr); obj;
       obj = hwloc_get_next_pcidev(topo, obj)) {
    unsigned cls = obj->attr->pcidev.class_id >> 8;
    bool gpu = obj->attr->pcidev.vendor_id == 0x10de && cls == 0x03;
    if (gpu || cls == 0x02) found.push_back(deviceOf(topo, obj, gpu, o));
  }
  addPciDevices(g, machine, found);
  GROVE_INFO(log::kTopo, "hwloc: %zu NUMA node(s), %zu GPU/NIC PCI device(s)", numa.size(),
             found.size());
  return true;
}

#else

bool detectHwloc(Graph&, NodeId, const DetectOptions&) {
  GROVE_INFO(log::kTopo, "hwloc: not in this build; CPUs and PCIe tree from sysfs");
  return false;
}

#endif

}  // namespace grove::topo::detail
