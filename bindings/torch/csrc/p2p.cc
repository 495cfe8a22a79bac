// p2p.cc - the point-to-point engine (p2p.h says how it works).
#include "p2p.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace grove::pytorch {

namespace {

// A direction may idle for hours between messages: its grove timeout is
// long, and torch's op timeout (Work::wait) bounds each operation instead.
constexpr int kLinkTimeoutMs = 1000 * 1000 * 1000;  // grove's limit: 10^6 s
constexpr auto kStorePoll = std::chrono::milliseconds(10);

// What goes ahead of every message on a direction.
struct Header {
  int64_t tag;
  uint64_t bytes;
};

size_t bytesOf(const Staged& s) {
  return static_cast<size_t>(s.buf.numel()) * s.buf.element_size();
}

std::exception_ptr errorOf(const std::string& what) {
  return std::make_exception_ptr(std::runtime_error("grove: " + what));
}

}  // namespace

// One end of a direction a -> b: the sender's (outgoing) or the receiver's.
struct Direction {
  int peer = -1;
  bool outgoing = false;
  groveComm_t comm = nullptr;  ///< made on first use; under State::mu
  bool busy = false;           ///< the thread is inside a grove call
  std::string broken;          ///< why this direction cannot be used any more
  std::thread thread;
  struct Send {
    c10::intrusive_ptr<GroveWork> work;
    Staged data;
    int tag;
  };
  std::deque<Send> sends;  ///< outgoing: queued, in posting order
};

// Works to fail, and why: completed outside State::mu, because completing a
// Work runs its future's callbacks, which may post more work.
using Failed = std::vector<std::pair<c10::intrusive_ptr<GroveWork>, std::string>>;

static void failAll(Failed& failed) {
  for (auto& [work, why] : failed) work->complete(errorOf(why));
  failed.clear();
}

struct P2P::State {
  c10::intrusive_ptr<::c10d::Store> store;
  int rank = 0, size = 1;
  std::chrono::milliseconds grace{0};

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::string abortWhy;  ///< set by abort()
  std::map<int, std::unique_ptr<Direction>> out, in;
  struct Recv {
    c10::intrusive_ptr<GroveWork> work;
    Staged data;
    int src;  ///< -1: any source
    int tag;
  };
  std::deque<Recv> recvs;  ///< posted, not matched, in posting order
  struct Unexpected {
    int src;
    int64_t tag;
    at::Tensor bytes;
  };
  std::deque<Unexpected> unexpected;  ///< arrived before a receive wanted them

  // --- under mu
  bool wanted(int peer) const {
    for (const Recv& r : recvs)
      if (r.src == peer || r.src == -1) return true;
    return false;
  }
  bool takeRecv(int peer, int64_t tag, Recv* out) {
    for (auto it = recvs.begin(); it != recvs.end(); ++it)
      if ((it->src == peer || it->src == -1) && it->tag == tag) {
        *out = std::move(*it);
        recvs.erase(it);
        return true;
      }
    return false;
  }
  // Takes the receives posted for onlyFrom (-1: all) into *failed, to be
  // failed with `why` once mu is released (completing runs callbacks).
  void failRecvs(int onlyFrom, const std::string& why, Failed* failed) {
    for (auto it = recvs.begin(); it != recvs.end();) {
      if (onlyFrom >= 0 && it->src != onlyFrom) {
        ++it;
        continue;
      }
      failed->push_back({std::move(it->work), why});
      it = recvs.erase(it);
    }
  }

