// Host wrappers of the GPU tests' persistent-style kernels: one block per
// slice ("channel") calling the device-side copySlice / reduceSlice of
// src/kernels/cuda/device_kernels.cuh with the block's own threads.
#pragma once

#include <cstddef>

namespace grove::gputest {

/// dst = s0 + s1 + s2 (float, left fold) over count elements, split into `blocks`
/// slices of ceil(count / blocks) elements, one block each; synchronises.
void sliceSumFloat(float* dst, const float* const* srcs, size_t count, int blocks);

/// dst = avg of 4 sources (fp16 bits: three rounded sums, then (acc + s3) / 4 in
/// float), one block per slice; synchronises.
void sliceAvgHalf(void* dst, const void* const* srcs, size_t count, int blocks);

/// Byte copy, one block per slice of ceil(bytes / blocks) bytes; synchronises.
void sliceCopy(void* dst, const void* src, size_t bytes, int blocks);

}  // namespace grove::gputest
