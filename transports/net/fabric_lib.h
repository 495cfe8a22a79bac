// The few libfabric functions that are not inline wrappers, loaded at run
// time: grove builds the network transport wherever libfabric's headers
// are, and a library built so runs on hosts without libfabric (the
// transport then reports itself unavailable). Every other fi_* call is an
// inline call through the objects' operation tables (rdma/fi_*.h).
#pragma once

#include <rdma/fabric.h>

#include <string>

namespace grove::transport::net {

struct FabricLib {
  decltype(&::fi_getinfo) getinfo = nullptr;
  decltype(&::fi_freeinfo) freeinfo = nullptr;
  decltype(&::fi_dupinfo) dupinfo = nullptr;
  decltype(&::fi_fabric) fabric = nullptr;
  decltype(&::fi_strerror) strerror = nullptr;
};

/// libfabric.so.1, loaded once; nullptr (and *why set) when it cannot be.
const FabricLib* fabricLib(std::string* why = nullptr);

/// "what: fi_strerror(-rc) (rc)".
std::string fabricError(const char* what, long rc);

}  // namespace grove::transport::net
