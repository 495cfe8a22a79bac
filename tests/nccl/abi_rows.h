// One row of NCCL's ABI (see abi_fields.inc): its name and its value, and
// whether the value may differ between NCCL versions.
#pragma once

#include <string>
#include <vector>

namespace ncclabi {

struct Row {
  std::string name;
  long long value;
  bool perVersion = false;
};

/// The ABI as the shim's nccl_abi.h defines it (abi_shim.cc).
std::vector<Row> shimRows();

}  // namespace ncclabi
