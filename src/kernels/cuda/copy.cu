// The standalone copy kernel: copySlice (device_kernels.cuh) over the grid.
#include <cuda_runtime.h>

#include "kernels/cuda/device_kernels.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/runtime.h"

namespace grove::kernels::cuda::detail {
namespace {

__global__ void __launch_bounds__(kBlockThreads, kCopyBlocksPerSm)
    copyKernel(void* dst, const void* src, size_t bytes) {
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t nthreads = static_cast<size_t>(gridDim.x) * blockDim.x;
  dev::copySlice(dst, src, bytes, tid, nthreads);
}

}  // namespace

void launchCopy(void* dst, const void* src, size_t bytes, void* stream) {
  const unsigned blocks =
      gridBlocks(bytes, size_t{16} * dev::kUnroll * kBlockThreads, kCopyBlocksPerSm);
  copyKernel<<<blocks, kBlockThreads, 0, static_cast<cudaStream_t>(stream)>>>(dst, src, bytes);
  throwIfLaunchFailed("copy kernel");
}

}  // namespace grove::kernels::cuda::detail
