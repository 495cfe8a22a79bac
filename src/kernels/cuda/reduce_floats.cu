// Reduce launchers of fp32 and fp64 (see reduce_kernels.cuh).
#include "kernels/cuda/reduce_kernels.cuh"

namespace grove::kernels::cuda::detail {

void launchReduceFloat32(const ReduceLaunch& l) { launchReduceTyped<float>(l); }
void launchReduceFloat64(const ReduceLaunch& l) { launchReduceTyped<double>(l); }

}  // namespace grove::kernels::cuda::detail
