// What each perf binary measures: nccl-tests' size/count conventions and
// bus-bandwidth formulas, one row per collective.
//
// A "size" on the command line is turned into counts exactly as nccl-tests'
// <coll>GetCollByteCount does (e.g. all_gather: size is the total gathered
// bytes, each rank sends size/elemsize/nranks elements). The printed size is
// max(send, recv) bytes and the printed count is the count passed to the call.
#pragma once

#include <cstddef>

#include "grove/grove.h"

namespace grove::perf {

/// The collectives the perf binaries measure.
enum class CollKind {
  kAllReduce,
  kAllGather,
  kBroadcast,
  kReduce,
  kReduceScatter,
  kGather,
  kScatter,
  kAlltoAll,
  kSendRecv
};

/// Element counts of one run (nccl-tests' getCollByteCount).
struct CollCounts {
  size_t sendCount = 0;          ///< elements of each rank's send buffer
  size_t recvCount = 0;          ///< elements of each rank's receive buffer
  size_t paramCount = 0;         ///< the count argument of the call
  size_t sendInplaceOffset = 0;  ///< in place: send = recv + this * rank (elements)
  size_t recvInplaceOffset = 0;  ///< in place: recv = recv + this * rank (elements)
};

/// Counts for `count` = size / elemsize elements over nranks ranks.
CollCounts collCounts(CollKind kind, size_t count, int nranks);

/// One measured setting: element type, op, root and the counts of one size.
struct Setting {
  groveDataType_t type = groveFloat32;
  groveRedOp_t op = groveSum;
  int root = -1;
  CollCounts counts;
  size_t es = 1;  ///< element size in bytes
};

/// The setting for a run of `size` bytes of `type` over nranks ranks.
Setting makeSetting(CollKind kind, int nranks, size_t size, groveDataType_t type, groveRedOp_t op,
                    int root);

/// nccl-tests' algorithm and bus bandwidth in GB/s for paramCount elements of
/// typeSize bytes taking `sec` seconds.
void collBandwidth(CollKind kind, size_t paramCount, size_t typeSize, double sec, int nranks,
                   double* algBw, double* busBw);

/// busBw / algBw: 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
/// reduce-scatter, all-to-all, gather and scatter, 1 otherwise.
double busBwFactor(CollKind kind, int nranks);

/// True for the collectives that take a reduction op.
bool collHasOp(CollKind kind);
/// True for the collectives that take a root.
bool collHasRoot(CollKind kind);
/// True when the in-place variant is measured (not for all-to-all and send/recv).
bool collHasInPlace(CollKind kind);
/// Name used in messages ("AllReduce", ...).
const char* collName(CollKind kind);

}  // namespace grove::perf
