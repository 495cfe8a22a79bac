// Bootstrap: unique ids, join, all-gather, refusal, abort and death detection.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/socket.h"
#include "core/bootstrap.h"
#include "core/bootstrap_root.h"
#include "unit/harness/run_threads.h"

namespace grove::core {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kTimeout = 20.0;

/// A fresh id whose root listens on loopback.
UniqueIdData localId() {
  config::setOverride("GROVE_SOCKET_IFNAME", "lo");
  return makeUniqueId(/*ignoreEnv=*/true);
}

/// Runs fn(rank) on nranks threads and joins them; fails the test on exceptions.
void runRanks(int nranks, const std::function<void(int)>& fn) { harness::runThreads(nranks, fn); }

/// Waits up to `sec` for the signal; returns the seconds it took (or -1).
double waitRaised(const AbortSignal& s, double sec) {
  auto t0 = Clock::now();
  while (!s.raised()) {
    if (std::chrono::duration<double>(Clock::now() - t0).count() > sec) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

transport::PeerInfo selfInfo() {
  transport::PeerInfo p;
  fillHostIdentity(p);
  return p;
}

}  // namespace

TEST(UniqueId, EncodeDecodeRoundTrip) {
  UniqueIdData d;
  d.root = net::resolveAddress("127.0.0.1:4567");
  d.secret = 0x1122334455667788ull;
  d.nonce = 42;
  d.fromEnv = true;
  groveUniqueId id;
  encodeUniqueId(d, &id);
  UniqueIdData e = decodeUniqueId(id);
  EXPECT_EQ(net::formatAddress(e.root), "127.0.0.1:4567");
  EXPECT_EQ(e.secret, d.secret);
  EXPECT_EQ(e.nonce, d.nonce);
  EXPECT_TRUE(e.fromEnv);
  d.root = net::resolveAddress("[::1]:9");
  d.fromEnv = false;
  encodeUniqueId(d, &id);
  e = decodeUniqueId(id);
  EXPECT_EQ(net::formatAddress(e.root), "[::1]:9");
  EXPECT_FALSE(e.fromEnv);
  EXPECT_EQ(jobIdOf(d), jobIdOf(e));
  UniqueIdData other = d;
  other.nonce = 43;
  EXPECT_NE(jobIdOf(d), jobIdOf(other));
  EXPECT_EQ(jobIdOf(d).size(), 16u);
}

// Two runs of one id (a restarted job with the same GROVE_COMM_ID and
// secret) get different link keys from their ranks' fresh salts; every rank
// of one run gets the same key, and another secret gives another key.
TEST(UniqueId, EachRunGetsItsOwnLinkKey) {
  UniqueIdData d;
  d.secret = 0x1234;
  d.nonce = 0x5678;
  std::vector<uint8_t> runA(16), runB(16);
  for (size_t i = 0; i < 16; ++i) {
    runA[i] = static_cast<uint8_t>(i);
    runB[i] = static_cast<uint8_t>(i + (i == 9 ? 1 : 0));  // one rank drew another salt
  }
  EXPECT_EQ(runLinkSecret(d, runA), runLinkSecret(d, runA));
  EXPECT_NE(runLinkSecret(d, runA), runLinkSecret(d, runB));
  EXPECT_NE(runLinkSecret(d, runA), d.secret);
  UniqueIdData other = d;
  other.secret = 0x1235;
  EXPECT_NE(runLinkSecret(other, runA), runLinkSecret(d, runA));
}

TEST(UniqueId, BadMagicAndCorruptionAreRejected) {
  groveUniqueId id;
  std::memset(&id, 0, sizeof(id));
  try {
    decodeUniqueId(id);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("magic"), std::string::npos);
  }
  UniqueIdData d = localId();
  encodeUniqueId(d, &id);
  id.internal[40] ^= 1;  // the nonce
  EXPECT_THROW(decodeUniqueId(id), Error);
}

class BootstrapSizes : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapSizes, JoinAllGatherBarrier) {
  const int n = GetParam();
  UniqueIdData id = localId();
  runRanks(n, [&](int r) {
    AbortSignal sig;
    Bootstrap b(id, r, n, selfInfo(), &sig, kTimeout);
    ASSERT_EQ(b.peers().size(), static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) {
      EXPECT_EQ(b.peers()[p].rank, p);
      EXPECT_EQ(b.peers()[p].pid, getpid());
      EXPECT_EQ(b.peers()[p].hostHash, localHostHash());
    }
    int32_t mine[3] = {r, r * 10, -r};
    auto all = b.allGather(mine, sizeof(mine));
    ASSERT_EQ(all.size(), sizeof(mine) * n);
    for (int p = 0; p < n; ++p) {
      int32_t got[3];
      std::memcpy(got, all.data() + p * sizeof(got), sizeof(got));
      EXPECT_EQ(got[0], p);
      EXPECT_EQ(got[1], p * 10);
      EXPECT_EQ(got[2], -p);
    }
    b.barrier();
    EXPECT_TRUE(b.allGather(nullptr, 0).empty());
    b.close();
    b.close();  // idempotent
    EXPECT_FALSE(sig.raised()) << sig.reason();
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapSizes, ::testing::Values(1, 2, 4, 8));

TEST(Bootstrap, ManySequentialAllGathers) {
  const int n = 4;
  UniqueIdData id = localId();
  runRanks(n, [&](int r) {
    AbortSignal sig;
    Bootstrap b(id, r, n, selfInfo(), &sig, kTimeout);
    for (int it = 0; it < 300; ++it) {
      size_t bytes = 1 + (it * 37) % 3000;
      std::vector<uint8_t> mine(bytes, static_cast<uint8_t>(r * 31 + it));
      auto all = b.allGather(mine.data(), bytes);
      ASSERT_EQ(all.size(), bytes * n);
      for (int p = 0; p < n; ++p)
        ASSERT_EQ(all[p * bytes + bytes - 1], static_cast<uint8_t>(p * 31 + it))
            << "iteration " << it;
      if (it % 50 == 0) b.barrier();
    }
  });
}

// A broadcast hands the source's bytes, of any size (none too), to every
// rank, in one numbering with the all-gathers around it.
TEST(Bootstrap, BroadcastFromEveryRankBetweenAllGathers) {
  const int n = 4;
  UniqueIdData id = localId();
  runRanks(n, [&](int r) {
    AbortSignal sig;
    Bootstrap b(id, r, n, selfInfo(), &sig, kTimeout);
    for (int it = 0; it < 12; ++it) {
      const int source = it % n;
      const size_t bytes = it == 5 ? 0 : 1 + (it * 4099) % 70000;
      std::vector<uint8_t> mine;
      if (r == source)  // others pass junk of another size: not read
        for (size_t i = 0; i < bytes; ++i) mine.push_back(static_cast<uint8_t>(i * 7 + it));
      else
        mine.assign(3, 0xee);
      const std::vector<uint8_t> got = b.broadcast(source, mine);
      ASSERT_EQ(got.size(), bytes) << "iteration " << it;
      for (size_t i = 0; i < bytes; ++i)
        ASSERT_EQ(got[i], static_cast<uint8_t>(i * 7 + it)) << "iteration " << it << " byte " << i;
      const int32_t v = r * 100 + it;
      auto all = b.allGather(&v, sizeof(v));
      ASSERT_EQ(all.size(), sizeof(v) * n);
      int32_t last;
      std::memcpy(&last, all.data() + (n - 1) * sizeof(v), sizeof(v));
      EXPECT_EQ(last, (n - 1) * 100 + it);
    }
    EXPECT_THROW(b.broadcast(n, {}), Error);  // no such rank: refused here, nothing sent
    b.barrier();
    EXPECT_FALSE(sig.raised()) << sig.reason();
  });
}

// Ranks that name different sources, or meet an all-gather with a
// broadcast, abort the job with the reason instead of waiting.
TEST(Bootstrap, InconsistentBroadcastsAbort) {
  const int n = 3;
  for (int variant = 0; variant < 2; ++variant) {
    UniqueIdData id = localId();
    std::vector<std::string> errors(n);
    runRanks(n, [&](int r) {
      AbortSignal sig;
      Bootstrap b(id, r, n, selfInfo(), &sig, kTimeout);
      try {
        if (variant == 1 && r == 2) {
          const int32_t v = r;
          b.allGather(&v, sizeof(v));
        } else {
          b.broadcast(variant == 0 && r == 1 ? 1 : 0, {1, 2, 3});
        }
      } catch (const Error& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
    for (int r = 0; r < n; ++r) {
      const std::string& e = errors[static_cast<size_t>(r)];
      EXPECT_NE(e.find("inconsistent"), std::string::npos) << "variant " << variant << ": " << e;
    }
  }
}

TEST(Bootstrap, WrongSecretDuplicateAndMismatchAreRefused) {
  const int n = 3;
  UniqueIdData id = localId();
  std::atomic<int> joined{0};
  std::thread rank0([&] {
    AbortSignal sig;
    Bootstrap b(id, 0, n, selfInfo(), &sig, kTimeout);
    joined++;
    auto all = b.allGather(&n, sizeof(n));
    EXPECT_EQ(all.size(), sizeof(n) * n);
    EXPECT_FALSE(sig.raised());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // rank 0 fixes nranks first
  auto expectRefused = [&](UniqueIdData badId, int rank, int nranks, const char* text) {
    try {
      Bootstrap bad(badId, rank, nranks, selfInfo(), nullptr, kTimeout);
      ADD_FAILURE() << "not refused: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), groveInvalidUsage) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  UniqueIdData wrong = id;
  wrong.secret ^= 0x5a5a;
  expectRefused(wrong, 2, n, "wrong secret");
  expectRefused(id, 1, n + 1, "nranks mismatch");
  std::thread rank1([&] {
    AbortSignal sig;
    Bootstrap b(id, 1, n, selfInfo(), &sig, kTimeout);
    b.allGather(&n, sizeof(n));
    EXPECT_FALSE(sig.raised());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  expectRefused(id, 1, n, "duplicate rank 1");
  AbortSignal sig2;
  {
    Bootstrap b(id, 2, n, selfInfo(), &sig2, kTimeout);
    b.allGather(&n, sizeof(n));
  }
  rank0.join();
  rank1.join();
  EXPECT_FALSE(sig2.raised()) << sig2.reason();
}

TEST(Bootstrap, RootClosesASilentConnection) {
  UniqueIdData id = localId();
  net::Fd c = net::connectUntil(id.root, net::Deadline::in(5));
  auto t0 = Clock::now();
  MsgHeader challenge;  // the root speaks first
  ASSERT_EQ(net::recvAll(c.get(), &challenge, sizeof(challenge), net::Deadline::in(5)),
            net::IoResult::kOk);
  EXPECT_EQ(challenge.type, static_cast<uint32_t>(MsgType::kChallenge));
  char b;
  EXPECT_EQ(net::recvAll(c.get(), &b, 1, net::Deadline::in(15)), net::IoResult::kClosed);
  double took = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_GT(took, kHelloTimeoutSec - 1);
  EXPECT_LT(took, kHelloTimeoutSec + 5);
}

// Open descriptors of this process.
int openFds() {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd) n += fcntl(fd, F_GETFD) != -1 ? 1 : 0;
  return n;
}

// A flood of connections that never say hello: the root holds at most
// kMaxPendingHellos of them (the oldest go first), so it cannot run out of
// descriptors, and a real rank still joins meanwhile.
TEST(Bootstrap, RootCapsConnectionsWithoutAHello) {
  UniqueIdData id = localId();
  const int before = openFds();
  std::vector<net::Fd> flood;
  for (int i = 0; i < 300; ++i) flood.push_back(net::connectUntil(id.root, net::Deadline::in(5)));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the root accepts them all
  const int held = openFds() - before - static_cast<int>(flood.size());
  EXPECT_LE(held, static_cast<int>(kMaxPendingHellos) + 4)
      << "the root holds " << held << " descriptors for 300 silent connections";
  runRanks(1, [&](int r) {
    AbortSignal sig;
    Bootstrap b(id, r, 1, selfInfo(), &sig, kTimeout);
    EXPECT_EQ(b.peers().size(), 1u);
    b.close();
  });
}

TEST(Bootstrap, AbortPropagatesToOtherRanks) {
  const int n = 4;
  UniqueIdData id = localId();
  runRanks(n, [&](int r) {
    AbortSignal sig;
    Bootstrap b(id, r, n, selfInfo(), &sig, kTimeout);
    b.barrier();
    if (r == 2) {
      b.abort("disk full");
      b.abort("again");  // harmless
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      EXPECT_FALSE(sig.raised());
      return;
    }
    ASSERT_GE(waitRaised(sig, 5), 0) << "rank " << r << " never saw the abort";
    EXPECT_NE(sig.reason().find("rank 2"), std::string::npos) << sig.reason();
    EXPECT_NE(sig.reason().find("disk full"), std::string::npos) << sig.reason();
    try {
      b.allGather(&r, sizeof(r));
      ADD_FAILURE();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), groveRemoteError);
    }
  });
}

/// Death detection: rank n-1 is a forked child that joins and then dies
/// without BYE; the parent's ranks must see their signals raised quickly.
void deathTest(bool sigkill) {
  const int n = 4;
  UniqueIdData id = localId();
  int pipeFd[2];
  ASSERT_EQ(pipe(pipeFd), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Child: only join, tell the parent, then die (or wait to be killed).
    alarm(60);  // never linger
    ::close(pipeFd[0]);
    try {
      Bootstrap b(id, n - 1, n, selfInfo(), nullptr, kTimeout);
      b.barrier();
      char one = 1;
      if (write(pipeFd[1], &one, 1) != 1) _exit(3);
      if (sigkill)
        for (;;) pause();
      _exit(0);
    } catch (...) {
      _exit(2);
    }
  }
  ::close(pipeFd[1]);
  std::atomic<Clock::time_point> deathAt{Clock::time_point{}};
  std::thread killer([&] {
    char one = 0;
    ASSERT_EQ(read(pipeFd[0], &one, 1), 1);
    if (sigkill) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      deathAt = Clock::now();
      kill(child, SIGKILL);
    } else {
      deathAt = Clock::now();  // the child _exit()s right after writing
    }
  });
  runRanks(n - 1, [&](int r) {
    AbortSignal sig;
    Bootstrap b(id, r, n, selfInfo(), &sig, kTimeout);
    b.barrier();
    ASSERT_GE(waitRaised(sig, 10), 0) << "rank " << r << " did not notice the death";
    while (deathAt.load() == Clock::time_point{})
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    double after = std::chrono::duration<double>(Clock::now() - deathAt.load()).count();
    EXPECT_LT(after, 2.0) << "noticed only after " << after << " s";
    EXPECT_NE(sig.reason().find("rank 3"), std::string::npos) << sig.reason();
    EXPECT_NE(sig.reason().find("died"), std::string::npos) << sig.reason();
  });
  killer.join();
  ::close(pipeFd[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (sigkill) {
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  } else {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
}

TEST(Bootstrap, DeathByExitWithoutByeIsDetected) { deathTest(false); }
TEST(Bootstrap, DeathBySigkillIsDetected) { deathTest(true); }

TEST(Bootstrap, CommIdFromEnvironment) {
  // A free loopback port for the root.
  sockaddr_storage probe = net::resolveAddress("127.0.0.1:0");
  int port;
  {
    net::Fd l = net::listenOn(probe);
    port = net::addressPort(probe);
  }
  config::setOverride("GROVE_COMM_ID", "127.0.0.1:" + std::to_string(port));
  config::setOverride("GROVE_COMM_SECRET", "bootstrap-test-secret-0123");
  const int n = 4;
  for (int job = 0; job < 2; ++job) {  // the second job reuses the port
    std::vector<std::string> jobIds(n);
    std::vector<groveUniqueId> ids(n);
    runRanks(n, [&](int r) {
      if (r != 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(10 * r));
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(150));  // others connect first
      UniqueIdData id = makeUniqueId();
      EXPECT_TRUE(id.fromEnv);
      encodeUniqueId(id, &ids[r]);
      jobIds[r] = jobIdOf(id);
      AbortSignal sig;
      Bootstrap b(id, r, n, selfInfo(), &sig, kTimeout);
      auto all = b.allGather(&r, sizeof(r));
      for (int p = 0; p < n; ++p) EXPECT_EQ(reinterpret_cast<const int*>(all.data())[p], p);
      b.close();
      EXPECT_FALSE(sig.raised()) << sig.reason();
    });
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(jobIds[r], jobIds[0]);
      EXPECT_EQ(std::memcmp(&ids[r], &ids[0], sizeof(groveUniqueId)), 0);
    }
  }
  config::setOverride("GROVE_COMM_ID", std::nullopt);
  config::setOverride("GROVE_COMM_SECRET", std::nullopt);
}

// GROVE_COMM_ID needs a real secret: none, or a short one, is refused with
// what to do; a secret file works like the variable.
TEST(Bootstrap, CommIdNeedsASecret) {
  config::setOverride("GROVE_COMM_ID", "127.0.0.1:29999");
  try {
    makeUniqueId();
    ADD_FAILURE() << "no secret was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), groveInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("set GROVE_COMM_SECRET"), std::string::npos) << e.what();
  }
  config::setOverride("GROVE_COMM_SECRET", "short");
  EXPECT_THROW(makeUniqueId(), Error);
  config::setOverride("GROVE_COMM_SECRET", "a-secret-of-enough-characters");
  const UniqueIdData fromVar = makeUniqueId();
  config::setOverride("GROVE_COMM_SECRET", std::nullopt);
  const std::string file = "/tmp/grove-secret-test-" + std::to_string(getpid());
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("a-secret-of-enough-characters\n", f);
  fclose(f);
  config::setOverride("GROVE_COMM_SECRET_FILE", file);
  const UniqueIdData fromFile = makeUniqueId();
  EXPECT_EQ(fromFile.secret, fromVar.secret);
  EXPECT_EQ(fromFile.nonce, fromVar.nonce);
  unlink(file.c_str());
  config::setOverride("GROVE_COMM_SECRET_FILE", std::nullopt);
  config::setOverride("GROVE_COMM_ID", std::nullopt);
}

TEST(Bootstrap, ManyCommunicatorsAtOnce) {
  const int comms = 4, n = 3;
  std::vector<UniqueIdData> ids;
  for (int c = 0; c < comms; ++c) ids.push_back(localId());
  runRanks(comms * n, [&](int t) {
    int c = t / n, r = t % n;
    AbortSignal sig;
    Bootstrap b(ids[c], r, n, selfInfo(), &sig, kTimeout);
    int v = c * 100 + r;
    auto all = b.allGather(&v, sizeof(v));
    for (int p = 0; p < n; ++p) EXPECT_EQ(reinterpret_cast<const int*>(all.data())[p], c * 100 + p);
  });
}

}  // namespace grove::core
