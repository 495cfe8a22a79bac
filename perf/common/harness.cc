#include "perf/common/harness.h"

#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/dtype.h"
#include "perf/common/device_memory.h"
#include "perf/common/perf_args.h"
#include "perf/common/report.h"
#include "perf/common/verify.h"
#include "tools/common/launch_env.h"

namespace grove::perf {
namespace {

/// A failed call; the message names the call site and the library's error text.
class PerfError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string hostName() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  std::string h(buf);
  return h.substr(0, h.find('.'));
}

[[noreturn]] void throwGrove(groveResult_t r, groveComm_t comm, const char* what, int line) {
  throw PerfError(hostName() + ": Test grove failure harness.cc:" + std::to_string(line) + " " +
                  what + ": '" + groveGetErrorString(r) + "' : " + groveGetLastError(comm));
}

#define PERF_CHECK(comm, call)                                         \
  do {                                                                 \
    groveResult_t res_ = (call);                                       \
    if (res_ != groveSuccess) throwGrove(res_, comm, #call, __LINE__); \
  } while (0)

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<char, FreeDeleter>;

Buffer allocBuffer(size_t bytes) {
  size_t size = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, size);
  if (p == nullptr) throw PerfError("out of memory allocating " + std::to_string(size) + " bytes");
  std::memset(p, 0, size);
  return Buffer(static_cast<char*>(p));
}

/// What every thread of this process shares (read-only while threads run).
struct Shared {
  PerfArgs args;
  CollKind kind = CollKind::kAllReduce;
  tools::LaunchEnv env;
  int nranks = 1;
  groveUniqueId id{};
  MemoryMode mode = MemoryMode::kHost;
  int deviceCount = 0;  ///< visible CUDA devices (kCuda only)
  /// The ranks (threads) of this process meet here once all are set up: a
  /// CUDA allocation may synchronise the device, and so wait for a peer's
  /// collective kernel that waits for this very thread.
  std::unique_ptr<std::barrier<>> setUpDone;
};

/// One rank (one thread) of this process.
struct Rank {
  const Shared* shared = nullptr;
  int thread = 0;
  int rank = 0;
  bool printer = false;  ///< global rank 0: prints the report
  groveComm_t comm = nullptr;
  groveHostStream_t hostStream = nullptr;
  Buffer send, recv, expected;             ///< the buffers; in kCuda mode the host staging of dev*
  int cudaDevice = -1;                     ///< kCuda: this rank's device
  DeviceStream devStream;                  ///< kCuda: this rank's stream
  DeviceBuffer devSend, devRecv, scratch;  ///< kCuda: buffers and small-call scratch
  long errors = 0;
  double bwSum = 0;
  int bwCount = 0;
  std::string failure;

