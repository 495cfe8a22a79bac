// Public entry of the CPU kernels: argument checks and dispatch by dtype to
// the multiversioned loops of reduce_ints.cc / reduce_floats.cc. See
// reduce_loops.h for how the loops are built and vectorised.
#include "kernels/cpu/reduce.h"

#include <cstring>
#include <string>

#include "base/error.h"
#include "base/fp16.h"
#include "kernels/cpu/reduce_loops.h"

namespace grove::kernels {

void reduce(groveDataType_t dtype, groveRedOp_t op, void* dst, void* dst2, const void* a,
            const void* b, size_t count, bool final, int nranks) {
  if (count == 0) return;
  if (static_cast<unsigned>(op) >= static_cast<unsigned>(groveNumOps)) {
    throwInvalidArgument("kernels::reduce: invalid op " + std::to_string(static_cast<int>(op)));
  }
  if (op == groveAvg && final && nranks < 1) {
    throwInvalidArgument("kernels::reduce: avg needs nranks >= 1, got " + std::to_string(nranks));
  }
  detail::ReduceArgs args{op, final, nranks, dst, dst2, a, b, count};
  switch (dtype) {
    case groveInt8: detail::reduceInt8(args); return;
    case groveUint8: detail::reduceUint8(args); return;
    case groveInt32: detail::reduceInt32(args); return;
    case groveUint32: detail::reduceUint32(args); return;
    case groveInt64: detail::reduceInt64(args); return;
    case groveUint64: detail::reduceUint64(args); return;
    case groveFloat16: detail::reduceFloat16(args); return;
    case groveFloat32: detail::reduceFloat32(args); return;
    case groveFloat64: detail::reduceFloat64(args); return;
    case groveBfloat16: detail::reduceBfloat16(args); return;
    default: break;
  }
  throwInvalidArgument("kernels::reduce: invalid data type " +
                       std::to_string(static_cast<int>(dtype)));
}

void copy(void* dst, const void* src, size_t bytes) {
  if (bytes != 0 && dst != src) std::memcpy(dst, src, bytes);
}

float halfToFloat(uint16_t h) { return fp16::halfBitsToFloat(h); }
uint16_t floatToHalf(float f) { return fp16::floatToHalfBits(f); }
float bf16ToFloat(uint16_t b) { return fp16::bf16BitsToFloat(b); }
uint16_t floatToBf16(float f) { return fp16::floatToBf16Bits(f); }

}  // namespace grove::kernels
