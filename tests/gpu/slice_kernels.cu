// Persistent-style kernels of the GPU tests: block b handles slice b of the
// range with the device functions the executor's channel kernels will call.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gpu/gpu_check.h"
#include "gpu/slice_kernels.h"
#include "kernels/cuda/device_kernels.cuh"

namespace grove::gputest {
namespace {

namespace dev = grove::kernels::cuda::dev;
constexpr int kMaxSrc = grove::kernels::cuda::kMaxReduceSources;

struct Srcs {
  const void* p[kMaxSrc];
};

template <class T, class Op, class LastOp>
__global__ void sliceReduce(T* dst, Srcs srcs, int nsrc, size_t count, size_t per, Op op,
                            LastOp last) {
  const size_t from = static_cast<size_t>(blockIdx.x) * per;
  if (from >= count) return;
  const size_t n = count - from < per ? count - from : per;
  const T* s[kMaxSrc];
  for (int i = 0; i < kMaxSrc; ++i) s[i] = static_cast<const T*>(srcs.p[i < nsrc ? i : 0]) + from;
  dev::reduceSlice<T>(s, nsrc, dst + from, static_cast<T*>(nullptr), n, threadIdx.x, blockDim.x, op,
                      last);
}

__global__ void sliceCopyKernel(unsigned char* dst, const unsigned char* src, size_t bytes,
                                size_t per) {
  const size_t from = static_cast<size_t>(blockIdx.x) * per;
  if (from >= bytes) return;
  const size_t n = bytes - from < per ? bytes - from : per;
  dev::copySlice(dst + from, src + from, n, threadIdx.x, blockDim.x);
}

Srcs pack(const void* const* srcs, int n) {
  Srcs s{};
  for (int i = 0; i < n; ++i) s.p[i] = srcs[i];
  return s;
}

}  // namespace

void sliceSumFloat(float* dst, const float* const* srcs, size_t count, int blocks) {
  const size_t per = (count + blocks - 1) / blocks;
  const void* p[3] = {srcs[0], srcs[1], srcs[2]};
  sliceReduce<float><<<blocks, 256>>>(dst, pack(p, 3), 3, count, per, dev::SumOp{}, dev::SumOp{});
  cudaOk(cudaDeviceSynchronize(), "sliceSumFloat");
}

void sliceAvgHalf(void* dst, const void* const* srcs, size_t count, int blocks) {
  const size_t per = (count + blocks - 1) / blocks;
  sliceReduce<__half><<<blocks, 128>>>(static_cast<__half*>(dst), pack(srcs, 4), 4, count, per,
                                       dev::SumOp{}, dev::AvgFinalOp{4});
  cudaOk(cudaDeviceSynchronize(), "sliceAvgHalf");
}

void sliceCopy(void* dst, const void* src, size_t bytes, int blocks) {
  const size_t per = (bytes + blocks - 1) / blocks;
  sliceCopyKernel<<<blocks, 96>>>(static_cast<unsigned char*>(dst),
                                  static_cast<const unsigned char*>(src), bytes, per);
  cudaOk(cudaDeviceSynchronize(), "sliceCopy");
}

}  // namespace grove::gputest
