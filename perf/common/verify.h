// Data check of the perf binaries: deterministic inputs and exact expected
// results for every collective, op and data type.
//
// How it works: every input element is a small integer chosen from (rank,
// index, op, type) so that every partial result any algorithm can form is an
// integer the type represents exactly (<= 120 in magnitude, or a signed power
// of two for prod), so the reference is exact whatever the order of the
// reduction. Per op:
//   sum  (index*5 + rank*3) mod m, m shrinking with nranks so n*(m-1) <= 120;
//   avg  base(index) + d(rank) with the d's summing to 0, so the sum is
//        n*base(index) and the average is base(index) exactly (also for
//        integer division and for multiplication by 1/n);
//   prod 1, -1 (signed and float types) and at most 6 twos per element;
//   max/min a spread of values, negative ones for signed types.
// Non-reducing collectives use (rank*31 + index*7) mod 97, so a block from the
// wrong rank or offset is caught. Expected buffers follow nccl-tests: the
// whole checked part of the receive buffer is compared, and on ranks where a
// rooted collective leaves recvbuff alone it must be left unchanged.
#pragma once

#include <cstddef>
#include <cstdint>

#include "grove/grove.h"
#include "perf/common/coll_spec.h"

namespace grove::perf {

/// What a data check is about.
struct DataSpec {
  CollKind kind = CollKind::kAllReduce;  ///< the collective
  groveRedOp_t op = groveSum;            ///< its op (ignored when it has none)
  groveDataType_t type = groveFloat32;   ///< element type
  int root = 0;                          ///< its root (ignored when it has none)
  int nranks = 1;                        ///< ranks of the communicator
};

/// The value rank `rank` puts at element `index` of its input.
int64_t inputValue(const DataSpec& spec, int rank, size_t index);

/// The value the reduction over every rank's input gives at `index` (before
/// it is stored in the type: integer types then wrap as the hardware does).
int64_t reducedValue(const DataSpec& spec, size_t index);

/// Sets up one rank's buffers for a checked run, like nccl-tests' InitData:
/// zeroes recv (counts.recvCount elements), writes this rank's input (into
/// send, or into recv at the in-place offset when inPlace), and writes the
/// expected contents of the checked region (see checkedRegion) to expected.
/// send and recv must hold sendCount and recvCount elements; expected
/// recvCount elements.
void prepareData(const DataSpec& spec, int rank, const CollCounts& counts, bool inPlace, void* send,
                 void* recv, void* expected);

/// Byte offset in recv of the region compared with the expected buffer
/// (recvCount elements from there).
size_t checkedRegionOffset(const DataSpec& spec, int rank, const CollCounts& counts, bool inPlace);

/// Bytes of recv, from its start, that prepareData writes: the checked
/// region and, in place, this rank's input (a reduce-scatter's or scatter's
/// input is nranks blocks, longer than the region). A device run copies this
/// much of recv to the device.
size_t preparedRecvBytes(const DataSpec& spec, int rank, const CollCounts& counts, bool inPlace);

/// Number of elements of got that differ (bitwise) from expected.
size_t countWrong(groveDataType_t type, const void* got, const void* expected, size_t count);

}  // namespace grove::perf
