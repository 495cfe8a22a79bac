#include "perf/common/coll_spec.h"

#include "base/dtype.h"

namespace grove::perf {

Setting makeSetting(CollKind kind, int nranks, size_t size, groveDataType_t type, groveRedOp_t op,
                    int root) {
  Setting s{type, op, root, {}, dtypeSize(type)};
  s.counts = collCounts(kind, size / s.es, nranks);
  return s;
}

CollCounts collCounts(CollKind kind, size_t count, int nranks) {
  const size_t n = nranks > 0 ? static_cast<size_t>(nranks) : 1;
  const size_t perRank = count / n;
  CollCounts c;
  switch (kind) {
    case CollKind::kAllReduce:
    case CollKind::kBroadcast:
    case CollKind::kReduce:
    case CollKind::kSendRecv: c.sendCount = c.recvCount = c.paramCount = count; break;
    case CollKind::kAllGather:
    case CollKind::kGather:
      c.sendCount = perRank;
      c.recvCount = perRank * n;
      c.sendInplaceOffset = perRank;
      c.paramCount = perRank;
      break;
    case CollKind::kReduceScatter:
    case CollKind::kScatter:
      c.sendCount = perRank * n;
      c.recvCount = perRank;
      c.recvInplaceOffset = perRank;
      c.paramCount = perRank;
      break;
    case CollKind::kAlltoAll:
      c.sendCount = c.recvCount = perRank * n;
      c.paramCount = perRank;
      break;
  }
  return c;
}

double busBwFactor(CollKind kind, int nranks) {
  const double n = nranks > 0 ? nranks : 1;
  switch (kind) {
    case CollKind::kAllReduce: return 2.0 * (n - 1) / n;
    case CollKind::kAllGather:
    case CollKind::kReduceScatter:
    case CollKind::kAlltoAll:
    case CollKind::kGather:
    case CollKind::kScatter: return (n - 1) / n;
    case CollKind::kBroadcast:
    case CollKind::kReduce:
    case CollKind::kSendRecv: return 1.0;
  }
  return 1.0;
}

void collBandwidth(CollKind kind, size_t paramCount, size_t typeSize, double sec, int nranks,
                   double* algBw, double* busBw) {
  double bytes = static_cast<double>(paramCount) * static_cast<double>(typeSize);
  switch (kind) {
    case CollKind::kAllGather:
    case CollKind::kReduceScatter:
    case CollKind::kAlltoAll:
    case CollKind::kGather:
    case CollKind::kScatter: bytes *= nranks; break;  // the count is per rank
    default: break;
  }
  *algBw = sec > 0 ? bytes / 1.0e9 / sec : 0.0;
  *busBw = *algBw * busBwFactor(kind, nranks);
}

bool collHasOp(CollKind kind) {
  return kind == CollKind::kAllReduce || kind == CollKind::kReduce ||
         kind == CollKind::kReduceScatter;
}

bool collHasRoot(CollKind kind) {
  return kind == CollKind::kBroadcast || kind == CollKind::kReduce || kind == CollKind::kGather ||
         kind == CollKind::kScatter;
}

bool collHasInPlace(CollKind kind) {
  return kind != CollKind::kAlltoAll && kind != CollKind::kSendRecv;
}

const char* collName(CollKind kind) {
  switch (kind) {
    case CollKind::kAllReduce: return "AllReduce";
    case CollKind::kAllGather: return "AllGather";
    case CollKind::kBroadcast: return "Broadcast";
    case CollKind::kReduce: return "Reduce";
    case CollKind::kReduceScatter: return "ReduceScatter";
    case CollKind::kGather: return "Gather";
    case CollKind::kScatter: return "Scatter";
    case CollKind::kAlltoAll: return "AlltoAll";
    case CollKind::kSendRecv: return "SendRecv";
  }
  return "?";
}

}  // namespace grove::perf
