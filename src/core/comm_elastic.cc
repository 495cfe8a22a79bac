// Elastic communicators: shrink, grow and revoke.
//
// How it works. A shrink, a grow or a split does not change a communicator:
// it makes a new one, planned from scratch for its own members (topology,
// rings, trees, routes), through the ordinary init. What differs is how the
// members meet, because a communicator that lost ranks may also have lost
// its bootstrap root (core/bootstrap.h):
//
//   - Shrink. Only the survivors call it, and they must meet without the
//     excluded ranks, without this communicator's root and without a new
//     unique id. So every rank's bootstrap opens a *rescue listener* at init
//     (a listening socket on the address it reaches the root from) and
//     publishes its address with its PeerInfo: every rank knows every
//     other's. The survivors agree without a word on everything else:
//       * the members: every rank not excluded, in the order of their ranks;
//       * the new root: the lowest survivor, on its rescue listener;
//       * the new id: secret and nonce are SipHash values keyed by this
//         communicator's secret and nonce over ("shrink", k, the sorted
//         excluded list), where k counts this communicator's shrinks. Only
//         a member of this communicator can compute them; survivors that
//         passed different lists make different ids and are refused.
//     The lowest survivor starts the root on a copy of its listener; all the
//     survivors then init with that id. Default mode first lets this rank's
//     queued work finish (the communicator must be healthy); abort mode
//     first aborts it here (after a failure, or after a revoke), which is
//     why it never waits for the excluded ranks.
//   - Grow. The old ranks are all alive, so the grow is collective over this
//     communicator: one of them made an id (groveCommGetUniqueId: a unique
//     id whose root runs in its process), the bootstrap all-gather hands it
//     to the others, and every old rank inits the bigger communicator with
//     it, keeping its rank. The new ranks init with the same id directly.
//   - Revoke raises this rank's abort signal (every pending wait ends with
//     its reason), records the error, and asks the root to pass the notice
//     to every other rank, where pending and later calls end alike.
//
// The new communicator opens its own links rather than taking over the
// parent's: after an abort a link's state is unknown, and proving it clean
// costs about what opening it does (docs/architecture.md).
#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "base/siphash.h"
#include "core/bootstrap.h"
#include "core/bootstrap_root.h"
#include "core/comm.h"
#include "core/device_path.h"

