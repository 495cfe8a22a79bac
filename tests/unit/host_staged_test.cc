// host_staged in emulation mode (plain shared host memory): making and
// opening rings, the closed word on destruction, a producer and a consumer
// thread streaming bytes through one ring, RingExport checks, and the
// errors for bad input. In a CUDA build without a GPU, the registered mode
// reports a clean CUDA error.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "transports/host_staged/host_staged_transport.h"

namespace grove::transport {
namespace {

std::string newJob() {
  static std::atomic<int> n{0};
  return "host-staged-test-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

// A context for `rank` of `nranks` ranks, all threads of this process on one host.
DeviceContext contextFor(const std::string& job, int rank, int nranks,
                         uint64_t otherHostOf = ~0ull) {
  DeviceContext c;
  c.rank = rank;
  c.nranks = nranks;
  c.jobId = job;
  for (int r = 0; r < nranks; ++r) {
    DevicePeer p;
    p.rank = r;
    p.pid = static_cast<int32_t>(getpid());
    p.hostHash = static_cast<uint64_t>(r) == otherHostOf ? 0xBADull : 0x1234ull;
    c.peers.push_back(p);
  }
  return c;
}

std::string shmDir() {
  std::string d = config::getString("GROVE_SHM_DIR");
  return d.empty() ? "/dev/shm" : d;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

uint64_t load(const uint64_t* p) {
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_acquire);
}
void store(uint64_t* p, uint64_t v) {
  std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_release);
}
uint32_t closedOf(const DevRing& r) {
  return std::atomic_ref<uint32_t>(*r.closed).load(std::memory_order_acquire);
}

TEST(HostStaged, CreateOpenShareOneRingAndNameGoesAway) {
  const std::string job = newJob();
  HostStagedTransport recv(contextFor(job, 1, 2), true);
  HostStagedTransport send(contextFor(job, 0, 2), true);
  EXPECT_TRUE(recv.emulated());
  EXPECT_STREQ(recv.name(), "host_staged");
  const LinkKey fromSender{0, 3, 7};
  RingExport exp;
  DevRing r = recv.createRecv(fromSender, 4096, exp);
  EXPECT_EQ(exp.kind, RingKind::kHostEmulated);
  EXPECT_EQ(exp.channel, 3);
  EXPECT_EQ(exp.route, 7u);
  EXPECT_EQ(exp.ownerRank, 1);
  EXPECT_EQ(exp.capacity, 4096u);
  const std::string path = shmDir() + "/" + exp.shmName;
  EXPECT_EQ(std::string(exp.shmName), HostStagedTransport::segmentName(job, 0, 1, 3, 7));
  EXPECT_TRUE(exists(path));
  EXPECT_EQ(load(r.head), 0u);
  EXPECT_EQ(load(r.tail), 0u);
  EXPECT_EQ(closedOf(r), 0u);

  DevRing s = send.openSend({1, 3, 7}, exp);
  EXPECT_FALSE(exists(path)) << "the sender removes the name once both sides hold a mapping";
  EXPECT_EQ(s.capacity, 4096u);
  EXPECT_NE(s.data, r.data) << "two mappings of one segment";
  // The same memory: what the sender writes, the receiver reads, and back.
  std::memcpy(s.data + 100, "grove", 6);
  store(s.head, 106);
  EXPECT_EQ(load(r.head), 106u);
  EXPECT_STREQ(reinterpret_cast<const char*>(r.data + 100), "grove");
  store(r.tail, 106);
  EXPECT_EQ(load(s.tail), 106u);
  EXPECT_EQ(send.ringCount(), 1u);
  EXPECT_EQ(recv.ringCount(), 1u);
}

TEST(HostStaged, DestructionSetsTheClosedWordForThePeer) {
  const std::string job = newJob();
  auto recv = std::make_unique<HostStagedTransport>(contextFor(job, 1, 2), true);
  auto send = std::make_unique<HostStagedTransport>(contextFor(job, 0, 2), true);
  RingExport e1, e2;
  DevRing r1 = recv->createRecv({0, 0, 0}, 1024, e1);
  DevRing r2 = recv->createRecv({0, 1, 0}, 1024, e2);
  DevRing s1 = send->openSend({1, 0, 0}, e1);
  DevRing s2 = send->openSend({1, 1, 0}, e2);
  EXPECT_EQ(closedOf(r1), 0u);
  send.reset();  // the sender goes away: the receiver sees it
  EXPECT_EQ(closedOf(r1), 1u);
  EXPECT_EQ(closedOf(r2), 1u);
  (void)s1;
  (void)s2;

  // And the other way round, with a fresh pair.
  auto send2 = std::make_unique<HostStagedTransport>(contextFor(job, 0, 2), true);
  RingExport e3;
  DevRing r3 = recv->createRecv({0, 2, 0}, 1024, e3);
  DevRing s3 = send2->openSend({1, 2, 0}, e3);
  (void)r3;
  recv.reset();  // the receiver goes away; the sender's mapping stays valid
  EXPECT_EQ(closedOf(s3), 1u);
}

TEST(HostStaged, ReceiverDestroyedBeforeTheSenderCameRemovesTheName) {
  const std::string job = newJob();
  std::string path;
  {
    HostStagedTransport recv(contextFor(job, 1, 2), true);
    RingExport e;
    recv.createRecv({0, 0, 0}, 1024, e);
    path = shmDir() + "/" + e.shmName;
    EXPECT_TRUE(exists(path));
  }
  EXPECT_FALSE(exists(path));
}

// A producer thread streams a pattern through a small ring; the consumer
// checks every byte (wraps, partial reads and writes of odd sizes).
TEST(HostStaged, ProducerAndConsumerThreadsStreamBytesIntact) {
  const std::string job = newJob();
  HostStagedTransport recv(contextFor(job, 1, 2), true);
  HostStagedTransport send(contextFor(job, 0, 2), true);
  RingExport e;
  const uint64_t cap = 4096;
  DevRing r = recv.createRecv({0, 5, 0}, cap, e);
  DevRing s = send.openSend({1, 5, 0}, e);
  const uint64_t total = 3u << 20;
  auto byteAt = [](uint64_t i) { return static_cast<uint8_t>((i * 131 + (i >> 12)) & 0xff); };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::atomic<bool> timedOut{false};
  std::thread producer([&] {
    uint64_t head = 0, piece = 1;
    while (head < total) {
      const uint64_t room = cap - (head - load(s.tail));
      if (room == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
          timedOut = true;
          return;
        }
        std::this_thread::yield();
        continue;
      }
      uint64_t n = std::min({room, total - head, piece, cap - head % cap});
      for (uint64_t i = 0; i < n; ++i) s.data[(head + i) % cap] = byteAt(head + i);
      head += n;
      store(s.head, head);
      piece = piece * 7 % 1531 + 1;  // odd sizes up to ~1.5 KiB
    }
  });
  uint64_t tail = 0, bad = 0, piece = 3;
  while (tail < total && !timedOut) {
    const uint64_t avail = load(r.head) - tail;
    if (avail == 0) {
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::yield();
      continue;
    }
    const uint64_t n = std::min(avail, piece);
    for (uint64_t i = 0; i < n; ++i) bad += r.data[(tail + i) % cap] != byteAt(tail + i);
    tail += n;
    store(r.tail, tail);
    piece = piece * 5 % 2039 + 1;
  }
  producer.join();
  EXPECT_FALSE(timedOut);
  EXPECT_EQ(tail, total);
  EXPECT_EQ(bad, 0u);
}

// The real case: the sender is another process. The child opens the ring
// from the export the parent sends it through a pipe, streams bytes, and
// exits; the parent checks every byte, then sees the closed word set.
TEST(HostStaged, SenderInAnotherProcess) {
  const std::string job = newJob();
  const int32_t parent = static_cast<int32_t>(getpid());
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const uint64_t cap = 2048, total = 1u << 20;
  auto byteAt = [](uint64_t i) { return static_cast<uint8_t>((i * 37 + (i >> 9)) & 0xff); };
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[1]);
    int rc = 0;
    try {
      RingExport e;
      size_t got = 0;
      while (got < sizeof(e)) {
        ssize_t n = ::read(fds[0], reinterpret_cast<char*>(&e) + got, sizeof(e) - got);
        if (n <= 0) ::_exit(3);
        got += static_cast<size_t>(n);
      }
      DeviceContext ctx = contextFor(job, 0, 2);
      ctx.peers[1].pid = parent;
      HostStagedTransport send(ctx, true);
      DevRing s = send.openSend({1, 0, 0}, e);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      uint64_t head = 0;
      while (head < total && rc == 0) {
        const uint64_t room = cap - (head - load(s.tail));
        if (room == 0) {
          if (std::chrono::steady_clock::now() > deadline) rc = 4;
          std::this_thread::yield();
          continue;
        }
        const uint64_t n = std::min({room, total - head, uint64_t(333)});
        for (uint64_t i = 0; i < n; ++i) s.data[(head + i) % cap] = byteAt(head + i);
        head += n;
        store(s.head, head);
      }
      // Wait until the parent consumed everything, then go (destruction closes).
      while (rc == 0 && load(s.tail) < total) {
        if (std::chrono::steady_clock::now() > deadline) rc = 5;
        std::this_thread::yield();
      }
    } catch (...) {
      rc = 6;
    }
    ::_exit(rc);
  }
  ::close(fds[0]);
  DeviceContext ctx = contextFor(job, 1, 2);
  ctx.peers[0].pid = static_cast<int32_t>(child);
  HostStagedTransport recv(ctx, true);
  RingExport e;
  DevRing r = recv.createRecv({0, 0, 0}, cap, e);
  ASSERT_EQ(::write(fds[1], &e, sizeof(e)), static_cast<ssize_t>(sizeof(e)));
  ::close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  uint64_t tail = 0, bad = 0;
  while (tail < total && std::chrono::steady_clock::now() < deadline) {
    const uint64_t avail = load(r.head) - tail;
    if (avail == 0) {
      std::this_thread::yield();
      continue;
    }
    for (uint64_t i = 0; i < avail; ++i) bad += r.data[(tail + i) % cap] != byteAt(tail + i);
    tail += avail;
    store(r.tail, tail);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child failed (3: pipe, 4/5: timeout, 6: exception)";
  EXPECT_EQ(tail, total);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(closedOf(r), 1u) << "the sender's process went away";
}

