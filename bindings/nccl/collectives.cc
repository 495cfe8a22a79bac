// Collectives, point-to-point, groups and PreMulSum ops: each NCCL call
// becomes the grove call of the same name on the same communicator and
// stream. What the shim adds: fp8 data types move as bytes (and refuse to
// reduce), PreMulSum ops are applied to a scratch copy of the input (see
// premul_sum.h), and a finalized communicator takes no new work.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "comm_state.h"
#include "premul_sum.h"

namespace grove::nccl {
namespace {

thread_local int groupDepth = 0;  // ncclGroupStart calls not yet ended on this thread

// A data type for a call that only moves data: fp8 moves as bytes.
groveDataType_t moveType(ncclDataType_t t) {
  if (t == ncclFloat8e4m3 || t == ncclFloat8e5m2) return groveUint8;
  return static_cast<groveDataType_t>(t);
}

// The grove arguments of a reducing call.
struct Reduction {
  const void* send;
  groveDataType_t type;
  groveRedOp_t op;
};

// Checks type and op; for a PreMulSum op, scales the input (count elements,
// or count per rank for a reduce-scatter's `perRank` input) into a scratch
// buffer that the call reads instead.
ncclResult_t prepare(const char* fn, groveComm_t comm, const void* send, size_t count, bool perRank,
                     ncclDataType_t type, ncclRedOp_t op, Reduction* out) {
  if (ncclResult_t r = takesWork(fn, comm); r != ncclSuccess) return r;
  if (type == ncclFloat8e4m3 || type == ncclFloat8e5m2)
    return refuse(ncclInvalidUsage, fn,
                  "grove does not reduce fp8 data types (ncclFloat8e4m3, ncclFloat8e5m2); they "
                  "can be broadcast, gathered, scattered and sent");
  *out = {send, static_cast<groveDataType_t>(type), static_cast<groveRedOp_t>(op)};
  if (op < ncclNumOps) return ncclSuccess;  // grove checks type, op and buffers itself
  groveResult_t idle = groveSuccess;        // the handle's check, and whether its work is done
  if (groveResult_t r = groveCommGetAsyncError(comm, &idle); r != groveSuccess) return toNccl(r);
  size_t ranks = 1;  // a reduce-scatter's input is count per rank
  if (perRank) {
    int nranks = 0;
    groveCommCount(comm, &nranks);
    ranks = static_cast<size_t>(std::max(nranks, 1));
  }
  return withState(comm, [&](CommState& s) -> ncclResult_t {
    auto it = s.ops.find(op);
    if (it == s.ops.end())
      return refuse(ncclInvalidArgument, fn,
                    "op " + std::to_string(op) +
                        " is neither a built-in op nor a PreMulSum op of this communicator");
    if (groupDepth > 0)
      return refuse(ncclInvalidUsage, fn,
                    "a PreMulSum op inside a group is not supported by grove's NCCL library: it "
                    "scales the input when the call is made, before the group's earlier calls "
                    "have run (make the call outside the group)");
    const PreMulSumOp& p = it->second;
    if (p.type != type)
      return refuse(ncclInvalidArgument, fn,
                    "PreMulSum op " + std::to_string(op) + " was made for data type " +
                        std::to_string(p.type) + ", not " + std::to_string(type));
    // Scratch of earlier calls is done once the communicator is idle (its
    // launches are synchronous, and no group holds a PreMulSum call).
    if (idle == groveSuccess) s.scratch.clear();
    // The scaled copy is count (times nranks) elements: refused where
    // grove would refuse the call's bytes, before the size can wrap.
    constexpr size_t kMostBytes = size_t{1} << 60;
    if (count > kMostBytes / arithmeticBytes(type) / ranks)
      return refuse(ncclInvalidArgument, fn,
                    "count " + std::to_string(count) + " is too large (overflow)");
    const size_t elements = count * ranks;
    const size_t bytes = elements * arithmeticBytes(type);
    auto scratch = std::make_unique<unsigned char[]>(bytes > 0 ? bytes : 1);
    if (send != nullptr && elements > 0)
      scaleInto(scratch.get(), send, elements, type, p.immediate ? p.value : p.where);
    out->send = send != nullptr ? scratch.get() : nullptr;
    out->op = groveSum;
    s.scratch.push_back(std::move(scratch));
    return ncclSuccess;
  });
}

groveStream_t toGrove(cudaStream_t s) { return reinterpret_cast<groveStream_t>(s); }

}  // namespace
}  // namespace grove::nccl

