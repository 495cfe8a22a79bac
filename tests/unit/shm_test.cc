// Tests of the shared-memory transport: threads as ranks in one process, and
// real processes made with fork() for the cross-process and dead-peer cases.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/wait.h"
#include "transports/shm/shm_link.h"
#include "transports/shm/shm_transport.h"
#include "unit/harness/shm_ranks.h"

namespace grove::transport {
namespace {

using Clock = std::chrono::steady_clock;

using harness::forkChild;
using harness::leftovers;
using harness::uniqueJob;
using harness::waitExit;

/// Contexts of `n` ranks on one host; pids[i] (default: this process) per rank.
Context makeContext(int rank, int n, const std::string& job, size_t buf, const WaitContext& wc,
                    std::vector<int> pids = {}) {
  return harness::shmContext(rank, n, job, buf, wc, std::move(pids));
}

uint8_t pattern(int src, int dst, int ch, uint64_t i) {
  return static_cast<uint8_t>(i ^ (i >> 8) ^ (i >> 17) ^ (src * 37 + dst * 11 + ch * 5));
}

/// One stream a rank writes (out) or reads and checks (in).
struct Stream {
  SendHalf* send = nullptr;
  RecvHalf* recv = nullptr;
  int src = 0, dst = 0, ch = 0;
  uint64_t total = 0;
  uint64_t done = 0;
  uint64_t wrong = 0;
};

/// Moves what it can on every stream, round-robin, until all are done. Odd
/// chunk limits make the ring positions wrap at odd offsets.
void pump(std::vector<Stream>& streams, const WaitContext& wc) {
  Waiter w(wc, "pumping test streams");
  for (;;) {
    bool moved = false, left = false;
    for (Stream& s : streams) {
      if (s.done == s.total) continue;
      left = true;
      if (s.send != nullptr) {
        void* p;
        size_t n = std::min<uint64_t>({s.send->reserve(&p), s.total - s.done, 7919});
        if (n == 0) continue;
        auto* b = static_cast<uint8_t*>(p);
        for (size_t i = 0; i < n; ++i) b[i] = pattern(s.src, s.dst, s.ch, s.done + i);
        s.send->commit(n);
        s.done += n;
      } else {
        const void* p;
        size_t n = std::min<uint64_t>({s.recv->peek(&p), s.total - s.done, 5003});
        if (n == 0) continue;
        auto* b = static_cast<const uint8_t*>(p);
        for (size_t i = 0; i < n; ++i) s.wrong += b[i] != pattern(s.src, s.dst, s.ch, s.done + i);
        s.recv->consume(n);
        s.done += n;
      }
      moved = true;
    }
    if (!left) return;
    if (moved)
      w.progressed();
    else
      w.wait();
  }
}

/// One rank's transport and halves.
struct RankLinks {
  std::unique_ptr<ShmTransport> transport;
  std::vector<LinkKey> sendKeys, recvKeys;
  std::vector<std::unique_ptr<SendHalf>> sends;
  std::vector<std::unique_ptr<RecvHalf>> recvs;
};

/// Runs fn(rank) on one thread per rank at once; rethrows the first failure.
void onRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errs(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errs[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errs)
    if (e) std::rethrow_exception(e);
}

/// A full mesh of `nch` channels among `n` thread-ranks, established at once.
std::vector<RankLinks> mesh(int n, int nch, size_t buf, const std::string& job,
                            const WaitContext& wc) {
  std::vector<RankLinks> ranks(n);
  for (int r = 0; r < n; ++r) {
    ranks[r].transport = std::make_unique<ShmTransport>(makeContext(r, n, job, buf, wc));
    for (int ch = 0; ch < nch; ++ch)
      for (int k = 1; k < n; ++k) {  // a different order on every rank
        ranks[r].sendKeys.push_back({(r + k) % n, ch});
        ranks[r].recvKeys.push_back({(r + n - k) % n, ch});
      }
    std::reverse(ranks[r].sendKeys.begin(), ranks[r].sendKeys.end());
  }
  onRanks(n, [&](int r) {
    RankLinks& rl = ranks[r];
    rl.transport->establish(rl.sendKeys, rl.recvKeys, rl.sends, rl.recvs);
  });
  return ranks;
}

/// Every link of `rl` as streams of `bytes` each.
std::vector<Stream> streamsOf(RankLinks& rl, int rank, uint64_t bytes) {
  std::vector<Stream> s;
  for (size_t i = 0; i < rl.sends.size(); ++i)
    s.push_back(
        {rl.sends[i].get(), nullptr, rank, rl.sendKeys[i].peer, rl.sendKeys[i].channel, bytes});
  for (size_t i = 0; i < rl.recvs.size(); ++i)
    s.push_back(
        {nullptr, rl.recvs[i].get(), rl.recvKeys[i].peer, rank, rl.recvKeys[i].channel, bytes});
  return s;
}

void exchange(std::vector<RankLinks>& ranks, uint64_t bytes, const WaitContext& wc) {
  onRanks(static_cast<int>(ranks.size()), [&](int r) {
    auto s = streamsOf(ranks[r], r, bytes);
    pump(s, wc);
    for (const Stream& st : s)
      EXPECT_EQ(st.wrong, 0u) << st.src << "->" << st.dst << " ch " << st.ch;
  });
}

class ShmTest : public harness::ShmFixture {};

TEST_F(ShmTest, TwoThreadRanksExchange10MiBBothWaysThrough64KiB) {
  std::string job = uniqueJob("bothways");
  auto ranks = mesh(2, 1, 64 << 10, job, wc_);
  EXPECT_EQ(ranks[0].transport->capacity(), 64u << 10);
  EXPECT_STREQ(ranks[0].transport->name(), "shm");
  EXPECT_EQ(leftovers(dir_, job), 0) << "names must go once both sides are mapped";
  exchange(ranks, 10 << 20, wc_);
  ranks.clear();
  EXPECT_EQ(leftovers(dir_, job), 0);
}

TEST_F(ShmTest, ManyChannelsOddBufferSize) {
  std::string job = uniqueJob("channels");
  auto ranks = mesh(2, 16, 1000, job, wc_);  // rounded up to 1024
  EXPECT_EQ(ranks[1].transport->capacity(), 1024u);
  exchange(ranks, 256 << 10, wc_);
}

TEST_F(ShmTest, FourRanksFullMeshEstablishAtOnce) {
  for (int round = 0; round < 5; ++round) {
    std::string job = uniqueJob("mesh4");
    auto ranks = mesh(4, 2, 16 << 10, job, wc_);
    ASSERT_EQ(ranks[2].sends.size(), 6u);
    exchange(ranks, 200 << 10, wc_);
    ranks.clear();
    EXPECT_EQ(leftovers(dir_, job), 0);
  }
}

TEST_F(ShmTest, CanConnectOnlyToOtherRanksOfThisHost) {
  Context c = makeContext(0, 3, uniqueJob("canconn"), 4096, wc_);
  c.peers[2].hostHash = 99;
  ShmTransport t(c);
  EXPECT_FALSE(t.canConnect(0));
  EXPECT_TRUE(t.canConnect(1));
  EXPECT_FALSE(t.canConnect(2));
  EXPECT_FALSE(t.canConnect(3));
  EXPECT_FALSE(t.canConnect(-1));
  std::vector<std::unique_ptr<SendHalf>> s;
  std::vector<std::unique_ptr<RecvHalf>> r;
  try {
    t.establish({{2, 0}}, {}, s, r);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveInvalidArgument);
  }
  EXPECT_THROW(t.establish({}, {{1, 0}, {1, 0}}, s, r), Error);
  Context bad = c;
  bad.jobId.clear();
  EXPECT_THROW(ShmTransport{bad}, Error);
}

TEST_F(ShmTest, ReceiverAloneRemovesItsNameWhenDestroyed) {
  std::string job = uniqueJob("alone");
  ShmTransport t(makeContext(1, 2, job, 4096, wc_));
  std::vector<std::unique_ptr<SendHalf>> s;
  std::vector<std::unique_ptr<RecvHalf>> r;
  t.establish({}, {{0, 0}, {0, 3}}, s, r);
  EXPECT_EQ(leftovers(dir_, job), 2);
  r.clear();
  EXPECT_EQ(leftovers(dir_, job), 0);
}

TEST_F(ShmTest, SegmentsGoWhereGroveShmDirSays) {
  char tmpl[] = "/tmp/grove-shmdir-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  config::setOverride("GROVE_SHM_DIR", std::string(tmpl) + "/");
  std::string job = uniqueJob("dir");
  ShmTransport t(makeContext(1, 2, job, 4096, wc_));
  config::setOverride("GROVE_SHM_DIR", std::nullopt);
  EXPECT_EQ(t.dir(), tmpl);
  std::vector<std::unique_ptr<SendHalf>> s;
  std::vector<std::unique_ptr<RecvHalf>> r;
  t.establish({}, {{0, 0}}, s, r);
  EXPECT_EQ(leftovers(tmpl, job), 1);
  r.clear();
  EXPECT_EQ(leftovers(tmpl, job), 0);
  rmdir(tmpl);
}

/// The identity fields of a header, for faking segments.
struct FakeHeader {
  uint64_t magic = shm::kShmMagic;
  uint32_t version = shm::kShmVersion;
  uint32_t dataOffset = shm::kShmDataOffset;
  uint64_t capacity = 4096;
  int32_t creatorPid = 0;
  int32_t src = 0, dst = 1, channel = 0;
  uint64_t run = 0;
};

/// Writes a file at `path`: `bytes` long, with a header as given.
void writeFakeSegment(const std::string& path, size_t bytes, const FakeHeader& proto, bool ready) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  std::vector<uint8_t> img(shm::kShmDataOffset, 0);
  auto* h = new (img.data()) shm::ShmHeader();
  h->magic = proto.magic;
  h->version = proto.version;
  h->dataOffset = proto.dataOffset;
  h->capacity = proto.capacity;
  h->creatorPid = proto.creatorPid;
  h->src = proto.src;
  h->dst = proto.dst;
  h->channel = proto.channel;
  h->run = proto.run;
  h->ready.store(ready ? 1 : 0);
  size_t n = std::min(bytes, img.size());  // a short file gets a cut header
  ASSERT_EQ(pwrite(fd, img.data(), n, 0), static_cast<ssize_t>(n));
  close(fd);
}

