// Kernels of the executor's GPU tests (see exec_kernels.h).
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "exec_kernels.h"

namespace grove::gputest {
namespace {

__global__ void fillSlowKernel(float* p, size_t n, float base, uint64_t delayNs) {
  if (threadIdx.x == 0) {
    uint64_t start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
      __nanosleep(1000);
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < delayNs);
  }
  __syncthreads();
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    p[i] = base + static_cast<float>(i % 97);
}

__global__ void scaleKernel(float* dst, const float* src, size_t n, float k) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    dst[i] = src[i] * k;
}

void checkLaunch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

}  // namespace

void launchFillSlow(float* p, size_t n, float base, uint64_t delayNs, void* stream) {
  fillSlowKernel<<<64, 256, 0, static_cast<cudaStream_t>(stream)>>>(p, n, base, delayNs);
  checkLaunch("fillSlowKernel");
}

void launchScale(float* dst, const float* src, size_t n, float k, void* stream) {
  scaleKernel<<<64, 256, 0, static_cast<cudaStream_t>(stream)>>>(dst, src, n, k);
  checkLaunch("scaleKernel");
}

void preloadTestKernels() {
  cudaFuncAttributes attr{};
  cudaError_t err = cudaFuncGetAttributes(&attr, fillSlowKernel);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attr, scaleKernel);
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("loading the test kernels: ") + cudaGetErrorString(err));
}

}  // namespace grove::gputest
