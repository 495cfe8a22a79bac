// NCCL's side of the ABI comparison (see abi_fields.inc): the nccl.h of the
// CUDA toolkit, when the build found one.
#include <cstddef>

#include "nccl/abi_rows.h"

#ifdef GROVE_NCCL_ORACLE
#include <nccl.h>

namespace ncclabi {
std::vector<Row> oracleRows() {
#include "nccl/abi_collect.inc"
}
}  // namespace ncclabi

#else
namespace ncclabi {
std::vector<Row> oracleRows() { return {}; }
}  // namespace ncclabi
#endif
