// The standalone reduce kernel and its launcher template, instantiated per
// dtype by reduce_ints.cu, reduce_half.cu and reduce_floats.cu (split so
// the three compile in parallel). One kernel per (type, fold kind): the
// source count is a run-time argument, so a type costs 5 kernels, not 35.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/device_kernels.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/runtime.h"

namespace grove::kernels::cuda::detail {

/// Kernel parameters (by value in the kernel's parameter space).
struct ReduceParams {
  void* dst;
  void* dst2;
  const void* src[kMaxReduceSources];
  int nsrc;
  size_t count;
};

/// reduceSlice over the whole grid.
template <class T, class Op, class LastOp>
__global__ void __launch_bounds__(kBlockThreads, kReduceBlocksPerSm)
    reduceKernel(ReduceParams prm, Op op, LastOp last) {
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t nthreads = static_cast<size_t>(gridDim.x) * blockDim.x;
  const T* srcs[kMaxReduceSources];
#pragma unroll
  for (int s = 0; s < kMaxReduceSources; ++s) srcs[s] = static_cast<const T*>(prm.src[s]);
  dev::reduceSlice<T>(srcs, prm.nsrc, static_cast<T*>(prm.dst), static_cast<T*>(prm.dst2),
                      prm.count, tid, nthreads, op, last);
}

/// Launches reduceKernel<T, Op, LastOp> for l.
template <class T, class Op, class LastOp>
void launchFold(const ReduceLaunch& l, Op op, LastOp last) {
  ReduceParams prm{};
  prm.dst = l.dst;
  prm.dst2 = l.dst2;
  for (int s = 0; s < kMaxReduceSources; ++s) prm.src[s] = s < l.nsrc ? l.src[s] : l.src[0];
  prm.nsrc = l.nsrc;
  prm.count = l.count;
  const unsigned blocks = gridBlocks(l.count * sizeof(T), size_t{16} * dev::kUnroll * kBlockThreads,
                                     kReduceBlocksPerSm);
  reduceKernel<T><<<blocks, kBlockThreads, 0, static_cast<cudaStream_t>(l.stream)>>>(prm, op, last);
  throwIfLaunchFailed("reduce kernel");
}

/// Dispatches l.kind for element type T.
template <class T>
void launchReduceTyped(const ReduceLaunch& l) {
  switch (l.kind) {
    case ReduceKind::kSum: launchFold<T>(l, dev::SumOp{}, dev::SumOp{}); break;
    case ReduceKind::kProd: launchFold<T>(l, dev::ProdOp{}, dev::ProdOp{}); break;
    case ReduceKind::kMax: launchFold<T>(l, dev::MaxOp{}, dev::MaxOp{}); break;
    case ReduceKind::kMin: launchFold<T>(l, dev::MinOp{}, dev::MinOp{}); break;
    case ReduceKind::kAvgFinal: launchFold<T>(l, dev::SumOp{}, dev::AvgFinalOp{l.nranks}); break;
  }
}

}  // namespace grove::kernels::cuda::detail
