// The executor kernels and their launcher: lowered device programs
// (exec/device/dev_program.h) interpreted on the GPU, one thread block per
// lane.
//
// How it works: the persistent kernel takes a DevLaunch by value (up to
// kMaxCallsPerLaunch calls) and walks it: for each call, for each phase,
// block b runs lane b of the phase when the phase has one (runLane, the
// interpreter of exec/device/dev_lane.h, over a BlockCtx), then every block
// meets at a grid barrier before the next phase. The barrier is a counter in
// device memory that the launcher zeroes on the stream just before the
// kernel: at its k-th barrier a block adds 1 and waits for the counter to
// reach k x gridDim.x. It is not cooperative_groups' grid sync, because that
// needs a cooperative launch, and the ranks sharing one GPU each launch
// their own kernel on their own stream: those kernels must run side by side,
// which a cooperative launch does not promise. The launcher checks instead
// that the grid fits on the device at once (residentBlocks).
//
// Failure: the first failing lane claims DevControl::status. Every block
// still reaches every barrier (so none waits for a block that left), but a
// block does no more work once the status is set, and a barrier stops
// waiting when the status is set, the abort flag is raised, or the control's
// timeout passes. Only thread 0 of a block polls; the decision is shared
// with the block, so the block's threads never diverge around a barrier.
//
// Fallback (no barrier word, or a grid too large to be co-resident): one
// launch of the phased kernel per (call, phase) on the same stream; stream
// order separates the phases.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "base/error.h"
#include "exec/cuda/cuda_check.h"
#include "exec/cuda/cuda_executor.h"
#include "exec/cuda/device_ctx.cuh"
#include "exec/device/dev_lane.h"

