// Human-readable views of a graph: a text summary (nodes, links, the
// GPU x GPU/NIC matrix in the spirit of `nvidia-smi topo -m`) and Graphviz DOT.
//
// How it works: both walk the graph once per machine. Pairs of links that
// are each other's reverse with the same figures print as one "<->" line /
// one undirected edge. The matrix cell for a pair is the class of the widest
// path between them (paths.h): NV# for # bonded NVLinks, NVS# through an
// NVSwitch with # links on the first hop, then PIX/PXB/PHB/SYS; each row ends
// with the GPU's CPU (NUMA) affinity and its closest NIC.
#pragma once

#include <string>

#include "topology/graph.h"

namespace grove::topo {

/// Nodes, links and (when there are GPUs or NICs) the path matrix of every machine.
std::string summaryText(const Graph& g);
/// The path matrix of one machine (rows: GPUs, or CPUs on a GPU-less machine).
std::string matrixText(const Graph& g, NodeId machine);
/// Label of a link for people: "NVLink x2 50 GB/s", "PCIe 3 x16 15.8 GB/s".
std::string linkLabel(const Link& l);
/// Graphviz DOT text (one cluster per machine, networks outside).
std::string toDot(const Graph& g);

}  // namespace grove::topo
