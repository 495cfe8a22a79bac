// The device execution context of the interpreter (exec/device/dev_context.h
// names what a context provides): the team that runs one lane is a thread
// block.
//
// How it works: tid/size are threadIdx.x/blockDim.x and sync is
// __syncthreads; share() passes thread 0's value through a __shared__ word
// the kernel owns. Ring counters and control words are read and written
// with system-scope PTX (ld.acquire.sys, ld.relaxed.sys, st.release.sys),
// because they may live in this GPU's memory, in a peer GPU's memory mapped
// by CUDA IPC, or in mapped pinned host memory; fenceRelease is
// __threadfence_system for the same reason. The status word is claimed with
// atomicCAS_system (mapped host memory: atomic as far as this GPU's threads
// go, which is all that claims it). The clock is %globaltimer (ns). A waiting
// thread backs off with __nanosleep, doubling from 64 ns to 8 us.
//
// copy and reduce call the kernels layer's slice functions with the block's
// threads; reduce dispatches the dtype, then the op (avg: a sum, except the
// final step which divides by nranks) to dev::reduceSlice<T>. Each dtype's
// dispatch is a separate non-inlined function, so the interpreter loop is
// compiled once, not once per type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "exec/device/dev_context.h"
#include "exec/device/dev_program.h"
#include "kernels/cuda/device_kernels.cuh"

namespace grove::exec::cuda {

namespace kdev = grove::kernels::cuda::dev;

/// Folds srcs into dst (and dst2) for element type T with the block's threads.
template <class T>
__device__ __noinline__ void reduceTyped(int32_t op, int32_t nranks, void* dst, void* dst2,
                                         const void* const* srcs, int nsrc, uint64_t count,
                                         bool final) {
  const T* s[grove::kernels::cuda::kMaxReduceSources];
#pragma unroll
  for (int i = 0; i < grove::kernels::cuda::kMaxReduceSources; ++i)
    s[i] = static_cast<const T*>(i < nsrc ? srcs[i] : srcs[0]);
  T* d = static_cast<T*>(dst);
  T* d2 = static_cast<T*>(dst2);
  const size_t tid = threadIdx.x, nt = blockDim.x;
  switch (op) {
    case groveSum:
      kdev::reduceSlice<T>(s, nsrc, d, d2, count, tid, nt, kdev::SumOp{}, kdev::SumOp{});
      break;
    case groveProd:
      kdev::reduceSlice<T>(s, nsrc, d, d2, count, tid, nt, kdev::ProdOp{}, kdev::ProdOp{});
      break;
    case groveMax:
      kdev::reduceSlice<T>(s, nsrc, d, d2, count, tid, nt, kdev::MaxOp{}, kdev::MaxOp{});
      break;
    case groveMin:
      kdev::reduceSlice<T>(s, nsrc, d, d2, count, tid, nt, kdev::MinOp{}, kdev::MinOp{});
      break;
    case groveAvg:
      if (final)
        kdev::reduceSlice<T>(s, nsrc, d, d2, count, tid, nt, kdev::SumOp{},
                             kdev::AvgFinalOp{nranks});
      else
        kdev::reduceSlice<T>(s, nsrc, d, d2, count, tid, nt, kdev::SumOp{}, kdev::SumOp{});
      break;
    default: break;  // lowering rejected it; the interpreter never gets here
  }
}

/// The interpreter's context on a GPU: one thread block.
class BlockCtx {
 public:
  /// `shareWord` is a __shared__ word of the kernel.
  __device__ explicit BlockCtx(uint64_t* shareWord) : share_(shareWord) {}

  __device__ __forceinline__ uint32_t tid() const { return threadIdx.x; }
  __device__ __forceinline__ uint32_t size() const { return blockDim.x; }
  __device__ __forceinline__ void sync() { __syncthreads(); }

  /// Barrier; every thread returns thread 0's v.
  __device__ __forceinline__ uint64_t share(uint64_t v) {
    __syncthreads();
    if (threadIdx.x == 0) *share_ = v;
    __syncthreads();
    const uint64_t r = *share_;
    __syncthreads();
    return r;
  }

  __device__ __forceinline__ uint64_t loadAcquire(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }

  __device__ __forceinline__ uint32_t loadFlag(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.relaxed.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
  }

  __device__ __forceinline__ void storeRelease(uint64_t* p, uint64_t v) {
    asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }

  __device__ __forceinline__ void fenceRelease() { __threadfence_system(); }

  __device__ __forceinline__ bool claimStatus(uint32_t* status, uint32_t value) {
    return atomicCAS_system(reinterpret_cast<unsigned int*>(status), 0u, value) == 0u;
  }

  __device__ __forceinline__ uint64_t nowNs() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }

  /// Backs off: nothing for the first polls, then naps doubling to ~8 us.
  __device__ __forceinline__ void pause(uint32_t spins) {
    if (spins < 16) return;
    const uint32_t shift = spins < 23 ? spins - 16 : 7;
    __nanosleep(64u << shift);
  }

  __device__ __forceinline__ void copy(void* dst, const void* src, uint64_t bytes) {
    kdev::copySlice(dst, src, bytes, threadIdx.x, blockDim.x);
  }

  __device__ __forceinline__ void reduce(const dev::DevReduce& r, void* dst, void* dst2,
                                         const void* const* srcs, int nsrc, uint64_t count,
                                         bool final) {
    switch (r.dtype) {
      case groveInt8:
        reduceTyped<int8_t>(r.op, r.nranks, dst, dst2, srcs, nsrc, count, final);
        break;
      case groveUint8:
        reduceTyped<uint8_t>(r.op, r.nranks, dst, dst2, srcs, nsrc, count, final);
        break;
      case groveInt32:
        reduceTyped<int32_t>(r.op, r.nranks, dst, dst2, srcs, nsrc, count, final);
        break;
      case groveUint32:
        reduceTyped<uint32_t>(r.op, r.nranks, dst, dst2, srcs, nsrc, count, final);
        break;
      case groveInt64:
        reduceTyped<int64_t>(r.op, r.nranks, dst, dst2, srcs, nsrc, count, final);
        break;
      case groveUint64:
        reduceTyped<uint64_t>(r.op, r.nranks, dst, dst2, srcs, nsrc, count, final);
        break;
      case groveFloat16:
        reduceTyped<__half>(r.op, r.nranks, dst, dst2, srcs, nsrc, count, final);
        break;
      case groveBfloat16:
        reduceTyped<__nv_bfloat16>(r.op, r.nranks, dst, dst2, srcs, nsrc, count, final);
        break;
      case groveFloat32:
        reduceTyped<float>(r.op, r.nranks, dst, dst2, srcs, nsrc, count, final);
        break;
      case groveFloat64:
        reduceTyped<double>(r.op, r.nranks, dst, dst2, srcs, nsrc, count, final);
        break;
      default: break;  // lowering rejected it
    }
  }

 private:
  uint64_t* share_;
};

}  // namespace grove::exec::cuda
