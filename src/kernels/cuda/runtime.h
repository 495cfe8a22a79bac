// CUDA runtime helpers of the kernels' launchers (defined in runtime.cu):
// grid sizing and launch error checks. Plain C++ declarations.
#pragma once

#include <cstddef>

namespace grove::kernels::cuda::detail {

/// Threads per block of the standalone kernels.
inline constexpr int kBlockThreads = 512;

/// Blocks of kBlockThreads per SM the reduce kernels are built to keep resident
/// (their __launch_bounds__: at most 64 registers a thread).
inline constexpr int kReduceBlocksPerSm = 2;

/// Blocks of kBlockThreads per SM of the copy kernel (few registers: the SM's
/// 2048-thread limit).
inline constexpr int kCopyBlocksPerSm = 4;

/// Blocks for `units` units of work of `perBlock` each: at least 1, at most what
/// the current device keeps resident at once (SMs x blocksPerSm), every block
/// the same number of whole rounds (split.h's balancedBlocks). Throws
/// grove::Error(groveUnhandledCudaError) when the device cannot be queried.
unsigned gridBlocks(size_t units, size_t perBlock, int blocksPerSm);

/// Throws grove::Error(groveUnhandledCudaError) naming `what` when the last
/// launch failed.
void throwIfLaunchFailed(const char* what);

}  // namespace grove::kernels::cuda::detail
