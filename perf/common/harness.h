// The driver shared by every perf binary: nccl-tests' common.cu for host and
// CUDA device memory.
//
// How it works: perfMain parses the flags, finds this process's ranks
// (LaunchEnv: grove-launch, torchrun variables or mpirun) and runs -t threads,
// each with its own communicator (global rank = process rank * threads +
// thread). For every type x op x root x size it times warm-up calls, then
// -n iterations (-m calls per group), reduces the time across ranks with the
// library itself (-a), and with -c checks one more call against the exact
// expected data of verify.h, summing the wrong elements across ranks. Rank 0
// (thread 0) prints; every process exits non-zero when a value was wrong or a
// call failed, printing groveGetErrorString and groveGetLastError.
//
// Memory (device_memory.h): with CUDA device memory, the rank on thread t of
// the process with local rank L uses device (L * threads + t) % devices, a
// CUDA communicator and one non-blocking stream; inputs are built in host
// staging buffers and copied to the device before timing, results copied back
// for the check; a timed loop enqueues its calls and then synchronizes the
// stream. The small collectives of the driver itself (barrier, time and error
// combination, the device list) pass their host values through a per-rank
// device scratch buffer. With the host emulation the communicators are CUDA
// ones over host buffers, and calls complete before they return.
#pragma once

#include <cstddef>

#include "grove/grove.h"
#include "perf/common/coll_spec.h"

namespace grove::perf {

/// Runs the perf binary of collective `kind`; returns the process exit status.
int perfMain(int argc, char** argv, CollKind kind);

/// Issues one call of `kind` with nccl-tests' argument conventions (count is
/// the per-call count; all-to-all, gather and scatter use per-rank blocks;
/// send/recv sends to rank+1 and receives from rank-1 in one group).
groveResult_t runColl(CollKind kind, const void* send, void* recv, size_t count,
                      groveDataType_t type, groveRedOp_t op, int root, groveComm_t comm,
                      groveStream_t stream);

}  // namespace grove::perf
