// Small CUDA kernels of the executor's GPU tests (exec_kernels.cu): user
// work enqueued before and after a collective on the same stream. Plain C++
// declarations; streams as void*.
#pragma once

#include <cstddef>
#include <cstdint>

namespace grove::gputest {

/// Enqueues p[i] = base + (i % 97) for i < n, after every block has first
/// waited delayNs on the GPU clock (a slow producer: a collective that does
/// not wait for it reads stale input).
void launchFillSlow(float* p, size_t n, float base, uint64_t delayNs, void* stream);

/// Enqueues dst[i] = src[i] * k for i < n.
void launchScale(float* dst, const float* src, size_t n, float k, void* stream);

/// Loads both kernels now. Under CUDA's lazy loading, the first launch of a
/// kernel may wait for every running kernel; launched behind a collective
/// that waits for a rank this thread has still to launch, it never returns.
void preloadTestKernels();

}  // namespace grove::gputest
