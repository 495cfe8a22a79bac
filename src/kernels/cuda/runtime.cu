// CUDA runtime helpers of the kernels: device count, grid sizing (cached
// per device) and launch error checks.
#include <cuda_runtime_api.h>

#include <atomic>
#include <string>

#include "base/error.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/split.h"

namespace grove::kernels::cuda {
namespace detail {
namespace {

constexpr int kMaxDevices = 64;
std::atomic<unsigned> gSmCount[kMaxDevices];

[[noreturn]] void throwCuda(const std::string& what, cudaError_t err) {
  throw Error(groveUnhandledCudaError, "kernels::cuda: " + what + ": " + cudaGetErrorString(err));
}

/// SMs of the current device (cached per device).
unsigned smCount() {
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) throwCuda("cudaGetDevice", err);
  if (dev >= 0 && dev < kMaxDevices) {
    unsigned cached = gSmCount[dev].load(std::memory_order_relaxed);
    if (cached != 0) return cached;
  }
  int sms = 0;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) throwCuda("cudaDeviceGetAttribute", err);
  unsigned n = sms > 0 ? static_cast<unsigned>(sms) : 1u;
  if (dev >= 0 && dev < kMaxDevices) gSmCount[dev].store(n, std::memory_order_relaxed);
  return n;
}

}  // namespace

unsigned gridBlocks(size_t units, size_t perBlock, int blocksPerSm) {
  const unsigned most = smCount() * static_cast<unsigned>(blocksPerSm > 0 ? blocksPerSm : 1);
  return balancedBlocks(units, perBlock, most);
}

void throwIfLaunchFailed(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throwCuda(std::string("launching ") + what, err);
}

}  // namespace detail

int deviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  return n;
}

}  // namespace grove::kernels::cuda
