// Detection of the local machine's topology, at the edge of the layer.
//
// How it works: detectLocal() builds a one-machine graph from the sources
// that this build and this machine have, each of which only adds what it
// finds and logs an INFO line (subsystem TOPO) when it finds nothing:
//   1. CPUs / NUMA nodes and the PCIe tree of GPUs and NICs: hwloc when the
//      build has it (GROVE_HAVE_HWLOC), otherwise sysfs (/sys/devices/system/
//      node, /sys/bus/pci/devices); PCIe bridges collapse to one switch node
//      per physical switch (upstream port) and root ports fold into their CPU;
//   2. NIC speeds and networks: sysfs (/sys/class/net/<if>/speed,
//      /sys/class/infiniband/<dev>/ports/N/rate), refined by ibverbs when built;
//   3. GPUs (CUDA device index, P2P access) and NVLinks per pair: CUDA runtime
//      and NVML when built with CUDA.
// localTopology() is what a communicator uses: detection, then the file named
// by GROVE_TOPO_FILE (an override edits the detected machine, a full
// description replaces it), then GROVE_TOPO_DUMP_FILE is written.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "topology/graph.h"

namespace grove::topo {

/// Which detectors run and where sysfs is (tests point it at a fake tree).
struct DetectOptions {
  std::string host;  ///< machine name; empty = gethostname()
  std::string sysRoot = "/sys";
  bool useHwloc = true;
  bool useCuda = true;
  bool useIbverbs = true;
};

/// Detects this machine (never throws for a missing library or device).
Graph detectLocal(const DetectOptions& options = {});
/// Detection + GROVE_TOPO_FILE + GROVE_TOPO_DUMP_FILE (see the block comment).
Graph localTopology(const DetectOptions& options = {});
/// This machine's host name.
std::string localHostName();
/// NUMA node of the CPU the calling thread runs on (sysfs), -1 when unknown.
int currentNumaNode(const std::string& sysRoot = "/sys");

namespace detail {

/// One hop of a PCIe path from a CPU root to a device.
struct PciHop {
  std::string busId;
  int gen = 0;
  int width = 0;
};

/// A GPU or NIC found on the PCIe bus.
struct PciDevice {
  NodeKind kind = NodeKind::kNic;
  std::string busId;
  std::string name;             ///< preferred node name ("" = gpuN / nicN)
  int numa = -1;                ///< NUMA node of the device, -1 unknown
  int gen = 0, width = 0;       ///< its own link
  std::vector<PciHop> bridges;  ///< bridges from the root port down (root port first)
  std::map<std::string, std::string> attrs;
};

/// Adds CPU nodes cpu<N> for each NUMA id, joined pairwise by SMP links.
void addCpus(Graph& g, NodeId machine, const std::vector<int>& numaIds,
             const std::vector<std::map<std::string, std::string>>& attrs);
/// Adds devices below their CPU, creating switch nodes for their bridges.
void addPciDevices(Graph& g, NodeId machine, const std::vector<PciDevice>& devices);
/// Parses "8.0 GT/s PCIe" / "16 GT/s" to a PCIe generation (0 unknown).
int pciGenFromSpeed(const std::string& text);

/// PCIe generation and width of device `busId` from sysfs (0 when unknown).
void sysfsLinkFacts(const std::string& sysRoot, const std::string& busId, int* gen, int* width);
/// sysfs: CPUs, NUMA, PCIe tree (GPUs, NICs). Returns false when nothing is there.
bool detectSysfsTree(Graph& g, NodeId machine, const DetectOptions& o);
/// sysfs: NIC speeds and their network links.
void detectSysfsNetSpeeds(Graph& g, NodeId machine, const DetectOptions& o);
/// hwloc: CPUs, NUMA, PCIe tree; false when unavailable (not built or failed).
bool detectHwloc(Graph& g, NodeId machine, const DetectOptions& o);
/// CUDA + NVML: GPU indices, NVLinks, P2P; false when unavailable.
bool detectCuda(Graph& g, NodeId machine, const DetectOptions& o);
/// ibverbs: HCA port speeds; false when unavailable.
bool detectIbverbs(Graph& g, NodeId machine, const DetectOptions& o);

}  // namespace detail
}  // namespace grove::topo