using namespace grove::nccl;

extern "C" {

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  return call("ncclRedOpCreatePreMulSum", [&] {
    const char* fn = "ncclRedOpCreatePreMulSum";
    if (ncclResult_t r = takesWork(fn, toGrove(comm)); r != ncclSuccess) return r;
    if (op == nullptr || scalar == nullptr)
      return refuse(ncclInvalidArgument, fn, "op or scalar is NULL");
    if (arithmeticBytes(datatype) == 0)
      return refuse(ncclInvalidArgument, fn,
                    "data type " + std::to_string(datatype) + " has no PreMulSum");
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
      return refuse(ncclInvalidArgument, fn, "bad residence " + std::to_string(residence));
    int device = -1;
    if (groveResult_t r = groveCommCuDevice(toGrove(comm), &device); r != groveSuccess)
      return toNccl(r);
    if (device >= 0)
      return refuse(ncclInvalidUsage, fn,
                    "PreMulSum ops on GPU memory are not supported by this grove release (use "
                    "ncclSum and scale before or after, or ncclAvg)");
    PreMulSumOp p{datatype, residence == ncclScalarHostImmediate, {}, scalar};
    if (p.immediate) std::memcpy(p.value, scalar, arithmeticBytes(datatype));
    return withState(toGrove(comm), [&](CommState& s) {
      if (s.nextOp == ncclMaxRedOp) return refuse(ncclInvalidUsage, fn, "out of op values");
      *op = static_cast<ncclRedOp_t>(s.nextOp++);
      s.ops[*op] = p;
      return ncclSuccess;
    });
  });
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return call("ncclRedOpDestroy", [&] {
    if (op < ncclNumOps)
      return refuse(ncclInvalidArgument, "ncclRedOpDestroy",
                    "op " + std::to_string(op) + " is built in");
    int n = 0;
    if (groveResult_t r = groveCommCount(toGrove(comm), &n); r != groveSuccess) return toNccl(r);
    const bool known = withState(toGrove(comm), [&](CommState& s) { return s.ops.erase(op) == 1; });
    return known
               ? ncclSuccess
               : refuse(ncclInvalidArgument, "ncclRedOpDestroy",
                        "op " + std::to_string(op) + " is not a PreMulSum op of this communicator");
  });
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return queued("ncclAllReduce", comm, [&] {
    Reduction r;
    if (ncclResult_t e =
            prepare("ncclAllReduce", toGrove(comm), sendbuff, count, false, datatype, op, &r))
      return e;
    return toNccl(
        groveAllReduce(r.send, recvbuff, count, r.type, r.op, toGrove(comm), toGrove(stream)));
  });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return queued("ncclReduce", comm, [&] {
    Reduction r;
    if (ncclResult_t e =
            prepare("ncclReduce", toGrove(comm), sendbuff, count, false, datatype, op, &r))
      return e;
    return toNccl(
        groveReduce(r.send, recvbuff, count, r.type, r.op, root, toGrove(comm), toGrove(stream)));
  });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return queued("ncclReduceScatter", comm, [&] {
    Reduction r;
    if (ncclResult_t e = prepare("ncclReduceScatter", toGrove(comm), sendbuff, recvcount, true,
                                 datatype, op, &r))
      return e;
    return toNccl(groveReduceScatter(r.send, recvbuff, recvcount, r.type, r.op, toGrove(comm),
                                     toGrove(stream)));
  });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return queued("ncclBroadcast", comm, [&] {
    if (ncclResult_t e = takesWork("ncclBroadcast", toGrove(comm))) return e;
    return toNccl(groveBroadcast(sendbuff, recvbuff, count, moveType(datatype), root, toGrove(comm),
                                 toGrove(stream)));
  });
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return queued("ncclAllGather", comm, [&] {
    if (ncclResult_t e = takesWork("ncclAllGather", toGrove(comm))) return e;
    return toNccl(groveAllGather(sendbuff, recvbuff, sendcount, moveType(datatype), toGrove(comm),
                                 toGrove(stream)));
  });
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return queued("ncclAlltoAll", comm, [&] {
    if (ncclResult_t e = takesWork("ncclAlltoAll", toGrove(comm))) return e;
    return toNccl(groveAlltoAll(sendbuff, recvbuff, count, moveType(datatype), toGrove(comm),
                                toGrove(stream)));
  });
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return queued("ncclGather", comm, [&] {
    if (ncclResult_t e = takesWork("ncclGather", toGrove(comm))) return e;
    return toNccl(groveGather(sendbuff, recvbuff, count, moveType(datatype), root, toGrove(comm),
                              toGrove(stream)));
  });
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return queued("ncclScatter", comm, [&] {
    if (ncclResult_t e = takesWork("ncclScatter", toGrove(comm))) return e;
    return toNccl(groveScatter(sendbuff, recvbuff, count, moveType(datatype), root, toGrove(comm),
                               toGrove(stream)));
  });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return queued("ncclSend", comm, [&] {
    if (ncclResult_t e = takesWork("ncclSend", toGrove(comm))) return e;
    return toNccl(
        groveSend(sendbuff, count, moveType(datatype), peer, toGrove(comm), toGrove(stream)));
  });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return queued("ncclRecv", comm, [&] {
    if (ncclResult_t e = takesWork("ncclRecv", toGrove(comm))) return e;
    return toNccl(
        groveRecv(recvbuff, count, moveType(datatype), peer, toGrove(comm), toGrove(stream)));
  });
}

