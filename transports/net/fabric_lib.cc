#include "transports/net/fabric_lib.h"

#include <dlfcn.h>

#include <mutex>

namespace grove::transport::net {

const FabricLib* fabricLib(std::string* why) {
  static FabricLib lib;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = dlerror();
      failure = std::string("cannot load libfabric.so.1: ") + (e != nullptr ? e : "unknown error");
      return;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      if (p == nullptr && failure.empty()) failure = std::string("libfabric.so.1 lacks ") + name;
      return p;
    };
    lib.getinfo = reinterpret_cast<decltype(lib.getinfo)>(sym("fi_getinfo"));
    lib.freeinfo = reinterpret_cast<decltype(lib.freeinfo)>(sym("fi_freeinfo"));
    lib.dupinfo = reinterpret_cast<decltype(lib.dupinfo)>(sym("fi_dupinfo"));
    lib.fabric = reinterpret_cast<decltype(lib.fabric)>(sym("fi_fabric"));
    lib.strerror = reinterpret_cast<decltype(lib.strerror)>(sym("fi_strerror"));
  });
  if (!failure.empty()) {
    if (why != nullptr) *why = failure;
    return nullptr;
  }
  return &lib;
}

std::string fabricError(const char* what, long rc) {
  const FabricLib* lib = fabricLib();
  const long e = rc < 0 ? -rc : rc;
  return std::string(what) + ": " +
         (lib != nullptr ? lib->strerror(static_cast<int>(e)) : "libfabric error") + " (" +
         std::to_string(rc) + ")";
}

}  // namespace grove::transport::net