namespace grove::core {

namespace {

// The shrunk communicator's id: keyed by the parent's secret and nonce, over
// which shrink of the parent it is and whom it excludes.
UniqueIdData shrinkId(const UniqueIdData& parent, uint64_t shrink,
                      const std::vector<int>& excludedSorted, const sockaddr_storage& root) {
  std::vector<uint64_t> words = {0x6b6e69726873ull /* "shrink" */, shrink, 0};
  for (int r : excludedSorted) words.push_back(static_cast<uint64_t>(r));
  const SipKey key{parent.secret, parent.nonce};
  UniqueIdData id;
  id.root = root;
  words[2] = 1;
  id.secret = sipHash24(key, words.data(), words.size() * sizeof(uint64_t));
  words[2] = 2;
  id.nonce = sipHash24(key, words.data(), words.size() * sizeof(uint64_t));
  id.fromEnv = false;
  return id;
}

}  // namespace

Comm::Reform Comm::prepareShrink(const std::vector<int>& excluded, bool abortMode) {
  std::vector<char> out(static_cast<size_t>(nranks_), 0);
  for (int r : excluded) {
    if (r < 0 || r >= nranks_)
      throwInvalidArgument("excluded rank " + std::to_string(r) + " out of range [0," +
                           std::to_string(nranks_) + ")");
    if (out[r]) throwInvalidArgument("rank " + std::to_string(r) + " is excluded twice");
    out[r] = 1;
  }
  if (out[rank_])
    throwInvalidArgument("rank " + std::to_string(rank_) +
                         " is in its own exclude list (excluded ranks do not call shrink)");
  if (!bootstrap_) throwInvalidUsage("communicator is closed");
  if (abortMode) {
    // This rank's pending work ends now: it may wait on an excluded rank.
    const std::string why = "rank " + std::to_string(rank_) +
                            " shrank the communicator with the abort flag (its pending calls "
                            "were aborted)";
    stopHere(why);
    sequencer_.drainFor(std::min(options_.timeoutSec, 5.0));
  } else {
    std::string text;
    if (errorState(&text) != groveSuccess)  // a raised abort included
      throwInvalidUsage("communicator has failed (" + text + "): shrink it with the abort flag");
    if (const char* pending = drainWork())
      throwRemoteError("shrink: this rank's " + std::string(pending) +
                       " did not finish within the timeout");
  }
  Reform reform;
  int root = -1;
  for (int r = 0; r < nranks_; ++r) {
    if (out[r]) continue;
    if (root < 0) root = r;
    if (r == rank_) reform.rank = reform.nranks;
    ++reform.nranks;
  }
  const sockaddr_storage& rootAddr = bootstrap_->peers()[root].rescue;
  if (!net::addressUsable(rootAddr))
    throwInvalidUsage("rank " + std::to_string(root) + " published no rescue address");
  std::vector<int> sorted = excluded;
  std::sort(sorted.begin(), sorted.end());
  reform.id = shrinkId(id_, ++shrinks_, sorted, rootAddr);
  if (reform.rank == 0) bootstrap_->startRescueRoot(reform.id.secret, reform.id.nonce);
  GROVE_INFO(log::kInit, "rank %d: shrink #%llu to %d ranks (rank %d there), root at %s%s", rank_,
             static_cast<unsigned long long>(shrinks_), reform.nranks, reform.rank,
             net::formatAddress(rootAddr).c_str(), abortMode ? ", abort mode" : "");
  return reform;
}

Comm::Reform Comm::prepareGrow(int nranks, const UniqueIdData* id) {
  if (nranks < nranks_)
    throwInvalidArgument("nranks " + std::to_string(nranks) + " is smaller than the " +
                         std::to_string(nranks_) + " ranks it grows from");
  struct Entry {
    int32_t nranks = 0;
    int32_t hasId = 0;
    groveUniqueId id{};
  };
  Entry mine;
  mine.nranks = nranks;
  mine.hasId = id != nullptr ? 1 : 0;
  if (id != nullptr) encodeUniqueId(*id, &mine.id);
  std::vector<uint8_t> all;
  runGuarded("groveCommGrow", [&] { all = bootstrap_->allGather(&mine, sizeof(mine)); });
  // Every rank sees the same entries, so every rank refuses alike (and the
  // communicator stays as it was).
  Reform reform;
  int from = -1;
  groveUniqueId first{};
  for (int r = 0; r < nranks_; ++r) {
    Entry e;
    std::memcpy(&e, all.data() + r * sizeof(Entry), sizeof(Entry));
    if (e.nranks != nranks)
      throwInvalidUsage("ranks disagree on the grown size: rank " + std::to_string(r) +
                        " asks for " + std::to_string(e.nranks) + ", rank " +
                        std::to_string(rank_) + " for " + std::to_string(nranks));
    if (!e.hasId) continue;
    if (from < 0) {
      from = r;
      first = e.id;
      reform.id = decodeUniqueId(e.id);
    } else if (std::memcmp(&e.id, &first, sizeof(first)) != 0) {
      throwInvalidUsage("ranks " + std::to_string(from) + " and " + std::to_string(r) +
                        " pass different grow ids");
    }
  }
  if (from < 0)
    throwInvalidUsage("no rank passed the grow id (one rank gets it from groveCommGetUniqueId)");
  reform.nranks = nranks;
  reform.rank = rank_;
  return reform;
}

void Comm::revoke() {
  failEverywhere("rank " + std::to_string(rank_) + " revoked the communicator");
}

void Comm::failEverywhere(const std::string& why) {
  if (bootstrap_) bootstrap_->abort(why);
  stopHere(why);
}

void Comm::stopHere(const std::string& why) {
  abort_.raise(why);
  {
    std::lock_guard<std::mutex> lock(errorMu_);
    if (error_ == groveSuccess) {
      errorText_ = why;
      error_ = groveRemoteError;
    }
  }
  if (device_) device_->abort();
}

}  // namespace grove::core