ncclResult_t ncclGroupStart(void) {
  return call("ncclGroupStart", [] {
    const groveResult_t r = groveGroupStart();
    if (r == groveSuccess) ++groupDepth;
    return toNccl(r);
  });
}

ncclResult_t ncclGroupEnd(void) {
  return call("ncclGroupEnd", [] {
    const groveResult_t r = groveGroupEnd();
    // The group ended, well or not: grove closes its group before it
    // reports what went wrong in it.
    if (groupDepth > 0) --groupDepth;
    return toNccl(r);
  });
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  (void)simInfo;
  return refuse(ncclInvalidUsage, "ncclGroupSimulateEnd",
                "not supported by grove's NCCL library (grove-plan predicts a collective's time); "
                "the group stays open: end it with ncclGroupEnd");
}

}  // extern "C"

GROVE_NCCL_PNAME(RedOpCreatePreMulSum);
GROVE_NCCL_PNAME(RedOpDestroy);
GROVE_NCCL_PNAME(AllReduce);
GROVE_NCCL_PNAME(Reduce);
GROVE_NCCL_PNAME(ReduceScatter);
GROVE_NCCL_PNAME(Broadcast);
GROVE_NCCL_PNAME(Bcast);
GROVE_NCCL_PNAME(AllGather);
GROVE_NCCL_PNAME(AlltoAll);
GROVE_NCCL_PNAME(Gather);
GROVE_NCCL_PNAME(Scatter);
GROVE_NCCL_PNAME(Send);
GROVE_NCCL_PNAME(Recv);
GROVE_NCCL_PNAME(GroupStart);
GROVE_NCCL_PNAME(GroupEnd);
GROVE_NCCL_PNAME(GroupSimulateEnd);
