// Memory: ncclMemAlloc/ncclMemFree and buffer registration.
//
// grove copies through its own registered staging and maps peers' buffers
// per call, so registering a user buffer changes nothing in how a call
// runs: ncclCommRegister (and ncclCommWindowRegister, windows.cc) are
// correct no-op registrations. They check their arguments, hand out a
// handle that the matching deregister must return, and refuse a handle that
// is not registered with that communicator.

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <set>

#include "comm_state.h"

#include "grove_build_info.h"

#if GROVE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace grove::nccl {

bool emulatedDevice() {
  char v[8];
  return groveGetConfig("GROVE_DEVICE_EMULATION", v, sizeof v, nullptr) == groveSuccess &&
         std::strcmp(v, "1") == 0;
}

namespace {

std::mutex hostMutex;
std::set<void*> hostBlocks;  // ncclMemAlloc's host blocks (emulated device)

std::mutex retiredMutex;
std::deque<std::unique_ptr<Registration>> retired;  // oldest first
constexpr size_t kRetiredKept = 4096;

}  // namespace

void retireRegistration(std::unique_ptr<Registration> reg) {
  std::lock_guard<std::mutex> lock(retiredMutex);
  retired.push_back(std::move(reg));
  if (retired.size() > kRetiredKept) retired.pop_front();
}

ncclResult_t registerBuffer(const char* fn, groveComm_t comm, void* buff, size_t size, bool window,
                            Registration** out) {
  if (out == nullptr) return refuse(ncclInvalidArgument, fn, "handle is NULL");
  *out = nullptr;
  int n = 0;
  if (groveResult_t r = groveCommCount(comm, &n); r != groveSuccess) return toNccl(r);
  if (buff == nullptr && size > 0) return refuse(ncclInvalidArgument, fn, "buff is NULL");
  int rank = -1;
  groveCommUserRank(comm, &rank);
  auto reg = std::make_unique<Registration>(Registration{buff, size, comm, rank, window});
  *out = reg.get();
  withState(comm, [&](CommState& s) { s.registrations[*out] = std::move(reg); });
  return ncclSuccess;
}

ncclResult_t deregisterBuffer(const char* fn, groveComm_t comm, bool window, const void* handle) {
  int n = 0;
  if (groveResult_t r = groveCommCount(comm, &n); r != groveSuccess) return toNccl(r);
  std::unique_ptr<Registration> gone;
  withState(comm, [&](CommState& s) {
    auto it = s.registrations.find(handle);
    if (it == s.registrations.end() || it->second->window != window) return;
    gone = std::move(it->second);
    s.registrations.erase(it);
  });
  const bool known = gone != nullptr;
  if (known) retireRegistration(std::move(gone));
  if (!known)
    return refuse(ncclInvalidArgument, fn,
                  std::string(window ? "win is not a window" : "handle is not a registration") +
                      " of this communicator");
  return ncclSuccess;
}

}  // namespace grove::nccl

using namespace grove::nccl;

extern "C" {

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  return call("ncclMemAlloc", [&]() -> ncclResult_t {
    const char* fn = "ncclMemAlloc";
    if (ptr == nullptr) return refuse(ncclInvalidArgument, fn, "ptr is NULL");
    *ptr = nullptr;
    if (size == 0) return refuse(ncclInvalidArgument, fn, "size is 0");
    if (emulatedDevice()) {  // the emulated device's buffers are host memory
      void* p = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096);
      if (p == nullptr) return refuse(ncclSystemError, fn, "out of host memory");
      std::lock_guard<std::mutex> lock(hostMutex);
      hostBlocks.insert(p);
      *ptr = p;
      return ncclSuccess;
    }
#if GROVE_HAVE_CUDA
    if (cudaError_t e = cudaMalloc(ptr, size); e != cudaSuccess)
      return refuse(ncclUnhandledCudaError, fn,
                    std::string("cudaMalloc: ") + cudaGetErrorString(e));
    return ncclSuccess;
#else
    return refuse(ncclInvalidUsage, fn, "this grove build has no CUDA (set GROVE_DEVICE_EMULATION=1 for host memory)");
#endif
  });
}

ncclResult_t ncclMemFree(void* ptr) {
  return call("ncclMemFree", [&]() -> ncclResult_t {
    if (ptr == nullptr) return ncclSuccess;
    {
      std::lock_guard<std::mutex> lock(hostMutex);
      if (hostBlocks.erase(ptr) == 1) {
        std::free(ptr);
        return ncclSuccess;
      }
    }
#if GROVE_HAVE_CUDA
    if (cudaError_t e = cudaFree(ptr); e != cudaSuccess)
      return refuse(ncclUnhandledCudaError, "ncclMemFree",
                    std::string("cudaFree: ") + cudaGetErrorString(e));
    return ncclSuccess;
#else
    return refuse(ncclInvalidArgument, "ncclMemFree", "ptr was not made by ncclMemAlloc");
#endif
  });
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return call("ncclCommRegister", [&] {
    if (handle == nullptr)  // checked first: a registration nobody could deregister is none
      return refuse(ncclInvalidArgument, "ncclCommRegister", "handle is NULL");
    if (ncclResult_t r = takesWork("ncclCommRegister", toGrove(comm)); r != ncclSuccess) return r;
    Registration* reg = nullptr;
    const ncclResult_t r =
        registerBuffer("ncclCommRegister", toGrove(comm), buff, size, false, &reg);
    *handle = reg;
    return r;
  });
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return call("ncclCommDeregister",
              [&] { return deregisterBuffer("ncclCommDeregister", toGrove(comm), false, handle); });
}

}  // extern "C"

GROVE_NCCL_PNAME(MemAlloc);
GROVE_NCCL_PNAME(MemFree);
GROVE_NCCL_PNAME(CommRegister);
GROVE_NCCL_PNAME(CommDeregister);
