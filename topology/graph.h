// The machine graph: nodes (GPUs, CPU sockets / NUMA nodes, PCIe switches,
// NICs, NVSwitches, networks, machines) and directed links between them.
//
// How it works: a Graph is a flat vector of Nodes and a flat vector of Links;
// both are addressed by their index (NodeId / link index), which stays valid
// until a node or link is removed (removal compacts and renumbers). Each node
// belongs to one machine (the index of a kMachine node) except network nodes,
// which belong to no machine (machine == -1) and join NICs of every machine.
// Machine nodes carry the host name and have no links: they only group.
// A node's `name` is unique within its machine ("gpu0", "cpu1", "nic2"); the
// qualified name "<machine>/<name>" is unique in the graph. Links are
// directed: a physical NVLink or PCIe lane bundle is two Links, one per
// direction, each with the bandwidth of that direction in GB/s and a latency
// in microseconds. A link may carry the IP addresses of its two ends (an
// emulated or real fabric where every link is its own IP subnet): srcAddr is
// the address of the `from` end, dstAddr of the `to` end; addBidi swaps them
// for the reverse direction. The model is pure data: no CUDA, sockets or
// threads here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace grove::topo {

/// Index of a node in Graph::nodes().
using NodeId = int;

/// What a node is.
enum class NodeKind { kMachine, kCpu, kGpu, kPciSwitch, kNic, kNvSwitch, kNet };

/// What a link is.
enum class LinkKind { kNvLink, kPcie, kSmp, kNet };

/// One vertex of the graph.
struct Node {
  NodeKind kind = NodeKind::kCpu;
  std::string name;   ///< unique within its machine, e.g. "gpu3" (host name for machines)
  int machine = -1;   ///< index of its kMachine node; -1 for network nodes
  int index = -1;     ///< CUDA device (GPU), NUMA id (CPU), device number (NIC); -1 unknown
  std::string busId;  ///< PCI bus id "0000:3b:00.0" when known
  std::map<std::string, std::string> attrs;  ///< free-form facts (model, vendor, sm, speed...)

  /// Attribute text, or `def` when absent.
  std::string attr(const std::string& key, const std::string& def = "") const;
};

/// One direction of a physical connection.
struct Link {
  NodeId from = -1;
  NodeId to = -1;
  LinkKind kind = LinkKind::kPcie;
  double bw = 0;         ///< GB/s in this direction
  double latencyUs = 0;  ///< one-way latency in microseconds
  int count = 1;         ///< NVLink: number of bonded links (bw already includes them)
  int pciGen = 0;        ///< PCIe generation, 0 unknown
  int pciWidth = 0;      ///< PCIe lanes, 0 unknown
  std::string srcAddr;   ///< IP address of the `from` end ("" = none), canonical text
  std::string dstAddr;   ///< IP address of the `to` end ("" = none), canonical text
};

/// Canonical text of an IPv4 or IPv6 literal ("10.0.0.1", "fd00::1"); nullopt
/// when `text` is neither (host names are not accepted).
std::optional<std::string> canonicalIpAddress(const std::string& text);

/// Name of a node kind as written in files ("gpu", "pci_switch", ...).
const char* kindName(NodeKind k);
/// Name of a link kind as written in files ("nvlink", "pcie", "smp", "net").
const char* kindName(LinkKind k);
/// Parses a node kind name; nullopt when unknown.
std::optional<NodeKind> parseNodeKind(const std::string& s);
/// Parses a link kind name; nullopt when unknown.
std::optional<LinkKind> parseLinkKind(const std::string& s);

/// GB/s per direction of one NVLink of a given version (1: P100, 2: V100, 3: A100, 4: H100).
double nvlinkBwPerLink(int version);
/// GB/s per direction of a PCIe link of this generation and lane count.
double pcieBw(int gen, int width);
/// Default latency (us) of a link kind.
double defaultLatencyUs(LinkKind k);

/// The machine graph.
class Graph {
 public:
  /// Adds a machine (host) node and returns its id.
  NodeId addMachine(const std::string& hostName);
  /// Adds a node to machine `machine` (-1 only for kNet nodes); name unique in that machine.
  NodeId addNode(Node node);
  /// Adds one directed link; returns its index.
  int addLink(const Link& link);
  /// Adds `link` and its reverse (same bandwidth, end addresses swapped).
  void addBidi(const Link& link);
  /// Removes a node and every link that touches it (renumbers nodes and links).
  void removeNode(NodeId id);
  /// Removes a machine node and every node of that machine (network nodes stay).
  void removeMachine(NodeId machine);
  /// Removes every link from `a` to `b` (one direction) of kind `kind`; returns how many.
  int removeLinks(NodeId a, NodeId b, LinkKind kind);

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Link>& links() const { return links_; }
  Node& node(NodeId id) { return nodes_.at(static_cast<size_t>(id)); }
  const Node& node(NodeId id) const { return nodes_.at(static_cast<size_t>(id)); }
  Link& link(int i) { return links_.at(static_cast<size_t>(i)); }
  /// Indices of the links leaving `id`.
  const std::vector<int>& outLinks(NodeId id) const { return out_.at(static_cast<size_t>(id)); }
  /// Index of the first link a->b (any kind when `kind` is empty), or -1.
  int findLink(NodeId a, NodeId b, std::optional<LinkKind> kind = std::nullopt) const;

  /// Node named `name` in machine `machine` (-1: network nodes), or -1.
  NodeId find(int machine, const std::string& name) const;
  /// Node by qualified name "host/name" or plain network name, or -1.
  NodeId findQualified(const std::string& qualified) const;
  /// "host/name" (machines: "host"; networks: "name").
  std::string qualifiedName(NodeId id) const;
  /// Ids of every node of this kind (in machine `machine` unless it is -2 = any), in order.
  std::vector<NodeId> nodesOfKind(NodeKind kind, int machine = -2) const;
  /// Ids of the machine nodes, in order.
  std::vector<NodeId> machines() const { return nodesOfKind(NodeKind::kMachine); }
  /// Machine node whose name is `host`, or -1.
  NodeId findMachine(const std::string& host) const;

  /// Appends a copy of machine `machine` of `other` (its nodes and the links
  /// among them, and links to network nodes, which are created by name if
  /// missing) under host name `host`. Returns the new machine id.
  NodeId appendMachine(const Graph& other, NodeId machine, const std::string& host);
  /// Appends every machine of `other` (and its networks).
  void append(const Graph& other);

  /// True when some link carries an end address.
  bool hasLinkAddresses() const;

  /// Structural equality: same nodes (kind, names, attributes) and same links
  /// (with their end addresses), in any order.
  bool sameAs(const Graph& other, std::string* why = nullptr) const;

 private:
  void rebuildIndex();

  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<std::vector<int>> out_;
};

}  // namespace grove::topo