  // Makes d's two-rank communicator with the peer, meeting through the store.
  // false: a receiving end that nobody wants any more (or stopping).
  bool link(Direction& d) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (d.comm != nullptr) return true;
    }
    const int from = d.outgoing ? rank : d.peer, to = d.outgoing ? d.peer : rank;
    const std::string key = "grove/p2p/" + std::to_string(from) + "->" + std::to_string(to);
    groveUniqueId id;
    if (d.outgoing) {
      groveResult_t r = groveGetUniqueId(&id);
      if (r != groveSuccess)
        throw groveFailure("making the unique id of the link to rank " + std::to_string(to),
                           nullptr, r);
      const auto* b = reinterpret_cast<const uint8_t*>(id.internal);
      store->set(key, std::vector<uint8_t>(b, b + GROVE_UNIQUE_ID_BYTES));
    } else {
      while (!store->check({key})) {
        std::unique_lock<std::mutex> lock(mu);
        if (stopping || !abortWhy.empty() || !wanted(d.peer)) return false;
        cv.wait_for(lock, kStorePoll);
      }
      std::vector<uint8_t> b = store->get(key);
      if (b.size() != GROVE_UNIQUE_ID_BYTES)
        throw std::runtime_error("grove: bad link id under " + key);
      std::memcpy(id.internal, b.data(), GROVE_UNIQUE_ID_BYTES);
    }
    groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
    cfg.blocking = 0;  // abortable while the peer has not come yet
    cfg.timeoutMs = kLinkTimeoutMs;
    cfg.commName = "torch-p2p";
    groveComm_t c = nullptr;
    groveResult_t r = groveCommInitRankConfig(&c, 2, id, d.outgoing ? 0 : 1, &cfg);
    {
      std::lock_guard<std::mutex> lock(mu);
      d.comm = c;
      if (c != nullptr && !abortWhy.empty()) {
        groveCommAbort(c);
        d.comm = nullptr;
        throw std::runtime_error("grove: the process group was aborted: " + abortWhy);
      }
    }
    while (r == groveInProgress || r == groveSuccess) {
      groveResult_t state = groveInProgress;
      r = groveCommGetAsyncError(c, &state);
      if (r != groveSuccess) break;
      if (state == groveSuccess) return true;
      if (state != groveInProgress) {
        r = state;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    throw groveFailure("joining the link " + std::to_string(from) + "->" + std::to_string(to), c,
                       r);
  }

  // Runs one grove call on d's communicator (busy while in it).
  void run(Direction& d, const std::string& what,
           const std::function<groveResult_t(groveComm_t)>& call) {
    groveComm_t c;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!abortWhy.empty())
        throw std::runtime_error("grove: the process group was aborted: " + abortWhy);
      c = d.comm;
      d.busy = true;
    }
    groveResult_t r = call(c);
    {
      std::lock_guard<std::mutex> lock(mu);
      d.busy = false;
    }
    if (r != groveSuccess) throw groveFailure(what, c, r);
  }

  // Leaves d's communicator: gracefully, or not at all if it was aborted.
  void unlink(Direction& d) {
    groveComm_t c;
    {
      std::lock_guard<std::mutex> lock(mu);
      c = d.comm;
      d.comm = nullptr;
    }
    if (c != nullptr) groveCommDestroy(c);
  }
};

