// C entry points for versions, errors, unique ids, communicators and host streams.
#include <memory>

#include "base/log.h"
#include "capi/handles.h"
#include "core/bootstrap.h"
#include "core/group.h"
#include "core/options.h"

using grove::Error;
using grove::capi::apiCall;
using grove::capi::recordingCall;
namespace core = grove::core;

namespace {

// Records in h the Comm made for it, or why none was (`fn` names the call).
void finishInit(groveComm* h, std::unique_ptr<core::Comm> impl, groveResult_t code,
                const std::string& text, const char* fn) {
  std::lock_guard<std::mutex> lock(h->mu);
  if (code == groveSuccess) {
    if (h->placeAtGroupEnd) h->rank = impl->rank(), h->nranks = impl->nranks();
    h->impl = std::move(impl);
    h->state.store(CommState::kReady);
  } else {
    h->initError = code;
    h->initErrorText = text;
    h->lastError = std::string(fn) + ": " + text;
    h->state.store(CommState::kFailed);
  }
}

// Runs make() for h: its Comm, or the error that stopped it (also rethrown
// when `rethrow`, for a group's end to report).
template <typename Make>
void makeFor(groveComm* h, const char* fn, bool rethrow, Make make) {
  try {
    finishInit(h, make(), groveSuccess, "", fn);
  } catch (const Error& e) {
    finishInit(h, nullptr, e.code(), e.what(), fn);
    if (rethrow) throw;
  } catch (const std::exception& e) {
    finishInit(h, nullptr, groveInternalError, e.what(), fn);
    if (rethrow) throw;
  }
}

// A deferred init or split whose group's end could not start it.
[[noreturn]] void refuseCancelled() {
  grove::throwSystemError(
      "the group's end did not start this communicator's creation (a thread could not be started "
      "for it, or a call of the group was refused)",
      EAGAIN);
}

// Creates the Comm behind h (unless `cancelled`); records success or failure in h.
void initHandle(groveComm* h, core::UniqueIdData id, core::CommOptions opts,
                bool cancelled = false) {
  makeFor(h, "groveCommInitRank", false, [&] {
    if (cancelled) refuseCancelled();
    return std::make_unique<core::Comm>(id, h->nranks, h->rank, opts, &h->initCancel);
  });
}

// A split in an open group runs at the group's end, beside the group's
// other inits and splits: one thread may split several ranks of one
// communicator (each rank's split waits for the others'), as with NCCL. The
// new handle learns its rank and size then; a split that fails there fails
// the group's end (and the handle).
groveComm* deferSplit(groveComm* parent, core::Comm& c, int color, int key,
                      const core::CommOptions& opts) {
  groveComm* h = nullptr;
  if (color != GROVE_SPLIT_NOCOLOR) {
    h = grove::capi::newCommHandle(-1, 0);
    h->placeAtGroupEnd = true;
  }
  core::Comm* cp = &c;
  core::groupRecordInit(
      [cp, h, color, key, opts](bool cancelled) {
        auto split = [&] {
          if (cancelled) refuseCancelled();
          std::unique_ptr<core::Comm> child;
          core::submit(*cp, nullptr, [&] { child = cp->split(color, key, opts); });
          return child;
        };
        if (h == nullptr) {
          split();
          return;
        }
        makeFor(h, "groveCommSplit", true, split);
      },
      h, parent);
  return h;
}

groveResult_t initRank(groveComm_t* comm, int nranks, const groveUniqueId& commId, int rank,
                       groveConfig_t* config, const char* fn) {
  return recordingCall(fn, nullptr, [&] {
    if (comm == nullptr) grove::throwInvalidArgument("comm (the output pointer) is NULL");
    *comm = nullptr;
    if (nranks < 1)
      grove::throwInvalidArgument("nranks " + std::to_string(nranks) + " must be >= 1");
    if (rank < 0 || rank >= nranks)
      grove::throwInvalidArgument("rank " + std::to_string(rank) + " out of range [0," +
                                  std::to_string(nranks) + ")");
    core::CommOptions opts = core::resolveOptions(config);
    core::UniqueIdData id = core::decodeUniqueId(commId);
    *comm = grove::capi::initComm(rank, nranks, id, opts);
    grove::capi::endInit(*comm, opts);
  });
}

}  // namespace

