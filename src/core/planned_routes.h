// Planned routes as connections: which addresses a planned link uses.
//
// How it works: a program's LinkRoute lists plan-graph links from the sending
// rank's vertex to the receiving rank's. The first and last of them that are
// real topology links (not a rank's virtual port) leave the sender's node and
// enter the receiver's; when the topology gives both of those ends an IP
// address, the connection binds the first and connects to the second, so the
// kernel carries it along that route (an emulated or multi-NIC fabric routes
// each address over its own links). The route id is a hash of the two
// addresses: both ends of a link compute it from the same route, and links
// of different programs over the same route share their connections.
#pragma once

#include <cstdint>
#include <string>

#include "algorithms/planner/topo_plans.h"
#include "core/connections.h"
#include "ir/schedule.h"
#include "topology/graph.h"

namespace grove::core {

/// The route id of two end addresses (FNV-1a of "from>to", never 0).
uint32_t routeId(const std::string& fromAddr, const std::string& toAddr);

/// The planned route of one of `rank`'s links over the plan graph `g` of
/// topology graph `topo`: id 0 (the default path) when an end of the route
/// has no address; else the id and the sockaddrs of the sender's end (local)
/// and the receiver's end (remote).
PlannedRoute plannedRoute(const plan::PlanGraph& g, const topo::Graph& topo,
                          const plan::LinkRoute& route);

}  // namespace grove::core
