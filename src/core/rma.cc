// Rma: puts, signals and windows (see rma.h for how it works).
#include "core/rma.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/error.h"
#include "base/idle_backoff.h"
#include "base/log.h"

namespace grove::core {

namespace {

constexpr uint32_t kMagic = 0x524d4131;  // "RMA1"

std::string peerName(int p) { return "rank " + std::to_string(p); }

}  // namespace

Rma::Rma(int rank, int nranks, std::vector<transport::SendHalf*> sends,
         std::vector<transport::RecvHalf*> recvs, const WaitContext& wait,
         transport::OneSided* oneSided, std::vector<bool> oneSidedPeers)
    : rank_(rank),
      nranks_(nranks),
      sends_(std::move(sends)),
      incoming_(static_cast<size_t>(nranks)),
      wait_(wait),
      arrived_(static_cast<size_t>(nranks) * kSignals, 0),
      consumed_(static_cast<size_t>(nranks) * kSignals, 0),
      applied_(static_cast<size_t>(nranks), 0),
      gone_(static_cast<size_t>(nranks)),
      sent_(static_cast<size_t>(nranks)) {
  for (int p = 0; p < nranks; ++p) incoming_[p].half = recvs[p];
  oneSidedPeers_.assign(static_cast<size_t>(nranks), false);
  for (size_t p = 0; p < oneSidedPeers.size() && p < oneSidedPeers_.size(); ++p)
    oneSidedPeers_[p] = oneSided != nullptr && oneSidedPeers[p] && static_cast<int>(p) != rank;
  if (std::find(oneSidedPeers_.begin(), oneSidedPeers_.end(), true) != oneSidedPeers_.end()) {
    if (static_cast<uint64_t>(nranks) * kSignals > transport::OneSided::kMaxSignal + 1ull)
      throwInternalError("one-sided puts: " + std::to_string(nranks) +
                         " ranks do not fit the transport's signal");
    oneSided_ = oneSided;
    signalTarget_ = oneSided_->expose(&signalWord_, sizeof signalWord_);
  }
  thread_ = std::thread([this] { loop(); });
}

Rma::~Rma() {
  stop_.store(true, std::memory_order_release);
  thread_.join();
  if (oneSided_ == nullptr) return;
  try {
    oneSided_->unexpose(signalTarget_);
    oneSided_->release(&signalWord_);
    for (const auto& [id, w] : windows_) {
      oneSided_->unexpose(ownRemote(w));
      oneSided_->release(w.base);
    }
  } catch (...) {
    // The transport may already have lost its peers; nothing to undo then.
  }
}

transport::OneSided::Remote Rma::expose(void* base, uint64_t bytes) {
  if (oneSided_ == nullptr || base == nullptr || bytes == 0) return {};
  return oneSided_->expose(base, bytes);
}

void Rma::unexpose(void* base, const transport::OneSided::Remote& exposed) {
  if (oneSided_ == nullptr || base == nullptr) return;
  std::lock_guard<std::mutex> lock(winMu_);
  oneSided_->unexpose(exposed);
  releaseUnlessExposed(base);
}

transport::OneSided::Remote Rma::ownRemote(const Window& w) const {
  return static_cast<size_t>(rank_) < w.remotes.size() ? w.remotes[rank_]
                                                       : transport::OneSided::Remote{};
}

void Rma::releaseUnlessExposed(const void* base) {
  if (base == &signalWord_) return;
  for (const auto& [id, w] : windows_)
    if (w.base == base) return;
  oneSided_->release(const_cast<void*>(base));
}

int Rma::nextWindow() const {
  std::lock_guard<std::mutex> lock(winMu_);
  return nextWindow_;
}

void Rma::addWindow(void* base, std::vector<uint64_t> sizes,
                    std::vector<transport::OneSided::Remote> remotes,
                    std::vector<transport::OneSided::Remote> signalTargets) {
  std::lock_guard<std::mutex> lock(winMu_);
  if (!signalTargets.empty()) signalTargets_ = std::move(signalTargets);
  windows_[nextWindow_++] =
      Window{static_cast<uint8_t*>(base), std::move(sizes), std::move(remotes)};
}

bool Rma::windowBytes(int id, int rank, uint64_t* bytes) const {
  if (id == kNoWindow && rank >= 0 && rank < nranks_) {  // signals alone
    *bytes = 0;
    return true;
  }
  std::lock_guard<std::mutex> lock(winMu_);
  auto it = windows_.find(id);
  if (it == windows_.end() || rank < 0 || rank >= nranks_) return false;
  *bytes = it->second.sizes[rank];
  return true;
}

void Rma::removeWindow(int id) {
  std::lock_guard<std::mutex> lock(winMu_);
  auto it = windows_.find(id);
  if (it == windows_.end()) return;
  uint8_t* base = it->second.base;
  const transport::OneSided::Remote exposed = ownRemote(it->second);
  windows_.erase(it);
  // Peers no longer write here; and the cache cannot see a free: take the
  // registrations starting here out of it before the memory goes (unless
  // another window starts at the same address).
  if (oneSided_ != nullptr && base != nullptr) {
    oneSided_->unexpose(exposed);
    releaseUnlessExposed(base);
  }
}

std::vector<uint64_t> Rma::sentCounts() const {
  std::vector<uint64_t> out(sent_.size());
  for (size_t p = 0; p < out.size(); ++p) out[p] = sent_[p].load();
  return out;
}

void Rma::checkPeer(int p) const {
  if (wait_.abortFlag != nullptr && wait_.abortFlag->load(std::memory_order_acquire))
    throw Error(groveRemoteError, wait_.abortReason != nullptr && !wait_.abortReason->empty()
                                      ? *wait_.abortReason
                                      : std::string("communicator aborted"));
  if (!gone_[p].empty())
    throw Error(groveRemoteError,
                "one-sided link from " + peerName(p) + " is gone (" + gone_[p] + ")");
}

// Waits on the signal table: `ready` (called under sigMu_) or a failure of
// one of `peers`, the abort flag, or GROVE_TIMEOUT without progress.
template <typename Ready, typename Peers>
static void waitTable(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                      const WaitContext& ctx, const char* what, Ready ready, Peers check) {
  using clock = std::chrono::steady_clock;
  const auto limit = std::chrono::duration<double>(ctx.timeoutSec > 0 ? ctx.timeoutSec : 1e9);
  auto last = clock::now();
  uint64_t progress = 0;
  for (;;) {
    uint64_t seen = 0;
    if (ready(&seen)) return;
    check();
    if (seen != progress) {
      progress = seen;
      last = clock::now();
    } else if (clock::now() - last > limit) {
      throw Error(groveRemoteError, std::string(what) + ": nothing arrived within GROVE_TIMEOUT (" +
                                        std::to_string(ctx.timeoutSec) + " s)");
    }
    cv.wait_for(lock, std::chrono::milliseconds(2));
  }
}

void Rma::drainFrom(const std::vector<uint64_t>& fromEach) {
  std::unique_lock<std::mutex> lock(sigMu_);
  waitTable(
      lock, sigCv_, wait_, "window deregistration waiting for puts in flight",
      [&](uint64_t* seen) {
        bool all = true;
        for (int p = 0; p < nranks_; ++p) {
          *seen += applied_[p];
          all = all && applied_[p] >= fromEach[p];
        }
        return all;
      },
      [&] {
        for (int p = 0; p < nranks_; ++p)
          if (applied_[p] < fromEach[p]) checkPeer(p);
      });
}

void Rma::waitSignals(const std::vector<Wait>& waits) {
  // Several waits on one slot add up.
  std::map<size_t, uint64_t> need;
  for (const Wait& w : waits) need[static_cast<size_t>(w.peer) * kSignals + w.signal] += w.count;
  std::unique_lock<std::mutex> lock(sigMu_);
  waitTable(
      lock, sigCv_, wait_, "groveWaitSignal",
      [&](uint64_t* seen) {
        bool all = true;
        for (const auto& [slot, n] : need) {
          *seen += arrived_[slot];
          all = all && arrived_[slot] - consumed_[slot] >= n;
        }
        return all;
      },
      [&] {
        for (const auto& [slot, n] : need)
          if (arrived_[slot] - consumed_[slot] < n) checkPeer(static_cast<int>(slot / kSignals));
      });
  for (const auto& [slot, n] : need) consumed_[slot] += n;
}

void Rma::put(int peer, int window, uint64_t offset, const void* src, uint64_t bytes, int signal) {
  uint64_t limit = 0;
  if (signal < 0 || signal >= kSignals)
    throwInvalidArgument("signal " + std::to_string(signal) + " out of range");
  if (!windowBytes(window, peer, &limit) || offset > limit || bytes > limit - offset)
    throwInvalidArgument("put of " + std::to_string(bytes) + " bytes at offset " +
                         std::to_string(offset) + " does not fit window " + std::to_string(window) +
                         " of " + peerName(peer));
  if (peer == rank_) {
    {
      std::lock_guard<std::mutex> lock(winMu_);
      if (bytes > 0) std::memmove(windows_.at(window).base + offset, src, bytes);
    }
    land(peer, signal);
    sent_[peer].fetch_add(1);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(sigMu_);
    checkPeer(peer);
  }
  if (oneSidedPeers_[peer]) {
    putOneSided(peer, window, offset, src, bytes, signal);
    return;
  }
  Header h{kMagic, window, offset, bytes, signal, 0};
  Waiter w(wait_, "one-sided put waiting for room on the link");
  writeAll(peer, &h, sizeof h, w);
  writeAll(peer, src, bytes, w);
  while (!sends_[peer]->flush()) w.wait();
  sent_[peer].fetch_add(1);
}

// The transport writes the bytes into the peer's window and delivers the
// signal after them; returns once the source may be reused.
void Rma::putOneSided(int peer, int window, uint64_t offset, const void* src, uint64_t bytes,
                      int signal) {
  transport::OneSided::Remote dst;
  {
    std::lock_guard<std::mutex> lock(winMu_);
    if (window == kNoWindow || bytes == 0) {  // the signal alone
      if (static_cast<size_t>(peer) >= signalTargets_.size())
        throwInternalError("one-sided signal to rank " + std::to_string(peer) +
                           " before any window was registered");
      dst = signalTargets_[peer];
      offset = 0;
      bytes = 0;
    } else {
      const Window& w = windows_.at(window);
      if (static_cast<size_t>(peer) >= w.remotes.size())
        throwInternalError("window " + std::to_string(window) + " has no one-sided descriptor");
      dst = w.remotes[peer];
    }
  }
  const uint32_t code = static_cast<uint32_t>(rank_ * kSignals + signal);
  Waiter w(wait_, "one-sided put waiting for the transport");
  uint64_t op = 0;
  try {
    while ((op = oneSided_->put(src, bytes, dst, offset, code)) == 0) {
      wait_.noteBlockedOn(-1, peer);
      w.wait();
    }
    while (!oneSided_->done(op)) w.wait();
  } catch (const Error& e) {
    if (e.code() == groveRemoteError) markGone(peer, e.what());
    // A failed put too: the caller may free the source now.
    dropSource(src, bytes);
    throw;
  }
  dropSource(src, bytes);
  sent_[peer].fetch_add(1);
  oneSidedPuts_.fetch_add(1);
}

// The transport registered a put's source on its way out; the caller may
// free it once the put returns (done or failed), and a cached registration
// would outlive its pages (a pinning NIC would read the old pages for the
// next buffer at that address): drop it (a source inside an exposed window
// used that one). A write still in flight keeps it until it completes.
void Rma::dropSource(const void* src, uint64_t bytes) noexcept {
  if (bytes == 0) return;
  try {
    std::lock_guard<std::mutex> lock(winMu_);
    releaseUnlessExposed(src);
  } catch (const std::exception& e) {
    GROVE_WARN(log::kP2p, "one-sided put: could not drop its source's registration: %s", e.what());
  }
}

// Signals of one-sided puts into this rank's windows; true if any came.
bool Rma::takeSignals() {
  bool any = false;
  uint32_t code = 0;
  while (oneSided_->takeSignal(&code)) {
    const int peer = static_cast<int>(code / kSignals), slot = static_cast<int>(code % kSignals);
    if (peer < 0 || peer >= nranks_ || !oneSidedPeers_[peer])
      throw Error(groveInternalError, "one-sided signal " + std::to_string(code) +
                                          " names no rank that puts one-sided here");
    land(peer, slot);
    any = true;
  }
  return any;
}

void Rma::writeAll(int peer, const void* data, size_t n, Waiter& w) {
  transport::SendHalf& half = *sends_[peer];
  const auto* from = static_cast<const uint8_t*>(data);
  while (n > 0) {
    void* to = nullptr;
    const size_t room = half.reserve(&to);
    if (room == 0) {
      half.flush();
      wait_.noteBlockedOn(-1, peer);
      w.wait();
      continue;
    }
    const size_t k = std::min(room, n);
    std::memcpy(to, from, k);
    half.commit(k);
    from += k;
    n -= k;
    w.progressed();
  }
}

void Rma::land(int peer, int signal) {
  {
    std::lock_guard<std::mutex> lock(sigMu_);
    ++arrived_[static_cast<size_t>(peer) * kSignals + signal];
    ++applied_[peer];
  }
  sigCv_.notify_all();
}

void Rma::markGone(int peer, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(sigMu_);
    if (!gone_[peer].empty()) return;
    gone_[peer] = why;
  }
  GROVE_INFO(log::kP2p, "rank %d: one-sided link from rank %d closed: %s", rank_, peer,
             why.c_str());
  sigCv_.notify_all();
}

