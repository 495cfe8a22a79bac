// Shared helpers of the GPU tests: CUDA error checks, device buffers, input
// generation per dtype (with special values), and the bit-for-bit
// comparison against the CPU loops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "exec/cuda/cuda_executor.h"
#include "grove/grove.h"

namespace grove::gputest {

/// Throws std::runtime_error naming `what` when err (a cudaError_t) is not success.
void cudaOk(int err, const char* what);

/// A zeroed device allocation, freed on destruction: the executor's own
/// (stream-ordered on a private stream, zeroed before it returns).
using DeviceBuffer = exec::cuda::DeviceBuffer;

/// Guard byte written around every destination before a launch.
inline constexpr unsigned char kGuard = 0xa5;

/// count random elements of dtype t; floats get ~1/32 special values
/// (+-0, +-Inf, quiet and signalling NaN, subnormals, the largest finite).
std::vector<unsigned char> makeInput(groveDataType_t t, size_t count, uint64_t seed);

/// True when element i of got and want agree: same bits, or both NaN where
/// the op is arithmetic (sum, prod, avg: NaN payloads are hardware-defined).
bool sameElement(groveDataType_t t, groveRedOp_t op, const unsigned char* got,
                 const unsigned char* want);

/// Hex bits of one element, for messages.
std::string elementHex(groveDataType_t t, const unsigned char* p);

/// Compares count elements; returns "" or a description of the first mismatches.
std::string compareElements(groveDataType_t t, groveRedOp_t op, const unsigned char* got,
                            const unsigned char* want, size_t count);

/// Checks that the bytes of `buf` outside [from, from + len) all equal kGuard.
std::string checkGuards(const std::vector<unsigned char>& buf, size_t from, size_t len);

}  // namespace grove::gputest
