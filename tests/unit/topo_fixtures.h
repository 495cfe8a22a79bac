// The topology fixtures of the unit tests (tests/fixtures/topology, whose
// folder the test target passes as GROVE_TOPO_FIXTURES) and communicators
// placed on them.
#pragma once

#include <string>
#include <vector>

#include "topology/comm_topology.h"
#include "topology/topo_file.h"

namespace grove::fixtures {

/// The fixture file `name` (grove JSON or NCCL XML), loaded.
inline topo::Graph fixture(const std::string& name) {
  return topo::loadTopologyFile(std::string(GROVE_TOPO_FIXTURES) + "/" + name);
}

/// A communicator with rank i on GPU "gpu<gpus[i]>" of the graph (a
/// one-machine fixture, whose GPU names follow their CUDA indices).
inline topo::CommTopology onGpus(const topo::Graph& g, const std::vector<int>& gpus) {
  std::vector<std::string> names;
  for (int gpu : gpus) names.push_back("gpu" + std::to_string(gpu));
  return topo::placeRanksOn(g, names, "test placement");
}

}  // namespace grove::fixtures
