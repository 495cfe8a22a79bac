// One row of NCCL's ABI (see abi_fields.inc): its name and its value.
#pragma once

#include <string>
#include <vector>

namespace ncclabi {

struct Row {
  std::string name;
  long long value;
};

/// The ABI as NCCL's nccl.h defines it (abi_oracle.cc; empty when the
/// build found no nccl.h).
std::vector<Row> oracleRows();
/// The ABI as the shim's nccl_abi.h defines it (abi_shim.cc).
std::vector<Row> shimRows();

}  // namespace ncclabi