namespace {

using State = P2P::State;

void sendLoop(std::shared_ptr<State> s, Direction* d) {
  for (;;) {
    Direction::Send item;
    std::string broken;
    {
      std::unique_lock<std::mutex> lock(s->mu);
      s->cv.wait(lock, [&] { return !d->sends.empty() || s->stopping; });
      if (d->sends.empty()) break;  // stopping, and every send went out
      item = std::move(d->sends.front());
      d->sends.pop_front();
      broken = d->broken;
    }
    std::exception_ptr error;
    try {
      if (!broken.empty()) throw std::runtime_error(broken);
      s->link(*d);
      const std::string what = "send to rank " + std::to_string(d->peer);
      Header h{item.tag, bytesOf(item.data)};
      s->run(*d, what,
             [&](groveComm_t c) { return groveSend(&h, sizeof h, groveUint8, 1, c, nullptr); });
      s->run(*d, what, [&](groveComm_t c) {
        return groveSend(item.data.ptr(), h.bytes, groveUint8, 1, c, nullptr);
      });
    } catch (const std::exception& e) {
      error = std::current_exception();
      std::lock_guard<std::mutex> lock(s->mu);
      if (d->broken.empty()) d->broken = e.what();
    }
    item.data = Staged{};
    item.work->complete(error);
  }
  s->unlink(*d);
}

// Delivers `message` (bytes that arrived from peer) to a receive.
void deliver(State::Recv& r, const at::Tensor& message, int peer, int64_t tag) {
  const size_t want = bytesOf(r.data);
  if (static_cast<size_t>(message.numel()) != want) {
    r.work->complete(errorOf("recv of " + std::to_string(want) + " bytes (tag " +
                             std::to_string(r.tag) + ") matched a message of " +
                             std::to_string(message.numel()) + " bytes from rank " +
                             std::to_string(peer) + " (tag " + std::to_string(tag) +
                             "): send and recv tensors must have the same size"));
    return;
  }
  if (want > 0) std::memcpy(r.data.ptr(), message.data_ptr(), want);
  r.data.copyBack();
  r.work->setSource(peer);
  r.work->complete(nullptr);
}

void recvLoop(std::shared_ptr<State> s, Direction* d) {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(s->mu);
      s->cv.wait(lock, [&] { return s->stopping || !d->broken.empty() || s->wanted(d->peer); });
      if (s->stopping || !d->broken.empty()) break;
    }
    try {
      if (!s->link(*d)) continue;
      const std::string what = "recv from rank " + std::to_string(d->peer);
      Header h{};
      s->run(*d, what,
             [&](groveComm_t c) { return groveRecv(&h, sizeof h, groveUint8, 0, c, nullptr); });
      State::Recv r;
      bool found;
      {
        std::lock_guard<std::mutex> lock(s->mu);
        found = s->takeRecv(d->peer, h.tag, &r);
      }
      if (found && bytesOf(r.data) == h.bytes) {
        s->run(*d, what, [&](groveComm_t c) {
          return groveRecv(r.data.ptr(), h.bytes, groveUint8, 0, c, nullptr);
        });
        r.data.copyBack();
        r.work->setSource(d->peer);
        r.work->complete(nullptr);
        continue;
      }
      at::Tensor message = at::empty({static_cast<int64_t>(h.bytes)}, at::kByte);
      s->run(*d, what, [&](groveComm_t c) {
        return groveRecv(message.data_ptr(), h.bytes, groveUint8, 0, c, nullptr);
      });
      if (found) {  // the sizes differ
        deliver(r, message, d->peer, h.tag);
        continue;
      }
      // Keep it for a later receive -- unless one was posted meanwhile.
      {
        std::lock_guard<std::mutex> lock(s->mu);
        found = s->takeRecv(d->peer, h.tag, &r);
        if (!found) s->unexpected.push_back({d->peer, h.tag, message});
      }
      if (found) deliver(r, message, d->peer, h.tag);
    } catch (const std::exception& e) {
      Failed failed;
      {
        std::lock_guard<std::mutex> lock(s->mu);
        if (d->broken.empty()) d->broken = e.what();
        s->failRecvs(d->peer, d->broken, &failed);
      }
      failAll(failed);
      break;
    }
  }
  s->unlink(*d);
}

}  // namespace

P2P::P2P(c10::intrusive_ptr<::c10d::Store> store, int rank, int size,
         std::chrono::milliseconds shutdownGrace)
    : state_(std::make_shared<State>()) {
  state_->store = std::move(store);
  state_->rank = rank;
  state_->size = size;
  state_->grace = shutdownGrace;
}

P2P::~P2P() { stop(); }

void P2P::send(c10::intrusive_ptr<GroveWork> work, Staged data, int dst, int tag) {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  if (s.stopping || !s.abortWhy.empty()) {
    const std::string why = s.abortWhy.empty() ? "send after the process group was shut down"
                                               : "the process group was aborted: " + s.abortWhy;
    lock.unlock();
    work->complete(errorOf(why));
    return;
  }
  auto& d = s.out[dst];
  if (!d) {
    d = std::make_unique<Direction>();
    d->peer = dst;
    d->outgoing = true;
    d->thread = std::thread(sendLoop, state_, d.get());
  }
  d->sends.push_back({std::move(work), std::move(data), tag});
  s.cv.notify_all();
}

