#include "perf/compare/peer_harness.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "perf/common/perf_args.h"
#include "perf/common/report.h"
#include "perf/common/verify.h"

namespace grove::perf::compare {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<char, FreeDeleter>;

Buffer allocBuffer(size_t bytes) {
  size_t size = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, size);
  if (p == nullptr) throw std::runtime_error("out of memory allocating " + std::to_string(size));
  std::memset(p, 0, size);
  return Buffer(static_cast<char*>(p));
}

std::string hostName() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  std::string h(buf);
  return h.substr(0, h.find('.'));
}

double seconds() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

/// The job as one process sees it.
struct Job {
  PerfArgs args;
  CollKind kind = CollKind::kAllReduce;
  PeerBackend* peer = nullptr;
  int rank = 0;
  int nranks = 1;
  Buffer send, recv, expected;
  long errors = 0;
  double bwSum = 0;
  int bwCount = 0;

  void print(const std::string& s) const {
    if (rank != 0) return;
    std::fputs(s.c_str(), stdout);
    std::fflush(stdout);
  }
};

void startColl(Job& j, const Setting& s, bool inPlace, int iter) {
  const size_t total = std::max(s.counts.sendCount, s.counts.recvCount) * s.es;
  const size_t steps = total ? std::max<size_t>(1, j.args.maxBytes / total) : 1;
  const size_t shift = total * (static_cast<size_t>(iter) % steps);
  char* recv = j.recv.get() + shift;
  char* send = j.send.get() + shift;
  const size_t rk = static_cast<size_t>(j.rank);
  const void* sp = inPlace ? recv + s.counts.sendInplaceOffset * rk * s.es : send;
  void* rp = inPlace ? recv + s.counts.recvInplaceOffset * rk * s.es : recv;
  j.peer->run(j.kind, sp, rp, s.counts.paramCount, s.type, s.op, s.root, inPlace);
}

// The driver's own collectives, through the peer.
void barrier(Job& j) {
  int32_t v = 0;
  j.peer->run(CollKind::kAllReduce, &v, &v, 1, groveInt32, groveSum, -1, true);
}

double combineTime(Job& j, double sec) {
  double v = sec;
  switch (j.args.average) {
    case AverageMode::kRank0:
      j.peer->run(CollKind::kBroadcast, &v, &v, 1, groveFloat64, groveSum, 0, true);
      return v;
    case AverageMode::kAvg:
      j.peer->run(CollKind::kAllReduce, &v, &v, 1, groveFloat64, groveSum, -1, true);
      return v / j.nranks;
    case AverageMode::kMin:
      j.peer->run(CollKind::kAllReduce, &v, &v, 1, groveFloat64, groveMin, -1, true);
      return v;
    case AverageMode::kMax:
      j.peer->run(CollKind::kAllReduce, &v, &v, 1, groveFloat64, groveMax, -1, true);
      return v;
  }
  return v;
}

uint64_t sumAcross(Job& j, uint64_t v) {
  j.peer->run(CollKind::kAllReduce, &v, &v, 1, groveUint64, groveSum, -1, true);
  return v;
}

// Runs -c checked calls; returns the wrong elements summed over ranks.
long checkData(Job& j, const Setting& s, bool inPlace) {
  const DataSpec spec{j.kind, s.op, s.type, s.root, j.nranks};
  uint64_t wrong = 0;
  for (int c = 0; c < j.args.check; ++c) {
    prepareData(spec, j.rank, s.counts, inPlace, j.send.get(), j.recv.get(), j.expected.get());
    startColl(j, s, inPlace, 0);
    const size_t off = checkedRegionOffset(spec, j.rank, s.counts, inPlace);
    wrong = countWrong(s.type, j.recv.get() + off, j.expected.get(), s.counts.recvCount);
    wrong = sumAcross(j, wrong);
    if (wrong) break;
  }
  return static_cast<long>(wrong);
}

