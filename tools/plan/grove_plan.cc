// grove-plan: plan a collective on a topology and show what the planners and
// the cost model make of it.
//
//   grove-plan                              the detected machine, all GPUs, all-reduce of 256 MiB
//   grove-plan --file F [--gpus 0,1,4]      a topology file (grove JSON or NCCL XML), some GPUs
//   grove-plan --ranks N                    N ranks placed like a communicator (machines in order)
//   grove-plan --file F --place gpu0,gpu3   ranks on named nodes (as GROVE_TOPO_RANKS)
//   grove-plan --coll broadcast --root 2 --size 64M
//   grove-plan --json | --svg OUT.svg       machine-readable report / picture of the trees
//   grove-plan --survey [--fixtures DIR]    the results table of docs/planning.md
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "tools/plan/plan_report.h"
#include "topology/detect.h"
#include "topology/topo_file.h"
#include "transports/registry.h"

#ifndef GROVE_PLAN_FIXTURES
#define GROVE_PLAN_FIXTURES "tests/fixtures/topology"
#endif

namespace grove::tools {
namespace {

struct Options {
  std::string file, svg, fixtures = GROVE_PLAN_FIXTURES;
  std::vector<int> gpus;
  std::vector<std::string> place;
  int ranks = 0;
  bool json = false, survey = false, optimum = false;
  PlanRequest request;
};

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: grove-plan [--file TOPO.json|.xml] [--coll C]\n"
      "                  [--gpus 0,1,4 | --place gpu0,gpu3 | --ranks N] [--root R] [--size 256M]\n"
      "                  [--transport NAME] [--no-judge] [--cache DIR]\n"
      "                  [--json] [--svg OUT.svg] [--survey | --optimum [--fixtures DIR]]\n"
      "  --file F     topology file (grove JSON or NCCL XML); default: detect this machine\n"
      "  --coll C     allreduce (default), broadcast, reduce, allgather, reducescatter\n"
      "               (forests), gather, scatter, alltoall (the direct prediction only)\n"
      "  --gpus LIST  one rank per GPU, by CUDA index (single-machine topologies)\n"
      "  --place L    rank i on the i-th node of L (gpu3 or host/gpu3), as GROVE_TOPO_RANKS\n"
      "  --ranks N    N ranks spread over the machines (default: one per GPU)\n"
      "  --root R     root rank of broadcast / reduce (default 0)\n"
      "  --size S     message size of the predictions (default 256M; K, M, G suffixes)\n"
      "  --transport T  the registered transport whose link traits the predictions assume\n"
      "                 (grove-info lists them); default: device rings for GPU ranks, else\n"
      "                 socket across machines or over addressed links, else shm\n"
      "  --no-judge   keep the packer's trees (99%% of the optimum, fewest trees) instead\n"
      "               of letting the cost model choose how many trees\n"
      "  --cache DIR  keep the plans in DIR by the topology's fingerprint and take them\n"
      "               from there next time (default: GROVE_PLAN_CACHE_DIR); the report\n"
      "               also times a second planning of the same topology (the cache)\n"
      "  --json       print the report as JSON\n"
      "  --svg F      also write an SVG of the topology and the trees to F\n"
      "  --survey     print the docs/planning.md results table over the fixtures\n"
      "  --optimum    print the tree LP optima over the survey's rows as JSON\n"
      "               (tests/fixtures/plan_optimum.json; scripts/plan-optimum)\n"
      "  --fixtures D the fixture folder --survey and --optimum read\n");
}

int intValue(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < 0 || x > 1 << 20)
    throwInvalidArgument(flag + " needs a non-negative integer, not '" + v + "'");
  return static_cast<int>(x);
}

