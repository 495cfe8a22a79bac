#include "capi/handles.h"

#include <atomic>
#include <deque>
#include <set>
#include <unordered_set>

namespace grove::capi {
namespace {

struct Registry {
  std::mutex mu;
  std::unordered_set<const groveComm*> comms;
  std::unordered_set<const groveComm*> destroyed;  ///< retired lately (kMaxDestroyed at most)
  std::deque<groveComm*> quarantine;               ///< retired shells still allocated, oldest first
  std::set<const groveHostStream*> streams;
};

constexpr size_t kMaxDestroyed = 1024;

// Bumped whenever a handle is unregistered: a thread's cached "known" answer
// is good only while the epoch it saw is current.
std::atomic<uint64_t> registryEpoch{0};

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
  // Repeated calls on the same communicator skip the registry's lock while
  // no handle was unregistered since this thread last looked.
  thread_local const groveComm* lastKnown = nullptr;
  thread_local uint64_t lastEpoch = 0;
  uint64_t epoch = registryEpoch.load(std::memory_order_acquire);
  if (h == lastKnown && h != nullptr && epoch == lastEpoch) return true;
  std::lock_guard<std::mutex> lock(registry().mu);
  if (registry().comms.count(h) == 0) return false;
  lastKnown = h;
  lastEpoch = epoch;
  return true;
}

void checkKnownComm(const groveComm* h) {
  if (knownComm(h)) return;
  std::lock_guard<std::mutex> lock(registry().mu);
  if (registry().destroyed.count(h) != 0)
    throwInvalidUsage("communicator was destroyed or aborted");
  throwInvalidArgument("comm is not a grove communicator");
}

bool unregisterComm(const groveComm* h) {
  std::lock_guard<std::mutex> lock(registry().mu);
  if (registry().comms.erase(h) == 0) return false;
  registryEpoch.fetch_add(1, std::memory_order_acq_rel);
  registry().destroyed.insert(h);
  return true;
}

void quarantineComm(groveComm* h) {
  h->lastError.clear();
  h->lastError.shrink_to_fit();
  h->initErrorText.clear();
  h->initErrorText.shrink_to_fit();
  groveComm* oldest = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    Registry& r = registry();
    r.quarantine.push_back(h);
    if (r.quarantine.size() > kMaxDestroyed) {
      oldest = r.quarantine.front();
      r.quarantine.pop_front();
      r.destroyed.erase(oldest);
    }
  }
  delete oldest;  // its address may now be reused: it is no longer remembered
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
  handleOf(h);
  joinInitThread(h);
  switch (h->state.load()) {
    case CommState::kReady: return *h->impl;
    case CommState::kFailed:
      throw Error(h->initError, "communicator failed to initialise: " + h->initErrorText);
    case CommState::kInitializing:
      throwInvalidUsage("communicator is still initialising (its group has not ended)");
  }
  throwInternalError("bad communicator state");
}

groveComm& handleOf(groveComm* h) {
  if (h == nullptr) throwInvalidArgument("comm is NULL");
  checkKnownComm(h);
  if (h->state.load() == CommState::kFailed)
    throw Error(h->initError, "communicator failed to initialise: " + h->initErrorText);
  return *h;
}

groveComm& placeOf(groveComm* h) {
  groveComm& c = handleOf(h);
  if (c.placeAtGroupEnd && c.state.load() != CommState::kReady)
    throwInvalidUsage(
        "a communicator split in a group has its rank and size once the group ends "
        "(groveGroupEnd)");
  return c;
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
  if (!knownStream(s)) throwInvalidArgument("stream is neither NULL nor a live groveHostStream_t");
  return &s->impl;
}

void setLastError(groveComm* comm, const std::string& text) {
  tlsLastError = text;
  if (comm != nullptr && knownComm(comm)) {
    std::lock_guard<std::mutex> lock(comm->mu);
    comm->lastError = text;
  }
}

void setLastErrorOfHeld(const std::vector<const void*>& held) {
  if (held.empty()) return;
  const std::unordered_set<const void*> set(held.begin(), held.end());
  std::lock_guard<std::mutex> lock(registry().mu);
  for (const groveComm* c : registry().comms) {
    auto* h = const_cast<groveComm*>(c);
    std::lock_guard<std::mutex> commLock(h->mu);  // impl is set under it
    if (set.count(h) == 0 && set.count(h->impl.get()) == 0) continue;
    h->lastError = tlsLastError;
  }
}

core::Comm* commIfReady(groveComm* h) {
  if (h == nullptr || !knownComm(h)) return nullptr;
  std::lock_guard<std::mutex> lock(h->mu);  // impl is set under it
  return h->state.load() == CommState::kReady ? h->impl.get() : nullptr;
}

const std::string& threadLastError() { return tlsLastError; }

void checkRank(int value, int nranks, const char* what) {
  if (value < 0 || value >= nranks)
    throwInvalidArgument(std::string(what) + " " + std::to_string(value) + " out of range [0," +
                         std::to_string(nranks) + ")");
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
