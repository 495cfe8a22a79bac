// grove_mp_check: one rank of a multi-process correctness check of every
// collective, started by grove-launch (or by hand with GROVE_COMM_ID,
// GROVE_RANK and GROVE_NRANKS set; with none of them it runs as one rank).
// It links libgrove only and uses the public C API only.
//
// How it works: every rank walks the same list of cases (collective x size x
// dtype x op x in-place x root), in the same order, so the collectives match.
// Inputs are deterministic from (case seed, rank, index) -- see mp_types.h --
// so each rank computes the exact expected result from scratch. To keep the
// 1 MiB cases cheap, inputs repeat with a prime period (4093 elements), so a
// reduced reference row of one period serves every index. Every receive
// buffer starts as the bitwise complement of the expected result (an element
// left unwritten is always caught), sits between guard bytes that must stay
// untouched, and out-of-place send buffers must come back unmodified (see
// mp_cases.cc). A failing case prints one "FAIL ..." line; the run ends with
// an all-reduce of the case and failure counts, a "SUMMARY" line on rank 0,
// and exit status 0 (clean), 1 (some case failed) or 2 (a call failed: the
// error is printed, the communicator aborted).
//
// Failure-test modes: --loop-seconds S runs float all-reduces of
// --loop-count floats (default 16384) for S seconds (exit 0 if all succeed,
// 1 with the error text otherwise);
// --die-rank R --die-after T makes rank R SIGKILL itself T seconds into the
// loop; --sleep-rank R makes rank R sleep --sleep-seconds instead of calling;
// --ready-dir D touches D/ready.<rank> after the first all-reduce;
// --bad-nranks R:V makes rank R pass nranks V to groveCommInitRankConfig.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mp_check.h"
#include "mp_types.h"

namespace mp {

double nowSec() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void fatalCall(Job& j, const char* what, groveResult_t r) {
  fprintf(stderr, "grove_mp_check[rank %d]: %s failed: %s (result %d): %s\n", j.rank, what,
          groveGetErrorString(r), static_cast<int>(r), groveGetLastError(j.comm));
  fflush(stderr);
  fflush(stdout);
  if (j.comm) groveCommAbort(j.comm);
  _exit(2);
}

namespace {

const char* const kDtypeNames[] = {"int8",   "uint8",   "int32",   "uint32",  "int64",
                                   "uint64", "float16", "float32", "float64", "bfloat16"};
const char* const kOpNames[] = {"sum", "prod", "max", "min", "avg"};

void usage() {
  fprintf(stderr,
          "usage: grove_mp_check [--quick] [--async] [--filter c1,c2] [--nchannels N]\n"
          "  [--transport shm|socket|auto] [--timeout-ms MS] [--sizes 0,1,7,1021,large]\n"
          "  [--dtypes int8,...|all] [--ops sum,...|all] [--large-dtypes L] [--large-ops L]\n"
          "  [--part K/M] [--large-part K/M] [--roots all|ends] [--seed S] [--verbose]\n"
          "  [--loop-seconds S [--loop-count N] [--die-rank R --die-after T] [--sleep-rank R "
          "--sleep-seconds T]\n"
          "   [--ready-dir D]] [--bad-nranks R:V] [--inject-fault result|guard|send]\n"
          "collectives: allreduce broadcast reduce allgather reducescatter gather scatter\n"
          "  alltoall sendrecv_ring sendrecv_pair sendrecv_allpairs (sendrecv = all three)\n"
          "large = (1 MiB)/elemsize + 3 elements. --quick: sizes 1,1021,large; large with\n"
          "  float32,bfloat16 x sum,max only; roots 0 and n-1.\n");
}

[[noreturn]] void bad(const std::string& what) {
  fprintf(stderr, "grove_mp_check: %s\n", what.c_str());
  usage();
  exit(64);
}

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<int> parseNames(const std::string& s, const char* const* names, int n) {
  std::vector<int> out;
  for (auto& x : splitList(s)) {
    if (x == "all") {
      for (int i = 0; i < n; ++i) out.push_back(i);
      continue;
    }
    int found = -1;
    for (int i = 0; i < n; ++i)
      if (x == names[i]) found = i;
    if (found < 0) bad("unknown name '" + x + "'");
    out.push_back(found);
  }
  return out;
}

void parsePart(const char* s, int* k, int* m) {
  if (sscanf(s, "%d/%d", k, m) != 2 || *m < 1 || *k < 0 || *k >= *m)
    bad(std::string("bad part '") + s + "' (want K/M with 0 <= K < M)");
}

Options parseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) bad("option " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--quick")
      o.quick = true;
    else if (a == "--async")
      o.async = true;
    else if (a == "--verbose")
      o.verbose = true;
    else if (a == "--filter") {
      for (auto& f : splitList(next())) {
        bool ok = f == "sendrecv";
        for (int c = 0; c < kNumColl; ++c) ok = ok || f == kCollNames[c];
        if (!ok) bad("unknown collective '" + f + "'");
        o.filter.insert(f);
      }
    } else if (a == "--nchannels")
      o.nChannels = atoi(next());
    else if (a == "--timeout-ms")
      o.timeoutMs = atoi(next());
    else if (a == "--transport")
      o.transport = next();
    else if (a == "--sizes") {
      o.sizes.clear();
      for (auto& s : splitList(next())) o.sizes.push_back(s == "large" ? kLarge : atoi(s.c_str()));
    } else if (a == "--dtypes")
      o.dtypes = parseNames(next(), kDtypeNames, 10);
    else if (a == "--ops")
      o.ops = parseNames(next(), kOpNames, 5);
    else if (a == "--large-dtypes")
      o.largeDtypes = parseNames(next(), kDtypeNames, 10);
    else if (a == "--large-ops")
      o.largeOps = parseNames(next(), kOpNames, 5);
    else if (a == "--part")
      parsePart(next(), &o.partK, &o.partM);
    else if (a == "--large-part")
      parsePart(next(), &o.largePartK, &o.largePartM);
    else if (a == "--roots")
      o.roots = next();
    else if (a == "--seed")
      o.seed = strtoull(next(), nullptr, 0);
    else if (a == "--max-print")
      o.maxPrint = atoi(next());
    else if (a == "--inject-fault") {
      o.injectFault = next();
      if (o.injectFault != "result" && o.injectFault != "guard" && o.injectFault != "send")
        bad("--inject-fault wants result, guard or send");
    } else if (a == "--loop-seconds")
      o.loopSeconds = atof(next());
    else if (a == "--loop-count")
      o.loopCount = strtoull(next(), nullptr, 0);
    else if (a == "--die-rank")
      o.dieRank = atoi(next());
    else if (a == "--die-after")
      o.dieAfter = atof(next());
    else if (a == "--sleep-rank")
      o.sleepRank = atoi(next());
    else if (a == "--sleep-seconds")
      o.sleepSeconds = atof(next());
    else if (a == "--ready-dir")
      o.readyDir = next();
    else if (a == "--bad-nranks") {
      if (sscanf(next(), "%d:%d", &o.badNranksRank, &o.badNranksValue) != 2)
        bad("--bad-nranks wants R:V");
    } else if (a == "--help" || a == "-h") {
      usage();
      exit(0);
    } else {
      bad("unknown option '" + a + "'");
    }
  }
  if (o.roots != "all" && o.roots != "ends") bad("--roots wants all or ends");
  if (o.dtypes.empty()) o.dtypes = parseNames("all", kDtypeNames, 10);
  if (o.ops.empty()) o.ops = parseNames("all", kOpNames, 5);
  if (o.quick) {
    o.sizes = {1, 1021, kLarge};
    if (o.largeDtypes.empty()) o.largeDtypes = {groveFloat32, groveBfloat16};
    if (o.largeOps.empty()) o.largeOps = {groveSum, groveMax};
    o.roots = "ends";
  }
  if (o.largeDtypes.empty()) o.largeDtypes = o.dtypes;
  if (o.largeOps.empty()) o.largeOps = o.ops;
  return o;
}