FakeHeader goodHeader(int src, int dst, int ch, size_t cap, int pid) {
  FakeHeader h;
  h.capacity = cap;
  h.creatorPid = pid;
  h.src = src;
  h.dst = dst;
  h.channel = ch;
  return h;
}

/// Links rank 0 -> 1 on `channels` channels of `job` (link key `secret`),
/// the sender first: it must wait past the stale files in its way, not take
/// them, until the receiver replaces them; then streams through them.
void sendPastStaleSegments(const std::string& job, int channels, uint64_t secret,
                           const WaitContext& wc) {
  std::vector<RankLinks> ranks(2);
  for (int r = 0; r < 2; ++r) {
    Context c = makeContext(r, 2, job, 4096, wc);
    c.secret = secret;
    ranks[r].transport = std::make_unique<ShmTransport>(std::move(c));
    for (int ch = 0; ch < channels; ++ch)
      (r == 0 ? ranks[r].sendKeys : ranks[r].recvKeys).push_back({1 - r, ch});
  }
  onRanks(2, [&](int r) {
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    RankLinks& rl = ranks[r];
    rl.transport->establish(rl.sendKeys, rl.recvKeys, rl.sends, rl.recvs);
  });
  exchange(ranks, 1 << 20, wc);
}

TEST_F(ShmTest, StaleSegmentsOfACrashedJobAreReplaced) {
  std::string job = uniqueJob("stale");
  std::string p0 = dir_ + "/" + ShmTransport::segmentName(job, 0, 1, 0);
  std::string p1 = dir_ + "/" + ShmTransport::segmentName(job, 0, 1, 1);
  // A ready-looking segment made by another (dead) process, and pure junk.
  writeFakeSegment(p0, shm::kShmDataOffset + 4096, goodHeader(0, 1, 0, 4096, 0x7ffffff0), true);
  {
    std::string junk(100, 'x');
    FILE* f = fopen(p1.c_str(), "w");
    fwrite(junk.data(), 1, 100, f);
    fclose(f);
  }
  ASSERT_EQ(leftovers(dir_, job), 2);
  sendPastStaleSegments(job, 2, 0, wc_);
  EXPECT_EQ(leftovers(dir_, job), 0);
}

