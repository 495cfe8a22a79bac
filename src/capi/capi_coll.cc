// C entry points of the collectives, send/recv and groups.
//
// Each entry point checks every argument (comm, buffers, count overflow,
// type, op, root/peer range, stream, overlapping buffers that are not the
// documented in-place form), works out NCCL's in-place convention, and then
// either records the call in the open group or submits it to the
// communicator in issue order.
#include <cstdint>
#include <string>

#include "base/dtype.h"
#include "capi/handles.h"
#include "core/group.h"

using grove::capi::apiCall;
using grove::capi::checkRank;
using grove::capi::recordingCall;
namespace core = grove::core;
namespace plan = grove::plan;

namespace {

// What an entry point needs once its arguments are known to be good.
struct Call {
  groveComm* handle = nullptr;
  core::Comm* comm = nullptr;
  core::HostStream* stream = nullptr;  // host communicators
  void* deviceStream = nullptr;        // CUDA communicators: the cudaStream_t
};

// A CUDA communicator's stream is a cudaStream_t, passed through; a host
// communicator's is NULL or a live groveHostStream_t.
Call begin(groveComm_t comm, groveStream_t stream) {
  Call c;
  c.handle = comm;
  c.comm = &grove::capi::usableComm(comm);
  if (c.comm->isDevice())
    c.deviceStream = stream;
  else
    c.stream = grove::capi::hostStreamOf(stream);
  return c;
}

void checkType(int dtype) {
  if (!grove::dtypeValid(dtype))
    grove::throwInvalidArgument("datatype " + std::to_string(dtype) + " is not a groveDataType_t");
}

void checkOp(int op) {
  if (!grove::opValid(op))
    grove::throwInvalidArgument("op " + std::to_string(op) + " is not a groveRedOp_t");
}

// Bytes of count elements times `blocks`, refusing overflow.
uint64_t checkedBytes(size_t count, groveDataType_t dtype, int blocks) {
  const uint64_t limit = UINT64_C(1) << 60;
  uint64_t elem = grove::dtypeSize(dtype);
  if (count > limit / elem / static_cast<uint64_t>(blocks))
    grove::throwInvalidArgument("count " + std::to_string(count) + " is too large (overflow)");
  return count * elem * static_cast<uint64_t>(blocks);
}

void checkBuffer(const void* p, uint64_t bytes, const char* name) {
  if (p == nullptr && bytes > 0) grove::throwInvalidArgument(std::string(name) + " is NULL");
}

bool overlaps(const void* a, uint64_t aBytes, const void* b, uint64_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}

// In place when `inner` sits exactly at outer + offset; any other overlap is an error.
bool inPlaceAt(const void* outer, uint64_t outerBytes, const void* inner, uint64_t innerBytes,
               uint64_t offset, const char* form) {
  if (inner == static_cast<const char*>(outer) + offset) return true;
  if (overlaps(outer, outerBytes, inner, innerBytes))
    grove::throwInvalidArgument(
        std::string("sendbuff and recvbuff overlap but not in the in-place form (") + form + ")");
  return false;
}

void run(const Call& c, const plan::CollArgs& args, const void* send, void* recv) {
  if (core::groupActive()) {
    core::GroupOp op;
    op.comm = c.comm;
    op.stream = c.stream;
    op.deviceStream = c.deviceStream;
    op.args = args;
    op.sendbuff = send;
    op.recvbuff = recv;
    core::groupRecord(op);
    return;
  }
  core::Comm* comm = c.comm;
  void* ds = c.deviceStream;
  core::submit(*comm, c.stream,
               [comm, args, send, recv, ds] { comm->collective(args, send, recv, ds); });
}

plan::CollArgs argsOf(plan::Coll coll, const Call& c, size_t count, groveDataType_t dtype,
                      groveRedOp_t op, int root) {
  plan::CollArgs a;
  a.coll = coll;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  a.root = root;
  a.rank = c.comm->rank();
  a.nranks = c.comm->nranks();
  return a;
}

}  // namespace

GROVE_API groveResult_t groveAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       groveDataType_t datatype, groveRedOp_t op, groveComm_t comm,
                                       groveStream_t stream) {
  return recordingCall("groveAllReduce", comm, [&] {
    Call c = begin(comm, stream);
    checkType(datatype);
    checkOp(op);
    uint64_t bytes = checkedBytes(count, datatype, 1);
    checkBuffer(sendbuff, bytes, "sendbuff");
    checkBuffer(recvbuff, bytes, "recvbuff");
    if (bytes == 0) return;
    auto a = argsOf(plan::Coll::kAllReduce, c, count, datatype, op, -1);
    a.inPlace = inPlaceAt(recvbuff, bytes, sendbuff, bytes, 0, "sendbuff == recvbuff");
    run(c, a, sendbuff, recvbuff);
  });
}

