// Which IP addresses a rank's socket to each peer should use, so that the
// bytes travel over the links the planner thinks they use.
//
// How it works: a topology whose links carry end addresses (Link::srcAddr /
// dstAddr: one IP subnet per link, as an emulated fabric builds it) names,
// for every pair of ranks, a local address to bind and a remote address to
// connect to. For rank r and peer p on nodes A and B:
//  1. a direct link A -> B (the widest if several): its two end addresses;
//  2. else the widest route A -> ... -> B whose intermediate nodes are
//     neither GPUs nor nodes of any rank, and that uses network links only
//     between machines (the relay rules of algorithms/planner/plan_graph.cc): the
//     first link's source address and the last link's destination address;
//  3. else (e.g. a ring-only fabric, where non-neighbours talk through a
//     neighbour's kernel forwarding): no local address, and as remote the
//     address of B's widest link end that has one;
//  4. else nothing: the socket uses the peer's published data address.
// A missing address on the chosen link is left empty (remote: falls back to
// rule 3). A topology without link addresses gives empty pairs everywhere.
// Pure: works on the merged CommTopology alone.
#pragma once

#include <string>
#include <vector>

#include "topology/comm_topology.h"

namespace grove::topo {

/// The addresses one rank uses to reach one peer.
struct PeerLinkAddress {
  std::string local;   ///< address to bind before connecting ("" = kernel's choice)
  std::string remote;  ///< address to connect to ("" = the peer's published data address)
  std::string path;    ///< short description: "direct nvlink gpu0->gpu3", "route ...", ...
};

/// For every rank of `t` (index = peer rank), the addresses `rank` uses to
/// reach it (see the block comment); the entry of `rank` itself is empty.
/// Throws grove::Error when `rank` is out of range.
std::vector<PeerLinkAddress> resolvePeerLinkAddresses(const CommTopology& t, int rank);

}  // namespace grove::topo
