// PreMulSum (ncclRedOpCreatePreMulSum): each rank's input times a scalar of
// its own, then summed. grove has no such op, so the shim multiplies the
// input into a scratch buffer and sums that with groveSum. The multiply
// runs on the CPU: it serves communicators whose buffers are host memory
// (the emulated device); on a GPU the shim refuses PreMulSum ops at
// creation with a clear error.
#pragma once

#include <cstddef>

#include "nccl_abi.h"

namespace grove::nccl {

/// Bytes of one element of an arithmetic type (0 for fp8 and bad types).
size_t arithmeticBytes(ncclDataType_t type);

/// dst[i] = src[i] * scalar for n elements of type, rounded to the type
/// (integers wrap, halves and bfloat16s round to nearest even).
void scaleInto(void* dst, const void* src, size_t n, ncclDataType_t type, const void* scalar);

}  // namespace grove::nccl