// A header is complete: find where its payload goes. False while its
// window is not registered here yet (the peer may return from the
// collective registration, and put, before this rank has added it).
bool Rma::begin(int peer, Incoming& in) {
  const Header& h = in.header;
  if (h.magic != kMagic)
    throw Error(groveInternalError,
                "garbled one-sided header (magic " + std::to_string(h.magic) + ")");
  if (h.signal < 0 || h.signal >= kSignals)
    throw Error(groveInternalError, "one-sided header with signal " + std::to_string(h.signal));
  in.done = 0;
  if (h.window == kNoWindow && h.bytes == 0) return true;  // a signal alone
  std::lock_guard<std::mutex> lock(winMu_);
  auto it = windows_.find(h.window);
  if (it == windows_.end() && h.window >= nextWindow_) return false;
  const uint64_t size = it == windows_.end() ? 0 : it->second.sizes[rank_];
  if (it == windows_.end() || h.offset > size || h.bytes > size - h.offset)
    throw Error(groveInvalidUsage,
                "a put of " + std::to_string(h.bytes) + " bytes at offset " +
                    std::to_string(h.offset) + " into window " + std::to_string(h.window) +
                    " does not fit this rank's windows (were windows registered in the same "
                    "order on every rank?)");
  in.dst = it->second.base + h.offset;
  return true;
}