TEST(HostStaged, RingExportRoundTripAndChecks) {
  RingExport e;
  e.kind = RingKind::kHostEmulated;
  e.channel = 4;
  e.route = 9;
  e.ownerRank = 2;
  e.ownerPid = 77;
  e.hostHash = 0xfeedull;
  e.capacity = 128;
  e.rawPtr = 0x1000;
  for (size_t i = 0; i < kIpcHandleBytes; ++i) e.ipcHandle[i] = static_cast<uint8_t>(i * 3);
  std::strcpy(e.shmName, "grove-x-2-0-4-dev9");
  std::vector<uint8_t> wire(sizeof(e));
  std::memcpy(wire.data(), &e, sizeof(e));
  RingExport back;
  std::memcpy(&back, wire.data(), sizeof(back));
  EXPECT_EQ(std::memcmp(&back, &e, sizeof(e)), 0);
  EXPECT_NO_THROW(checkRingExport(back, {2, 4, 9}, RingKind::kHostEmulated, "t"));

  auto rejected = [&](RingExport x, LinkKey k, RingKind kind, const char* what) {
    try {
      checkRingExport(x, k, kind, "t");
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), groveInternalError) << what;
    }
  };
  rejected(back, {2, 5, 9}, RingKind::kHostEmulated, "other channel");
  rejected(back, {2, 4, 8}, RingKind::kHostEmulated, "other route");
  rejected(back, {1, 4, 9}, RingKind::kHostEmulated, "other owner");
  rejected(back, {2, 4, 9}, RingKind::kCudaIpc, "other kind");
  RingExport garbled = back;
  garbled.magic = 0;
  rejected(garbled, {2, 4, 9}, RingKind::kHostEmulated, "no magic");
  RingExport odd = back;
  odd.capacity = 100;
  rejected(odd, {2, 4, 9}, RingKind::kHostEmulated, "capacity not aligned");
}

