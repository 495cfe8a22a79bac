// Internals shared by the NCCL shim's files: results and the last error,
// the communicator handle, per-communicator shim state (PreMulSum ops,
// registrations), and the export of every function under both of NCCL's
// names. The shim is a translation layer over grove's public C API only.
#pragma once

#include <grove/grove.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "nccl_abi.h"

namespace grove::nccl {

/// An ncclComm_t is grove's communicator handle itself: grove checks it
/// (NULL, destroyed, aborted) on every call.
inline groveComm_t toGrove(ncclComm_t comm) { return reinterpret_cast<groveComm_t>(comm); }
inline ncclComm_t toNccl(groveComm_t comm) { return reinterpret_cast<ncclComm_t>(comm); }

/// grove's result codes have NCCL's values.
inline ncclResult_t toNccl(groveResult_t r) { return static_cast<ncclResult_t>(r); }

/// Refuses a call from the shim itself: `fn: why` becomes this thread's
/// last error (ncclGetLastError) and is logged as grove logs a refusal.
ncclResult_t refuse(ncclResult_t code, const char* fn, const std::string& why);
/// Makes `text` the thread's last error (what ncclGetLastError(NULL) shows) without a warning.
void noteLastError(const std::string& text);

/// Refuses a versioned struct (a config, properties) whose magic its
/// initializer did not write: "`what` was not initialised with
/// `initializer` (magic N)". ncclSuccess when the magic is NCCL's.
ncclResult_t checkMagic(const char* fn, unsigned int magic, const char* what,
                        const char* initializer);

/// Runs one API call: clears the shim's last error and turns an exception
/// escaping the body into ncclInternalError, so that none crosses the C
/// boundary.
ncclResult_t call(const char* fn, const std::function<ncclResult_t()>& body);

/// The shim's own last error of this thread ("" when grove's is the one).
const std::string& lastShimError();

/// call() for a call an open group records (collectives, sends and
/// receives, puts, signals and waits, inits and splits; `comm`: its
/// communicator, or null): a refusal of the library's own, or grove's,
/// inside a group fails the whole group at its end, as NCCL's group error
/// does (groveGroupFail does nothing outside a group).
template <typename Fn>
ncclResult_t queued(const char* fn, ncclComm_t comm, Fn&& body) {
  const ncclResult_t r = call(fn, std::forward<Fn>(body));
  if (r == ncclSuccess || r == ncclInProgress) return r;
  const auto code = static_cast<int>(r) < static_cast<int>(groveNumResults)
                        ? static_cast<groveResult_t>(r)
                        : groveInvalidUsage;
  const std::string why = lastShimError().empty() ? groveGetLastError(nullptr) : lastShimError();
  (void)groveGroupFail(toGrove(comm), code, why.c_str());
  return r;
}

/// Sets GROVE_* variables from the NCCL_* names that users set (env.cc).
/// Called when the library loads and again by the calls that make
/// communicators, so that a variable set after load still counts.
void mapNcclEnvironment();

/// The NCCL names the shim translates (env.cc's table, in its order): the
/// parameter API's keys.
std::vector<const char*> ncclNames();

/// One NCCL name's value as the library uses it: the grove variable it maps
/// onto, that variable's value (the environment's, else grove's default),
/// and that value in NCCL's terms.
struct NcclParam {
  std::string value;
  std::string groveName;
  std::string groveValue;
};
/// False for a name outside the table (or a grove value the library refuses).
bool ncclParam(const char* nccl, NcclParam* out);

/// GROVE_DEVICE_EMULATION as the library reads it (a refused value: not
/// emulated; communicator creation then names the bad value).
bool emulatedDevice();

/// Converts an ncclConfig_t (NULL: defaults) into a groveConfig_t for a CUDA
/// communicator; refuses a config that NCCL_CONFIG_INITIALIZER did not make.
ncclResult_t toGroveConfig(const ncclConfig_t* in, groveConfig_t* out, const char* fn);

/// Forgets the shim's state of a communicator (destroy, abort).
void forgetComm(groveComm_t comm);

}  // namespace grove::nccl

/// Exports pnccl<Name> as a second name of nccl<Name> (NCCL's profiling
/// interface), in the file that defines nccl<Name>.
#define GROVE_NCCL_PNAME(name)                                                         \
  extern "C" __attribute__((visibility("default"))) __typeof__(nccl##name) pnccl##name \
      __attribute__((alias("nccl" #name)))
