// Host API of the CUDA copy/reduce kernels. Plain C++: it includes no CUDA
// header, so host code built without nvcc can call it; a stream is passed as
// `void*` (a cudaStream_t; nullptr is the legacy default stream).
//
// Every call validates its arguments (a bad one throws grove::Error with
// groveInvalidArgument before anything is launched), enqueues one kernel on
// the stream and returns; a failed launch throws grove::Error with
// groveUnhandledCudaError and the CUDA error text. A count of 0 launches
// nothing. Pointers are device (or managed / mapped host) pointers of the
// current device.
//
// Results equal the CPU loops' (kernels/cpu/reduce.h) bit for bit: integer
// sums and products wrap; fp16 and bf16 are computed natively and every
// pairwise op rounds to the type; min/max propagate NaN as the CPU loops do;
// avg is a sum except on the final step, which divides by nranks (in fp32
// for fp16/bf16, integer division for integers).
#pragma once

#include <cstddef>

#include "grove/grove.h"

namespace grove::kernels::cuda {

/// Most sources one multi-source reduce folds (a tree node's fan-in).
inline constexpr int kMaxReduceSources = 8;

/// Enqueues dst[0:bytes) = src[0:bytes) (memcpy semantics, any alignment; 16-byte
/// vectors on the co-aligned body). dst == src is a no-op; other overlaps are refused.
void copyAsync(void* dst, const void* src, size_t bytes, void* stream);

/// Enqueues dst[i] = a[i] op b[i] for i < count, also written to dst2 when it is not
/// null. `final` with groveAvg divides by nranks; otherwise avg acts as sum. Pointers
/// must be aligned to the element size; dst and dst2 may equal a or b exactly.
void reduceCopyAsync(groveDataType_t dtype, groveRedOp_t op, void* dst, void* dst2, const void* a,
                     const void* b, size_t count, bool final, int nranks, void* stream);

/// Enqueues dst[i] = s0[i] op s1[i] op ... op s(n-1)[i], folded left (each step
/// rounds to the type), for 2 <= nsrcs <= kMaxReduceSources; `final` applies to the
/// last step only, exactly as a chain of CPU reduce calls.
void reduceMultiAsync(groveDataType_t dtype, groveRedOp_t op, void* dst, void* dst2,
                      const void* const* srcs, int nsrcs, size_t count, bool final, int nranks,
                      void* stream);

/// Number of CUDA devices visible; 0 when there is none or no driver (never throws).
int deviceCount();

}  // namespace grove::kernels::cuda
