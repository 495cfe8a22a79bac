// Choosing the device engine (see engine_choice.h).
#include "core/engine_choice.h"

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "base/error.h"

namespace grove::core {

const char* deviceEngineName(DeviceEngineKind k) {
  return k == DeviceEngineKind::kStream ? "stream" : "kernel";
}

namespace {

// Ranks of more than one process on one GPU of one host.
struct SharedGpu {
  std::string busId;
  std::vector<int> ranks;
  std::set<int32_t> pids;
  bool mps = true;  // every one of its ranks sees an MPS daemon
};

std::vector<SharedGpu> sharedGpus(const std::vector<transport::DevicePeer>& peers) {
  std::map<std::pair<uint64_t, std::string>, SharedGpu> byGpu;
  for (const transport::DevicePeer& p : peers) {
    const std::string bus(p.pciBusId, strnlen(p.pciBusId, sizeof(p.pciBusId)));
    if (bus.empty()) continue;  // no real device (emulation)
    SharedGpu& g = byGpu[{p.hostHash, bus}];
    g.busId = bus;
    g.ranks.push_back(p.rank);
    g.pids.insert(p.pid);
    g.mps = g.mps && (p.flags & transport::kDevicePeerMps) != 0;
  }
  std::vector<SharedGpu> out;
  for (auto& [key, g] : byGpu)
    if (g.pids.size() > 1) out.push_back(std::move(g));
  return out;
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i == 4 && ranks.size() > 5) return s + ", ... (" + std::to_string(ranks.size()) + ")";
    s += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  }
  return s;
}

}  // namespace

EngineChoice chooseDeviceEngine(const std::string& setting,
                                const std::vector<transport::DevicePeer>& peers) {
  EngineChoice c;
  const std::vector<SharedGpu> shared = sharedGpus(peers);
  const SharedGpu* slow = nullptr;  // a GPU shared by processes without MPS
  for (const SharedGpu& g : shared)
    if (!g.mps) slow = slow == nullptr ? &g : slow;
  bool tapesEverywhere = true;
  for (const transport::DevicePeer& p : peers)
    tapesEverywhere = tapesEverywhere && (p.flags & transport::kDevicePeerStreamOps) != 0;
  const std::string where =
      slow == nullptr ? ""
                      : "ranks " + rankList(slow->ranks) + " share GPU " + slow->busId + " from " +
                            std::to_string(slow->pids.size()) + " processes without MPS";

  if (setting == "stream") {
    for (const transport::DevicePeer& p : peers)
      if ((p.flags & transport::kDevicePeerStreamOps) == 0)
        throw Error(groveInvalidUsage,
                    "GROVE_DEVICE_ENGINE=stream, but rank " + std::to_string(p.rank) +
                        "'s device has no 64-bit stream memory operations (leave it at auto)");
    c.kind = DeviceEngineKind::kStream;
    c.why = "GROVE_DEVICE_ENGINE=stream";
    return c;
  }
  if (setting == "kernel") {
    c.why = "GROVE_DEVICE_ENGINE=kernel";
    if (slow != nullptr)
      c.advice = where +
                 ": their persistent kernels take turns on the GPU and every wait for each other "
                 "costs a time slice; start MPS (nvidia-cuda-mps-control -d) before the job, or "
                 "leave GROVE_DEVICE_ENGINE at auto";
    return c;
  }
  if (slow == nullptr) {
    c.why = shared.empty() ? "no two processes share a GPU"
                           : "the processes sharing a GPU run under MPS";
    return c;
  }
  if (!tapesEverywhere) {
    c.why = where + ", but not every device has 64-bit stream memory operations";
    c.advice = where +
               ": their persistent kernels take turns on the GPU and every wait for each other "
               "costs a time slice; start MPS (nvidia-cuda-mps-control -d) before the job";
    return c;
  }
  c.kind = DeviceEngineKind::kStream;
  c.why = where;
  c.advice = where +
             ": collectives run as stream operations (copies, short kernels and stream waits) "
             "so that no kernel waits for another process; small calls are faster under MPS: "
             "start nvidia-cuda-mps-control -d before the job";
  return c;
}

bool mpsDaemonRunning() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string pipe =
      std::string(dir != nullptr && *dir != 0 ? dir : "/tmp/nvidia-mps") + "/control";
  struct stat st {};
  return stat(pipe.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

}  // namespace grove::core
