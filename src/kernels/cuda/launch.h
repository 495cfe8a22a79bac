// Internals of the CUDA kernels' host API (cuda_kernels.h): argument checks,
// the kind of fold a reduce runs, and the per-dtype launchers the dispatch
// table points to. Plain C++; the launchers are defined in the .cu files.
#pragma once

#include <cstddef>

#include "grove/grove.h"
#include "kernels/cuda/cuda_kernels.h"

namespace grove::kernels::cuda::detail {

/// The fold a kernel runs: avg is a sum except on its final step.
enum class ReduceKind { kSum, kProd, kMax, kMin, kAvgFinal };

/// Number of ReduceKind values.
inline constexpr int kNumReduceKinds = 5;

/// The kind for op and final (groveAvg without final is kSum); op must be valid.
ReduceKind reduceKindFor(groveRedOp_t op, bool final);

/// One validated reduce launch: sources, destinations and the fold.
struct ReduceLaunch {
  void* dst;                           ///< first destination
  void* dst2;                          ///< second destination or nullptr
  const void* src[kMaxReduceSources];  ///< sources, nsrc of them
  int nsrc;                            ///< 2..kMaxReduceSources
  size_t count;                        ///< elements, > 0
  ReduceKind kind;                     ///< fold (the final step's kind for avg)
  int nranks;                          ///< divisor of kAvgFinal
  void* stream;                        ///< cudaStream_t
};

/// A per-dtype launcher (defined in reduce_*.cu).
using ReduceLauncher = void (*)(const ReduceLaunch&);

/// The dispatch table: the launcher of dtype, nullptr for an invalid dtype.
ReduceLauncher reduceLauncher(groveDataType_t dtype);

/// Checks a reduce call (dtype, op, source count, pointers, alignment, overlap,
/// nranks); throws grove::Error(groveInvalidArgument) naming the problem.
void checkReduceArgs(groveDataType_t dtype, groveRedOp_t op, const void* dst, const void* dst2,
                     const void* const* srcs, int nsrcs, size_t count, bool final, int nranks);

/// Checks a copy call (null pointers, partial overlap); throws grove::Error.
void checkCopyArgs(const void* dst, const void* src, size_t bytes);

/// Launchers, one per dtype (reduce_ints.cu, reduce_half.cu, reduce_floats.cu).
void launchReduceInt8(const ReduceLaunch& l);
void launchReduceUint8(const ReduceLaunch& l);
void launchReduceInt32(const ReduceLaunch& l);
void launchReduceUint32(const ReduceLaunch& l);
void launchReduceInt64(const ReduceLaunch& l);
void launchReduceUint64(const ReduceLaunch& l);
void launchReduceFloat16(const ReduceLaunch& l);
void launchReduceBfloat16(const ReduceLaunch& l);
void launchReduceFloat32(const ReduceLaunch& l);
void launchReduceFloat64(const ReduceLaunch& l);

/// Launches the copy kernel (copy.cu); arguments already checked, bytes > 0.
void launchCopy(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace grove::kernels::cuda::detail
