// GROVE_CHECK=calls: the ranks compare every call before they run it.
//
// How it works: before a collective, each rank all-gathers (over the
// bootstrap) a fixed-size record of what it is about to do -- a sequence
// number, the collective, count, data type, op and root. Every rank compares
// every record alike, so all of them fail together with the same message,
// naming the ranks and the difference: another collective, count, type, op
// or root in the same slot. Nothing has moved when the check fails, so no
// rank returns wrong data. The cost is one bootstrap round trip per call
// (tens to hundreds of microseconds): a debugging aid, off by default, like
// PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL. Sends and receives are not
// checked: only their peers take part in them, and the all-gather needs
// every rank.
#pragma once

#include <cstdint>

#include "core/agreement.h"
#include "ir/schedule.h"

namespace grove::core {

/// Checks that every rank calls the same collective as `args` in slot `seq`;
/// throws grove::Error(groveInvalidUsage) naming the difference.
void checkCollectiveCall(const plan::CollArgs& args, uint64_t seq, int nranks,
                         const AllGatherFn& allGather);

}  // namespace grove::core
