// Which device engine a CUDA communicator runs: the persistent kernel
// (device_engine_cuda.cc) or stream tapes (device_engine_stream.cc).
//
// How it works: processes that share a GPU without MPS only take turns on
// it, a time slice (about a millisecond) each, and a kernel of one cannot
// run beside a kernel of another. The persistent kernel waits inside the
// kernel for its peers' ring counters, so every wait for a rank of another
// process on the same GPU costs a slice; stream tapes wait in the GPU's
// front end, which lets the other process run. Under MPS the processes'
// kernels run side by side and the persistent kernel is the faster one.
//
// GROVE_DEVICE_ENGINE=auto picks stream tapes when two processes of the job
// share one GPU (same host, same PCI bus id, different pids) and MPS is not
// running on that host, and every rank's device can run tapes; the kernel
// otherwise. Every rank decides from the same all-gathered DevicePeers, so
// every rank decides alike (the selector's channel counts depend on it).
// `kernel` and `stream` force a choice (both are agreed settings).
#pragma once

#include <string>
#include <vector>

#include "transports/device_transport.h"

namespace grove::core {

/// The two device engines of a real GPU (the emulation has both too).
enum class DeviceEngineKind { kKernel, kStream };

/// Name for logs and grove-info: "kernel" or "stream".
const char* deviceEngineName(DeviceEngineKind k);

/// What was chosen and why, and what to tell the user once at init.
struct EngineChoice {
  DeviceEngineKind kind = DeviceEngineKind::kKernel;
  std::string why;     ///< one line: the reason, for the INFO log
  std::string advice;  ///< non-empty: the setup makes collectives slow; what to do
};

/// Chooses from GROVE_DEVICE_ENGINE's value ("auto", "kernel", "stream")
/// and every rank's DevicePeer (its flags included). Pure: the same inputs
/// give the same choice on every rank. Throws grove::Error
/// (groveInvalidUsage) on every rank for `stream` where some rank's device
/// cannot run tapes.
EngineChoice chooseDeviceEngine(const std::string& setting,
                                const std::vector<transport::DevicePeer>& peers);

/// True when an MPS control daemon runs for this process's pipe directory
/// (CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps): its `control` pipe exists.
bool mpsDaemonRunning();

}  // namespace grove::core