namespace grove::exec::cuda {
namespace {

/// Runs lane blockIdx.x of `phase` of `call` when the phase has it and no
/// call has failed yet. All threads of the block call it.
__device__ __noinline__ void runUnit(const DevCall& call, uint32_t callIndex, uint32_t phase,
                                     DevControl* ctl) {
  __shared__ uint64_t shareWord;
  BlockCtx ctx(&shareWord);
  const dev::DevPhase ph = call.program.phases[phase];
  const uint32_t lane = blockIdx.x;
  if (lane >= ph.end - ph.begin) return;
  if (ctx.share(threadIdx.x == 0 ? ctx.loadFlag(&ctl->status) : 0) != dev::kDevOk) return;
  const uint32_t st = dev::runLane(call, callIndex, phase, lane, ctx, ctl);
  if (st != dev::kDevOk && threadIdx.x == 0) ctx.claimStatus(&ctl->status, st);
}

/// Thread 0's wait at a grid barrier: true when the block may go on.
__device__ void barrierWait(const uint64_t* counter, uint64_t target, DevControl* ctl,
                            BlockCtx& ctx) {
  uint32_t spins = 0;
  uint64_t start = 0;
  while (true) {
    uint64_t v;
    asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(counter) : "memory");
    if (v >= target) return;
    if (++spins < 16) continue;
    if (ctx.loadFlag(&ctl->status) != dev::kDevOk) return;
    if (ctx.loadFlag(&ctl->abortFlag) != 0) {
      ctx.claimStatus(&ctl->status, dev::kDevAborted);
      return;
    }
    const uint64_t now = ctx.nowNs();
    if (start == 0) start = now;
    const uint64_t limit = ctl->timeoutNs;
    if (limit != 0 && now - start > limit) {
      if (ctx.claimStatus(&ctl->status, dev::kDevTimedOut)) ctl->failedLane = blockIdx.x;
      return;
    }
    ctx.pause(spins);
  }
}

/// The grid barrier: the k-th call on a block waits for k x gridDim.x arrivals.
__device__ void gridBarrier(uint64_t* counter, uint64_t& target, DevControl* ctl) {
  __shared__ uint64_t unused;
  BlockCtx ctx(&unused);
  __syncthreads();
  target += gridDim.x;
  if (threadIdx.x == 0) {
    __threadfence();  // the block's writes before the arrival
    atomicAdd(reinterpret_cast<unsigned long long*>(counter), 1ull);
    barrierWait(counter, target, ctl, ctx);
    __threadfence();
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kExecThreads, 1)
    persistentKernel(const __grid_constant__ DevLaunch launch) {
  uint64_t target = 0;
  for (uint32_t c = 0; c < launch.nCalls; ++c) {
    const DevCall& call = launch.calls[c];
    for (uint32_t p = 0; p < call.program.nPhases; ++p) {
      runUnit(call, launch.firstCall + c, p, launch.ctl);
      const bool last = c + 1 == launch.nCalls && p + 1 == call.program.nPhases;
      if (!last) gridBarrier(launch.barrier, target, launch.ctl);
    }
  }
}

__global__ void __launch_bounds__(kExecThreads, 1)
    phasedKernel(const __grid_constant__ DevCall call, uint32_t callIndex, uint32_t phase,
                 DevControl* ctl) {
  runUnit(call, callIndex, phase, ctl);
}

std::atomic<uint32_t> gResident[kMaxDevices];
std::atomic<bool> gPreloaded[kMaxDevices];

void checkLaunchArgs(const DevCall* calls, size_t n, const DevControl* ctl,
                     const LaunchOptions& options) {
  if (n > 0 && calls == nullptr) throwInvalidArgument("exec::cuda::launchCalls: calls is null");
  if (ctl == nullptr) throwInvalidArgument("exec::cuda::launchCalls: no control block");
  if (options.mode == LaunchMode::kPersistent && options.barrier == nullptr)
    throwInvalidArgument("exec::cuda::launchCalls: a persistent launch needs a barrier word");
  for (size_t i = 0; i < n; ++i) {
    const DevProgramView& v = calls[i].program;
    if (v.nPhases > 0 && (v.phases == nullptr || v.lanes == nullptr))
      throwInvalidArgument("exec::cuda::launchCalls: call " + std::to_string(i) +
                           " has phases but no uploaded program");
  }
}

void launchPersistent(const DevCall* calls, size_t n, DevControl* ctl, cudaStream_t stream,
                      uint64_t* barrier) {
  for (size_t first = 0; first < n; first += kMaxCallsPerLaunch) {
    const size_t count = std::min<size_t>(kMaxCallsPerLaunch, n - first);
    DevLaunch launch;
    launch.nCalls = static_cast<uint32_t>(count);
    launch.firstCall = static_cast<uint32_t>(first);
    launch.ctl = ctl;
    launch.barrier = barrier;
    std::copy(calls + first, calls + first + count, launch.calls);
    detail::check(cudaMemsetAsync(barrier, 0, sizeof(uint64_t), stream),
                  "cudaMemsetAsync(grid barrier)");
    persistentKernel<<<gridFor(calls + first, count), kExecThreads, 0, stream>>>(launch);
    detail::check(cudaGetLastError(), "launching the executor kernel");
  }
}

void launchPhased(const DevCall* calls, size_t n, DevControl* ctl, cudaStream_t stream) {
  for (size_t c = 0; c < n; ++c) {
    const uint32_t grid = gridFor(calls + c, 1);
    for (uint32_t p = 0; p < calls[c].program.nPhases; ++p) {
      phasedKernel<<<grid, kExecThreads, 0, stream>>>(calls[c], static_cast<uint32_t>(c), p, ctl);
      detail::check(cudaGetLastError(), "launching the phased executor kernel");
    }
  }
}

}  // namespace

uint32_t gridFor(const DevCall* calls, size_t n) {
  uint32_t grid = 1;
  for (size_t i = 0; i < n; ++i) grid = std::max(grid, calls[i].program.maxLanes);
  return grid;
}

uint32_t residentBlocks() {
  int device = 0;
  detail::check(cudaGetDevice(&device), "cudaGetDevice");
  if (device >= 0 && device < kMaxDevices) {
    const uint32_t cached = gResident[device].load(std::memory_order_relaxed);
    if (cached != 0) return cached;
  }
  int perSm = 0, sms = 0;
  detail::check(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, persistentKernel, kExecThreads, 0),
      "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  detail::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                "cudaDeviceGetAttribute(multiprocessors)");
  const uint32_t n = static_cast<uint32_t>(std::max(perSm, 0) * std::max(sms, 0));
  if (device >= 0 && device < kMaxDevices && n != 0)
    gResident[device].store(n, std::memory_order_relaxed);
  return n;
}

void preloadKernels() {
  int device = 0;
  detail::check(cudaGetDevice(&device), "loading the executor kernels: cudaGetDevice");
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached && gPreloaded[device].load(std::memory_order_acquire)) return;
  cudaFuncAttributes attr{};  // getting a kernel's attributes loads it
  detail::check(cudaFuncGetAttributes(&attr, persistentKernel), "loading the persistent kernel");
  detail::check(cudaFuncGetAttributes(&attr, phasedKernel), "loading the phased kernel");
  if (cached) gPreloaded[device].store(true, std::memory_order_release);
}

void launchCalls(const DevCall* calls, size_t n, DevControl* ctl, void* stream,
                 const LaunchOptions& options) {
  checkLaunchArgs(calls, n, ctl, options);
  if (n == 0) return;
  preloadKernels();
  auto s = static_cast<cudaStream_t>(stream);
  bool persistent = false;
  if (options.mode != LaunchMode::kPhased && options.barrier != nullptr) {
    const uint32_t grid = gridFor(calls, n), resident = residentBlocks();
    persistent = grid <= resident;
    if (!persistent && options.mode == LaunchMode::kPersistent)
      throwInvalidArgument("exec::cuda::launchCalls: " + std::to_string(grid) +
                           " blocks cannot be co-resident (the device holds " +
                           std::to_string(resident) + ")");
  }
  if (persistent)
    launchPersistent(calls, n, ctl, s, options.barrier);
  else
    launchPhased(calls, n, ctl, s);
}

}  // namespace grove::exec::cuda
