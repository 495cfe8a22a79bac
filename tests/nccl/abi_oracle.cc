// NCCL's side of the ABI comparison (see abi_fields.inc): built once per
// NCCL header at hand (nccl.cmake), it prints the header's version code,
// then one row a line, "name<TAB>value<TAB>perVersion", for
// nccl_shim_test.cc to compare with the shim's rows.
#include <nccl.h>
#if NCCL_VERSION_CODE >= 23000
#include <nccl_device.h>  // ncclCommProperties_t (the host side of the device API)
#endif

#include <cstddef>
#include <cstdio>

#include "nccl/abi_rows.h"

#define ABI_HEADER_VERSION NCCL_VERSION_CODE

namespace {
std::vector<ncclabi::Row> oracleRows() {
  using ncclabi::Row;
#include "nccl/abi_collect.inc"
}
}  // namespace

int main() {
  std::printf("version\t%d\t0\n", NCCL_VERSION_CODE);
  for (const ncclabi::Row& r : oracleRows())
    std::printf("%s\t%lld\t%d\n", r.name.c_str(), r.value, r.perVersion ? 1 : 0);
  return 0;
}