groveComm* grove::capi::initComm(int rank, int nranks, const core::UniqueIdData& id,
                                 const core::CommOptions& opts) {
  groveComm* h = grove::capi::newCommHandle(rank, nranks);
  if (core::groupActive()) {
    core::groupRecordInit([h, id, opts](bool cancelled) { initHandle(h, id, opts, cancelled); }, h);
    return h;
  }
  if (!opts.blocking) {
    grove::capi::startInitThread(h, [h, id, opts] { initHandle(h, id, opts); });
    return h;
  }
  initHandle(h, id, opts);
  return h;
}

void grove::capi::endInit(groveComm* h, const core::CommOptions& opts) {
  if (core::groupActive()) return;
  if (!opts.blocking) throw Error(groveInProgress, "initialising");
  if (h->state.load() == CommState::kFailed) throw Error(h->initError, h->initErrorText);
}

GROVE_API groveResult_t groveGetVersion(int* version) {
  return apiCall("groveGetVersion", nullptr, [&] {
    if (version == nullptr) grove::throwInvalidArgument("version is NULL");
    *version = GROVE_VERSION_CODE;
  });
}

GROVE_API const char* groveGetErrorString(groveResult_t result) {
  switch (result) {
    case groveSuccess: return "no error";
    case groveUnhandledCudaError:
      return "unhandled cuda error (run with GROVE_DEBUG=INFO for details)";
    case groveSystemError: return "unhandled system error (run with GROVE_DEBUG=INFO for details)";
    case groveInternalError:
      return "internal error - please report this issue to the grove developers";
    case groveInvalidArgument: return "invalid argument (run with GROVE_DEBUG=WARN for details)";
    case groveInvalidUsage: return "invalid usage (run with GROVE_DEBUG=WARN for details)";
    case groveRemoteError: return "remote process exited or there was a network error";
    case groveInProgress: return "grove operation in progress";
    default: return "unknown result code";
  }
}

GROVE_API groveResult_t groveGetUniqueId(groveUniqueId* uniqueId) {
  return apiCall("groveGetUniqueId", nullptr, [&] {
    if (uniqueId == nullptr) grove::throwInvalidArgument("uniqueId is NULL");
    core::encodeUniqueId(core::makeUniqueId(false), uniqueId);
  });
}

GROVE_API groveResult_t groveCommInitRank(groveComm_t* comm, int nranks, groveUniqueId commId,
                                          int rank) {
  return initRank(comm, nranks, commId, rank, nullptr, "groveCommInitRank");
}

GROVE_API groveResult_t groveCommInitRankConfig(groveComm_t* comm, int nranks, groveUniqueId commId,
                                                int rank, groveConfig_t* config) {
  return initRank(comm, nranks, commId, rank, config, "groveCommInitRankConfig");
}

GROVE_API groveResult_t groveCommInitAll(groveComm_t* comms, int ndev, const int* devlist) {
  return apiCall("groveCommInitAll", nullptr, [&] {
    if (comms == nullptr) grove::throwInvalidArgument("comms is NULL");
    if (ndev < 1) grove::throwInvalidArgument("ndev " + std::to_string(ndev) + " must be >= 1");
    groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
    if (devlist != nullptr) cfg.deviceKind = groveDeviceCuda;
    core::CommOptions opts = core::resolveOptions(devlist != nullptr ? &cfg : nullptr);
    core::UniqueIdData id = core::makeUniqueId(/*ignoreEnv=*/true);
    std::vector<groveComm*> handles;
    std::vector<std::thread> threads;
    for (int r = 0; r < ndev; ++r) handles.push_back(grove::capi::newCommHandle(r, ndev));
    for (int r = 0; r < ndev; ++r) {
      core::CommOptions mine = opts;
      if (devlist != nullptr) mine.device = devlist[r];  // rank r on device devlist[r]
      threads.emplace_back([&, r, mine] { initHandle(handles[r], id, mine); });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < ndev; ++r) {
      if (handles[r]->state.load() != CommState::kFailed) continue;
      std::string why = handles[r]->initErrorText;
      groveResult_t code = handles[r]->initError;
      for (groveComm* h : handles)
        if (h->impl) h->impl->abort("groveCommInitAll failed");
      throw Error(code, "rank " + std::to_string(r) + ": " + why);
    }
    for (int r = 0; r < ndev; ++r) comms[r] = handles[r];
  });
}