TEST_F(ShmTest, AnEarlierRunsSegmentIsStaleEvenFromTheSamePid) {
  // Pids repeat across pid namespaces: a crashed run of the same
  // communicator id can leave a segment whose creator had the pid the
  // receiver has now. Only the run tag (from the run's fresh link key)
  // tells it apart; the sender must wait for the receiver's own.
  std::string job = uniqueJob("rerun");
  std::string path = dir_ + "/" + ShmTransport::segmentName(job, 0, 1, 0);
  FakeHeader earlier = goodHeader(0, 1, 0, 4096, getpid());
  earlier.run = ShmTransport::runTagOf(0x1111);
  writeFakeSegment(path, shm::kShmDataOffset + 4096, earlier, true);
  EXPECT_NE(ShmTransport::runTagOf(0x2222), earlier.run);
  EXPECT_EQ(ShmTransport::runTagOf(0), 0u);
  sendPastStaleSegments(job, 1, 0x2222, wc_);  // this run's link key, the same on both ranks
  EXPECT_EQ(leftovers(dir_, job), 0);
}

/// Establishes rank 0 -> 1 channel 0 alone (nobody makes the segment) and returns the error.
Error sendAlone(const std::string& job, const WaitContext& wc) {
  ShmTransport t(makeContext(0, 2, job, 4096, wc));
  std::vector<std::unique_ptr<SendHalf>> s;
  std::vector<std::unique_ptr<RecvHalf>> r;
  try {
    t.establish({{1, 0}}, {}, s, r);
  } catch (const Error& e) {
    return e;
  }
  return Error(groveSuccess, "no error");
}