void P2P::recv(c10::intrusive_ptr<GroveWork> work, Staged data, int src, int tag) {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  if (s.stopping || !s.abortWhy.empty()) {
    const std::string why = s.abortWhy.empty() ? "recv after the process group was shut down"
                                               : "the process group was aborted: " + s.abortWhy;
    lock.unlock();
    work->complete(errorOf(why));
    return;
  }
  for (auto it = s.unexpected.begin(); it != s.unexpected.end(); ++it) {
    if ((src == -1 || it->src == src) && it->tag == tag) {
      State::Unexpected u = std::move(*it);
      s.unexpected.erase(it);
      lock.unlock();
      State::Recv r{std::move(work), std::move(data), src, tag};
      deliver(r, u.bytes, u.src, u.tag);
      return;
    }
  }
  if (src >= 0) {
    auto it = s.in.find(src);
    if (it != s.in.end() && !it->second->broken.empty()) {
      const std::string why = it->second->broken;
      lock.unlock();
      work->complete(errorOf(why));
      return;
    }
  }
  s.recvs.push_back({std::move(work), std::move(data), src, tag});
  for (int peer = 0; peer < s.size; ++peer) {
    if (peer == s.rank || (src >= 0 && peer != src)) continue;
    auto& d = s.in[peer];
    if (d) continue;
    d = std::make_unique<Direction>();
    d->peer = peer;
    d->thread = std::thread(recvLoop, state_, d.get());
  }
  s.cv.notify_all();
}

bool P2P::cancel(const c10::intrusive_ptr<GroveWork>& work) {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = std::find_if(s.recvs.begin(), s.recvs.end(),
                           [&](const State::Recv& r) { return r.work == work; });
    if (it == s.recvs.end()) return false;
    s.recvs.erase(it);
  }
  work->complete(errorOf("recv cancelled"));
  return true;
}

void P2P::abort(const std::string& why) {
  State& s = *state_;
  Failed failed;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.abortWhy.empty()) return;
    s.abortWhy = why.empty() ? "aborted" : why;
    const std::string reason = "the process group was aborted: " + s.abortWhy;
    s.failRecvs(-1, reason, &failed);
    for (auto* dirs : {&s.out, &s.in})
      for (auto& [peer, d] : *dirs) {
        for (auto& item : d->sends) failed.push_back({std::move(item.work), reason});
        d->sends.clear();
        if (d->broken.empty()) d->broken = reason;
        if (d->comm != nullptr) groveCommAbort(d->comm);  // a call in flight returns with an error
        d->comm = nullptr;
      }
    s.cv.notify_all();
  }
  failAll(failed);
}

void P2P::stop() {
  State& s = *state_;
  Failed failed;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.stopping) return;
    s.stopping = true;
    s.failRecvs(-1, "the process group was shut down before a message arrived", &failed);
    // A receiving end inside a grove call waits for a message nobody wants now.
    for (auto& [peer, d] : s.in)
      if (d->busy && d->comm != nullptr) {
        groveCommAbort(d->comm);
        d->comm = nullptr;
      }
    s.cv.notify_all();
  }
  failAll(failed);
  // Queued sends go out, for at most the grace period.
  const auto deadline = std::chrono::steady_clock::now() + s.grace;
  for (;;) {
    std::unique_lock<std::mutex> lock(s.mu);
    bool idle = true;
    for (auto& [peer, d] : s.out) idle &= d->sends.empty() && !d->busy;
    if (idle) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      lock.unlock();
      abort("shut down with sends still in flight after " + std::to_string(s.grace.count()) +
            " ms");
      break;
    }
    s.cv.wait_for(lock, std::chrono::milliseconds(5));
  }
  std::vector<std::thread*> threads;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto* dirs : {&s.out, &s.in})
      for (auto& [peer, d] : *dirs) threads.push_back(&d->thread);
  }
  for (std::thread* t : threads) {
    if (!t->joinable()) continue;
    if (t->get_id() == std::this_thread::get_id()) {
      t->detach();  // the last reference went from this direction's own thread
      continue;
    }
    t->join();
  }
}

}  // namespace grove::pytorch
