// Reduce launchers of fp16 and bf16, computed natively (see reduce_ops.cuh).
#include "kernels/cuda/reduce_kernels.cuh"

namespace grove::kernels::cuda::detail {

void launchReduceFloat16(const ReduceLaunch& l) { launchReduceTyped<__half>(l); }
void launchReduceBfloat16(const ReduceLaunch& l) { launchReduceTyped<__nv_bfloat16>(l); }

}  // namespace grove::kernels::cuda::detail