TEST_F(ShmTest, WrongOrShortSegmentsGiveClearErrors) {
  WaitContext quick = WaitContext::of(abort_, 0.4);
  std::string job = uniqueJob("bad");
  std::string path = dir_ + "/" + ShmTransport::segmentName(job, 0, 1, 0);

  Error missing = sendAlone(job, quick);
  EXPECT_EQ(missing.code(), groveRemoteError);
  EXPECT_NE(std::string(missing.what()).find("does not exist yet"), std::string::npos)
      << missing.what();

  writeFakeSegment(path, shm::kShmDataOffset + 512, goodHeader(0, 1, 0, 1 << 20, getpid()), true);
  Error shortSeg = sendAlone(job, quick);
  EXPECT_EQ(shortSeg.code(), groveSystemError);
  EXPECT_NE(std::string(shortSeg.what()).find("too short"), std::string::npos) << shortSeg.what();

  FakeHeader h = goodHeader(0, 1, 0, 4096, getpid());
  h.version = 99;
  writeFakeSegment(path, shm::kShmDataOffset + 4096, h, true);
  Error version = sendAlone(job, quick);
  EXPECT_EQ(version.code(), groveSystemError);
  EXPECT_NE(std::string(version.what()).find("layout version 99"), std::string::npos)
      << version.what();

  writeFakeSegment(path, shm::kShmDataOffset + 4096, goodHeader(0, 1, 5, 4096, getpid()), true);
  Error wrongLink = sendAlone(job, quick);
  EXPECT_EQ(wrongLink.code(), groveSystemError);
  EXPECT_NE(std::string(wrongLink.what()).find("not this one"), std::string::npos)
      << wrongLink.what();

  h = goodHeader(0, 1, 0, 4096, getpid());
  h.magic = 42;
  writeFakeSegment(path, shm::kShmDataOffset + 4096, h, true);
  Error magic = sendAlone(job, quick);
  EXPECT_EQ(magic.code(), groveRemoteError);
  EXPECT_NE(std::string(magic.what()).find("bad magic"), std::string::npos) << magic.what();

  writeFakeSegment(path, 100, h, true);
  Error tiny = sendAlone(job, quick);
  EXPECT_NE(std::string(tiny.what()).find("is only 100 bytes"), std::string::npos) << tiny.what();
  unlink(path.c_str());
}

TEST_F(ShmTest, AbortEndsTheWaitForAPeer) {
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abort_.raise("test abort");
  });
  Error e = sendAlone(uniqueJob("abort"), wc_);
  raiser.join();
  EXPECT_EQ(e.code(), groveRemoteError);
  EXPECT_NE(std::string(e.what()).find("test abort"), std::string::npos) << e.what();
}

TEST_F(ShmTest, SenderNoticesAClosedReceiver) {
  auto ranks = mesh(2, 1, 4096, uniqueJob("closed"), wc_);
  ranks[1].recvs.clear();
  Waiter w(wc_, "filling");
  try {
    for (;;) {
      void* p;
      size_t n = ranks[0].sends[0]->reserve(&p);
      if (n > 0)
        ranks[0].sends[0]->commit(n);
      else
        w.wait();
    }
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveRemoteError);
    EXPECT_NE(std::string(e.what()).find("closed its end"), std::string::npos) << e.what();
  }
}