  bool onDevice() const { return shared->mode == MemoryMode::kCuda; }
  groveStream_t stream() const {
    if (onDevice()) return devStream.handle();
    if (shared->mode == MemoryMode::kEmulated) return nullptr;  // calls complete on return
    return shared->args.blocking ? nullptr : hostStream;
  }
  char* sendBuf() const { return onDevice() ? devSend.get() : send.get(); }
  char* recvBuf() const { return onDevice() ? devRecv.get() : recv.get(); }
  void print(const std::string& s) const {
    if (!printer) return;
    std::fputs(s.c_str(), stdout);
    std::fflush(stdout);
  }
};

double seconds() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

void startColl(Rank& r, const Setting& s, bool inPlace, int iter) {
  const size_t total = std::max(s.counts.sendCount, s.counts.recvCount) * s.es;
  const size_t steps = total ? std::max<size_t>(1, r.shared->args.maxBytes / total) : 1;
  const size_t shift = total * (static_cast<size_t>(iter) % steps);
  char* recv = r.recvBuf() + shift;
  char* send = r.sendBuf() + shift;
  const size_t rk = static_cast<size_t>(r.rank);
  const void* sp = inPlace ? recv + s.counts.sendInplaceOffset * rk * s.es : send;
  void* rp = inPlace ? recv + s.counts.recvInplaceOffset * rk * s.es : recv;
  PERF_CHECK(r.comm, runColl(r.shared->kind, sp, rp, s.counts.paramCount, s.type, s.op, s.root,
                             r.comm, r.stream()));
}

void completeColl(Rank& r) {
  if (r.onDevice()) {
    cudaStreamWait(r.stream());
    return;
  }
  if (r.hostStream != nullptr && !r.shared->args.blocking)
    PERF_CHECK(r.comm, groveHostStreamSynchronize(r.hostStream));
}

using SmallCall = std::function<groveResult_t(const void* send, void* recv, groveStream_t)>;

// Runs a small collective on host values (in: inBytes, out: outBytes; in == out
// runs in place). Device communicators take device memory: there the values go
// through the rank's scratch buffer and the call is waited for.
void smallColl(Rank& r, const void* in, size_t inBytes, void* out, size_t outBytes,
               const SmallCall& call) {
  if (!r.onDevice()) {
    PERF_CHECK(r.comm, call(in, out, nullptr));
    return;
  }
  char* dIn = r.scratch.get();
  char* dOut = in == out ? dIn : dIn + (inBytes + 63) / 64 * 64;
  copyToDevice(dIn, in, inBytes, r.stream());
  PERF_CHECK(r.comm, call(dIn, dOut, r.stream()));
  // Wait for the call before the copy: a copy to pageable memory waits for
  // the stream inside the driver, holding a lock that another rank thread of
  // this process may need to launch the peer half of this very call.
  cudaStreamWait(r.stream());
  copyToHost(out, dOut, outBytes, r.stream());
}

// Every rank of the job waits for every other (a one-element all-reduce).
void barrier(Rank& r) {
  int32_t v = 0;
  smallColl(r, &v, sizeof(v), &v, sizeof(v), [&](const void* s, void* d, groveStream_t st) {
    return groveAllReduce(s, d, 1, groveInt32, groveSum, r.comm, st);
  });
}

// One double across ranks with op (or broadcast from rank 0 when bcast).
double reduceDouble(Rank& r, double v, groveRedOp_t op, bool bcast) {
  smallColl(r, &v, sizeof(v), &v, sizeof(v), [&](const void* s, void* d, groveStream_t st) {
    return bcast ? groveBroadcast(s, d, 1, groveFloat64, 0, r.comm, st)
                 : groveAllReduce(s, d, 1, groveFloat64, op, r.comm, st);
  });
  return v;
}

double combineTime(Rank& r, double sec) {
  switch (r.shared->args.average) {
    case AverageMode::kRank0: return reduceDouble(r, sec, groveSum, true);
    case AverageMode::kAvg: return reduceDouble(r, sec, groveSum, false) / r.shared->nranks;
    case AverageMode::kMin: return reduceDouble(r, sec, groveMin, false);
    case AverageMode::kMax: return reduceDouble(r, sec, groveMax, false);
  }
  return sec;
}

uint64_t sumAcross(Rank& r, uint64_t v) {
  smallColl(r, &v, sizeof(v), &v, sizeof(v), [&](const void* s, void* d, groveStream_t st) {
    return groveAllReduce(s, d, 1, groveUint64, groveSum, r.comm, st);
  });
  return v;
}

// Writes the inputs and expected values (verify.h) into the host buffers and,
// on a device, copies the inputs to the device buffers.
void prepare(Rank& r, const DataSpec& spec, const CollCounts& counts, bool inPlace) {
  prepareData(spec, r.rank, counts, inPlace, r.send.get(), r.recv.get(), r.expected.get());
  if (!r.onDevice()) return;
  const size_t es = dtypeSize(spec.type);
  copyToDevice(r.devSend.get(), r.send.get(), counts.sendCount * es, r.stream());
  copyToDevice(r.devRecv.get(), r.recv.get(), preparedRecvBytes(spec, r.rank, counts, inPlace),
               r.stream());
}

// Runs -c checked calls; returns the wrong elements summed over ranks.
long checkData(Rank& r, const Setting& s, bool inPlace) {
  const Shared& sh = *r.shared;
  const DataSpec spec{sh.kind, s.op, s.type, s.root, sh.nranks};
  uint64_t wrong = 0;
  for (int c = 0; c < sh.args.check; ++c) {
    prepare(r, spec, s.counts, inPlace);
    startColl(r, s, inPlace, 0);
    completeColl(r);
    const size_t off = checkedRegionOffset(spec, r.rank, s.counts, inPlace);
    if (r.onDevice())
      copyToHost(r.recv.get(), r.devRecv.get(), off + s.counts.recvCount * s.es, r.stream());
    wrong = countWrong(s.type, r.recv.get() + off, r.expected.get(), s.counts.recvCount);
    wrong = sumAcross(r, wrong);
    if (wrong) break;
  }
  return static_cast<long>(wrong);
}

// Times one variant (out-of-place or in-place) of one setting; returns its result columns.
std::string benchTime(Rank& r, const Setting& s, bool inPlace) {
  const Shared& sh = *r.shared;
  const PerfArgs& a = sh.args;
  if (a.check) {
    const DataSpec spec{sh.kind, s.op, s.type, s.root, sh.nranks};
    prepare(r, spec, s.counts, inPlace);
  }
  startColl(r, s, inPlace, 0);
  completeColl(r);
  barrier(r);

  const double t0 = seconds();
  for (int iter = 0; iter < a.iters; ++iter) {
    if (a.aggIters > 1) PERF_CHECK(r.comm, groveGroupStart());
    for (int k = 0; k < a.aggIters; ++k) startColl(r, s, inPlace, iter * a.aggIters + k);
    if (a.aggIters > 1) PERF_CHECK(r.comm, groveGroupEnd());
  }
  const double calls = static_cast<double>(a.iters) * a.aggIters;
  const double cpuSec = (seconds() - t0) / calls;
  completeColl(r);
  double sec = combineTime(r, (seconds() - t0) / calls);

  double algBw = 0, busBw = 0;
  collBandwidth(sh.kind, s.counts.paramCount, s.es, sec, sh.nranks, &algBw, &busBw);
  long wrong = -1;
  if (a.check) {
    wrong = checkData(r, s, inPlace);
    if (wrong) ++r.errors;
  }
  r.bwSum += busBw;
  ++r.bwCount;
  return formatResult((a.reportCpuTime ? cpuSec : sec) * 1e6, algBw, busBw, wrong);
}

void warmUp(Rank& r, size_t size, groveDataType_t type, groveRedOp_t op, int root) {
  Setting s = makeSetting(r.shared->kind, r.shared->nranks, size, type, op, root);
  for (int iter = 0; iter < r.shared->args.warmupIters; ++iter) startColl(r, s, false, iter);
  completeColl(r);
}

void timeTest(Rank& r, groveDataType_t type, groveRedOp_t op, int root) {
  const Shared& sh = *r.shared;
  const char* opText = collHasOp(sh.kind) ? opName(op) : "none";
  barrier(r);
  warmUp(r, sh.args.maxBytes, type, op, root);
  warmUp(r, sh.args.minBytes, type, op, root);
  for (size_t size : perfSizes(sh.args)) {
    Setting s = makeSetting(r.shared->kind, r.shared->nranks, size, type, op, root);
    std::string row = formatRowParams(std::max(s.counts.sendCount, s.counts.recvCount) * s.es,
                                      s.counts.paramCount, dtypeName(type), opText, root);
    row += benchTime(r, s, false);
    row += collHasInPlace(sh.kind) ? benchTime(r, s, true) : formatSkippedResult();
    r.print(row + "\n");
  }
}

void runTests(Rank& r) {
  const Shared& sh = *r.shared;
  std::vector<int> roots{-1};
  if (collHasRoot(sh.kind)) {
    roots.clear();
    if (sh.args.root >= 0)
      roots.push_back(sh.args.root);
    else
      for (int i = 0; i < sh.nranks; ++i) roots.push_back(i);
  }
  std::vector<groveRedOp_t> ops = collHasOp(sh.kind) ? sh.args.ops : std::vector{groveSum};
  for (groveDataType_t type : sh.args.types)
    for (groveRedOp_t op : ops)
      for (int root : roots) timeTest(r, type, op, root);
}

/// One rank's line of the "# Using devices" block, as exchanged.
struct DeviceRecord {
  int32_t pid;
  int32_t device;
  char host[56];
  char label[120];  ///< "[host] CPU", or the CUDA device's "[0x<bus>] <name>"
};

// The slot of this rank among the ranks of its host (host memory's "device").
int localSlot(const Rank& r) {
  return r.shared->env.localRank * r.shared->args.nThreads + r.thread;
}

// Gathers (pid, host, device) of every rank and prints the "# Using devices" block.
void printDevices(Rank& r) {
  DeviceRecord mine{static_cast<int32_t>(getpid()), localSlot(r), {}, {}};
  std::string label = "[host] CPU";
  if (r.onDevice()) {
    mine.device = r.cudaDevice;
    label = cudaDeviceLabel(r.cudaDevice);
  } else if (r.shared->mode == MemoryMode::kEmulated) {
    label = "[emul] CUDA emulation on the CPU";
  }
  std::snprintf(mine.host, sizeof(mine.host), "%s", hostName().c_str());
  std::snprintf(mine.label, sizeof(mine.label), "%s", label.c_str());
  std::vector<DeviceRecord> all(static_cast<size_t>(r.shared->nranks));
  smallColl(r, &mine, sizeof(mine), all.data(), sizeof(DeviceRecord) * all.size(),
            [&](const void* s, void* d, groveStream_t st) {
              return groveAllGather(s, d, sizeof(DeviceRecord), groveUint8, r.comm, st);
            });
  std::string text = "# Using devices\n";
  for (int i = 0; i < r.shared->nranks; ++i)
    text += formatDeviceLine(i, all[i].pid, all[i].host, all[i].device, all[i].label);
  r.print(text + "#\n");
}

// Creates this rank's communicator and buffers for the memory mode.
void setUp(Rank& r) {
  const Shared& sh = *r.shared;
  groveConfig_t cfg = GROVE_CONFIG_INITIALIZER;
  if (sh.args.timeoutSec > 0) cfg.timeoutMs = sh.args.timeoutSec * 1000;
  if (sh.mode != MemoryMode::kHost) cfg.deviceKind = groveDeviceCuda;
  if (r.onDevice()) {
    r.cudaDevice = localSlot(r) % sh.deviceCount;
    cudaUseDevice(r.cudaDevice);
    cfg.device = r.cudaDevice;
  }
  PERF_CHECK(nullptr, groveCommInitRankConfig(&r.comm, sh.nranks, sh.id, r.rank, &cfg));
  if (sh.mode == MemoryMode::kHost && !sh.args.blocking)
    PERF_CHECK(r.comm, groveHostStreamCreate(&r.hostStream));
  r.send = allocBuffer(sh.args.maxBytes);
  r.recv = allocBuffer(sh.args.maxBytes);
  r.expected = allocBuffer(sh.args.check ? sh.args.maxBytes : 0);
  if (r.onDevice()) {
    r.devStream.create();
    r.devSend = DeviceBuffer(sh.args.maxBytes);
    r.devRecv = DeviceBuffer(sh.args.maxBytes);
    // smallColl: the input, padded to 64 bytes, then the output (at most one record per rank).
    r.scratch = DeviceBuffer(sizeof(DeviceRecord) + 64 +
                             sizeof(DeviceRecord) * static_cast<size_t>(sh.nranks));
  }
}

// Releases the device resources (on the rank's own thread, its device current).
void releaseDevice(Rank& r) {
  r.devSend = DeviceBuffer();
  r.devRecv = DeviceBuffer();
  r.scratch = DeviceBuffer();
  r.devStream.destroy();
}

void rankMain(Rank& r) {
  const Shared& sh = *r.shared;
  bool met = false;  // passed the setUpDone barrier
  try {
    setUp(r);
    sh.setUpDone->arrive_and_wait();
    met = true;
    printDevices(r);
    r.print(formatColumnHeader(sh.args.reportCpuTime ? "cputime" : "time"));
    runTests(r);
    if (r.hostStream) PERF_CHECK(r.comm, groveHostStreamDestroy(r.hostStream));
    r.hostStream = nullptr;
    PERF_CHECK(r.comm, groveCommDestroy(r.comm));
    r.comm = nullptr;
    if (r.onDevice()) releaseDevice(r);
  } catch (const std::exception& e) {
    r.failure = e.what();
    if (!met) sh.setUpDone->arrive_and_drop();      // the others go on without this rank
    if (r.comm != nullptr) groveCommAbort(r.comm);  // peers fail fast instead of timing out
    r.comm = nullptr;
    if (r.onDevice()) releaseDevice(r);
  }
}

// Checks the options that this memory mode cannot honour; returns an error text or "".
std::string unsupported(const PerfArgs& a, MemoryMode mode) {
  if (a.nGpus != 1 && mode == MemoryMode::kCuda)
    return "-g " + std::to_string(a.nGpus) +
           ": one process driving several GPUs through grouped calls is not supported yet; "
           "each rank uses one device, so only -g 1 is supported (use -t or more processes "
           "for more ranks)";
  if (a.nGpus != 1)
    return "-g " + std::to_string(a.nGpus) +
           ": host-memory communicators use one buffer per rank; only -g 1 is supported "
           "(use -t for more ranks per process)";
  if (!a.outputFile.empty()) return "-F (CSV output) is not supported yet";
  return "";
}

}  // namespace

