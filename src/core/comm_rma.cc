// Comm's one-sided access: windows, puts with a signal, and waits for
// signals, over the Rma service (core/rma.h), which is made with its links
// and progress thread at the first window registration.
//
// Registration and deregistration are collective and go through the
// bootstrap's all-gather: registration tells every rank every window's size
// (and checks that all ranks register their k-th window together);
// deregistration exchanges how many puts each rank sent to each other, so
// every rank waits for exactly the puts still in flight to it.
#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "core/bootstrap.h"
#include "core/comm.h"
#include "core/connections.h"
#include "core/rma.h"

namespace grove::core {

namespace {

// Every rank's copy of `mine` (POD) from the bootstrap's all-gather.
template <typename T>
std::vector<T> gatherEach(Bootstrap& b, const T& mine, int nranks) {
  const std::vector<uint8_t> all = b.allGather(&mine, sizeof(T));
  if (all.size() != sizeof(T) * static_cast<size_t>(nranks))
    throw Error(groveInternalError, "one-sided exchange: all-gather returned the wrong size");
  std::vector<T> out(static_cast<size_t>(nranks));
  std::memcpy(out.data(), all.data(), all.size());
  return out;
}

}  // namespace

void Comm::checkOneSided(const char* what) const {
  if (isDevice() && !options_.emulateDevice)
    throw Error(groveInvalidUsage,
                std::string(what) +
                    ": one-sided puts and signals are not supported on GPU memory in this "
                    "release (host communicators and the emulated device only); use send/recv");
}

int Comm::windowRegister(void* base, uint64_t bytes) {
  checkOneSided("groveWindowRegister");
  int id = -1;
  runGuarded("groveWindowRegister", [&] {
    if (!rma_) {
      std::vector<transport::SendHalf*> sends(static_cast<size_t>(nranks_), nullptr);
      std::vector<transport::RecvHalf*> recvs(static_cast<size_t>(nranks_), nullptr);
      // Peers whose transport writes one-sided (net) are reached that way,
      // while the signal can name every rank; the others over byte links.
      transport::OneSided* oneSided = nullptr;
      std::vector<bool> direct(static_cast<size_t>(nranks_), false);
      if (static_cast<uint64_t>(nranks_) * Rma::kSignals <= transport::OneSided::kMaxSignal + 1ull)
        for (int p = 0; p < nranks_; ++p) {
          transport::OneSided* os = p == rank_ ? nullptr : connections_->oneSidedTo(p);
          if (os != nullptr && (oneSided == nullptr || os == oneSided)) {
            oneSided = os;
            direct[p] = true;
          }
        }
      if (nranks_ > 1) {
        // One link to and from every other peer on the reserved channel.
        plan::Program links;
        links.algo = "one-sided-links";
        plan::Lane lane;
        for (int p = 0; p < nranks_; ++p) {
          if (p == rank_ || direct[p]) continue;
          plan::Step send;
          send.kind = plan::StepKind::kSend;
          send.sendPeer = p;
          send.channel = kRmaChannel;
          lane.steps.push_back(send);
          plan::Step recv;
          recv.kind = plan::StepKind::kRecv;
          recv.recvPeer = p;
          recv.channel = kRmaChannel;
          lane.steps.push_back(recv);
        }
        links.phases.push_back(plan::Phase{{lane}});
        exec::LinkTable& table = connections_->ensure(links);
        for (int p = 0; p < nranks_; ++p) {
          if (p == rank_ || direct[p]) continue;
          sends[p] = table.sendLink(transport::LinkKey{p, kRmaChannel, 0}).half.get();
          recvs[p] = table.recvLink(transport::LinkKey{p, kRmaChannel, 0}).half.get();
        }
      }
      const int viaOneSided = static_cast<int>(std::count(direct.begin(), direct.end(), true));
      rma_ = std::make_unique<Rma>(rank_, nranks_, std::move(sends), std::move(recvs), wait_,
                                   oneSided, std::move(direct));
      if (viaOneSided > 0)
        GROVE_INFO(log::kP2p, "rank %d puts to %d peer(s) with the transport's one-sided writes",
                   rank_, viaOneSided);
    }
    struct Entry {
      int64_t id;
      uint64_t bytes;
      transport::OneSided::Remote window;  // blank without one-sided peers
      transport::OneSided::Remote signals;
      int64_t exposed;  // 1: the window is exposed (or needs not be)
      int64_t call;     // countWindowCall()'s count, refused calls included
    };
    // Every rank learns whether all could expose, so all fail together
    // instead of waiting for a window that never comes.
    Entry mine{rma_->nextWindow(), bytes, {}, rma_->signalTarget(), 1, windowCalls_.load()};
    std::string exposeError;
    try {
      mine.window = rma_->expose(base, bytes);
    } catch (const std::exception& e) {
      exposeError = e.what();
      mine.exposed = 0;
    }
    // Every way out but success ends the exposure (it holds the transport's
    // registration); an exposure that failed here has nothing to end.
    try {
      const auto all = gatherEach(*bootstrap_, mine, nranks_);
      if (!exposeError.empty())
        throw Error(
            groveSystemError,
            "window registration: exposing the window for one-sided writes failed: " + exposeError);
      for (int r = 0; r < nranks_; ++r)
        if (all[r].call != mine.call)
          throw Error(groveInvalidUsage,
                      "window registration: this is rank " + std::to_string(r) + "'s call " +
                          std::to_string(all[r].call) + " of groveWindowRegister but rank " +
                          std::to_string(rank_) + "'s call " + std::to_string(mine.call) +
                          " (a call refused on one rank was not made on the others: every rank "
                          "must make the same calls)");
      for (int r = 0; r < nranks_; ++r)
        if (all[r].exposed == 0)
          throw Error(groveRemoteError, "window registration: rank " + std::to_string(r) +
                                            " could not expose its window for one-sided writes");
      std::vector<transport::OneSided::Remote> remotes, signalTargets;
      for (int r = 0; r < nranks_; ++r) {
        remotes.push_back(all[r].window);
        signalTargets.push_back(all[r].signals);
      }
      std::vector<uint64_t> sizes;
      for (int r = 0; r < nranks_; ++r) {
        if (all[r].id != all[rank_].id)
          throw Error(groveInvalidUsage,
                      "window registration: rank " + std::to_string(r) + " registers its window " +
                          std::to_string(all[r].id) + " while rank " + std::to_string(rank_) +
                          " registers its window " + std::to_string(all[rank_].id) +
                          " (every rank must register and deregister windows together)");
        sizes.push_back(all[r].bytes);
      }
      id = rma_->nextWindow();
      rma_->addWindow(base, std::move(sizes), std::move(remotes), std::move(signalTargets));
    } catch (...) {
      if (exposeError.empty()) rma_->unexpose(base, mine.window);
      throw;
    }
  });
  return id;
}

void Comm::windowDeregister(int id) {
  uint64_t unused = 0;
  if (!windowBytes(id, rank_, &unused))
    throwInvalidArgument("window " + std::to_string(id) + " is not registered");
  runGuarded("groveWindowDeregister", [&] {
    const auto ids = gatherEach(*bootstrap_, static_cast<int64_t>(id), nranks_);
    for (int r = 0; r < nranks_; ++r)
      if (ids[r] != id)
        throw Error(groveInvalidUsage, "window deregistration: rank " + std::to_string(r) +
                                           " deregisters window " + std::to_string(ids[r]) +
                                           ", this rank window " + std::to_string(id));
    // Row r of the gathered matrix: what rank r sent to each rank.
    const std::vector<uint64_t> sent = rma_->sentCounts();
    const std::vector<uint8_t> all = bootstrap_->allGather(sent.data(), sent.size() * 8);
    std::vector<uint64_t> fromEach(static_cast<size_t>(nranks_));
    for (int r = 0; r < nranks_; ++r)
      std::memcpy(&fromEach[r], all.data() + (static_cast<size_t>(r) * nranks_ + rank_) * 8, 8);
    rma_->drainFrom(fromEach);
    rma_->removeWindow(id);
  });
}

bool Comm::windowBytes(int id, int rank, uint64_t* bytes) const {
  return rma_ && rma_->windowBytes(id, rank, bytes);
}

void Comm::putSignal(int peer, int window, uint64_t offset, const void* src, uint64_t bytes,
                     int signal) {
  checkOneSided("grovePutSignal");
  if (!rma_) throw Error(groveInvalidUsage, "grovePutSignal: no window is registered");
  runGuarded("grovePutSignal", [&] { rma_->put(peer, window, offset, src, bytes, signal); });
}

void Comm::waitSignals(const std::vector<std::array<int, 3>>& waits) {
  checkOneSided("groveWaitSignal");
  if (!rma_) throw Error(groveInvalidUsage, "groveWaitSignal: no window is registered");
  runGuarded("groveWaitSignal", [&] {
    std::vector<Rma::Wait> w;
    for (const auto& [peer, signal, count] : waits)
      w.push_back(Rma::Wait{peer, signal, static_cast<uint64_t>(count)});
    rma_->waitSignals(w);
  });
}

}  // namespace grove::core
