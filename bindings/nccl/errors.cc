// Version, result texts and the last error. The shim keeps its own last
// error per thread for the refusals it makes itself (an fp8 reduction, an
// unknown PreMulSum op, ...); every other error text is grove's.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "shim.h"

namespace grove::nccl {
namespace {

thread_local std::string shimError;

// GROVE_DEBUG as the library reads it (NCCL_DEBUG maps onto it, env.cc); a
// value it refuses leaves warnings on.
bool warnings() {
  char level[16];
  if (groveGetConfig("GROVE_DEBUG", level, sizeof level, nullptr) != groveSuccess) return true;
  return std::strcmp(level, "NONE") != 0;
}

}  // namespace

const std::string& lastShimError() { return shimError; }

void noteLastError(const std::string& text) { shimError = text; }

ncclResult_t refuse(ncclResult_t code, const char* fn, const std::string& why) {
  shimError = std::string(fn) + ": " + why;
  if (warnings()) std::fprintf(stderr, "grove nccl: WARN %s\n", shimError.c_str());
  return code;
}

ncclResult_t checkMagic(const char* fn, unsigned int magic, const char* what,
                        const char* initializer) {
  if (magic == GROVE_NCCL_CONFIG_MAGIC) return ncclSuccess;
  return refuse(ncclInvalidArgument, fn,
                std::string(what) + " was not initialised with " + initializer + " (magic " +
                    std::to_string(magic) + ")");
}

ncclResult_t call(const char* fn, const std::function<ncclResult_t()>& body) {
  shimError.clear();
  try {
    return body();
  } catch (const std::exception& e) {
    return refuse(ncclInternalError, fn, e.what());
  } catch (...) {
    return refuse(ncclInternalError, fn, "unknown exception");
  }
}

}  // namespace grove::nccl

using namespace grove::nccl;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  return call("ncclGetVersion", [&] {
    if (version == nullptr) return refuse(ncclInvalidArgument, "ncclGetVersion", "version is NULL");
    *version = GROVE_NCCL_VERSION_CODE;
    return ncclSuccess;
  });
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the grove developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "operation timed out";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  if (!shimError.empty()) return shimError.c_str();
  return groveGetLastError(toGrove(comm));
}

// NCCL re-reads NCCL_DEBUG here; grove reads its variables on every use.
void ncclResetDebugInit(void) { mapNcclEnvironment(); }

}  // extern "C"

GROVE_NCCL_PNAME(GetVersion);
GROVE_NCCL_PNAME(GetErrorString);
GROVE_NCCL_PNAME(GetLastError);
GROVE_NCCL_PNAME(ResetDebugInit);
