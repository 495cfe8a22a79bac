// The shim's side of the ABI comparison (see abi_fields.inc).
#include "nccl_abi.h"

#include <cstddef>

#include "nccl/abi_rows.h"

#define ABI_HEADER_VERSION GROVE_NCCL_VERSION_CODE

namespace ncclabi {

std::vector<Row> shimRows() {
#include "nccl/abi_collect.inc"
}

}  // namespace ncclabi
