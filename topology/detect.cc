#include "topology/detect.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "topology/topo_file.h"

namespace grove::topo {

std::string localHostName() {
  char buf[256] = "";
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

int currentNumaNode(const std::string& sysRoot) {
  int cpu = sched_getcpu();
  if (cpu < 0) return -1;
  std::string cpuDir = sysRoot + "/devices/system/cpu/cpu" + std::to_string(cpu);
  DIR* d = opendir(cpuDir.c_str());
  if (!d) return -1;
  int numa = -1;
  while (dirent* e = readdir(d))  // the cpu's directory holds a "node<N>" link
    if (std::strncmp(e->d_name, "node", 4) == 0 &&
        std::isdigit(static_cast<unsigned char>(e->d_name[4])))
      numa = std::atoi(e->d_name + 4);
  closedir(d);
  return numa;
}

Graph detectLocal(const DetectOptions& o) {
  Graph g;
  NodeId m = g.addMachine(o.host.empty() ? localHostName() : o.host);
  bool tree = o.useHwloc && detail::detectHwloc(g, m, o);
  if (!tree) detail::detectSysfsTree(g, m, o);
  if (o.useIbverbs) detail::detectIbverbs(g, m, o);
  detail::detectSysfsNetSpeeds(g, m, o);
  if (o.useCuda) detail::detectCuda(g, m, o);
  GROVE_INFO(log::kTopo,
             "detected %s: %zu CPU node(s), %zu GPU(s), %zu NIC(s), %zu PCIe switch(es)",
             g.node(m).name.c_str(), g.nodesOfKind(NodeKind::kCpu).size(),
             g.nodesOfKind(NodeKind::kGpu).size(), g.nodesOfKind(NodeKind::kNic).size(),
             g.nodesOfKind(NodeKind::kPciSwitch).size());
  return g;
}

namespace {

// A full description from a file replaces the detected machine. A file with
// one machine describes this machine whatever host name it carries; a file
// with several machines is a whole (possibly emulated) cluster and is used as is.
Graph replaceWithFile(Graph detected, Graph file, const std::string& path) {
  std::vector<NodeId> machines = file.machines();
  if (machines.size() != 1) {
    GROVE_INFO(log::kTopo, "%s describes %zu machines; using it instead of detection", path.c_str(),
               machines.size());
    return file;
  }
  NodeId local = detected.machines().at(0);
  Graph out;
  out.appendMachine(file, machines[0], detected.node(local).name);
  GROVE_INFO(log::kTopo, "%s replaces the detected description of %s", path.c_str(),
             detected.node(local).name.c_str());
  return out;
}

}  // namespace

Graph localTopology(const DetectOptions& options) {
  Graph g = detectLocal(options);
  std::string path = config::getString("GROVE_TOPO_FILE");
  if (!path.empty()) {
    std::string text = readTextFile(path);
    if (looksLikeXml(path, text)) {
      g = replaceWithFile(std::move(g), fromNcclXml(text, path, "file"), path);
    } else if (isOverrideJson(text, path)) {
      applyJson(g, text, path);
      GROVE_INFO(log::kTopo, "%s applied as an override", path.c_str());
    } else {
      g = replaceWithFile(std::move(g), fromJson(text, path), path);
    }
  }
  std::string dump = config::getString("GROVE_TOPO_DUMP_FILE");
  if (!dump.empty()) {
    try {
      writeTextFile(dump, toJson(g));
      GROVE_INFO(log::kTopo, "topology written to %s", dump.c_str());
    } catch (const Error& e) {
      GROVE_WARN(log::kTopo, "GROVE_TOPO_DUMP_FILE: %s", e.what());
    }
  }
  return g;
}

}  // namespace grove::topo
