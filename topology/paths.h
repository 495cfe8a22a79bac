// Paths through the machine graph: widest (bottleneck) paths, the
// nvidia-smi-style path class between two endpoints, P2P feasibility and the
// NIC closest to a GPU or CPU.
//
// How it works: pathBetween() runs a widest-path Dijkstra from the source:
// the label of a node is the best bottleneck bandwidth of any path reaching
// it (ties broken by fewer hops, then lower latency). Endpoints are never
// relayed through: a GPU, a CPU-only endpoint's peer GPU, or a NIC is only a
// path's first or last node, except that a NIC may be crossed between its
// PCIe side and its network side; network links are used only when the two
// endpoints are on different machines (two sockets of one host never talk
// through the switch in the basement). CPU nodes are crossed freely (that is
// PHB/SYS traffic). The resulting path is classified like `nvidia-smi topo
// -m`: NV# (direct NVLink, # = bonded links), NVS (NVLink through NVSwitch),
// PIX (at most one PCIe switch), PXB (several PCIe switches, no CPU), PHB
// (through one CPU / host bridge), SYS (across the SMP interconnect), NET
// (across machines). classify() of A->B uses the widest path.
#pragma once

#include <string>
#include <vector>

#include "topology/graph.h"

namespace grove::topo {

/// Path class, best first (like nvidia-smi topo -m).
enum class PathType { kSelf, kNvLink, kNvSwitch, kPix, kPxb, kPhb, kSys, kNet, kNone };

/// Short name of a path class ("NV", "NVS", "PIX", ..., "X" for self, "-" for none).
const char* pathTypeName(PathType t);

/// One path from a source to a destination.
struct Path {
  std::vector<int> links;  ///< link indices, source to destination
  double bottleneck = 0;   ///< GB/s: the narrowest link on the path (0: no path)
  double latencyUs = 0;    ///< sum of link latencies
  PathType type = PathType::kNone;
  int nvlinks = 0;  ///< kNvLink: bonded links of the direct link; kNvSwitch: of the first hop
  bool exists() const { return bottleneck > 0 || type == PathType::kSelf; }
};

/// Widest path from `a` to `b` (see the block comment); type kNone when there is none.
Path pathBetween(const Graph& g, NodeId a, NodeId b);
/// Bottleneck bandwidth of pathBetween(a, b) in GB/s (0 when disconnected).
double bottleneckBw(const Graph& g, NodeId a, NodeId b);
/// Path class of the widest path a -> b.
PathType classify(const Graph& g, NodeId a, NodeId b);
/// Text of a path: "gpu0 -nvlink(50)-> gpu1".
std::string describePath(const Graph& g, const Path& p);

/// Whether GPUs `a` and `b` can access each other's memory directly: same
/// machine and a path class no worse than PHB (NVLink, NVSwitch, PCIe under
/// one root). A GPU node attribute "p2p_peers" (comma list of GPU names) or
/// "p2p"="0" set by detection or a file overrides the rule.
bool canP2P(const Graph& g, NodeId a, NodeId b);

/// The NIC of the same machine closest to `node` (best path class, then widest,
/// then lowest latency, then lowest index), or -1 when the machine has none.
NodeId closestNic(const Graph& g, NodeId node);
/// The CPU node (NUMA node / socket) `node` hangs off (the CPU on its best path), or -1.
NodeId localCpu(const Graph& g, NodeId node);

}  // namespace grove::topo
