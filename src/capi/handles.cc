#include "capi/handles.h"

#include <set>

namespace grove::capi {
namespace {

struct Registry {
  std::mutex mu;
  std::set<const groveComm*> comms;
  std::set<const groveHostStream*> streams;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: handles outlive static teardown
  return *r;
}

thread_local std::string tlsLastError;

}  // namespace

groveComm* newCommHandle(int rank, int nranks) {
  auto* h = new groveComm();
  h->rank = rank;
  h->nranks = nranks;
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().comms.insert(h);
  return h;
}

bool knownComm(const groveComm* h) {
  // Handles are never unregistered, so one this thread found stays known:
  // repeated calls on the same communicator skip the registry's lock.
  thread_local const groveComm* lastKnown = nullptr;
  if (h == lastKnown && h != nullptr) return true;
  std::lock_guard<std::mutex> lock(registry().mu);
  if (registry().comms.count(h) == 0) return false;
  lastKnown = h;
  return true;
}

void startInitThread(groveComm* h, std::function<void()> init) {
  std::lock_guard<std::mutex> lock(h->joinMu);
  h->initJoined.store(false);
  h->initThread = std::thread(std::move(init));
}

void joinInitThread(groveComm* h) {
  if (h->initJoined.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(h->joinMu);
  if (h->initThread.joinable()) h->initThread.join();
  h->initJoined.store(true, std::memory_order_release);
}

core::Comm& usableComm(groveComm* h) {
  if (h == nullptr) throwInvalidArgument("comm is NULL");
  if (!knownComm(h)) throwInvalidArgument("comm is not a grove communicator");
  joinInitThread(h);
  switch (h->state.load()) {
    case CommState::kReady: return *h->impl;
    case CommState::kFailed:
      throw Error(h->initError, "communicator failed to initialise: " + h->initErrorText);
    case CommState::kDestroyed:
      throwInvalidUsage("communicator was destroyed or aborted");
    case CommState::kInitializing:
      throwInvalidUsage("communicator is still initialising (its group has not ended)");
  }
  throwInternalError("bad communicator state");
}

void addStream(groveHostStream* s) {
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().streams.insert(s);
}

void removeStream(groveHostStream* s) {
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().streams.erase(s);
}

bool knownStream(const groveHostStream* s) {
  std::lock_guard<std::mutex> lock(registry().mu);
  return registry().streams.count(s) != 0;
}

core::HostStream* hostStreamOf(groveStream_t stream) {
  if (stream == nullptr) return nullptr;
  auto* s = static_cast<groveHostStream*>(stream);
  if (!knownStream(s))
    throwInvalidArgument("stream is neither NULL nor a live groveHostStream_t");
  return &s->impl;
}

void setLastError(groveComm* comm, const std::string& text) {
  tlsLastError = text;
  if (comm != nullptr && knownComm(comm)) {
    std::lock_guard<std::mutex> lock(comm->mu);
    comm->lastError = text;
  }
}

}  // namespace grove::capi

GROVE_API const char* groveGetLastError(groveComm_t comm) {
  using namespace grove::capi;
  if (comm != nullptr && knownComm(comm)) {
    thread_local std::string copy;
    std::lock_guard<std::mutex> lock(comm->mu);
    copy = comm->lastError;
    return copy.c_str();
  }
  return tlsLastError.c_str();
}