// Times one variant of one setting; returns its result columns.
std::string benchTime(Job& j, const Setting& s, bool inPlace) {
  if (!j.peer->hasVariant(j.kind, inPlace)) return formatSkippedResult();
  const PerfArgs& a = j.args;
  if (a.check) {
    const DataSpec spec{j.kind, s.op, s.type, s.root, j.nranks};
    prepareData(spec, j.rank, s.counts, inPlace, j.send.get(), j.recv.get(), j.expected.get());
  }
  startColl(j, s, inPlace, 0);
  barrier(j);

  const double t0 = seconds();
  const int calls = a.iters * a.aggIters;
  for (int iter = 0; iter < calls; ++iter) startColl(j, s, inPlace, iter);
  const double cpuSec = (seconds() - t0) / calls;  // blocking calls: the same as the time
  double sec = combineTime(j, cpuSec);

  double algBw = 0, busBw = 0;
  collBandwidth(j.kind, s.counts.paramCount, s.es, sec, j.nranks, &algBw, &busBw);
  long wrong = -1;
  if (a.check) {
    wrong = checkData(j, s, inPlace);
    if (wrong) ++j.errors;
  }
  j.bwSum += busBw;
  ++j.bwCount;
  return formatResult(sec * 1e6, algBw, busBw, wrong);
}

void warmUp(Job& j, size_t size, groveDataType_t type, groveRedOp_t op, int root) {
  Setting s = makeSetting(j.kind, j.nranks, size, type, op, root);
  const bool inPlace = !j.peer->hasVariant(j.kind, false);
  for (int iter = 0; iter < j.args.warmupIters; ++iter) startColl(j, s, inPlace, iter);
}

void timeTest(Job& j, groveDataType_t type, groveRedOp_t op, int root) {
  const char* opText = collHasOp(j.kind) ? opName(op) : "none";
  barrier(j);
  warmUp(j, j.args.maxBytes, type, op, root);
  warmUp(j, j.args.minBytes, type, op, root);
  for (size_t size : perfSizes(j.args)) {
    Setting s = makeSetting(j.kind, j.nranks, size, type, op, root);
    std::string row = formatRowParams(std::max(s.counts.sendCount, s.counts.recvCount) * s.es,
                                      s.counts.paramCount, dtypeName(type), opText, root);
    row += benchTime(j, s, false);
    row += collHasInPlace(j.kind) ? benchTime(j, s, true) : formatSkippedResult();
    j.print(row + "\n");
  }
}

// Every setting the flags ask for; throws when the peer lacks one of them.
void runTests(Job& j) {
  std::vector<int> roots{-1};
  if (collHasRoot(j.kind)) {
    roots.clear();
    if (j.args.root >= 0)
      roots.push_back(j.args.root);
    else
      for (int i = 0; i < j.nranks; ++i) roots.push_back(i);
  }
  std::vector<groveRedOp_t> ops = collHasOp(j.kind) ? j.args.ops : std::vector{groveSum};
  for (groveDataType_t type : j.args.types)
    for (groveRedOp_t op : ops)
      if (std::string why = j.peer->unsupported(j.kind, type, op); !why.empty())
        throw std::runtime_error(why);
  for (groveDataType_t type : j.args.types)
    for (groveRedOp_t op : ops)
      for (int root : roots) timeTest(j, type, op, root);
}

// Gathers (pid, host) of every rank and prints the "# Using devices" block.
void printDevices(Job& j) {
  struct Record {
    int32_t pid;
    int32_t device;
    char host[56];
  };
  Record mine{static_cast<int32_t>(getpid()), 0, {}};
  std::snprintf(mine.host, sizeof(mine.host), "%s", hostName().c_str());
  std::vector<Record> all(static_cast<size_t>(j.nranks));
  j.peer->run(CollKind::kAllGather, &mine, all.data(), sizeof(Record), groveUint8, groveSum, -1,
              false);
  std::string text = "# Using devices\n";
  for (int i = 0; i < j.nranks; ++i)
    text += formatDeviceLine(i, all[i].pid, all[i].host, all[i].device);
  j.print(text + "#\n");
}

