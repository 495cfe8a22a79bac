// Rma: one-sided puts and signals into registered windows, for one rank of
// a communicator (the core of groveWindowRegister, grovePutSignal and
// groveWaitSignal).
//
// How it works: a put must land without the target doing anything, so each
// rank runs a progress thread that owns the receiving halves of a reserved
// connection channel (kRmaChannel, one link from every peer) and applies
// what arrives. A put is a 32-byte header (window id, offset, bytes,
// signal) followed by its payload on the sending half to the target; the
// sender returns once every byte is handed to the transport (the source may
// then be reused). The target's thread reads the header, looks the window
// up, copies the payload straight from the transport's buffer into the
// window, and only then counts the signal, so a waiter that sees the count
// sees the bytes. Links are byte streams in order, so puts from one peer
// land in the order they were issued. A put to one's own rank is a copy.
//
// Signals: one counter per (peer, signal slot). A wait for `count` signals
// from a peer returns when that many have arrived beyond those earlier
// waits consumed, and consumes them (NCCL's ncclWaitSignal).
//
// Windows are registered collectively, in the same order on every rank: the
// k-th window has id k everywhere, and each rank learns every rank's window
// size, so a put out of the target's bounds is refused at the source. A
// window leaves collectively too: every rank first waits until it has
// applied every put its peers made before the call (removeWindow after
// drainFrom), so nothing in flight can land in freed memory. A peer may
// return from a registration and put before this rank has added the
// window: the thread holds such a header (a window id not reached yet)
// until the window is there.
//
// One-sided writes (transport.h's OneSided, where the transport reaching
// a peer has it: net): a put to such a peer is the transport's own write
// into the peer's registered window with a signal, and the progress thread
// takes the signals that arrive and counts them as above; no header
// travels and no thread copies the bytes. Every rank exposes each window
// (and an 8-byte target for signals alone) at registration and the
// registration's all-gather carries the descriptors (Remote). The signal
// names the putting rank and the slot, rank * kSignals + slot, so this
// path serves at most OneSided::kMaxSignal / kSignals ranks (the core
// uses the byte links past that). A peer is reached one way for the
// communicator's life, and each put waits for its write's completion
// before it returns, so one peer's puts stay in order.
//
// Failures: a peer whose links break (it died, or left the communicator)
// is marked gone with the reason; a wait for its signals then fails at once
// instead of running into the timeout. Waits watch the communicator's abort
// flag and fail after GROVE_TIMEOUT without progress. The thread backs off
// (pause, yield, then naps of up to 1 ms) when nothing arrives, so an idle
// window costs little CPU.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/wait.h"
#include "core/device_connections.h"
#include "grove/grove.h"
#include "transports/transport.h"

namespace grove::core {

/// Connection channel of the one-sided links: past every proxied device channel.
inline constexpr int kRmaChannel =
    kDeviceProxyChannelBase + plan::kP2PChannel + plan::kMaxP2PChannels;

class Rma {
 public:
  /// Signal slots per peer (grovePutSignal's `signal` is below this).
  static constexpr int kSignals = GROVE_MAX_SIGNALS;
  /// The window id of a signal alone (bytes 0): no window, only a signal.
  static constexpr int kNoWindow = -1;
  /// One wait of waitSignals: `count` more signals in slot `signal` from `peer`.
  struct Wait {
    int peer = -1;
    int signal = 0;
    uint64_t count = 0;
  };

  /// sends[p] / recvs[p]: the kRmaChannel halves to and from rank p (null at
  /// `rank`, and for the peers `oneSided` serves); `oneSided`: the one-sided
  /// access every peer p with oneSidedPeers[p] is reached with (null, or
  /// oneSidedPeers empty: none). Everything must outlive this object.
  /// Starts the progress thread.
  Rma(int rank, int nranks, std::vector<transport::SendHalf*> sends,
      std::vector<transport::RecvHalf*> recvs, const WaitContext& wait,
      transport::OneSided* oneSided = nullptr, std::vector<bool> oneSidedPeers = {});
  /// Stops the progress thread (what has not arrived is dropped).
  ~Rma();
  Rma(const Rma&) = delete;
  Rma& operator=(const Rma&) = delete;

