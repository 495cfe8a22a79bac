// C entry points of elastic communicators: shrink, revoke and grow
// (core/comm_elastic.cc has how they work).
#include <vector>

#include "capi/handles.h"
#include "core/group.h"
#include "core/options.h"

using grove::capi::apiCall;
namespace core = grove::core;

GROVE_API groveResult_t groveCommShrink(groveComm_t comm, const int* excludeRanks, int excludeCount,
                                        groveComm_t* newcomm, groveConfig_t* config, int flags) {
  return apiCall("groveCommShrink", comm, [&] {
    if (newcomm == nullptr) grove::throwInvalidArgument("newcomm is NULL");
    *newcomm = nullptr;
    if ((flags & ~GROVE_SHRINK_ABORT) != 0)
      grove::throwInvalidArgument("unknown flags " + std::to_string(flags) +
                                  " (GROVE_SHRINK_DEFAULT or GROVE_SHRINK_ABORT)");
    if (excludeCount < 0) grove::throwInvalidArgument("excludeCount is negative");
    if (excludeCount > 0 && excludeRanks == nullptr)
      grove::throwInvalidArgument("excludeRanks is NULL with excludeCount > 0");
    core::Comm& c = grove::capi::usableComm(comm);
    const core::CommOptions opts = core::childOptions(config, c.options(), c.cudaDevice());
    const std::vector<int> excluded(excludeRanks, excludeRanks + excludeCount);
    // Not a ticket of the communicator's sequencer: default mode waits for
    // every queued call itself, abort mode does not wait behind them.
    const core::Comm::Reform reform =
        c.prepareShrink(excluded, /*abortMode=*/(flags & GROVE_SHRINK_ABORT) != 0);
    *newcomm = grove::capi::initComm(reform.rank, reform.nranks, reform.id, opts);
    grove::capi::endInit(*newcomm, opts);
  });
}

GROVE_API groveResult_t groveCommRevoke(groveComm_t comm, int flags) {
  return apiCall("groveCommRevoke", comm, [&] {
    if (flags != GROVE_REVOKE_DEFAULT)
      grove::throwInvalidArgument("unknown flags " + std::to_string(flags) +
                                  " (GROVE_REVOKE_DEFAULT)");
    grove::capi::usableComm(comm).revoke();
  });
}

GROVE_API groveResult_t groveCommGetUniqueId(groveComm_t comm, groveUniqueId* uniqueId) {
  return apiCall("groveCommGetUniqueId", comm, [&] {
    if (uniqueId == nullptr) grove::throwInvalidArgument("uniqueId is NULL");
    grove::capi::usableComm(comm);
    core::encodeUniqueId(core::makeUniqueId(/*ignoreEnv=*/true), uniqueId);
  });
}

GROVE_API groveResult_t groveCommGrow(groveComm_t comm, int nranks, const groveUniqueId* uniqueId,
                                      int rank, groveComm_t* newcomm, groveConfig_t* config) {
  return apiCall("groveCommGrow", comm, [&] {
    if (newcomm == nullptr) grove::throwInvalidArgument("newcomm is NULL");
    *newcomm = nullptr;
    core::UniqueIdData id;
    if (uniqueId != nullptr) id = core::decodeUniqueId(*uniqueId);
    core::Comm::Reform reform;
    core::CommOptions opts;
    if (comm != nullptr) {
      core::Comm& c = grove::capi::usableComm(comm);
      if (rank != -1)
        grove::throwInvalidArgument("rank " + std::to_string(rank) +
                                    ": a rank of comm passes -1 (it keeps its rank)");
      opts = core::childOptions(config, c.options(), c.cudaDevice());
      core::submit(c, nullptr,
                   [&] { reform = c.prepareGrow(nranks, uniqueId != nullptr ? &id : nullptr); });
    } else {
      if (uniqueId == nullptr)
        grove::throwInvalidArgument("a new rank (comm NULL) needs the grow id");
      if (nranks < 1 || rank < 0 || rank >= nranks)
        grove::throwInvalidArgument("rank " + std::to_string(rank) + " out of range [0," +
                                    std::to_string(nranks) + ")");
      opts = core::resolveOptions(config);
      reform = {id, nranks, rank};
    }
    *newcomm = grove::capi::initComm(reform.rank, reform.nranks, reform.id, opts);
    grove::capi::endInit(*newcomm, opts);
  });
}
