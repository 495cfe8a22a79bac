// Planned routes as connections; see planned_routes.h.
#include "core/planned_routes.h"

#include "base/socket.h"

namespace grove::core {

uint32_t routeId(const std::string& fromAddr, const std::string& toAddr) {
  uint32_t h = 2166136261u;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 16777619u;
  };
  mix(fromAddr);
  mix(">");
  mix(toAddr);
  return h == 0 ? 1 : h;
}

PlannedRoute plannedRoute(const plan::PlanGraph& g, const topo::Graph& topo,
                          const plan::LinkRoute& route) {
  const topo::Link* first = nullptr;
  const topo::Link* last = nullptr;
  for (int l : route.links) {
    if (l < 0 || l >= static_cast<int>(g.links().size())) return {};
    const int t = g.links()[static_cast<size_t>(l)].topoLink;
    if (t < 0 || t >= static_cast<int>(topo.links().size())) continue;
    const topo::Link& link = topo.links()[static_cast<size_t>(t)];
    if (first == nullptr) first = &link;
    last = &link;
  }
  if (first == nullptr || first->srcAddr.empty() || last->dstAddr.empty()) return {};
  PlannedRoute pr;
  pr.id = routeId(first->srcAddr, last->dstAddr);
  pr.addresses.local = net::resolveAddress(first->srcAddr, 0);
  pr.addresses.remote = net::resolveAddress(last->dstAddr, 0);
  pr.addresses.path = "planned route " + first->srcAddr + " -> " + last->dstAddr;
  return pr;
}

}  // namespace grove::core