int envInt(const char* name, int dflt) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

void initComm(Job& j) {
  j.rank = envInt("GROVE_RANK", 0);
  j.n = envInt("GROVE_NRANKS", 1);
  if (j.n < 1 || j.rank < 0 || j.rank >= j.n) {
    fprintf(stderr, "grove_mp_check: bad GROVE_RANK=%d / GROVE_NRANKS=%d\n", j.rank, j.n);
    exit(64);
  }
  const bool launched = getenv("GROVE_COMM_ID") != nullptr;
  if (!launched && j.n > 1) {
    fprintf(stderr, "grove_mp_check: GROVE_NRANKS=%d needs GROVE_COMM_ID (use grove-launch)\n",
            j.n);
    exit(64);
  }
  groveUniqueId id;
  check(j, groveGetUniqueId(&id), "groveGetUniqueId");
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  if (!j.opt.transport.empty()) cfg.transport = j.opt.transport.c_str();
  if (j.opt.nChannels != INT32_MIN) cfg.nChannels = j.opt.nChannels;
  if (j.opt.timeoutMs != INT32_MIN) cfg.timeoutMs = j.opt.timeoutMs;
  cfg.commName = "grove_mp_check";
  int nranks = j.rank == j.opt.badNranksRank ? j.opt.badNranksValue : j.n;
  groveResult_t r = groveCommInitRankConfig(&j.comm, nranks, id, j.rank, &cfg);
  if (r != groveSuccess) {
    fprintf(stderr, "grove_mp_check[rank %d]: groveCommInitRankConfig failed: %s (result %d): %s\n",
            j.rank, groveGetErrorString(r), static_cast<int>(r), groveGetLastError(j.comm));
    exit(2);
  }
  int count = -1, rank = -1;
  check(j, groveCommCount(j.comm, &count), "groveCommCount");
  check(j, groveCommUserRank(j.comm, &rank), "groveCommUserRank");
  if (count != j.n || rank != j.rank) {
    fprintf(stderr, "grove_mp_check[rank %d]: groveCommCount/UserRank say %d/%d, want %d/%d\n",
            j.rank, count, rank, j.n, j.rank);
    exit(2);
  }
  if (j.opt.async) check(j, groveHostStreamCreate(&j.hs), "groveHostStreamCreate");
}

