// The bootstrap root's thread: its state, its event loop and the messages
// it answers. Internal to src/core (bootstrap_root.h has how it works):
// root_loop.cc runs the connections (poll, accept, read, queue, close,
// deaths), root_messages.cc answers what ranks send (hello, all-gather,
// abort, bye, the hang doctor's reports), bootstrap_root.cc is the
// RootServer handle other threads hold.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/socket.h"
#include "core/bootstrap_root.h"
#include "core/hang_doctor.h"

namespace grove::core {

using Buffer = std::shared_ptr<std::vector<uint8_t>>;

/// A message: the header and `bytes` of payload.
Buffer makeMessage(MsgType type, uint64_t seq, const void* payload, size_t bytes);

/// This process's running roots by nonce, under rootRegistryMutex().
std::mutex& rootRegistryMutex();
std::map<uint64_t, std::weak_ptr<RootServer>>& rootRegistry();
/// Nonces of this process's roots that have ended, newest last (at most 1024).
std::deque<uint64_t>& endedRoots();

/// The server thread's state and loop.
class RootLoop {
 public:
  RootLoop(std::shared_ptr<RootServer> server, net::Fd listener, uint64_t secret, uint64_t nonce,
           bool closeWhenComplete)
      : server_(std::move(server)),
        listener_(std::move(listener)),
        secret_(secret),
        nonce_(nonce),
        closeWhenComplete_(closeWhenComplete) {}

  /// Runs until the job is over; never throws.
  void run();

 private:
  struct Conn {
    net::Fd fd;
    std::vector<uint8_t> in;  // received bytes not yet parsed
    std::deque<Buffer> out;   // queued messages
    size_t outOff = 0;        // bytes of out.front() already sent
    int rank = -1;            // set by a valid hello
    bool bye = false;         // sent BYE: its end is not a death
    bool closing = false;     // close once `out` is flushed
    bool gone = false;        // closed; erased at the end of the round
    net::Deadline helloBy;
    std::string from;        // peer address text
    uint64_t challenge = 0;  // what its hello's mac must cover
  };
  enum class RankState { kAbsent, kJoined, kLeft, kDead };
  /// An all-gather or a broadcast in progress, by seq.
  struct Gather {
    static constexpr int kAllGather = -1;  ///< `source` of an all-gather
    int source = kAllGather;               ///< a broadcast's source rank
    uint32_t bytes = 0;
    int count = 0;
    std::vector<uint8_t> data;
    std::vector<uint8_t> have;
  };

  // Logs about strangers (failed accepts, silent or refused connections),
  // at most one line per kQuietSec with the count of those left unsaid, so a
  // flood cannot fill the log.
  struct Throttle {
    net::Deadline next;
    size_t unsaid = 0;
    bool first = true;
    // True when a line may be written now (*unsaid: how many were not).
    bool allow(size_t* unsaidOut) {
      if (!first && !next.expired()) {
        ++unsaid;
        return false;
      }
      first = false;
      next = net::Deadline::in(kQuietSec);
      *unsaidOut = unsaid;
      unsaid = 0;
      return true;
    }
  };
  static constexpr double kQuietSec = 10.0;

  void loop();
  int pollTimeoutMs();
  void acceptOne();
  /// Closes the oldest connection that has not said hello (the pending cap).
  void dropOldestPending(const char* why);
  void readConn(Conn& c);
  void parse(Conn& c);
  void handle(Conn& c, const MsgHeader& h, const uint8_t* payload);
  void onHello(Conn& c, const MsgHeader& h, const uint8_t* payload);
  void onGather(Conn& c, uint64_t seq, const uint8_t* payload, size_t bytes);
  void onBroadcast(Conn& c, uint64_t seq, const uint8_t* payload, size_t bytes);
  /// Every rank gave its part of `seq`: the result goes to each rank still there.
  void finishGather(uint64_t seq, const std::vector<uint8_t>& data);
  void startDiagnosis();
  void onReport(Conn& c, uint64_t seq, const uint8_t* payload, size_t bytes);
  void finishDiagnosis();
  Buffer joinDiagnosis(uint64_t seq) const;
  void refuse(Conn& c, const std::string& why);
  void send(Conn& c, const Buffer& msg);
  void flush(Conn& c);
  void close(Conn& c);
  void abortAll(const std::string& reason, int except);
  std::string describe(int rank) const;
  bool done() const;
  void publish();

  std::shared_ptr<RootServer> server_;
  net::Fd listener_;
  uint64_t secret_, nonce_;
  bool closeWhenComplete_;
  std::string failedWhy_;  // the first abort's reason (told to ranks that join after it)
  Throttle strangerLog_;
  std::vector<std::unique_ptr<Conn>> conns_;
  int nranks_ = 0;
  int joined_ = 0;
  bool complete_ = false;
  bool failed_ = false;
  std::vector<RankState> ranks_;
  std::vector<transport::PeerInfo> infos_;
  std::map<uint64_t, Gather> gathers_;
  struct Diagnosis {
    uint64_t id = 0;
    bool active = false;
    int waiting = 0;  // reports still expected
    net::Deadline by;
    std::vector<RankReport> reports;
  } diag_;
};

}  // namespace grove::core