TEST(HostStaged, BadInputGetsClearErrors) {
  const std::string job = newJob();
  // Rank 2 is on another host.
  HostStagedTransport t(contextFor(job, 0, 3, 2), true);
  EXPECT_FALSE(t.canConnect(0)) << "self";
  EXPECT_TRUE(t.canConnect(1));
  EXPECT_FALSE(t.canConnect(2)) << "another host";
  EXPECT_FALSE(t.canConnect(3)) << "out of range";
  RingExport e;
  EXPECT_THROW(t.createRecv({2, 0, 0}, 1024, e), Error);
  EXPECT_THROW(t.createRecv({1, 0, 0}, 1000, e), Error);  // not a multiple of 64
  EXPECT_THROW(t.createRecv({1, 0, 0}, 0, e), Error);

  // A segment that is gone: a remote error naming the ring.
  HostStagedTransport peer(contextFor(job, 1, 3, 2), true);
  RingExport gone;
  peer.createRecv({0, 0, 0}, 1024, gone);
  HostStagedTransport other(contextFor(job, 0, 3, 2), true);
  t.openSend({1, 0, 0}, gone);  // takes (and removes) the name
  try {
    other.openSend({1, 0, 0}, gone);
    ADD_FAILURE() << "opened a ring whose name is gone";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), groveRemoteError);
    EXPECT_NE(std::string(err.what()).find("is gone"), std::string::npos) << err.what();
  }
  RingExport slash = gone;
  std::strcpy(slash.shmName, "../etc/passwd");
  EXPECT_THROW(other.openSend({1, 0, 0}, slash), Error);

  DeviceContext bad = contextFor(job, 0, 2);
  bad.peers.pop_back();
  EXPECT_THROW(HostStagedTransport(bad, true), Error);
  bad = contextFor("", 0, 2);
  EXPECT_THROW(HostStagedTransport(bad, true), Error);
}

