// CUDA runtime + NVML detection: CUDA device indices, models and compute
// capability of the GPUs found on the PCIe bus (or new GPU nodes when the bus
// walk did not see them), P2P access per pair, and NVLinks per pair counted
// from NVML's per-link remote PCI info (remote ends that are not GPUs are
// NVSwitches, merged into one node as NCCL does). NVML is loaded with dlopen
// so a machine without the driver library still runs: it just gets no NVLinks.
// Compiled to a stub when the build has no CUDA.
#include "base/log.h"
#include "topology/detect.h"

#include "grove_build_info.h"

#if GROVE_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <map>
#endif

namespace grove::topo::detail {

#if GROVE_HAVE_CUDA
namespace {

std::string normBus(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s.size() > 12 ? s.substr(s.size() - 12) : s;  // NVML writes an 8-digit domain
}

// The slice of NVML's C ABI we use, declared here because NVML is loaded with
// dlopen and the toolkit need not ship nvml.h (layouts as in nvml.h, stable
// since NVML 10: nvmlPciInfo_t is the v3 struct the *_v2 calls fill).
using nvmlReturn_t = int;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlEnableState_t = int;
constexpr nvmlEnableState_t NVML_FEATURE_ENABLED = 1;
constexpr unsigned NVML_NVLINK_MAX_LINKS = 18;
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};

// The few NVML entry points we need, resolved at run time.
struct Nvml {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*byBus)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*linkState)(nvmlDevice_t, unsigned, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*remotePci)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;
  Nvml() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    init = reinterpret_cast<decltype(init)>(dlsym(lib, "nvmlInit_v2"));
    byBus = reinterpret_cast<decltype(byBus)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    linkState = reinterpret_cast<decltype(linkState)>(dlsym(lib, "nvmlDeviceGetNvLinkState"));
    remotePci =
        reinterpret_cast<decltype(remotePci)>(dlsym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2"));
    if (!init || !byBus || !linkState || !remotePci || init() != NVML_SUCCESS) {
      dlclose(lib);
      lib = nullptr;
    }
  }
  // NVML stays loaded: other code in the process may use it too.
};

NodeId gpuNode(Graph& g, NodeId machine, int dev, const std::string& bus) {
  for (NodeId id : g.nodesOfKind(NodeKind::kGpu, machine))
    if (g.node(id).busId == bus) return id;
  Node n;  // not seen on the bus (e.g. a container without sysfs): hang it off the first CPU
  n.kind = NodeKind::kGpu;
  n.name = "gpu" + std::to_string(dev);
  n.machine = machine;
  n.busId = bus;
  while (g.find(machine, n.name) >= 0) n.name += "_";
  NodeId id = g.addNode(std::move(n));
  std::vector<NodeId> cpus = g.nodesOfKind(NodeKind::kCpu, machine);
  if (!cpus.empty()) {
    Link l;
    l.from = cpus[0], l.to = id, l.kind = LinkKind::kPcie, l.bw = pcieBw(3, 16);
    l.latencyUs = defaultLatencyUs(LinkKind::kPcie);
    g.addBidi(l);
  }
  return id;
}

void addNvlinks(Graph& g, NodeId machine, const std::map<std::string, NodeId>& byBus) {
  Nvml nvml;
  if (!nvml.lib) {
    GROVE_INFO(log::kTopo, "NVML: libnvidia-ml.so.1 not usable; no NVLink facts");
    return;
  }
  NodeId nvs = -1;
  for (const auto& [bus, gpu] : byBus) {
    nvmlDevice_t dev;
    if (nvml.byBus(bus.c_str(), &dev) != NVML_SUCCESS) continue;
    std::map<std::string, int> count;
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t on;
      nvmlPciInfo_t pci;
      if (nvml.linkState(dev, link, &on) != NVML_SUCCESS || on != NVML_FEATURE_ENABLED) continue;
      if (nvml.remotePci(dev, link, &pci) != NVML_SUCCESS) continue;
      ++count[normBus(pci.busId)];
    }
    int sm = std::atoi(g.node(gpu).attr("sm", "70").c_str());
    for (const auto& [remote, n] : count) {
      Link l;
      l.from = gpu, l.kind = LinkKind::kNvLink, l.count = n;
      l.bw = n * nvlinkBwPerLink(sm < 70 ? 1 : 2);
      l.latencyUs = defaultLatencyUs(LinkKind::kNvLink);
      auto it = byBus.find(remote);
      if (it != byBus.end()) {
        l.to = it->second;
        g.addLink(l);  // the peer adds the other direction
        continue;
      }
      if (nvs < 0) {
        Node s;
        s.kind = NodeKind::kNvSwitch, s.name = "nvs0", s.machine = machine;
        nvs = g.addNode(std::move(s));
      }
      int existing = g.findLink(gpu, nvs, LinkKind::kNvLink);
      if (existing >= 0) {  // several switch chips: one merged node, links add up
        for (int li : {existing, g.findLink(nvs, gpu, LinkKind::kNvLink)}) {
          g.link(li).count += n;
          g.link(li).bw += l.bw;
        }
        continue;
      }
      l.to = nvs;
      g.addBidi(l);
    }
  }
}

}  // namespace

bool detectCuda(Graph& g, NodeId machine, const DetectOptions& o) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    GROVE_INFO(log::kTopo, "CUDA: no usable GPU; the graph has no CUDA devices");
    return false;
  }
  std::map<std::string, NodeId> byBus;
  std::vector<NodeId> ids(static_cast<size_t>(count));
  for (int dev = 0; dev < count; ++dev) {
    char bus[32] = "";
    cudaDeviceProp prop{};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), dev) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
      continue;
    NodeId id = gpuNode(g, machine, dev, normBus(bus));
    Node& n = g.node(id);
    n.index = dev;
    n.attrs["model"] = prop.name;
    n.attrs["sm"] = std::to_string(prop.major * 10 + prop.minor);
    n.attrs["memory_gb"] = std::to_string(prop.totalGlobalMem >> 30);
    byBus[n.busId] = id;
    ids[dev] = id;
  }
  for (int a = 0; a < count; ++a) {
    std::string peers;
    for (int b = 0; b < count; ++b) {
      int ok = 0;
      if (a != b && cudaDeviceCanAccessPeer(&ok, a, b) == cudaSuccess && ok)
        peers += (peers.empty() ? "" : ",") + g.node(ids[b]).name;
    }
    g.node(ids[a]).attrs["p2p_peers"] = peers;
  }
  addNvlinks(g, machine, byBus);
  GROVE_INFO(log::kTopo, "CUDA: %d GPU(s)", count);
  return true;
}

#else

bool detectCuda(Graph&, NodeId, const DetectOptions&) {
  GROVE_INFO(log::kTopo, "CUDA: not in this build; GPUs only as seen on the PCIe bus");
  return false;
}

#endif

}  // namespace grove::topo::detail
