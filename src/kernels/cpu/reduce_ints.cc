// Per-dtype reduce entry points for the integer types, each compiled for
// several instruction sets (GROVE_KERNEL_CLONES); see reduce_loops.h.
#include "kernels/cpu/reduce_loops.h"

namespace grove::kernels::detail {

GROVE_KERNEL_CLONES void reduceInt8(const ReduceArgs& args) {
  reduceTyped<PlainCodec<int8_t>>(args);
}
GROVE_KERNEL_CLONES void reduceUint8(const ReduceArgs& args) {
  reduceTyped<PlainCodec<uint8_t>>(args);
}
GROVE_KERNEL_CLONES void reduceInt32(const ReduceArgs& args) {
  reduceTyped<PlainCodec<int32_t>>(args);
}
GROVE_KERNEL_CLONES void reduceUint32(const ReduceArgs& args) {
  reduceTyped<PlainCodec<uint32_t>>(args);
}
GROVE_KERNEL_CLONES void reduceInt64(const ReduceArgs& args) {
  reduceTyped<PlainCodec<int64_t>>(args);
}
GROVE_KERNEL_CLONES void reduceUint64(const ReduceArgs& args) {
  reduceTyped<PlainCodec<uint64_t>>(args);
}

}  // namespace grove::kernels::detail
