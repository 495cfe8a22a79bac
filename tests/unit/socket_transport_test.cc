// Socket transport: bulk two-way exchange, early connections, peer loss.
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "base/error.h"
#include "base/socket.h"
#include "transports/socket/socket_transport.h"
#include "unit/harness/run_threads.h"
#include "unit/harness/socket_job.h"

namespace grove::transport {
namespace {

constexpr uint64_t kSecret = harness::kSocketJobSecret;

using Job = harness::SocketJob;

void runRanks(int n, const std::function<void(int)>& fn) { harness::runThreads(n, fn); }

uint8_t pattern(int src, uint64_t i) {
  return static_cast<uint8_t>(i * 131 + src * 17 + (i >> 12));
}

/// Sends `total` bytes on `send` while receiving `total` from `recv`, round-robin.
void pump(SendHalf& send, RecvHalf& recv, int me, int peer, uint64_t total) {
  uint64_t sent = 0, got = 0;
  auto start = std::chrono::steady_clock::now();
  while (sent < total || !send.flush() || got < total) {
    bool moved = false;
    if (sent < total) {
      void* p;
      size_t room = send.reserve(&p);
      size_t n = std::min<uint64_t>(room, std::min<uint64_t>(total - sent, 20000));
      for (size_t i = 0; i < n; ++i) static_cast<uint8_t*>(p)[i] = pattern(me, sent + i);
      if (n > 0) send.commit(n);
      sent += n;
      moved |= n > 0;
    }
    const void* q;
    size_t avail = recv.peek(&q);
    for (size_t i = 0; i < avail; ++i)
      ASSERT_EQ(static_cast<const uint8_t*>(q)[i], pattern(peer, got + i)) << "byte " << got + i;
    if (avail > 0) recv.consume(avail);
    got += avail;
    moved |= avail > 0;
    if (!moved) {
      pollfd fds[2] = {{recv.pollFd(), POLLIN, 0}, {send.pollFd(), POLLOUT, 0}};
      ::poll(fds, sent < total || !send.flush() ? 2 : 1, 10);
    }
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  }
}

}  // namespace

TEST(SocketTransport, TwoRanksExchange10MiBBothWays) {
  Job job(2);
  EXPECT_STREQ(job.transports[0]->name(), "socket");
  EXPECT_TRUE(job.transports[0]->canConnect(1));
  EXPECT_TRUE(job.transports[0]->canConnect(0));
  EXPECT_FALSE(job.transports[0]->canConnect(2));
  runRanks(2, [&](int r) {
    int peer = 1 - r;
    std::vector<std::unique_ptr<SendHalf>> sends;
    std::vector<std::unique_ptr<RecvHalf>> recvs;
    job.transports[r]->establish({{peer, 0}}, {{peer, 0}}, sends, recvs);
    ASSERT_EQ(sends.size(), 1u);
    ASSERT_EQ(recvs.size(), 1u);
    EXPECT_GE(sends[0]->pollFd(), 0);
    pump(*sends[0], *recvs[0], r, peer, 10u << 20);
  });
}

TEST(SocketTransport, EarlyConnectionsAreStashedAndRoutedByChannel) {
  Job job(2);
  std::barrier sync(2);
  runRanks(2, [&](int r) {
    std::vector<std::unique_ptr<SendHalf>> sends;
    std::vector<std::unique_ptr<RecvHalf>> recvs;
    if (r == 1) {
      // Runs ahead: opens channels 0, 1, 2 and sends one byte on each.
      job.transports[1]->establish({{0, 0}, {0, 1}, {0, 2}}, {}, sends, recvs);
      for (int c = 0; c < 3; ++c) {
        void* p;
        ASSERT_GT(sends[c]->reserve(&p), 0u);
        *static_cast<uint8_t*>(p) = static_cast<uint8_t>(100 + c);
        sends[c]->commit(1);
        while (!sends[c]->flush()) std::this_thread::yield();
      }
      sync.arrive_and_wait();
      sync.arrive_and_wait();  // keep the connections until rank 0 read them
      return;
    }
    sync.arrive_and_wait();  // rank 1's connections are all in the backlog now
    auto& t = *job.transports[0];
    t.establish({}, {{1, 1}}, sends, recvs);  // channel 0 arrives first and is stashed
    EXPECT_GE(t.stashedCount(), 1u);
    std::vector<std::unique_ptr<SendHalf>> s2;
    std::vector<std::unique_ptr<RecvHalf>> r2;
    t.establish({}, {{1, 2}, {1, 0}}, s2, r2);
    EXPECT_EQ(t.stashedCount(), 0u);
    std::vector<RecvHalf*> byChannel = {r2[1].get(), recvs[0].get(), r2[0].get()};
    for (int c = 0; c < 3; ++c) {
      const void* q;
      size_t n = 0;
      for (int i = 0; i < 5000 && n == 0; ++i) {
        n = byChannel[c]->peek(&q);
        if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      ASSERT_EQ(n, 1u) << "channel " << c;
      EXPECT_EQ(*static_cast<const uint8_t*>(q), 100 + c);
      byChannel[c]->consume(1);
    }
    EXPECT_THROW(t.establish({}, {{1, 0}}, s2, r2), Error);  // opened twice
    sync.arrive_and_wait();
  });
}

TEST(SocketTransport, PeerClosingIsAnError) {
  Job job(2);
  std::barrier sync(2);
  runRanks(2, [&](int r) {
    int peer = 1 - r;
    std::vector<std::unique_ptr<SendHalf>> sends;
    std::vector<std::unique_ptr<RecvHalf>> recvs;
    job.transports[r]->establish({{peer, 0}}, {{peer, 0}}, sends, recvs);
    if (r == 1) {
      void* p;
      ASSERT_GE(sends[0]->reserve(&p), 100u);
      std::memset(p, 7, 100);
      sends[0]->commit(100);
      while (!sends[0]->flush()) std::this_thread::yield();
      sync.arrive_and_wait();
      sends.clear();  // rank 1 goes away in both directions
      recvs.clear();
      return;
    }
    sync.arrive_and_wait();
    // Receiving: the 100 bytes, then an error naming rank 1.
    size_t got = 0;
    try {
      for (int i = 0; i < 10000; ++i) {
        const void* q;
        size_t n = recvs[0]->peek(&q);
        recvs[0]->consume(n);
        got += n;
        if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      ADD_FAILURE() << "no error after the peer closed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), groveRemoteError);
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
    EXPECT_EQ(got, 100u);
    // Sending: the kernel soon reports the reset.
    try {
      for (int i = 0; i < 10000; ++i) {
        void* p;
        size_t room = sends[0]->reserve(&p);
        if (room > 0) sends[0]->commit(room);
        sends[0]->flush();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      ADD_FAILURE() << "no error sending to a closed peer";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), groveRemoteError);
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
  });
}

// Strangers are dropped, and none of them holds up the real link: garbage, a
// hello with a wrong secret, connections that say nothing or half a hello,
// and a flood of more than may wait at once. Hellos are read side by side
// (three silent strangers used to cost 5 s each); the real link arrives well
// inside the job's 1 s timeout.
TEST(SocketTransport, StrangersAreRefusedAndWaitsEnd) {
  Job job(2, 64 << 10, /*timeout=*/1.0);
  std::vector<net::Fd> silent;
  for (int i = 0; i < 3; ++i)
    silent.push_back(net::connectUntil(unpackSocketAddress(job.addrs[0]), net::Deadline::in(5)));
  net::Fd half = net::connectUntil(unpackSocketAddress(job.addrs[0]), net::Deadline::in(5));
  const uint64_t magic = 0x47524f56534f434bull;
  ASSERT_EQ(net::sendAll(half.get(), &magic, sizeof(magic), net::Deadline::in(5)),
            net::IoResult::kOk);
  for (int i = 0; i < 200; ++i)
    silent.push_back(net::connectUntil(unpackSocketAddress(job.addrs[0]), net::Deadline::in(5)));
  // Strangers (garbage, then a hello with a wrong secret) are dropped; the real link still arrives.
  net::Fd junk = net::connectUntil(unpackSocketAddress(job.addrs[0]), net::Deadline::in(5));
  char garbage[48] = "GET / HTTP/1.0\r\n\r\n";  // at least one hello long
  ASSERT_EQ(net::sendAll(junk.get(), garbage, sizeof(garbage), net::Deadline::in(5)),
            net::IoResult::kOk);
  net::Fd liar = net::connectUntil(unpackSocketAddress(job.addrs[0]), net::Deadline::in(5));
  // A well-formed hello (version 3) whose mac is not made with the job's secret.
  struct {
    uint64_t magic, mac, nonce;
    int32_t src, dst, channel;
    uint32_t version, route, reserved;
  } hello = {0x47524f56534f434bull, kSecret, 7, 1, 0, 0, 3, 0, 0};
  ASSERT_EQ(net::sendAll(liar.get(), &hello, sizeof(hello), net::Deadline::in(5)),
            net::IoResult::kOk);
  runRanks(2, [&](int r) {
    std::vector<std::unique_ptr<SendHalf>> sends;
    std::vector<std::unique_ptr<RecvHalf>> recvs;
    if (r == 1) {
      job.transports[1]->establish({{0, 0}}, {}, sends, recvs);
      return;
    }
    job.transports[0]->establish({}, {{1, 0}}, sends, recvs);
    ASSERT_EQ(recvs.size(), 1u);
    EXPECT_NE(recvs[0], nullptr);
    // Nobody will open channel 5: the wait ends with a timeout error.
    try {
      job.transports[0]->establish({}, {{1, 5}}, sends, recvs);
      ADD_FAILURE();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), groveRemoteError);
      EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
    }
    // An abort ends it too, with the abort's reason.
    job.signals[0].raise("stop: test abort");
    try {
      job.transports[0]->establish({}, {{1, 6}}, sends, recvs);
      ADD_FAILURE();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("test abort"), std::string::npos) << e.what();
    }
  });
}

}  // namespace grove::transport