GROVE_API groveResult_t groveBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                       groveDataType_t datatype, int root, groveComm_t comm,
                                       groveStream_t stream) {
  return recordingCall("groveBroadcast", comm, [&] {
    Call c = begin(comm, stream);
    checkType(datatype);
    checkRank(root, c.comm->nranks(), "root");
    uint64_t bytes = checkedBytes(count, datatype, 1);
    bool isRoot = c.comm->rank() == root;
    if (isRoot) checkBuffer(sendbuff, bytes, "sendbuff (on the root)");
    checkBuffer(recvbuff, bytes, "recvbuff");
    if (bytes == 0) return;
    auto a = argsOf(plan::Coll::kBroadcast, c, count, datatype, groveSum, root);
    a.inPlace = isRoot && inPlaceAt(recvbuff, bytes, sendbuff, bytes, 0, "sendbuff == recvbuff");
    run(c, a, isRoot ? sendbuff : nullptr, recvbuff);
  });
}

GROVE_API groveResult_t groveReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    groveDataType_t datatype, groveRedOp_t op, int root,
                                    groveComm_t comm, groveStream_t stream) {
  return recordingCall("groveReduce", comm, [&] {
    Call c = begin(comm, stream);
    checkType(datatype);
    checkOp(op);
    checkRank(root, c.comm->nranks(), "root");
    uint64_t bytes = checkedBytes(count, datatype, 1);
    bool isRoot = c.comm->rank() == root;
    checkBuffer(sendbuff, bytes, "sendbuff");
    if (isRoot) checkBuffer(recvbuff, bytes, "recvbuff (on the root)");
    if (bytes == 0) return;
    auto a = argsOf(plan::Coll::kReduce, c, count, datatype, op, root);
    a.inPlace = isRoot && inPlaceAt(recvbuff, bytes, sendbuff, bytes, 0, "sendbuff == recvbuff");
    run(c, a, sendbuff, isRoot ? recvbuff : nullptr);
  });
}

GROVE_API groveResult_t groveAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       groveDataType_t datatype, groveComm_t comm,
                                       groveStream_t stream) {
  return recordingCall("groveAllGather", comm, [&] {
    Call c = begin(comm, stream);
    checkType(datatype);
    uint64_t bytes = checkedBytes(sendcount, datatype, 1);
    uint64_t total = checkedBytes(sendcount, datatype, c.comm->nranks());
    checkBuffer(sendbuff, bytes, "sendbuff");
    checkBuffer(recvbuff, total, "recvbuff");
    if (bytes == 0) return;
    auto a = argsOf(plan::Coll::kAllGather, c, sendcount, datatype, groveSum, -1);
    a.inPlace = inPlaceAt(recvbuff, total, sendbuff, bytes, bytes * c.comm->rank(),
                          "sendbuff == recvbuff + rank*sendcount");
    run(c, a, sendbuff, recvbuff);
  });
}

GROVE_API groveResult_t groveReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           groveDataType_t datatype, groveRedOp_t op,
                                           groveComm_t comm, groveStream_t stream) {
  return recordingCall("groveReduceScatter", comm, [&] {
    Call c = begin(comm, stream);
    checkType(datatype);
    checkOp(op);
    uint64_t bytes = checkedBytes(recvcount, datatype, 1);
    uint64_t total = checkedBytes(recvcount, datatype, c.comm->nranks());
    checkBuffer(sendbuff, total, "sendbuff");
    checkBuffer(recvbuff, bytes, "recvbuff");
    if (bytes == 0) return;
    auto a = argsOf(plan::Coll::kReduceScatter, c, recvcount, datatype, op, -1);
    a.inPlace = inPlaceAt(sendbuff, total, recvbuff, bytes, bytes * c.comm->rank(),
                          "recvbuff == sendbuff + rank*recvcount");
    run(c, a, sendbuff, recvbuff);
  });
}

GROVE_API groveResult_t groveGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    groveDataType_t datatype, int root, groveComm_t comm,
                                    groveStream_t stream) {
  return recordingCall("groveGather", comm, [&] {
    Call c = begin(comm, stream);
    checkType(datatype);
    checkRank(root, c.comm->nranks(), "root");
    uint64_t bytes = checkedBytes(sendcount, datatype, 1);
    uint64_t total = checkedBytes(sendcount, datatype, c.comm->nranks());
    bool isRoot = c.comm->rank() == root;
    checkBuffer(sendbuff, bytes, "sendbuff");
    if (isRoot) checkBuffer(recvbuff, total, "recvbuff (on the root)");
    if (bytes == 0) return;
    auto a = argsOf(plan::Coll::kGather, c, sendcount, datatype, groveSum, root);
    a.inPlace = isRoot && inPlaceAt(recvbuff, total, sendbuff, bytes, bytes * root,
                                    "sendbuff == recvbuff + root*sendcount");
    run(c, a, sendbuff, isRoot ? recvbuff : nullptr);
  });
}