groveResult_t runColl(CollKind kind, const void* send, void* recv, size_t count,
                      groveDataType_t type, groveRedOp_t op, int root, groveComm_t comm,
                      groveStream_t stream) {
  switch (kind) {
    case CollKind::kAllReduce: return groveAllReduce(send, recv, count, type, op, comm, stream);
    case CollKind::kAllGather: return groveAllGather(send, recv, count, type, comm, stream);
    case CollKind::kBroadcast: return groveBroadcast(send, recv, count, type, root, comm, stream);
    case CollKind::kReduce: return groveReduce(send, recv, count, type, op, root, comm, stream);
    case CollKind::kReduceScatter:
      return groveReduceScatter(send, recv, count, type, op, comm, stream);
    case CollKind::kGather:
      if (count == 0) return groveSuccess;
      return groveGather(send, recv, count, type, root, comm, stream);
    case CollKind::kScatter:
      if (count == 0) return groveSuccess;
      return groveScatter(send, recv, count, type, root, comm, stream);
    case CollKind::kAlltoAll:
      if (count == 0) return groveSuccess;
      return groveAlltoAll(send, recv, count, type, comm, stream);
    case CollKind::kSendRecv: {
      int n = 0, rank = 0;
      groveResult_t res = groveCommCount(comm, &n);
      if (res == groveSuccess) res = groveCommUserRank(comm, &rank);
      if (res != groveSuccess) return res;
      if ((res = groveGroupStart()) != groveSuccess) return res;
      groveResult_t r1 = groveSend(send, count, type, (rank + 1) % n, comm, stream);
      groveResult_t r2 = groveRecv(recv, count, type, (rank - 1 + n) % n, comm, stream);
      res = groveGroupEnd();
      return r1 != groveSuccess ? r1 : r2 != groveSuccess ? r2 : res;
    }
  }
  return groveInvalidArgument;
}