// Takes a communicator out of service (waiting for a non-blocking init),
// frees its handle and hands back its Comm; null for a NULL handle. Shared by
// destroy and abort. A communicator that an open group still uses is refused:
// its groveGroupEnd would run on freed memory.
std::shared_ptr<core::Comm> retire(groveComm_t comm, const char* fn, bool cancelInit) {
  if (comm == nullptr) return nullptr;  // like free(NULL)
  grove::capi::checkKnownComm(comm);
  if (core::heldByOpenGroup(comm) ||
      (comm->state.load() == CommState::kReady && core::heldByOpenGroup(comm->impl.get())))
    grove::throwInvalidUsage(std::string(fn) +
                             " inside a group that still holds this "
                             "communicator's operations or init: call groveGroupEnd first");
  // From here this thread owns the handle; a racing destroy gets "destroyed".
  if (!grove::capi::unregisterComm(comm)) grove::capi::checkKnownComm(comm);
  // Abort ends a non-blocking init still under way; destroy lets it finish.
  if (cancelInit)
    comm->initCancel.cancel("rank " + std::to_string(comm->rank) +
                            " called groveCommAbort during init");
  grove::capi::joinInitThread(comm);
  std::shared_ptr<core::Comm> impl = std::move(comm->impl);
  grove::capi::quarantineComm(comm);  // never freed while remembered: no later handle aliases it
  return impl;
}

GROVE_API groveResult_t groveCommDestroy(groveComm_t comm) {
  return apiCall("groveCommDestroy", nullptr, [&] {
    if (std::shared_ptr<core::Comm> impl = retire(comm, "groveCommDestroy", false)) impl->close();
  });
}

GROVE_API groveResult_t groveCommAbort(groveComm_t comm) {
  return apiCall("groveCommAbort", nullptr, [&] {
    // The rank from the Comm, not the handle: a split deferred to a group's
    // end may still be placing the handle on another thread.
    if (std::shared_ptr<core::Comm> impl = retire(comm, "groveCommAbort", true))
      impl->abort("rank " + std::to_string(impl->rank()) + " called groveCommAbort");
  });
}

GROVE_API groveResult_t groveCommSplit(groveComm_t comm, int color, int key, groveComm_t* newcomm,
                                       groveConfig_t* config) {
  return recordingCall("groveCommSplit", comm, [&] {
    if (newcomm == nullptr) grove::throwInvalidArgument("newcomm is NULL");
    *newcomm = nullptr;
    core::Comm& c = grove::capi::usableComm(comm);
    if (color < 0 && color != GROVE_SPLIT_NOCOLOR)
      grove::throwInvalidArgument("color must be >= 0 or GROVE_SPLIT_NOCOLOR");
    core::CommOptions opts = core::childOptions(config, c.options(), c.cudaDevice());
    if (core::groupActive()) {
      *newcomm = deferSplit(comm, c, color, key, opts);
      return;
    }
    std::unique_ptr<core::Comm> child;
    core::submit(c, nullptr, [&] { child = c.split(color, key, opts); });
    if (!child) return;
    groveComm* h = grove::capi::newCommHandle(child->rank(), child->nranks());
    h->impl = std::move(child);
    h->state.store(CommState::kReady);
    *newcomm = h;
  });
}

GROVE_API groveResult_t groveCommCount(const groveComm_t comm, int* count) {
  return apiCall("groveCommCount", comm, [&] {
    if (count == nullptr) grove::throwInvalidArgument("count is NULL");
    *count = grove::capi::placeOf(comm).nranks;  // known before init ends: no wait
  });
}

