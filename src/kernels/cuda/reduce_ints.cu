// Reduce launchers of the integer types (see reduce_kernels.cuh).
#include "kernels/cuda/reduce_kernels.cuh"

namespace grove::kernels::cuda::detail {

void launchReduceInt8(const ReduceLaunch& l) { launchReduceTyped<int8_t>(l); }
void launchReduceUint8(const ReduceLaunch& l) { launchReduceTyped<uint8_t>(l); }
void launchReduceInt32(const ReduceLaunch& l) { launchReduceTyped<int32_t>(l); }
void launchReduceUint32(const ReduceLaunch& l) { launchReduceTyped<uint32_t>(l); }
void launchReduceInt64(const ReduceLaunch& l) { launchReduceTyped<int64_t>(l); }
void launchReduceUint64(const ReduceLaunch& l) { launchReduceTyped<uint64_t>(l); }

}  // namespace grove::kernels::cuda::detail