GROVE_API groveResult_t groveScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     groveDataType_t datatype, int root, groveComm_t comm,
                                     groveStream_t stream) {
  return recordingCall("groveScatter", comm, [&] {
    Call c = begin(comm, stream);
    checkType(datatype);
    checkRank(root, c.comm->nranks(), "root");
    uint64_t bytes = checkedBytes(recvcount, datatype, 1);
    uint64_t total = checkedBytes(recvcount, datatype, c.comm->nranks());
    bool isRoot = c.comm->rank() == root;
    if (isRoot) checkBuffer(sendbuff, total, "sendbuff (on the root)");
    checkBuffer(recvbuff, bytes, "recvbuff");
    if (bytes == 0) return;
    auto a = argsOf(plan::Coll::kScatter, c, recvcount, datatype, groveSum, root);
    a.inPlace = isRoot && inPlaceAt(sendbuff, total, recvbuff, bytes, bytes * root,
                                    "recvbuff == sendbuff + root*recvcount");
    run(c, a, isRoot ? sendbuff : nullptr, recvbuff);
  });
}

GROVE_API groveResult_t groveAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                      groveDataType_t datatype, groveComm_t comm,
                                      groveStream_t stream) {
  return recordingCall("groveAlltoAll", comm, [&] {
    Call c = begin(comm, stream);
    checkType(datatype);
    uint64_t total = checkedBytes(count, datatype, c.comm->nranks());
    checkBuffer(sendbuff, total, "sendbuff");
    checkBuffer(recvbuff, total, "recvbuff");
    if (total == 0) return;
    auto a = argsOf(plan::Coll::kAlltoAll, c, count, datatype, groveSum, -1);
    a.inPlace = sendbuff == recvbuff;
    if (!a.inPlace && overlaps(sendbuff, total, recvbuff, total))
      grove::throwInvalidArgument(
          "sendbuff and recvbuff of an all-to-all must be the same buffer (in place) or not "
          "overlap");
    run(c, a, sendbuff, recvbuff);
  });
}

namespace {
groveResult_t pointToPoint(const char* fn, bool isSend, const void* buf, size_t count,
                           groveDataType_t datatype, int peer, groveComm_t comm,
                           groveStream_t stream) {
  return recordingCall(fn, comm, [&] {
    Call c = begin(comm, stream);
    checkType(datatype);
    checkRank(peer, c.comm->nranks(), "peer");
    uint64_t bytes = checkedBytes(count, datatype, 1);
    checkBuffer(buf, bytes, isSend ? "sendbuff" : "recvbuff");
    if (bytes == 0) return;
    core::GroupOp op;
    op.comm = c.comm;
    op.stream = c.stream;
    op.deviceStream = c.deviceStream;
    op.isP2P = true;
    op.p2p.isSend = isSend;
    op.p2p.peer = peer;
    op.p2p.buffer = const_cast<void*>(buf);
    op.p2p.bytes = bytes;
    op.p2p.dtype = datatype;
    if (core::groupActive()) {
      core::groupRecord(op);
      return;
    }
    // Alone, a send to self never meets its receive: refused now, before
    // anything is queued (NCCL, too, pairs them only within a group).
    if (peer == c.comm->rank())
      grove::throwInvalidUsage(std::string(isSend ? "a send to self" : "a receive from self") +
                               " needs its match in the same group (groveGroupStart ... "
                               "groveGroupEnd)");
    core::Comm* cm = c.comm;
    void* ds = c.deviceStream;
    core::submit(*cm, c.stream, [cm, p = op.p2p, ds] { cm->pointToPoint({p}, groveUint8, ds); });
  });
}
}  // namespace

GROVE_API groveResult_t groveSend(const void* sendbuff, size_t count, groveDataType_t datatype,
                                  int peer, groveComm_t comm, groveStream_t stream) {
  return pointToPoint("groveSend", true, sendbuff, count, datatype, peer, comm, stream);
}

GROVE_API groveResult_t groveRecv(void* recvbuff, size_t count, groveDataType_t datatype, int peer,
                                  groveComm_t comm, groveStream_t stream) {
  return pointToPoint("groveRecv", false, recvbuff, count, datatype, peer, comm, stream);
}

GROVE_API groveResult_t groveGroupStart(void) {
  return apiCall("groveGroupStart", nullptr, [] { core::groupStart(); });
}

GROVE_API groveResult_t groveGroupFail(groveComm_t comm, groveResult_t result, const char* reason) {
  return apiCall("groveGroupFail", nullptr, [&] {
    if (result <= groveSuccess || result >= groveNumResults || result == groveInProgress)
      grove::throwInvalidArgument("result " + std::to_string(result) + " is not a failure");
    if (reason == nullptr) grove::throwInvalidArgument("reason is NULL");
    // An unknown or destroyed comm (what the library refused) still fails the group.
    core::groupRefused(result, reason, grove::capi::commIfReady(comm));
  });
}

GROVE_API groveResult_t groveGroupEnd(void) {
  const std::vector<const void*> held = core::groupHeld();
  const groveResult_t r = apiCall("groveGroupEnd", nullptr, [] { core::groupEnd(); });
  // groveGetLastError(comm) of every communicator of the group holds the failure too.
  if (r != groveSuccess && r != groveInProgress) grove::capi::setLastErrorOfHeld(held);
  return r;
}
