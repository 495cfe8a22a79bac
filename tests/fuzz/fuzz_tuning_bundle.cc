// libFuzzer target: the tuning bundle (algorithms/cost/tuning_share.h) a
// communicator's rank 0 hands the other ranks, and with it plan_codec's
// readers of every plan kind (the plan store reads the same text from its
// folder). Any input must either apply -- and then leave plans that encode
// again and tables the selector accepts -- or be refused with false (or
// grove::Error); anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "algorithms/cost/tuning_share.h"
#include "base/error.h"
#include "topology/comm_topology.h"
#include "topology/topo_file.h"

namespace {

// Four GPUs, fully connected by NVLink, on one CPU's PCIe.
const char* kTopology = R"({"grove_topology": 1, "machines": [{"host": "k4", "nodes": [
  {"name": "cpu0", "kind": "cpu", "index": 0},
  {"name": "gpu0", "kind": "gpu", "index": 0}, {"name": "gpu1", "kind": "gpu", "index": 1},
  {"name": "gpu2", "kind": "gpu", "index": 2}, {"name": "gpu3", "kind": "gpu", "index": 3}],
 "links": [
  {"a": "gpu0", "b": "gpu1", "kind": "nvlink", "bw": 25}, {"a": "gpu0", "b": "gpu2", "kind": "nvlink", "bw": 25},
  {"a": "gpu0", "b": "gpu3", "kind": "nvlink", "bw": 25}, {"a": "gpu1", "b": "gpu2", "kind": "nvlink", "bw": 25},
  {"a": "gpu1", "b": "gpu3", "kind": "nvlink", "bw": 25}, {"a": "gpu2", "b": "gpu3", "kind": "nvlink", "bw": 25},
  {"a": "cpu0", "b": "gpu0", "kind": "pcie", "bw": 12}, {"a": "cpu0", "b": "gpu1", "kind": "pcie", "bw": 12},
  {"a": "cpu0", "b": "gpu2", "kind": "pcie", "bw": 12}, {"a": "cpu0", "b": "gpu3", "kind": "pcie", "bw": 12}]}]})";

const grove::topo::CommTopology& topology() {
  static const grove::topo::CommTopology t = grove::topo::placeRanksOn(
      grove::topo::fromJson(kTopology, "k4.json"), {"gpu0", "gpu1", "gpu2", "gpu3"}, "fuzz");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace grove::plan;
  const std::string bundle(reinterpret_cast<const char*>(data), size);
  try {
    TopoPlans plans(PlanGraph::fromTopology(topology()));
    Selector sel(4, grove::LinkTraits{}, SelectorConfig{});
    std::string why;
    if (applyTuning(bundle, plans, sel, &why)) {
      // What was taken is whole: it encodes, and the encoding applies again.
      TopoPlans again(PlanGraph::fromTopology(topology()));
      Selector sel2(4, grove::LinkTraits{}, SelectorConfig{});
      if (!applyTuning(encodeTuning(plans, sel), again, sel2, &why)) __builtin_trap();
    } else if (why.empty()) {
      __builtin_trap();  // a refusal says why
    }
  } catch (const grove::Error&) {}
  return 0;
}
