// The per-call configured collectives of NCCL 2.32 (ncclAllReduceConfig and
// its seven siblings): the plain call, after the ncclCollConfig_t is checked.
//
// What a config can ask, and what grove does with it:
// - minCTAs, maxCTAs, nvlsCTAs, cgaClusterSize, CTAPolicy tune NCCL's own
//   kernels: grove plans its own channels and ignores them, as it does for
//   the communicator's config;
// - userProfilerTag goes to profiler plugins, which grove does not load;
// - ext is a list of vendor options: grove defines none, so it reads none
//   (NCCL's library ignores every extension too);
// - algSelection: per-call algorithm choice is not grove's; an empty one is
//   automatic, any other is refused while forceAlgSelection is set (its
//   default: "an unsatisfiable selection is an error") and ignored when not;
// - launchCompletionEvent is recorded on the call's stream after the call
//   is enqueued (on a GPU; grove's device launch is one enqueue, so the
//   event completes no earlier than NCCL's would), and refused where there
//   is no CUDA stream to record on (the emulated device).
#include <cstddef>
#include <cstring>

#include "comm_state.h"
#include "grove_build_info.h"

#if GROVE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

using namespace grove::nccl;

namespace {

// Checks a config (NULL: none) before the call runs.
ncclResult_t checkConfig(const char* fn, const ncclCollConfig_t* c) {
  if (c == nullptr) return ncclSuccess;
  if (ncclResult_t r = checkMagic(fn, c->magic, "config", "NCCL_COLLCONFIG_INITIALIZER");
      r != ncclSuccess)
    return r;
  if (c->size < offsetof(ncclCollConfig_t, launchCompletionEvent) + sizeof(cudaEvent_t))
    return refuse(ncclInvalidArgument, fn,
                  "config.size " + std::to_string(c->size) + " is smaller than NCCL 2.32's");
  if (c->algSelection != nullptr && c->algSelection[0] != '\0' && c->forceAlgSelection != 0)
    return refuse(ncclInvalidUsage, fn,
                  std::string("config.algSelection \"") + c->algSelection +
                      "\": grove chooses each call's algorithm itself (GROVE_ALGO sets it per "
                      "collective for the whole job); set forceAlgSelection = 0 to ignore it");
  if (c->launchCompletionEvent != nullptr && (!GROVE_HAVE_CUDA || emulatedDevice()))
    return refuse(ncclInvalidUsage, fn,
                  "config.launchCompletionEvent needs a CUDA stream (not the emulated device)");
  return ncclSuccess;
}

// Runs the plain call, then records the config's event after it.
template <typename Call>
ncclResult_t configured(const char* fn, const ncclCollConfig_t* config, cudaStream_t stream,
                        Call plain) {
  return call(fn, [&] {
    if (ncclResult_t r = checkConfig(fn, config); r != ncclSuccess) return r;
    const ncclResult_t r = plain();
#if GROVE_HAVE_CUDA
    if (r == ncclSuccess && config != nullptr && config->launchCompletionEvent != nullptr)
      if (cudaError_t e = cudaEventRecord(config->launchCompletionEvent, stream); e != cudaSuccess)
        return refuse(
            ncclUnhandledCudaError, fn,
            std::string("cudaEventRecord(launchCompletionEvent): ") + cudaGetErrorString(e));
#else
    (void)stream;
#endif
    return r;
  });
}

}  // namespace

extern "C" {

ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config) {
  return configured("ncclAllReduceConfig", config, stream, [&] {
    return ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
  });
}

ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config) {
  return configured("ncclBroadcastConfig", config, stream, [&] {
    return ncclBroadcast(sendbuff, recvbuff, count, datatype, root, comm, stream);
  });
}

ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t* config) {
  return configured("ncclReduceConfig", config, stream, [&] {
    return ncclReduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
  });
}

ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                 const ncclCollConfig_t* config) {
  return configured("ncclAllGatherConfig", config, stream, [&] {
    return ncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
  });
}

ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream, const ncclCollConfig_t* config) {
  return configured("ncclReduceScatterConfig", config, stream, [&] {
    return ncclReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
  });
}

ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count,
                                ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                const ncclCollConfig_t* config) {
  return configured("ncclAlltoAllConfig", config, stream, [&] {
    return ncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream);
  });
}

ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t* config) {
  return configured("ncclGatherConfig", config, stream, [&] {
    return ncclGather(sendbuff, recvbuff, count, datatype, root, comm, stream);
  });
}

ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream, const ncclCollConfig_t* config) {
  return configured("ncclScatterConfig", config, stream, [&] {
    return ncclScatter(sendbuff, recvbuff, count, datatype, root, comm, stream);
  });
}

}  // extern "C"

GROVE_NCCL_PNAME(AllReduceConfig);
GROVE_NCCL_PNAME(BroadcastConfig);
GROVE_NCCL_PNAME(ReduceConfig);
GROVE_NCCL_PNAME(AllGatherConfig);
GROVE_NCCL_PNAME(ReduceScatterConfig);
GROVE_NCCL_PNAME(AlltoAllConfig);
GROVE_NCCL_PNAME(GatherConfig);
GROVE_NCCL_PNAME(ScatterConfig);
