// Internal to exec/cuda: turning a CUDA runtime result into grove::Error.
// Plain C++ (the result is passed as int, a cudaError_t).
#pragma once

namespace grove::exec::cuda::detail {

/// Throws grove::Error(groveUnhandledCudaError, "exec::cuda: <what>: <CUDA
/// error text>") when err is not cudaSuccess; clears the runtime's last error.
void check(int err, const char* what);

}  // namespace grove::exec::cuda::detail