// Applies what arrived from `peer`; true if any byte moved.
bool Rma::pump(int peer) {
  Incoming& in = incoming_[peer];
  bool moved = false;
  for (;;) {
    if (in.headerHave == sizeof(Header) && !in.started) {
      if (!begin(peer, in)) return moved;
      in.started = true;
    }
    if (in.started && in.done == in.header.bytes) {  // the put is whole
      in.headerHave = 0;
      in.started = false;
      land(peer, in.header.signal);
      moved = true;
      continue;
    }
    const void* src = nullptr;
    const size_t avail = in.half->peek(&src);
    if (avail == 0) return moved;
    moved = true;
    if (in.headerHave < sizeof(Header)) {
      const size_t k = std::min(avail, sizeof(Header) - in.headerHave);
      std::memcpy(reinterpret_cast<uint8_t*>(&in.header) + in.headerHave, src, k);
      in.headerHave += k;
      in.half->consume(k);
      continue;
    }
    const size_t k = static_cast<size_t>(std::min<uint64_t>(avail, in.header.bytes - in.done));
    std::memcpy(in.dst + in.done, src, k);
    in.done += k;
    in.half->consume(k);
  }
}

void Rma::loop() {
  IdleBackoff backoff(1000);  // naps of up to 1000 us
  while (!stop_.load(std::memory_order_acquire)) {
    bool moved = false;
    if (oneSided_ != nullptr) {
      try {
        moved = takeSignals();
      } catch (const std::exception& e) {
        for (int p = 0; p < nranks_; ++p)
          if (oneSidedPeers_[p]) markGone(p, e.what());
      }
    }
    for (int p = 0; p < nranks_; ++p) {
      if (incoming_[p].half == nullptr) continue;
      try {
        moved = pump(p) || moved;
      } catch (const std::exception& e) {
        markGone(p, e.what());
        incoming_[p].half = nullptr;
      }
    }
    if (moved)
      backoff.progressed();
    else
      backoff.idle();
  }
}

}  // namespace grove::core
