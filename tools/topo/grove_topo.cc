// grove-topo: detect, load, print and render the machine topology.
//
//   grove-topo                         detect this machine (+ GROVE_TOPO_FILE) and print a summary
//   grove-topo --file F                load F (grove JSON or NCCL XML) instead of detecting
//   grove-topo --json [--out F]        print / write the graph as grove JSON
//   grove-topo --dot [--out F]         print / write Graphviz DOT
//   grove-topo --svg F                 render an SVG with Graphviz `dot`
//   grove-topo --ranks N [--ranks-per-machine K] [--cuda|--host]
//                                      show how N ranks of a communicator map onto the graph
//   grove-topo --path A B              the widest path between two nodes ("host/gpu0" or "gpu0")
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.h"
#include "topology/comm_topology.h"
#include "topology/detect.h"
#include "topology/paths.h"
#include "topology/render.h"
#include "topology/topo_file.h"

namespace grove::tools {
namespace {

struct Options {
  std::string file, out, svg, pathA, pathB;
  bool json = false, dot = false, noDetectFile = false;
  int ranks = 0, ranksPerMachine = 0;
  topo::DeviceKind device = topo::DeviceKind::kHost;
  bool deviceGiven = false;
};

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: grove-topo [--file F] [--json | --dot | --svg OUT.svg] [--out F]\n"
      "                  [--ranks N [--ranks-per-machine K] [--cuda | --host]] [--path A B]\n"
      "  --file F    load a topology file (grove JSON or NCCL XML) instead of detecting\n"
      "  --json      print the graph in grove's JSON format (see docs/topology-format.md)\n"
      "  --dot       print Graphviz DOT text\n"
      "  --svg F     render an SVG picture to F (needs Graphviz: apt-get install graphviz)\n"
      "  --out F     write --json / --dot output to F instead of stdout\n"
      "  --ranks N   show where N ranks of a communicator sit (machines in order)\n"
      "  --ranks-per-machine K   K ranks per machine (default: spread evenly)\n"
      "  --cuda / --host         place ranks on GPUs / CPU nodes (default: GPUs when any)\n"
      "  --path A B  print the widest path between two nodes (e.g. gpu0 nic1, host/gpu0)\n"
      "Without --file the machine is detected (hwloc/sysfs/CUDA/ibverbs as built) and\n"
      "GROVE_TOPO_FILE / GROVE_TOPO_DUMP_FILE apply as in a communicator.\n");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throwInvalidArgument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--file" || a == "-f")
      o.file = value();
    else if (a == "--json")
      o.json = true;
    else if (a == "--dot")
      o.dot = true;
    else if (a == "--svg")
      o.svg = value();
    else if (a == "--out" || a == "-o")
      o.out = value();
    else if (a == "--ranks")
      o.ranks = std::atoi(value().c_str());
    else if (a == "--ranks-per-machine")
      o.ranksPerMachine = std::atoi(value().c_str());
    else if (a == "--cuda")
      o.device = topo::DeviceKind::kCuda, o.deviceGiven = true;
    else if (a == "--host")
      o.device = topo::DeviceKind::kHost, o.deviceGiven = true;
    else if (a == "--path")
      o.pathA = value(), o.pathB = value();
    else if (a == "--help" || a == "-h") {
      usage(stdout);
      std::exit(0);
    } else {
      throwInvalidArgument("unknown option '" + a + "' (see --help)");
    }
  }
  return o;
}

void emit(const std::string& text, const std::string& out) {
  if (out.empty()) {
    std::fputs(text.c_str(), stdout);
    return;
  }
  topo::writeTextFile(out, text);
  std::fprintf(stderr, "grove-topo: wrote %s\n", out.c_str());
}

int renderSvg(const topo::Graph& g, const std::string& svg) {
  if (std::system("command -v dot >/dev/null 2>&1") != 0) {
    std::fprintf(stderr,
                 "grove-topo: --svg needs Graphviz's `dot`, which is not installed "
                 "(apt-get install graphviz); use --dot and render elsewhere\n");
    return 2;
  }
  std::string dotPath = svg + ".dot";
  topo::writeTextFile(dotPath, topo::toDot(g));
  std::string cmd = "dot -Tsvg -o '" + svg + "' '" + dotPath + "'";
  int rc = std::system(cmd.c_str());
  std::remove(dotPath.c_str());
  if (rc != 0) {
    std::fprintf(stderr, "grove-topo: `%s` failed (status %d)\n", cmd.c_str(), rc);
    return 1;
  }
  std::fprintf(stderr, "grove-topo: wrote %s\n", svg.c_str());
  return 0;
}

topo::NodeId resolve(const topo::Graph& g, const std::string& name) {
  topo::NodeId id = g.findQualified(name);
  if (id < 0 && !g.machines().empty()) id = g.find(g.machines()[0], name);
  if (id < 0) throwInvalidArgument("no node named '" + name + "'");
  return id;
}

int run(int argc, char** argv) {
  Options o = parse(argc, argv);
  topo::Graph g = o.file.empty() ? topo::localTopology() : topo::loadTopologyFile(o.file);
  if (o.json) {
    emit(topo::toJson(g), o.out);
    return 0;
  }
  if (o.dot) {
    emit(topo::toDot(g), o.out);
    return 0;
  }
  if (!o.svg.empty()) return renderSvg(g, o.svg);
  if (!o.pathA.empty()) {
    topo::Path p = topo::pathBetween(g, resolve(g, o.pathA), resolve(g, o.pathB));
    std::printf("%s\nclass %s, bottleneck %.3g GB/s, latency %.3g us\n",
                topo::describePath(g, p).c_str(), topo::pathTypeName(p.type), p.bottleneck,
                p.latencyUs);
    return 0;
  }
  if (o.ranks > 0) {
    topo::DeviceKind dev = o.device;
    if (!o.deviceGiven && !g.nodesOfKind(topo::NodeKind::kGpu).empty())
      dev = topo::DeviceKind::kCuda;
    topo::CommTopology t = topo::placeRanks(g, o.ranks, o.ranksPerMachine, dev);
    std::printf("%d rank(s) on %zu machine(s), %s communicator:\n%s", o.ranks, g.machines().size(),
                dev == topo::DeviceKind::kCuda ? "CUDA" : "host", t.describe().c_str());
    for (size_t r = 0; r < t.ranks.size(); ++r) {
      topo::NodeId nic = topo::closestNic(g, t.ranks[r].node);
      std::printf("  rank %zu: %s (local rank %d), closest NIC %s\n", r,
                  g.qualifiedName(t.ranks[r].node).c_str(), t.ranks[r].localRank,
                  nic >= 0 ? g.node(nic).name.c_str() : "-");
    }
    return 0;
  }
  std::fputs(topo::summaryText(g).c_str(), stdout);
  return 0;
}

}  // namespace
}  // namespace grove::tools

int main(int argc, char** argv) {
  try {
    return grove::tools::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grove-topo: %s\n", e.what());
    return 1;
  }
}
