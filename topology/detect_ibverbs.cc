// ibverbs detection: for each HCA port that is active, its speed (width x
// lane rate) and link layer, written onto the NIC node of that device (found
// by the "device" attribute the bus walk recorded; a new NIC under the first
// CPU otherwise). Compiled to a stub when the build has no ibverbs.
#include "base/log.h"
#include "topology/detect.h"

#include "grove_build_info.h"

#if GROVE_HAVE_IBVERBS
#include <infiniband/verbs.h>

#include "topology/json.h"
#endif

namespace grove::topo::detail {

#if GROVE_HAVE_IBVERBS
namespace {

double laneGbps(uint8_t speed) {
  switch (speed) {
    case 1: return 2.5;  // SDR
    case 2: return 5.0;  // DDR
    case 4:
    case 8: return 10.0;     // QDR, FDR10
    case 16: return 14.0;    // FDR
    case 32: return 25.0;    // EDR
    case 64: return 50.0;    // HDR
    case 128: return 100.0;  // NDR
    default: return 0;
  }
}

int widthLanes(uint8_t w) {
  return w == 1 ? 1 : w == 2 ? 4 : w == 4 ? 8 : w == 8 ? 12 : w == 16 ? 2 : 0;
}

NodeId nicFor(Graph& g, NodeId machine, const std::string& dev) {
  for (NodeId id : g.nodesOfKind(NodeKind::kNic, machine))
    if (g.node(id).attr("device") == dev) return id;
  return -1;
}

}  // namespace

bool detectIbverbs(Graph& g, NodeId machine, const DetectOptions& o) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list) ibv_free_device_list(list);
    GROVE_INFO(log::kTopo, "ibverbs: no RDMA device");
    return false;
  }
  for (int i = 0; i < n; ++i) {
    std::string name = ibv_get_device_name(list[i]);
    NodeId nic = nicFor(g, machine, name);
    if (nic < 0) continue;  // not on the PCIe bus we walked (e.g. soft RoCE): leave it alone
    ibv_context* ctx = ibv_open_device(list[i]);
    if (!ctx) continue;
    ibv_device_attr attr{};
    if (ibv_query_device(ctx, &attr) == 0) {
      for (uint8_t port = 1; port <= attr.phys_port_cnt; ++port) {
        ibv_port_attr pa{};
        if (ibv_query_port(ctx, port, &pa) != 0 || pa.state != IBV_PORT_ACTIVE) continue;
        double gbps = laneGbps(pa.active_speed) * widthLanes(pa.active_width);
        Node& node = g.node(nic);
        node.attrs["port"] = std::to_string(port);
        node.attrs["link_layer"] = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "roce" : "ib";
        if (gbps > 0) node.attrs["speed_gbps"] = json::formatNumber(gbps);
        break;
      }
    }
    ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  return true;
}

#else

bool detectIbverbs(Graph&, NodeId, const DetectOptions&) {
  GROVE_INFO(log::kTopo, "ibverbs: not in this build; NIC speeds from sysfs");
  return false;
}

#endif

}  // namespace grove::topo::detail