std::vector<int> listValue(const std::string& flag, const std::string& v) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= v.size()) {
    const size_t comma = v.find(',', pos);
    out.push_back(intValue(
        flag, v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos)));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  o.request.cacheDir = config::getString("GROVE_PLAN_CACHE_DIR");
  bool sizeGiven = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throwInvalidArgument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--file" || a == "-f")
      o.file = value();
    else if (a == "--coll") {
      const std::string c = value();
      const auto coll = plan::parseColl(c);
      if (!coll || *coll == plan::Coll::kSendRecv)
        throwInvalidArgument("--coll '" + c +
                             "': allreduce, broadcast, reduce, allgather, reducescatter, gather, "
                             "scatter or alltoall");
      o.request.coll = *coll;
    } else if (a == "--gpus")
      o.gpus = listValue(a, value());
    else if (a == "--place") {
      o.place = topo::parseNodeList(value());
      if (o.place.empty()) throwInvalidArgument("--place needs a list of node names");
    } else if (a == "--ranks")
      o.ranks = intValue(a, value());
    else if (a == "--root")
      o.request.root = intValue(a, value());
    else if (a == "--size")
      o.request.bytes = parseBytes(value()), sizeGiven = true;
    else if (a == "--transport") {
      const std::string t = value();
      const transport::TransportEntry* e = transport::findTransport(t);
      if (e == nullptr)
        throwInvalidArgument("--transport: '" + t + "' is not a transport (one of " +
                             transport::transportNames() + ")");
      o.request.transport = e->name;
    } else if (a == "--no-judge")
      o.request.judgeTrees = false;
    else if (a == "--cache")
      o.request.cacheDir = value();
    else if (a == "--json")
      o.json = true;
    else if (a == "--svg")
      o.svg = value();
    else if (a == "--survey")
      o.survey = true;
    else if (a == "--optimum")
      o.optimum = true;
    else if (a == "--fixtures")
      o.fixtures = value();
    else if (a == "--help" || a == "-h") {
      usage(stdout);
      std::exit(0);
    } else {
      throwInvalidArgument("unknown option '" + a + "' (see --help)");
    }
  }
  if ((!o.gpus.empty()) + (!o.place.empty()) + (o.ranks > 0) > 1)
    throwInvalidArgument("--gpus, --place and --ranks exclude each other");
  if (o.ranks == 0 && std::find(argv, argv + argc, std::string("--ranks")) != argv + argc)
    throwInvalidArgument("--ranks needs at least 1");
  if (o.survey && !sizeGiven) o.request.bytes = 256ull << 20;
  return o;
}

topo::CommTopology place(const topo::Graph& g, const Options& o) {
  if (!o.gpus.empty()) return placeOnGpus(g, o.gpus);
  if (!o.place.empty()) return topo::placeRanksOn(g, o.place);
  const int gpus = static_cast<int>(g.nodesOfKind(topo::NodeKind::kGpu).size());
  const int n = o.ranks > 0 ? o.ranks : gpus;
  if (n == 0) throwInvalidArgument("the topology has no GPUs: say how many ranks with --ranks N");
  return topo::placeRanks(g, n, 0, gpus > 0 ? topo::DeviceKind::kCuda : topo::DeviceKind::kHost);
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.optimum) {
    std::fputs(optimumJson(o.fixtures).c_str(), stdout);
    return 0;
  }
  if (o.survey) {
    const auto t0 = std::chrono::steady_clock::now();
    std::fputs(surveyText(o.fixtures, o.request.bytes).c_str(), stdout);
    std::printf("\n(survey took %.1f s)\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
  }
  const topo::Graph g = o.file.empty() ? topo::localTopology() : topo::loadTopologyFile(o.file);
  const topo::CommTopology t = place(g, o);
  if (t.ranks.size() < 2) throwInvalidArgument("planning needs at least 2 ranks");
  plan::TopoPlans plans(plan::PlanGraph::fromTopology(t));
  const PlanReport r = makeReport(t, plans, o.request);
  std::fputs((o.json ? reportJson(r, plans.graph()) : reportText(r, plans.graph())).c_str(),
             stdout);
  if (!o.svg.empty()) {
    topo::writeTextFile(o.svg, reportSvg(r, t));
    std::fprintf(stderr, "grove-plan: wrote %s\n", o.svg.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace grove::tools

int main(int argc, char** argv) {
  try {
    return grove::tools::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grove-plan: %s\n", e.what());
    return 1;
  }
}