// --loop-seconds: all-reduces until the time is up, for the failure tests.
int runLoop(Job& j) {
  const Options& o = j.opt;
  if (j.rank == o.sleepRank) {
    fprintf(stderr, "grove_mp_check[rank %d]: sleeping %.0f s instead of calling\n", j.rank,
            o.sleepSeconds);
    std::this_thread::sleep_for(std::chrono::duration<double>(o.sleepSeconds));
    return 0;
  }
  const size_t count = std::max<size_t>(o.loopCount, 1);
  std::vector<float> send(count, static_cast<float>(j.rank + 1)), recv(count);
  const float want = static_cast<float>(j.n * (j.n + 1) / 2);
  double t0 = nowSec();
  long iter = 0;
  while (nowSec() - t0 < o.loopSeconds) {
    if (j.rank == o.dieRank && nowSec() - t0 >= o.dieAfter) {
      fprintf(stderr, "grove_mp_check[rank %d]: killing myself (SIGKILL) after %ld all-reduces\n",
              j.rank, iter);
      fflush(stderr);
      raise(SIGKILL);
    }
    groveResult_t r =
        groveAllReduce(send.data(), recv.data(), count, groveFloat32, groveSum, j.comm, j.hs);
    if (r == groveSuccess && j.hs) r = groveHostStreamSynchronize(j.hs);
    if (r != groveSuccess) {
      fprintf(stderr,
              "grove_mp_check[rank %d]: groveAllReduce failed after %.2f s (%ld done): %s "
              "(result %d): %s\n",
              j.rank, nowSec() - t0, iter, groveGetErrorString(r), static_cast<int>(r),
              groveGetLastError(j.comm));
      fflush(stderr);
      return 1;
    }
    if (recv[0] != want || recv[count - 1] != want) {
      fprintf(stderr, "grove_mp_check[rank %d]: wrong all-reduce result %g, want %g\n", j.rank,
              recv[0], want);
      return 1;
    }
    if (iter++ == 0 && !o.readyDir.empty()) {
      std::string path = o.readyDir + "/ready." + std::to_string(j.rank);
      if (FILE* f = fopen(path.c_str(), "w")) fclose(f);
    }
  }
  printf("grove_mp_check[rank %d]: loop done, %ld all-reduces\n", j.rank, iter);
  return 0;
}

int runChecks(Job& j) {
  double t0 = nowSec();
  runCases(j);
  double elapsed = nowSec() - t0;
  if (j.hs) check(j, groveHostStreamDestroy(j.hs), "groveHostStreamDestroy");
  j.hs = nullptr;
  // Every rank learns the job-wide totals.
  int64_t totals[2] = {j.cases, j.failures};
  check(j, groveAllReduce(totals, totals, 2, groveInt64, groveSum, j.comm, nullptr),
        "groveAllReduce (summary)");
  printf("grove_mp_check[rank %d]: %ld cases, %ld failures, %.1f s\n", j.rank, j.cases, j.failures,
         elapsed);
  if (!j.opt.injectFault.empty())
    printf(
        "grove_mp_check[rank %d]: injected %ld '%s' faults, all caught unless FAIL lines say so\n",
        j.rank, j.injected, j.opt.injectFault.c_str());
  if (j.rank == 0) {
    std::string per;
    for (int c = 0; c < kNumColl; ++c) {
      if (j.collCases[c] == 0) continue;
      char buf[96];
      snprintf(buf, sizeof buf, " %s=%ld/%.1fs", kCollNames[c], j.collCases[c], j.collTime[c]);
      per += buf;
    }
    printf("grove_mp_check: times (rank 0, cases/seconds):%s\n", per.c_str());
    printf("grove_mp_check: SUMMARY nranks=%d cases=%lld failures=%lld time=%.1fs %s\n", j.n,
           static_cast<long long>(totals[0]), static_cast<long long>(totals[1]), elapsed,
           totals[1] == 0 ? "PASSED" : "FAILED");
  }
  fflush(stdout);
  return totals[1] == 0 ? 0 : 1;
}

}  // namespace
}  // namespace mp

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  mp::Job job;
  job.opt = mp::parseArgs(argc, argv);
  mp::initComm(job);
  int rc = job.opt.loopSeconds > 0 ? mp::runLoop(job) : mp::runChecks(job);
  if (rc != 0) {  // a failed job: do not wait for peers that may be gone
    groveCommAbort(job.comm);
    return rc;
  }
  if (job.hs) groveHostStreamDestroy(job.hs);
  groveResult_t r = groveCommDestroy(job.comm);
  if (r != groveSuccess) {
    fprintf(stderr, "grove_mp_check[rank %d]: groveCommDestroy failed: %s: %s\n", job.rank,
            groveGetErrorString(r), groveGetLastError(nullptr));
    if (rc == 0) rc = 2;
  }
  return rc;
}