int perfMain(int argc, char** argv, CollKind kind) {
  setlinebuf(stdout);
  const std::string prog = basename(argv[0]);
  Shared sh;
  sh.kind = kind;
  std::string error;
  switch (parsePerfArgs(argc, argv, &sh.args, &error)) {
    case ParseStatus::kHelp: std::printf("%s", perfUsage(prog).c_str()); return 0;
    case ParseStatus::kError:
      std::fprintf(stderr, "%s: %s\n%s", prog.c_str(), error.c_str(), perfUsage(prog).c_str());
      return 1;
    case ParseStatus::kRun: break;
  }
  std::optional<MemoryMode> mode = chooseMemoryMode(&error);
  if (!mode) {
    std::fprintf(stderr, "%s: %s\n", prog.c_str(), error.c_str());
    return 1;
  }
  sh.mode = *mode;
  if (sh.mode == MemoryMode::kCuda) sh.deviceCount = cudaDeviceCount();
  if (std::string why = unsupported(sh.args, sh.mode); !why.empty()) {
    std::fprintf(stderr, "%s: %s\n", prog.c_str(), why.c_str());
    return 1;
  }
  sh.env = tools::detectLaunchEnv();
  sh.nranks = sh.env.nranks * sh.args.nThreads;
  if (collHasRoot(kind) && sh.args.root >= sh.nranks) {
    std::fprintf(stderr, "%s: invalid root %d (there are %d ranks)\n", prog.c_str(), sh.args.root,
                 sh.nranks);
    return 1;
  }
  const bool mainProc = sh.env.rank == 0;
  if (mainProc) {
    std::printf("# Collective test starting: %s\n", prog.c_str());
    PerfArgs shown = sh.args;
    if (sh.mode != MemoryMode::kHost) shown.blocking = 0;  // -z selects a host stream only
    std::printf("%s", formatParamHeader(shown).c_str());
    std::printf("# Memory: %s\n#\n", memoryModeText(sh.mode));
    if (sh.args.cudaGraph && sh.mode == MemoryMode::kCuda)
      std::printf("# -G (CUDA graphs) is not supported yet: calls are launched directly\n");
    else if (sh.args.cudaGraph)
      std::printf("# -G (CUDA graphs) is ignored for host memory\n");
  }
  if (tools::uniqueIdFromEnv(sh.env, &sh.id) != groveSuccess) return 1;  // reason printed

  sh.setUpDone = std::make_unique<std::barrier<>>(sh.args.nThreads);
  std::vector<Rank> ranks(static_cast<size_t>(sh.args.nThreads));
  for (int t = 0; t < sh.args.nThreads; ++t) {
    Rank& r = ranks[static_cast<size_t>(t)];
    r.shared = &sh;
    r.thread = t;
    r.rank = sh.env.rank * sh.args.nThreads + t;
    r.printer = mainProc && t == 0;
  }
  std::vector<std::thread> threads;
  for (int t = 1; t < sh.args.nThreads; ++t) threads.emplace_back(rankMain, std::ref(ranks[t]));
  rankMain(ranks[0]);
  for (auto& th : threads) th.join();

  bool failed = false;
  for (const Rank& r : ranks)
    if (!r.failure.empty()) {
      std::fprintf(stderr, "rank %d: %s\n", r.rank, r.failure.c_str());
      failed = true;
    }
  const Rank& r0 = ranks[0];
  if (!failed)
    r0.print(formatSummary(r0.errors, r0.bwCount ? r0.bwSum / r0.bwCount : 0.0) +
             "# Collective test concluded: " + prog + "\n");
  return failed || r0.errors ? 1 : 0;
}

}  // namespace grove::perf
