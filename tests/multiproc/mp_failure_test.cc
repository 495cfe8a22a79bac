// Failure tests with real processes. The ranks are started directly by this
// test (GROVE_COMM_ID=127.0.0.1:port, GROVE_RANK, GROVE_NRANKS) rather than
// through grove-launch, so that each rank's exit status, time of exit and
// output can be seen, and no launcher kills the survivors for them; one test
// checks grove-launch's own status propagation.
//   (a) SIGKILL one of 4 ranks (rank 0, the bootstrap root's host, or rank 2)
//       during a loop of all-reduces, over shm and over socket: the other 3
//       must exit non-zero by themselves within 20 s (GROVE_TIMEOUT is 30 s),
//       each with an error text.
//   (b) a rank that never calls the all-reduce: with GROVE_TIMEOUT=3 the
//       others fail (timeout) within 20 s.
//   (d) random faults: SIGKILL or SIGSTOP of a random rank at a random
//       moment, over every path (below).
//   (c) a rank with the wrong secret (GROVE_COMM_SECRET) or the wrong nranks
//       is refused with a clear error, and nobody hangs.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <ostream>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "mp_job.h"
#include "mp_spawn.h"

namespace {

using mptest::groveShmFiles;
using mptest::Job;
using mptest::Rank;

// True if a survivor's error names rank v as the culprit: "rank v (host
// ..." (the hang doctor, a dead peer), "rank v's process" (the bootstrap
// root's host) or a list of ranks that have not joined that holds v.
bool namesRank(const std::string& err, int v) {
  const std::string who = "rank " + std::to_string(v);
  if (err.find(who + " (host") != std::string::npos) return true;
  if (err.find(who + "'s process") != std::string::npos) return true;
  const std::regex notJoined("ranks? ([0-9, ]+)(and [0-9]+ more )?ha(s|ve) not joined");
  std::smatch m;
  if (!std::regex_search(err, m, notJoined)) return false;
  const std::regex number("[0-9]+");
  const std::string list = m[1].str();
  for (auto it = std::sregex_iterator(list.begin(), list.end(), number);
       it != std::sregex_iterator(); ++it)
    if (it->str() == std::to_string(v)) return true;
  return false;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The library's error text in a rank's output: what follows "(result N): ".
std::string libraryError(const std::string& out) {
  size_t at = out.find("(result ");
  if (at == std::string::npos) return "";
  size_t colon = out.find("): ", at);
  if (colon == std::string::npos) return "";
  size_t end = out.find('\n', colon);
  return out.substr(colon + 3, end == std::string::npos ? std::string::npos : end - colon - 3);
}

bool exitedNonZero(const Rank& r) {
  return r.done && WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0;
}

// ------------------------------------------------------------ (a) a rank dies
struct KillCase {
  const char* transport;
  int victim;
  bool device = false;  // CUDA communicators on the emulated device (host_staged rings)
  bool eager = false;   // all-reduces of 16 floats: eager collectives over shm slot links
  bool stream = false;  // with device: stream tapes (GROVE_DEVICE_ENGINE=stream)
};
// Readable ctest names ("... # GetParam() = socket, kill rank 0").
void PrintTo(const KillCase& k, std::ostream* os) {
  *os << k.transport << ", kill rank " << k.victim << (k.device ? ", emulated device" : "")
      << (k.eager ? ", eager" : "") << (k.stream ? ", stream tapes" : "");
}

// The environment of a rank of an emulated-device job.
std::vector<std::string> emulatedDeviceEnv(int) {
  return {"GROVE_DEVICE_KIND=cuda", "GROVE_DEVICE_EMULATION=1"};
}
// The same with stream tapes instead of the interpreter's launches.
std::vector<std::string> emulatedStreamEnv(int) {
  return {"GROVE_DEVICE_KIND=cuda", "GROVE_DEVICE_EMULATION=1", "GROVE_DEVICE_ENGINE=stream"};
}
std::function<std::vector<std::string>(int)> deviceEnv(bool device, bool stream) {
  if (!device) return nullptr;
  return stream ? emulatedStreamEnv : emulatedDeviceEnv;
}

class KillRank : public ::testing::TestWithParam<KillCase> {};

TEST_P(KillRank, OthersFailFastWithAClearError) {
  const KillCase kc = GetParam();
  constexpr int kRanks = 4;
  Job job;
  std::vector<std::string> args = {"--loop-seconds", "90", "--ready-dir", job.dir};
  if (kc.eager) args.insert(args.end(), {"--loop-count", "16"});
  job.start(kRanks, kc.transport, "30", args, deviceEnv(kc.device, kc.stream));
  ASSERT_TRUE(job.waitReady(kRanks, 60)) << "ranks never got going\n" << job.allOutput();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_FALSE(job.poll({kc.victim})) << "victim ended early\n" << job.allOutput();
  double killedAt = mptest::now();
  ASSERT_EQ(kill(job.ranks[kc.victim].pid, SIGKILL), 0);
  std::vector<int> others;
  for (int r = 0; r < kRanks; ++r)
    if (r != kc.victim) others.push_back(r);
  bool all = job.waitRanks(others, 20);
  job.waitRanks({kc.victim}, 5);
  EXPECT_TRUE(all) << "survivors still running 20 s after rank " << kc.victim
                   << " was killed (GROVE_TIMEOUT=30)\n"
                   << job.allOutput();
  for (int r : others) {
    const Rank& k = job.ranks[r];
    if (!k.done) continue;
    std::string err = libraryError(job.output(r));
    printf("rank %d: %s after %.2f s: %s\n", r, mptest::describeStatus(k.status).c_str(),
           k.endedAt - killedAt, err.c_str());
    EXPECT_TRUE(exitedNonZero(k)) << "rank " << r << ": " << mptest::describeStatus(k.status)
                                  << " (want a non-zero exit, no crash)\n"
                                  << job.allOutput();
    EXPECT_LT(k.endedAt - killedAt, 20.0);
    EXPECT_FALSE(err.empty()) << "rank " << r << " printed no library error text\n"
                              << job.allOutput();
    // The dead rank is named. When rank 0 dies the bootstrap root dies with
    // it; the survivors' call boards (core/call_board.h) name it instead.
    const std::string victim = "rank " + std::to_string(kc.victim) + " (host";
    bool named = err.find(victim) != std::string::npos;
    if (kc.victim == 0) named = named && err.find("has died") != std::string::npos;
    EXPECT_TRUE(named) << "rank " << r << "'s error does not name the dead rank " << kc.victim
                       << ": \"" << err << "\"";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Mp, KillRank,
    ::testing::Values(KillCase{"shm", 2}, KillCase{"shm", 0}, KillCase{"socket", 2},
                      KillCase{"socket", 0}, KillCase{"shm", 2, true},
                      KillCase{"shm", 2, true, false, true}, KillCase{"shm", 2, false, true}),
    [](const ::testing::TestParamInfo<KillCase>& i) {
      return std::string(i.param.transport) + "_rank" + std::to_string(i.param.victim) +
             (i.param.device ? "_device" : "") + (i.param.eager ? "_eager" : "") +
             (i.param.stream ? "_stream" : "");
    });

// grove-launch passes a rank's death on as its own non-zero status, and the
// survivors end by themselves well before the launcher's grace period would
// end them.
TEST(MpFailure, LaunchPropagatesARankDeath) {
  std::string dir = mptest::makeTempDir("launch");
  std::vector<std::string> argv = {GROVE_LAUNCH_PATH,
                                   "-n",
                                   "4",
                                   "--tag-output",
                                   "--grace",
                                   "40",
                                   "--timeout",
                                   "90",
                                   "--",
                                   GROVE_MP_CHECK_PATH,
                                   "--loop-seconds",
                                   "60",
                                   "--die-rank",
                                   "2",
                                   "--die-after",
                                   "2"};
  mptest::RunResult r =
      mptest::runCommand(argv, {"GROVE_TRANSPORT=shm", "GROVE_TIMEOUT=30"}, 100, dir + "/out.txt");
  printf("grove-launch: %s after %.1f s\n", mptest::describeStatus(r.status).c_str(), r.seconds);
  ASSERT_TRUE(r.finished) << mptest::tail(r.output);
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0)
      << mptest::describeStatus(r.status) << "\n"
      << mptest::tail(r.output);
  // 2 s of loop, then the survivors fail; well under the 40 s grace.
  EXPECT_LT(r.seconds, 25.0) << mptest::tail(r.output);
  EXPECT_NE(r.output.find("groveAllReduce failed"), std::string::npos) << mptest::tail(r.output);
}

// ------------------------------------------------------------ (b) a rank never calls
// Rank 1 sleeps instead of calling; the others must time out (GROVE_TIMEOUT=3).
void silentRankCase(const char* transport, bool device, bool stream = false) {
  constexpr int kRanks = 4, kSilent = 1;
  Job job;
  job.start(
      kRanks, transport, "3",
      {"--loop-seconds", "60", "--sleep-rank", std::to_string(kSilent), "--sleep-seconds", "60"},
      deviceEnv(device, stream));
  std::vector<int> others = {0, 2, 3};
  bool all = job.waitRanks(others, 20);
  EXPECT_TRUE(all) << "ranks still waiting 20 s after start with GROVE_TIMEOUT=3\n"
                   << job.allOutput();
  int mentionsTimeout = 0;
  for (int r : others) {
    const Rank& k = job.ranks[r];
    if (!k.done) continue;
    std::string err = libraryError(job.output(r));
    printf("rank %d: %s after %.2f s: %s\n", r, mptest::describeStatus(k.status).c_str(),
           k.endedAt - job.startedAt, err.c_str());
    EXPECT_TRUE(exitedNonZero(k)) << "rank " << r << ": " << mptest::describeStatus(k.status)
                                  << "\n"
                                  << job.allOutput();
    EXPECT_FALSE(err.empty()) << "rank " << r << " printed no library error\n" << job.allOutput();
    std::string l = lower(err);
    mentionsTimeout += l.find("timeout") != std::string::npos ||
                       l.find("timed out") != std::string::npos ||
                       l.find("no progress") != std::string::npos;
  }
  EXPECT_GE(mentionsTimeout, 1) << "no survivor's error says it timed out\n" << job.allOutput();
  if (device) return;  // CUDA communicators: the device wait has no hang doctor yet
  // The hang doctor names the silent rank: alive, answering, not in the call.
  bool diagnosed = false;
  for (int r : others) {
    const std::string err = libraryError(job.output(r));
    diagnosed = diagnosed || (err.find("hang doctor: ") != std::string::npos &&
                              err.find("rank 1 (host") != std::string::npos &&
                              err.find("is not in a call") != std::string::npos);
  }
  EXPECT_TRUE(diagnosed) << "no survivor's error names rank 1 as not in a call\n"
                         << job.allOutput();
}

// A rank stopped by SIGSTOP in the middle of the loop: the survivors time
// out, and the hang doctor names the stopped rank (it cannot answer). When
// that is rank 0, whose process hosts the bootstrap root, nobody answers
// the doctor's question: the survivors read their host's call boards.
class StoppedRank : public ::testing::TestWithParam<int> {};

TEST_P(StoppedRank, HangDoctorNamesIt) {
  constexpr int kRanks = 3;
  const int kStopped = GetParam();
  Job job;
  job.start(kRanks, "shm", "3", {"--loop-seconds", "60", "--ready-dir", job.dir});
  ASSERT_TRUE(job.waitReady(kRanks, 30)) << job.allOutput();
  ASSERT_EQ(kill(job.ranks[kStopped].pid, SIGSTOP), 0);
  std::vector<int> others;
  for (int r = 0; r < kRanks; ++r)
    if (r != kStopped) others.push_back(r);
  bool all = job.waitRanks(others, 20);
  kill(job.ranks[kStopped].pid, SIGCONT);
  EXPECT_TRUE(all) << "ranks still waiting 20 s after the stop with GROVE_TIMEOUT=3\n"
                   << job.allOutput();
  bool named = false;
  for (int r : others) {
    const std::string err = libraryError(job.output(r));
    printf("rank %d: %s\n", r, err.c_str());
    EXPECT_TRUE(exitedNonZero(job.ranks[r])) << job.allOutput();
    const std::string who = "hang doctor: rank " + std::to_string(kStopped) + " (host";
    named = named || (err.find(who) != std::string::npos &&
                      (err.find("stopped answering") != std::string::npos ||
                       err.find("is stopped") != std::string::npos));
  }
  EXPECT_TRUE(named) << "no survivor's error names the stopped rank\n" << job.allOutput();
}

INSTANTIATE_TEST_SUITE_P(Mp, StoppedRank, ::testing::Values(2, 0),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "rank" + std::to_string(i.param);
                         });

class SilentRank : public ::testing::TestWithParam<const char*> {};

TEST_P(SilentRank, OthersTimeOut) { silentRankCase(GetParam(), false); }

// The same on CUDA communicators over the emulated device: the device wait
// itself times out (the launch's DevControl deadline).
TEST(MpFailure, SilentRankOnTheEmulatedDevice) { silentRankCase("shm", true); }
// And with stream tapes: a tape's wait has the same deadline.
TEST(MpFailure, SilentRankOnEmulatedStreamTapes) { silentRankCase("shm", true, true); }

INSTANTIATE_TEST_SUITE_P(Mp, SilentRank, ::testing::Values("shm", "socket"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

// ------------------------------------------------------------ (c) refused ranks
TEST(MpFailure, WrongSecretIsRefused) {
  constexpr int kRanks = 4, kBad = 3;
  Job job;
  job.start(kRanks, "shm", "3", {"--loop-seconds", "2"}, [](int r) {
    return r == kBad ? std::vector<std::string>{"GROVE_COMM_SECRET=not-the-secret-of-this-job"}
                     : std::vector<std::string>{};
  });
  bool all = job.waitRanks({0, 1, 2, 3}, 20);
  EXPECT_TRUE(all) << "ranks still running 20 s after start\n" << job.allOutput();
  const Rank& bad = job.ranks[kBad];
  EXPECT_TRUE(exitedNonZero(bad)) << job.allOutput();
  std::string err = lower(libraryError(job.output(kBad)));
  printf("refused rank: %s\n", err.c_str());
  EXPECT_NE(err.find("secret"), std::string::npos)
      << "the refused rank's error does not say why: \"" << err << "\"\n"
      << job.allOutput();
  for (int r = 0; r < kRanks; ++r)
    if (r != kBad) {
      EXPECT_TRUE(exitedNonZero(job.ranks[r])) << "rank " << r << "\n" << job.allOutput();
    }
}

TEST(MpFailure, WrongNranksIsRefused) {
  constexpr int kRanks = 4, kBad = 3;
  Job job;
  job.start(kRanks, "shm", "3", {"--loop-seconds", "2", "--bad-nranks", "3:5"});
  bool all = job.waitRanks({0, 1, 2, 3}, 20);
  EXPECT_TRUE(all) << "ranks still running 20 s after start\n" << job.allOutput();
  EXPECT_TRUE(exitedNonZero(job.ranks[kBad])) << job.allOutput();
  // Whichever joined first sets the job's size: the others are refused,
  // naming the mismatch (the bad rank, or the good ones if it came first).
  bool named = false;
  for (int r = 0; r < kRanks; ++r) {
    std::string err = lower(libraryError(job.output(r)));
    printf("rank %d: %s\n", r, err.c_str());
    named = named || err.find("nranks mismatch") != std::string::npos;
  }
  EXPECT_TRUE(named) << "no rank's error names the nranks mismatch\n" << job.allOutput();
  for (int r = 0; r < kRanks; ++r)
    if (r != kBad) {
      EXPECT_TRUE(exitedNonZero(job.ranks[r])) << "rank " << r << "\n" << job.allOutput();
    }
}

}  // namespace

// ------------------------------------------------------------ (d) random faults
// Randomised fault injection: each trial starts a job of 2-4 ranks looping
// all-reduces (shared memory, sockets, eager blocks, or CUDA communicators
// on the emulated device), waits a random moment -- during init or in the
// loop -- and then SIGKILLs or SIGSTOPs a random rank. Every survivor must
// exit non-zero by itself, with a library error, within GROVE_TIMEOUT (3 s)
// plus a margin; afterwards no process of the job is left and no shared-
// memory file of it remains. GROVE_FAULT_TRIALS sets the number of trials
// (CI runs a few; a nightly run 100 or more), GROVE_FAULT_SEED the seed
// (printed, so a failing trial can be replayed).
namespace {

int envInt(const char* name, int fallback) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? atoi(v) : fallback;
}

}  // namespace

TEST(MpFailure, RandomFaultsNeverHang) {
  const int trials = envInt("GROVE_FAULT_TRIALS", 8);
  const unsigned seed =
      static_cast<unsigned>(envInt("GROVE_FAULT_SEED", static_cast<int>(time(nullptr))));
  printf("random faults: %d trials, GROVE_FAULT_SEED=%u\n", trials, seed);
  std::mt19937 rng(seed);
  const char* kPaths[] = {"shm", "socket", "eager", "device"};
  int kills = 0, stops = 0, duringInit = 0, slowest = 0, survivors = 0, named = 0;
  int initSurvivors = 0, initNamed = 0;
  double worst = 0;
  for (int t = 0; t < trials; ++t) {
    const std::string path = kPaths[rng() % 4];
    const int n = 2 + static_cast<int>(rng() % 3);
    const int victim = static_cast<int>(rng() % n);
    const bool stop = rng() % 2 == 0;
    const double delay = static_cast<double>(rng() % 1500) / 1000.0;
    // The job's segments go to a directory of the trial's own, so that
    // tests running beside this one are neither counted nor cleaned up.
    const mptest::ShmDir shmDir("fault-trial");
    ASSERT_FALSE(shmDir.path().empty()) << "no directory for the trial's segments";
    SCOPED_TRACE("trial " + std::to_string(t) + ": " + path + ", " + std::to_string(n) +
                 " ranks, " + (stop ? "SIGSTOP" : "SIGKILL") + " rank " + std::to_string(victim) +
                 " after " + std::to_string(delay) +
                 " s (GROVE_FAULT_SEED=" + std::to_string(seed) + ")");
    Job job;
    std::vector<std::string> args = {"--loop-seconds", "60", "--ready-dir", job.dir};
    if (path == "eager") args.insert(args.end(), {"--loop-count", "16"});
    job.start(n, path == "socket" ? "socket" : "shm", "3", args, [&](int r) {
      std::vector<std::string> env;
      if (path == "device") env = emulatedDeviceEnv(r);
      env.push_back("GROVE_SHM_DIR=" + shmDir.path());
      return env;
    });
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    const bool inInit = !job.waitReady(n, 0);
    duringInit += inInit ? 1 : 0;
    ASSERT_EQ(kill(job.ranks[victim].pid, stop ? SIGSTOP : SIGKILL), 0);
    (stop ? stops : kills)++;
    const double faultAt = mptest::now();
    std::vector<int> others;
    for (int r = 0; r < n; ++r)
      if (r != victim) others.push_back(r);
    const bool ended = job.waitRanks(others, 3.0 + 12.0);
    if (stop) kill(job.ranks[victim].pid, SIGCONT);
    EXPECT_TRUE(ended) << "survivors still running 15 s after the fault\n" << job.allOutput();
    for (int r : others) {
      const Rank& k = job.ranks[r];
      if (!k.done) continue;
      const double took = k.endedAt - faultAt;
      if (took > worst) {
        worst = took;
        slowest = t;
      }
      EXPECT_TRUE(exitedNonZero(k)) << "rank " << r << "\n" << job.allOutput();
      const std::string err = libraryError(job.output(r));
      EXPECT_FALSE(err.empty()) << "rank " << r << " printed no library error\n" << job.allOutput();
      // The culprit is named, whichever rank it is, once every rank is
      // past init. During init it is counted only: a survivor may still be
      // joining when the root's process (rank 0's) gives up on the job.
      const bool isNamed = namesRank(err, victim);
      if (inInit) {
        ++initSurvivors;
        initNamed += isNamed ? 1 : 0;
        continue;
      }
      ++survivors;
      if (isNamed)
        ++named;
      else
        ADD_FAILURE() << "rank " << r << "'s error does not name rank " << victim << ": " << err;
    }
    // The victim: a stopped one ends by itself once continued (its peers are
    // gone); a killed one is reaped. Then nothing of the job is left.
    EXPECT_TRUE(job.waitRanks({victim}, 15.0) || stop) << job.allOutput();
    for (Rank& k : job.ranks)
      if (!k.done) {
        mptest::killGroup(k.pid);
        job.waitRanks({static_cast<int>(&k - job.ranks.data())}, 5.0);
      }
    for (const Rank& k : job.ranks) EXPECT_TRUE(k.done) << "a process of the job is left";
    for (const std::string& f : groveShmFiles(shmDir.path()))
      ADD_FAILURE() << "shared-memory file " << f << " is left after the job";
  }
  printf(
      "random faults: %d trials (%d SIGKILL, %d SIGSTOP, %d during init); slowest survivor "
      "exit %.2f s after the fault (trial %d); %d of %d survivors' errors name the culprit "
      "(faults during init: %d of %d)\n",
      trials, kills, stops, duringInit, worst, slowest, named, survivors, initNamed, initSurvivors);
}