  /// The id the next window gets (windows registered so far).
  int nextWindow() const;
  /// What peers need to write one-sided into [base, base + bytes) here
  /// (exposed, cached; a blank Remote without one-sided peers).
  transport::OneSided::Remote expose(void* base, uint64_t bytes);
  /// Undoes expose(base), which returned `exposed`, when the window never
  /// came (a failed registration).
  void unexpose(void* base, const transport::OneSided::Remote& exposed);
  /// This rank's 8-byte target of signals alone (blank without one-sided peers).
  transport::OneSided::Remote signalTarget() const { return signalTarget_; }
  /// Adds window nextWindow() at `base`; sizes[r] = rank r's window bytes,
  /// remotes[r] what rank r exposed (empty: no one-sided peers), and
  /// signalTargets[r] rank r's signalTarget() (likewise).
  void addWindow(void* base, std::vector<uint64_t> sizes,
                 std::vector<transport::OneSided::Remote> remotes = {},
                 std::vector<transport::OneSided::Remote> signalTargets = {});
  /// Rank `rank`'s bytes of window `id`; false if this rank has no such window.
  bool windowBytes(int id, int rank, uint64_t* bytes) const;
  /// Drops window `id` (call after drainFrom: nothing may be in flight to
  /// it) and its one-sided registration.
  void removeWindow(int id);
  /// Puts sent one-sided so far (tests, logs).
  uint64_t oneSidedPuts() const { return oneSidedPuts_.load(); }

  /// Puts sent to each rank so far.
  std::vector<uint64_t> sentCounts() const;
  /// Waits until fromEach[p] puts from each rank p have been applied.
  void drainFrom(const std::vector<uint64_t>& fromEach);

  /// Writes [src, src + bytes) into `peer`'s window `window` at `offset`,
  /// then raises its signal slot `signal` (bytes 0: the signal alone).
  /// Returns once the source may be reused. Arguments are checked by the
  /// caller (windowBytes); a bad one here is groveInvalidArgument.
  void put(int peer, int window, uint64_t offset, const void* src, uint64_t bytes, int signal);
  /// Waits for every wait of `waits` (see the file comment), then consumes them.
  void waitSignals(const std::vector<Wait>& waits);

 private:
  struct Header {
    uint32_t magic;
    int32_t window;
    uint64_t offset;
    uint64_t bytes;
    int32_t signal;
    uint32_t pad;
  };
  static_assert(sizeof(Header) == 32, "one-sided header is 32 bytes on the wire");
  struct Window {
    uint8_t* base = nullptr;
    std::vector<uint64_t> sizes;
    std::vector<transport::OneSided::Remote> remotes;  // by rank (one-sided peers)
  };
  // What the progress thread knows of the stream from one peer.
  struct Incoming {
    transport::RecvHalf* half = nullptr;
    Header header{};
    size_t headerHave = 0;   // header bytes read so far
    uint8_t* dst = nullptr;  // where the payload goes
    uint64_t done = 0;       // payload bytes applied
    bool started = false;    // the header's window was found (dst is set)
  };

  void loop();
  bool pump(int peer);
  bool begin(int peer, Incoming& in);
  void land(int peer, int signal);
  void markGone(int peer, const std::string& why);
  void writeAll(int peer, const void* data, size_t n, Waiter& w);
  void putOneSided(int peer, int window, uint64_t offset, const void* src, uint64_t bytes,
                   int signal);
  bool takeSignals();
  // Takes the one-sided registrations starting at `base` out of the
  // transport's cache unless a window or the signal target starts there
  // (under winMu_).
  void releaseUnlessExposed(const void* base);
  // A put's source registration out of the cache once the put returned,
  // done or failed (takes winMu_; never throws).
  void dropSource(const void* src, uint64_t bytes) noexcept;
  // What this rank exposed for window w (blank without one-sided peers).
  transport::OneSided::Remote ownRemote(const Window& w) const;
  // Throws if peer `p` is gone (with its reason) or the communicator aborted.
  void checkPeer(int p) const;

  int rank_;
  int nranks_;
  std::vector<transport::SendHalf*> sends_;
  std::vector<Incoming> incoming_;  // by rank; the progress thread's alone
  WaitContext wait_;

  mutable std::mutex winMu_;
  std::map<int, Window> windows_;
  int nextWindow_ = 0;

  mutable std::mutex sigMu_;  // arrived_, consumed_, applied_, gone_
  std::condition_variable sigCv_;
  std::vector<uint64_t> arrived_;   // [peer * kSignals + signal]
  std::vector<uint64_t> consumed_;  // same layout
  std::vector<uint64_t> applied_;   // puts applied, by peer
  std::vector<std::string> gone_;   // by peer: why its links broke ("" while fine)

  std::vector<std::atomic<uint64_t>> sent_;  // puts sent, by peer
  transport::OneSided* oneSided_ = nullptr;  // the one-sided access, if any peer uses it
  std::vector<bool> oneSidedPeers_;          // by rank
  uint64_t signalWord_ = 0;                  // target of signals alone
  transport::OneSided::Remote signalTarget_{};
  std::vector<transport::OneSided::Remote> signalTargets_;  // by rank
  std::atomic<uint64_t> oneSidedPuts_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace grove::core