GROVE_API groveResult_t groveCommUserRank(const groveComm_t comm, int* rank) {
  return apiCall("groveCommUserRank", comm, [&] {
    if (rank == nullptr) grove::throwInvalidArgument("rank is NULL");
    *rank = grove::capi::placeOf(comm).rank;  // known before init ends: no wait
  });
}

GROVE_API groveResult_t groveCommGetHash(const groveComm_t comm, uint64_t* hash) {
  return apiCall("groveCommGetHash", comm, [&] {
    if (hash == nullptr) grove::throwInvalidArgument("hash is NULL");
    *hash = grove::capi::usableComm(comm).hash();
  });
}

GROVE_API groveResult_t groveCommCuDevice(const groveComm_t comm, int* device) {
  return apiCall("groveCommCuDevice", comm, [&] {
    if (device == nullptr) grove::throwInvalidArgument("device is NULL");
    core::Comm& c = grove::capi::usableComm(comm);
    *device = c.cudaDevice();
  });
}

GROVE_API groveResult_t groveCommGetAsyncError(groveComm_t comm, groveResult_t* asyncError) {
  return apiCall("groveCommGetAsyncError", comm, [&] {
    if (asyncError == nullptr) grove::throwInvalidArgument("asyncError is NULL");
    if (comm == nullptr) grove::throwInvalidArgument("comm is NULL");
    grove::capi::checkKnownComm(comm);
    switch (comm->state.load()) {
      case CommState::kInitializing: *asyncError = groveInProgress; return;
      case CommState::kFailed: *asyncError = comm->initError; return;
      case CommState::kReady: {
        // The failure's text goes to groveGetLastError(comm): a rank that
        // made no call since a peer aborted learns which peer, and why.
        std::string text;
        *asyncError = comm->impl->errorState(&text);
        if (*asyncError != groveSuccess) {  // the communicator's text, not the thread's
          std::lock_guard<std::mutex> lock(comm->mu);
          comm->lastError = "groveCommGetAsyncError: " + text;
        }
        return;
      }
    }
  });
}

GROVE_API groveResult_t groveHostStreamCreate(groveHostStream_t* stream) {
  return apiCall("groveHostStreamCreate", nullptr, [&] {
    if (stream == nullptr) grove::throwInvalidArgument("stream is NULL");
    auto* s = new groveHostStream();
    grove::capi::addStream(s);
    *stream = s;
  });
}

namespace {
groveResult_t streamResult(const char* fn, groveHostStream_t stream, bool wait) {
  if (stream == nullptr || !grove::capi::knownStream(stream)) {
    grove::capi::setLastError(nullptr,
                              std::string(fn) + ": stream is not a live groveHostStream_t");
    return groveInvalidArgument;
  }
  std::string text;
  groveResult_t r = wait ? stream->impl.synchronize(&text) : stream->impl.query(&text);
  if (r != groveSuccess && r != groveInProgress)
    grove::capi::setLastError(nullptr, std::string(fn) + ": " + text);
  return r;
}
}  // namespace

GROVE_API groveResult_t groveHostStreamSynchronize(groveHostStream_t stream) {
  return streamResult("groveHostStreamSynchronize", stream, true);
}

GROVE_API groveResult_t groveHostStreamQuery(groveHostStream_t stream) {
  return streamResult("groveHostStreamQuery", stream, false);
}

GROVE_API groveResult_t groveHostStreamDestroy(groveHostStream_t stream) {
  return apiCall("groveHostStreamDestroy", nullptr, [&] {
    if (stream == nullptr || !grove::capi::knownStream(stream))
      grove::throwInvalidArgument("stream is not a live groveHostStream_t");
    if (core::heldByOpenGroup(&stream->impl))
      grove::throwInvalidUsage(
          "groveHostStreamDestroy inside a group that still holds operations "
          "on this stream: call groveGroupEnd first");
    grove::capi::removeStream(stream);
    delete stream;  // drains the queue first
  });
}