// Splits argv into the collective name, the harness options and the rest.
bool splitArgs(int argc, char** argv, CollKind* kind, PeerOptions* opts, std::vector<char*>* rest,
               std::string* error) {
  rest->push_back(argv[0]);
  bool haveKind = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--store" || a == "--iface") {
      if (i + 1 >= argc) {
        *error = a + " needs a value";
        return false;
      }
      (a == "--store" ? opts->storeDir : opts->iface) = argv[++i];
    } else if (i == 1 && a[0] != '-') {
      if (!parseCollName(a, kind)) {
        *error = "unknown collective '" + a + "'";
        return false;
      }
      haveKind = true;
    } else {
      rest->push_back(argv[i]);
    }
  }
  if (!haveKind) *error = "name a collective first (all_reduce, broadcast, all_gather, ...)";
  return haveKind;
}

std::string usage(const std::string& prog) {
  return "usage: " + prog +
         " <all_reduce|broadcast|all_gather|reduce|reduce_scatter> [--store DIR] [--iface IF]"
         " [nccl-tests flags]\n" +
         perfUsage(prog);
}

// Runs the whole job on a started peer; returns the exit status.
int runJob(Job& j, const std::string& prog) {
  j.rank = j.peer->rank();
  j.nranks = j.peer->nranks();
  if (collHasRoot(j.kind) && j.args.root >= j.nranks) {
    std::fprintf(stderr, "%s: invalid root %d (there are %d ranks)\n", prog.c_str(), j.args.root,
                 j.nranks);
    return 1;
  }
  j.print("# Collective test starting: " + prog + " " + collName(j.kind) + "\n" +
          formatParamHeader(j.args) + "# Peer: " + j.peer->describe() + "\n");
  j.send = allocBuffer(j.args.maxBytes);
  j.recv = allocBuffer(j.args.maxBytes);
  j.expected = allocBuffer(j.args.check ? j.args.maxBytes : 0);
  printDevices(j);
  j.print(formatColumnHeader("time"));
  runTests(j);
  j.print(formatSummary(j.errors, j.bwCount ? j.bwSum / j.bwCount : 0.0) +
          "# Collective test concluded: " + prog + "\n");
  return j.errors ? 1 : 0;
}

}  // namespace

bool parseCollName(const std::string& name, CollKind* kind) {
  std::string n;
  for (char c : name)
    if (c != '_' && c != '-') n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n.size() > 4 && n.compare(n.size() - 4, 4, "perf") == 0) n.resize(n.size() - 4);
  static const struct {
    const char* name;
    CollKind kind;
  } kNames[] = {{"allreduce", CollKind::kAllReduce}, {"broadcast", CollKind::kBroadcast},
                {"bcast", CollKind::kBroadcast},     {"allgather", CollKind::kAllGather},
                {"reduce", CollKind::kReduce},       {"reducescatter", CollKind::kReduceScatter}};
  for (const auto& e : kNames)
    if (n == e.name) {
      *kind = e.kind;
      return true;
    }
  return false;
}

int peerMain(int argc, char** argv,
             std::unique_ptr<PeerBackend> (*makeBackend)(const PeerOptions& options)) {
  setlinebuf(stdout);
  const std::string prog = basename(argv[0]);
  Job j;
  PeerOptions opts;
  std::vector<char*> rest;
  std::string error;
  if (!splitArgs(argc, argv, &j.kind, &opts, &rest, &error)) {
    std::fprintf(stderr, "%s: %s\n%s", prog.c_str(), error.c_str(), usage(prog).c_str());
    return 1;
  }
  switch (parsePerfArgs(static_cast<int>(rest.size()), rest.data(), &j.args, &error)) {
    case ParseStatus::kHelp: std::printf("%s", usage(prog).c_str()); return 0;
    case ParseStatus::kError:
      std::fprintf(stderr, "%s: %s\n%s", prog.c_str(), error.c_str(), usage(prog).c_str());
      return 1;
    case ParseStatus::kRun: break;
  }
  if (j.args.nThreads != 1 || j.args.nGpus != 1 || !j.args.outputFile.empty()) {
    std::fprintf(stderr, "%s: -t, -g and -F are not supported by the peer harnesses\n",
                 prog.c_str());
    return 1;
  }
  std::unique_ptr<PeerBackend> peer = makeBackend(opts);
  j.peer = peer.get();
  try {
    peer->start();
    const int status = runJob(j, prog);
    peer->stop();
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: rank %d: %s\n", prog.c_str(), j.rank, e.what());
    peer->abort();
    return 1;
  }
}

}  // namespace grove::perf::compare
