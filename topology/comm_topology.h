// The topology of a communicator: the merged graph of every rank's machine
// and where each rank sits on it.
//
// How it works: at init every rank describes what it sees (a LocalView: its
// machine's graph as JSON, its host name, its device) and the views are
// exchanged with the bootstrap's all-gather; exchangeCommTopology() does the
// exchange with any all-gather of equal-size blobs (first the sizes, then the
// views padded to the largest), so every rank decodes the same bytes and
// builds the same CommTopology. Merging groups ranks by host name, takes the
// lowest rank's view of each host (logging when ranks of one host disagree)
// and joins the machines through their shared network nodes. Ranks map to
// their GPU (CUDA comms: by PCI bus id, else CUDA index) or to the CPU node of
// the NUMA node they run on (host comms). When the views carry a multi-machine
// graph (a cluster file used on one box), that graph is used as is and ranks
// are spread over its machines in contiguous blocks, like a real launch.
// GROVE_TOPO_RANKS (carried in every view, identical on every rank) then
// overrides the automatic placement: rank i sits on the i-th named node
// (a plain name is looked up on the rank's own machine first, then anywhere
// in the graph when only one node has it); a real multi-host job may not
// move a rank to another host's node.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "topology/graph.h"

namespace grove::topo {

/// Which nodes ranks map to.
enum class DeviceKind { kHost, kCuda };

/// What one rank contributes at communicator init.
struct LocalView {
  std::string graphJson;  ///< toJson() of its machine (or of a whole cluster file)
  std::string host;       ///< the machine the rank runs on (its name in graphJson)
  DeviceKind device = DeviceKind::kHost;
  int cudaDevice = -1;                 ///< CUDA device index (CUDA comms)
  std::string gpuBusId;                ///< its GPU's PCI bus id when known
  int numa = -1;                       ///< NUMA node the process runs on, -1 unknown
  std::vector<std::string> placement;  ///< GROVE_TOPO_RANKS: node of each rank (empty: automatic)
};

/// Where one rank sits.
struct RankPlacement {
  NodeId node = -1;     ///< GPU node (CUDA) or CPU node (host)
  NodeId machine = -1;  ///< its machine node
  int localRank = 0;    ///< index among the ranks of its machine
};

/// The merged graph and every rank's place on it.
struct CommTopology {
  Graph graph;
  std::vector<RankPlacement> ranks;  ///< by rank
  std::vector<std::vector<int>>
      ranksByMachine;  ///< per machine (in graph order), rank ids ascending
  /// Readable lines: one per machine with its ranks and their nodes.
  std::string describe() const;
};

/// The view of this process: `local` is localTopology(); the NUMA node is the
/// one the calling thread runs on (sysfs), the GPU the one of `cudaDevice`.
LocalView makeLocalView(const Graph& local, DeviceKind device, int cudaDevice);
/// Serialises a view (JSON text).
std::string encodeLocalView(const LocalView& view);
/// Parses a view; throws grove::Error naming `source` on bad text.
LocalView decodeLocalView(const std::string& text, const std::string& source);

/// Merges the views of every rank (index = rank); see the block comment.
CommTopology buildCommTopology(const std::vector<LocalView>& views);
/// Same, from encoded views.
CommTopology buildCommTopology(const std::vector<std::string>& encodedViews);

/// An all-gather of equal-size blobs: every rank passes `bytes` bytes and gets
/// nranks * bytes back in rank order (Bootstrap::allGather has this shape).
using AllGatherFn = std::function<std::vector<uint8_t>(const void* data, size_t bytes)>;
/// Exchanges `mine` with every rank (two all-gathers: sizes, then padded
/// views) and builds the communicator's topology; collective.
CommTopology exchangeCommTopology(const LocalView& mine, int nranks, const AllGatherFn& allGather);

/// Splits a GROVE_TOPO_RANKS-style list ("gpu0,host1/gpu3"); "" gives an
/// empty list; throws grove::Error on an empty entry.
std::vector<std::string> parseNodeList(const std::string& text);

/// Node of graph `g` named `name`: "host/name" qualified, or a plain name,
/// looked up in `machine` first (-1: nowhere first), then in the whole graph
/// when exactly one node has it. Machine and network nodes are refused.
/// Throws grove::Error naming `what` on an unknown or ambiguous name.
NodeId resolveRankNode(const Graph& g, const std::string& name, NodeId machine,
                       const std::string& what);

/// Moves rank i of `t` onto node names[i] (each rank's current machine is
/// where a plain name is looked up first) and recomputes ranksByMachine and
/// the local ranks. `allowOtherMachine` = false refuses a node on another
/// machine than the rank's own. Throws, naming `source` (where the list came
/// from), when names.size() != ranks or a name does not resolve.
void applyPlacement(CommTopology& t, const std::vector<std::string>& names, bool allowOtherMachine,
                    const std::string& source = "GROVE_TOPO_RANKS");

/// Places one rank per named node of `g` (grove-plan --place): rank i on names[i].
CommTopology placeRanksOn(const Graph& g, const std::vector<std::string>& names,
                          const std::string& source = "--place");

/// Places `nranks` ranks on a graph without views (grove-topo --ranks, tests):
/// machines in order, `ranksPerMachine` each (0: spread evenly), each rank on
/// the next GPU (CUDA) or CPU node (host) of its machine, wrapping around.
CommTopology placeRanks(const Graph& g, int nranks, int ranksPerMachine, DeviceKind device);

}  // namespace grove::topo
