// CPU element-wise kernels: copy and reduce for every data type and op.
//
// fp16 and bf16 are computed in fp32 and rounded once per operation (round to
// nearest even). Integer sums and products wrap (two's complement), as on
// GPUs. Loops are written so the compiler vectorises them, and are built for
// several instruction sets (the best one is picked at run time).
#pragma once

#include <cstddef>
#include <cstdint>

#include "grove/grove.h"

namespace grove::kernels {

/// dst[i] = a[i] op b[i] for i < count; also written to dst2[i] when dst2 is
/// not null. When `final` is set and op is groveAvg, the result is divided
/// by nranks (integer division for integer types); otherwise avg acts as sum.
/// dst may alias a or b exactly (element-wise in place); nothing else may overlap.
void reduce(groveDataType_t dtype, groveRedOp_t op, void* dst, void* dst2, const void* a,
            const void* b, size_t count, bool final, int nranks);

/// Copies bytes (memcpy; large copies may use streaming stores).
void copy(void* dst, const void* src, size_t bytes);

/// Float <-> half / bfloat16 conversions (round to nearest even), exposed for tests and tools.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);

}  // namespace grove::kernels