TEST(HostStaged, RegisteredModeWithoutAGpuFailsCleanly) {
  const std::string job = newJob();
#include "grove_build_info.h"

#if GROVE_HAVE_CUDA
  HostStagedTransport t(contextFor(job, 1, 2), false);
  EXPECT_FALSE(t.emulated());
  RingExport e;
  try {
    DevRing r = t.createRecv({0, 0, 0}, 1024, e);
    EXPECT_NE(r.data, nullptr);  // a GPU is present: the ring is registered
    EXPECT_EQ(e.kind, RingKind::kHostStaged);
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), groveUnhandledCudaError) << err.what();
    EXPECT_NE(std::string(err.what()).find("cudaHostRegister"), std::string::npos) << err.what();
    EXPECT_FALSE(exists(shmDir() + "/" + HostStagedTransport::segmentName(job, 0, 1, 0, 0)))
        << "a failed ring leaves no segment behind";
  }
#else
  try {
    HostStagedTransport t(contextFor(job, 1, 2), false);
    ADD_FAILURE() << "a build without CUDA made a registered host_staged transport";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), groveInvalidArgument);
    EXPECT_NE(std::string(err.what()).find("emulation"), std::string::npos) << err.what();
  }
#endif
}

}  // namespace
}  // namespace grove::transport