TEST_F(ShmTest, ReceiverDrainsAClosedSenderThenGetsAnError) {
  auto ranks = mesh(2, 1, 4096, uniqueJob("drain"), wc_);
  void* p;
  ASSERT_EQ(ranks[0].sends[0]->reserve(&p), 4096u);
  memset(p, 7, 100);
  ranks[0].sends[0]->commit(100);
  ranks[0].sends.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const void* q;
  ASSERT_EQ(ranks[1].recvs[0]->peek(&q), 100u);
  EXPECT_EQ(static_cast<const uint8_t*>(q)[99], 7);
  ranks[1].recvs[0]->consume(100);
  Waiter w(wc_, "draining");
  try {
    for (;;)
      if (ranks[1].recvs[0]->peek(&q) == 0) w.wait();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveRemoteError);
    EXPECT_NE(std::string(e.what()).find("closed its end"), std::string::npos) << e.what();
  }
}

TEST_F(ShmTest, TwoProcessesExchangeAndVerify) {
  std::string job = uniqueJob("fork");
  pid_t parent = getpid();
  auto side = [&](int rank, std::vector<int> pids) {
    ShmTransport t(makeContext(rank, 2, job, 64 << 10, wc_, pids));
    RankLinks rl;
    rl.sendKeys = {{1 - rank, 0}, {1 - rank, 1}};
    rl.recvKeys = {{1 - rank, 1}, {1 - rank, 0}};
    t.establish(rl.sendKeys, rl.recvKeys, rl.sends, rl.recvs);
    auto s = streamsOf(rl, rank, 10 << 20);
    pump(s, wc_);
    uint64_t wrong = 0;
    for (const Stream& st : s) wrong += st.wrong;
    return wrong;
  };
  pid_t child = forkChild([&] { return side(1, {parent, getpid()}) == 0 ? 0 : 1; });
  ASSERT_GT(child, 0);
  EXPECT_EQ(side(0, {parent, child}), 0u);
  EXPECT_EQ(waitExit(child), 0);
  EXPECT_EQ(leftovers(dir_, job), 0);
}

TEST_F(ShmTest, KilledChildEndsPeekAndReserveWithRemoteError) {
  std::string job = uniqueJob("kill");
  pid_t parent = getpid();
  auto open = [&](int rank, std::vector<int> pids, RankLinks& rl) {
    rl.transport = std::make_unique<ShmTransport>(makeContext(rank, 2, job, 64 << 10, wc_, pids));
    rl.sendKeys = {{1 - rank, 0}};
    rl.recvKeys = {{1 - rank, 0}};
    rl.transport->establish(rl.sendKeys, rl.recvKeys, rl.sends, rl.recvs);
  };
  pid_t child = forkChild([&] {
    RankLinks rl;
    open(1, {parent, getpid()}, rl);
    auto s = streamsOf(rl, 1, 1000);
    pump(s, wc_);
    pause();  // until killed
    return 0;
  });
  ASSERT_GT(child, 0);
  RankLinks rl;
  open(0, {parent, child}, rl);
  auto s = streamsOf(rl, 0, 1000);
  pump(s, wc_);
  kill(child, SIGKILL);  // not reaped until the end: the parent sees a zombie
  auto expectDeath = [&](const std::function<size_t()>& poll, const char* what) {
    auto start = Clock::now();
    Waiter w(wc_, what);
    try {
      for (;;)
        if (poll() == 0) w.wait();
    } catch (const Error& e) {
      double sec = std::chrono::duration<double>(Clock::now() - start).count();
      EXPECT_EQ(e.code(), groveRemoteError) << what;
      EXPECT_NE(std::string(e.what()).find("died"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(child)), std::string::npos) << e.what();
      EXPECT_LT(sec, 2.0) << what;
    }
  };
  expectDeath(
      [&] {
        const void* p;
        return rl.recvs[0]->peek(&p);
      },
      "peek");
  expectDeath(
      [&] {
        void* p;
        size_t n = rl.sends[0]->reserve(&p);
        if (n > 0) rl.sends[0]->commit(n);
        return n;
      },
      "reserve");
  EXPECT_EQ(waitExit(child), 128 + SIGKILL);
  rl = RankLinks();
  EXPECT_EQ(leftovers(dir_, job), 0);
}

}  // namespace
}  // namespace grove::transport
