// An NCCL program, compiled against one of NCCL's own nccl.h (each version
// the build found, from 2.28 on; else the shim's nccl_abi.h) and run, under
// grove-launch on the emulated device, with grove's libnccl.so.2 first on
// the loader path. It runs every collective, data type and op, groups of
// sends and receives, split, PreMulSum, registration, non-blocking init,
// finalize and the refusals, and what its header's version adds (2.30:
// suspend/resume, memory statistics, grow ids, windows' user pointers,
// properties, the parameter API; 2.32: the configured collectives and
// encryption), checks every element, and prints which library it ran on
// and how many checks passed. Exit 0 only if all passed.
//
//   grove-launch -n 3 -- env GROVE_DEVICE_EMULATION=1 nccl_client [--env]
// --env prints the GROVE_* values that NCCL_* names mapped to, and exits.
#include NCCL_CLIENT_HEADER

#include <dlfcn.h>

#ifndef NCCL_VERSION_CODE  // the shim's header names it so
#define NCCL_VERSION_CODE GROVE_NCCL_VERSION_CODE
#elif NCCL_VERSION_CODE >= 23000
#include <nccl_device.h>  // the device API's host side, ncclCommProperties_t
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

// The host side of NCCL's device API: grove's nccl_abi.h declares it;
// NCCL's nccl.h does not (nccl_device.h, which needs CUDA's headers), so
// against nccl.h it is declared here with its C layout.
#if defined(GROVE_NCCL_VERSION_CODE) || NCCL_VERSION_CODE >= 23000
using ClientTeam = ncclTeam_t;
using ClientDevComm = ncclDevComm_t;
#else
extern "C" {
struct ClientTeam {
  int nRanks, rank, stride;
};
struct ClientDevComm;
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* reqs, ClientDevComm* outDevComm);
ClientTeam ncclTeamWorld(ncclComm_t comm);
ClientTeam ncclTeamLsa(ncclComm_t comm);
int ncclTeamRankToWorld(ncclComm_t comm, ClientTeam team, int rank);
}
#endif

namespace {

int rank = 0, nranks = 1, checks = 0, failures = 0;

void expect(bool ok, const std::string& what) {
  ++checks;
  if (ok) return;
  ++failures;
  if (failures <= 20) std::fprintf(stderr, "nccl_client: rank %d: FAILED %s\n", rank, what.c_str());
}

// Asserts a call's result; on an error, names it with ncclGetLastError.
bool ok(ncclResult_t r, const char* what, ncclComm_t comm = nullptr) {
  expect(r == ncclSuccess,
         std::string(what) + " returned " + std::to_string(r) + ": " + ncclGetLastError(comm));
  return r == ncclSuccess;
}

const ncclDataType_t kTypes[] = {ncclInt8,   ncclUint8,   ncclInt32,   ncclUint32,  ncclInt64,
                                 ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};
const char* const kTypeNames[] = {"int8",   "uint8", "int32", "uint32", "int64",
                                  "uint64", "half",  "float", "double", "bfloat16"};

size_t bytesOf(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

// Writes a small non-negative integer (exact in every type) as type t.
void put(void* base, size_t i, ncclDataType_t t, double v) {
  char* p = static_cast<char*>(base) + i * bytesOf(t);
  const float f = static_cast<float>(v);
  uint32_t fb;
  std::memcpy(&fb, &f, 4);
  switch (t) {
    case ncclInt8:
    case ncclUint8: {
      uint8_t x = static_cast<uint8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case ncclInt32:
    case ncclUint32: {
      uint32_t x = static_cast<uint32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case ncclInt64:
    case ncclUint64: {
      uint64_t x = static_cast<uint64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case ncclFloat32: std::memcpy(p, &f, 4); break;
    case ncclFloat64: std::memcpy(p, &v, 8); break;
    case ncclBfloat16: {
      uint16_t x = static_cast<uint16_t>(fb >> 16);
      std::memcpy(p, &x, 2);
      break;
    }
    case ncclFloat16: {  // exact for small integers: rebias the exponent, drop 13 zero bits
      uint16_t x =
          v == 0 ? 0
                 : static_cast<uint16_t>((((fb >> 23) & 0xff) - 112) << 10 | (fb & 0x7fffff) >> 13);
      std::memcpy(p, &x, 2);
      break;
    }
    default: break;
  }
}

bool same(const void* a, size_t ai, const void* b, size_t bi, ncclDataType_t t) {
  const size_t s = bytesOf(t);
  return std::memcmp(static_cast<const char*>(a) + ai * s, static_cast<const char*>(b) + bi * s,
                     s) == 0;
}

// The value rank r contributes at index i: 1..3 on ranks 1.., and on rank
// 0 what makes the sum a multiple of n (exact averages, integer or not).
double value(int r, size_t i) {
  if (r > 0) return 1 + static_cast<double>((r + i) % 3);
  double others = 0;
  for (int q = 1; q < nranks; ++q) others += value(q, i);
  const double total = nranks * static_cast<double>(static_cast<long>(others / nranks) + 1);
  return total - others;  // in 1..n
}

double reduceOf(ncclRedOp_t op, size_t i) {
  double acc = value(0, i);
  for (int r = 1; r < nranks; ++r) {
    const double v = value(r, i);
    if (op == ncclSum || op == ncclAvg) acc += v;
    if (op == ncclProd) acc *= v;
    if (op == ncclMax) acc = acc > v ? acc : v;
    if (op == ncclMin) acc = acc < v ? acc : v;
  }
  return op == ncclAvg ? acc / nranks : acc;
}

void allReduces(ncclComm_t comm, size_t count) {
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  const char* opNames[] = {"sum", "prod", "max", "min", "avg"};
  for (int ti = 0; ti < 10; ++ti) {
    const ncclDataType_t t = kTypes[ti];
    std::vector<char> in(count * bytesOf(t)), out(in.size()), want(in.size());
    for (size_t i = 0; i < count; ++i) put(in.data(), i, t, value(rank, i));
    for (int oi = 0; oi < 5; ++oi) {
      if (ops[oi] == ncclProd && nranks > 4) continue;  // 3^n overflows int8
      for (size_t i = 0; i < count; ++i) put(want.data(), i, t, reduceOf(ops[oi], i));
      const std::string what = std::string("allreduce ") + kTypeNames[ti] + " " + opNames[oi] +
                               " count " + std::to_string(count);
      if (!ok(ncclAllReduce(in.data(), out.data(), count, t, ops[oi], comm, nullptr), what.c_str(),
              comm))
        continue;
      size_t bad = 0;
      for (size_t i = 0; i < count; ++i) bad += !same(out.data(), i, want.data(), i, t);
      expect(bad == 0, what + ": " + std::to_string(bad) + " wrong elements");
    }
  }
}

void dataMovement(ncclComm_t comm, size_t count) {
  const ncclDataType_t t = ncclFloat32;
  const std::string size = " count " + std::to_string(count);
  std::vector<float> mine(count), all(count * nranks), got(count * nranks);
  auto v = [](int r, size_t i) { return static_cast<float>(r * 1000 + i % 997); };
  for (size_t i = 0; i < count; ++i) mine[i] = v(rank, i);

  const int root = nranks - 1;
  std::vector<float> b(count, -1);
  if (rank == root) b = mine;
  ok(ncclBcast(b.data(), count, t, root, comm, nullptr), "bcast", comm);
  bool good = true;
  for (size_t i = 0; i < count; ++i) good &= b[i] == v(root, i);
  expect(good, "bcast" + size);

  ok(ncclAllGather(mine.data(), got.data(), count, t, comm, nullptr), "allgather", comm);
  good = true;
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < count; ++i) good &= got[r * count + i] == v(r, i);
  expect(good, "allgather" + size);

  // all-to-all: block j of rank i goes to block i of rank j
  std::vector<float> a2a(count * nranks);
  for (int j = 0; j < nranks; ++j)
    for (size_t i = 0; i < count; ++i) a2a[j * count + i] = v(rank, i) + j;
  ok(ncclAlltoAll(a2a.data(), got.data(), count, t, comm, nullptr), "alltoall", comm);
  good = true;
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < count; ++i) good &= got[r * count + i] == v(r, i) + rank;
  expect(good, "alltoall" + size);
  // in place, as nccl-tests runs it
  ok(ncclAlltoAll(a2a.data(), a2a.data(), count, t, comm, nullptr), "alltoall in place", comm);
  good = true;
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < count; ++i) good &= a2a[r * count + i] == v(r, i) + rank;
  expect(good, "alltoall in place" + size);

  const int groot = 1 % nranks;
  std::fill(got.begin(), got.end(), -1.0f);
  ok(ncclGather(mine.data(), got.data(), count, t, groot, comm, nullptr), "gather", comm);
  if (rank == groot) {
    good = true;
    for (int r = 0; r < nranks; ++r)
      for (size_t i = 0; i < count; ++i) good &= got[r * count + i] == v(r, i);
    expect(good, "gather" + size);
  }
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < count; ++i) all[r * count + i] = v(r, i) + 0.5f;
  std::vector<float> part(count, -1);
  ok(ncclScatter(all.data(), part.data(), count, t, groot, comm, nullptr), "scatter", comm);
  good = true;
  for (size_t i = 0; i < count; ++i) good &= part[i] == v(rank, i) + 0.5f;
  expect(good, "scatter" + size);

  // reduce-scatter: block r of the sum of every rank's `all`-shaped input
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < count; ++i) all[r * count + i] = static_cast<float>(rank + r + i % 7);
  ok(ncclReduceScatter(all.data(), part.data(), count, t, ncclSum, comm, nullptr), "reducescatter",
     comm);
  good = true;
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int q = 0; q < nranks; ++q) want += static_cast<float>(q + rank + i % 7);
    good &= part[i] == want;
  }
  expect(good, "reducescatter" + size);

  std::vector<int32_t> rin(count, rank + 1), rout(count, -1);
  ok(ncclReduce(rin.data(), rout.data(), count, ncclInt32, ncclMax, groot, comm, nullptr), "reduce",
     comm);
  if (rank == groot) {
    good = true;
    for (size_t i = 0; i < count; ++i) good &= rout[i] == nranks;
    expect(good, "reduce max" + size);
  }

  // a ring of sends and receives in one group, both directions
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  std::vector<float> fromPrev(count, -1), fromNext(count, -1);
  ok(ncclGroupStart(), "group start");
  ok(ncclSend(mine.data(), count, t, next, comm, nullptr), "send next", comm);
  ok(ncclSend(mine.data(), count, t, prev, comm, nullptr), "send prev", comm);
  ok(ncclRecv(fromPrev.data(), count, t, prev, comm, nullptr), "recv prev", comm);
  ok(ncclRecv(fromNext.data(), count, t, next, comm, nullptr), "recv next", comm);
  ok(ncclGroupEnd(), "group end");
  good = true;
  for (size_t i = 0; i < count; ++i) good &= fromPrev[i] == v(prev, i) && fromNext[i] == v(next, i);
  expect(good, "send/recv ring in a group" + size);

  // fp8 moves as bytes and refuses to reduce
  std::vector<uint8_t> f8(count), f8all(count * nranks);
  for (size_t i = 0; i < count; ++i) f8[i] = static_cast<uint8_t>(rank * 31 + i);
  ok(ncclAllGather(f8.data(), f8all.data(), count, ncclFloat8e4m3, comm, nullptr), "fp8 allgather",
     comm);
  good = true;
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < count; ++i)
      good &= f8all[r * count + i] == static_cast<uint8_t>(r * 31 + i);
  expect(good, "fp8 allgather" + size);
  expect(ncclAllReduce(f8.data(), f8.data(), count, ncclFloat8e5m2, ncclSum, comm, nullptr) ==
             ncclInvalidUsage,
         "an fp8 all-reduce is refused");
  expect(std::strstr(ncclGetLastError(comm), "fp8") != nullptr, "the refusal names fp8");
}

// PreMulSum: each rank's input times its own scalar, summed.
void preMulSums(ncclComm_t comm, size_t count) {
  for (ncclDataType_t t : {ncclFloat32, ncclInt32, ncclFloat16, ncclBfloat16, ncclUint8}) {
    for (ncclScalarResidence_t where : {ncclScalarHostImmediate, ncclScalarDevice}) {
      std::vector<char> scalar(8), in(count * bytesOf(t)), out(in.size()), want(in.size());
      put(scalar.data(), 0, t, rank + 1);
      for (size_t i = 0; i < count; ++i) put(in.data(), i, t, (i + rank) % 3);
      for (size_t i = 0; i < count; ++i) {
        double sum = 0;
        for (int r = 0; r < nranks; ++r) sum += (r + 1) * static_cast<double>((i + r) % 3);
        put(want.data(), i, t, sum);
      }
      ncclRedOp_t op;
      const std::string what = std::string("premulsum type ") + std::to_string(t) +
                               (where == ncclScalarDevice ? " device scalar" : " host scalar");
      if (!ok(ncclRedOpCreatePreMulSum(&op, scalar.data(), t, where, comm), what.c_str(), comm))
        continue;
      expect(op >= ncclNumOps, what + ": the op is a new value");
      ok(ncclAllReduce(in.data(), out.data(), count, t, op, comm, nullptr), what.c_str(), comm);
      size_t bad = 0;
      for (size_t i = 0; i < count; ++i) bad += !same(out.data(), i, want.data(), i, t);
      expect(bad == 0, what + ": " + std::to_string(bad) + " wrong elements");
      ok(ncclRedOpDestroy(op, comm), "redop destroy", comm);
      expect(ncclRedOpDestroy(op, comm) == ncclInvalidArgument,
             what + ": a destroyed op is refused");
    }
  }
}

void lifecycle(ncclComm_t comm) {
  int count = 0, me = -1, dev = 7;
  ok(ncclCommCount(comm, &count), "count");
  ok(ncclCommUserRank(comm, &me), "user rank");
  ok(ncclCommCuDevice(comm, &dev), "cu device");
  expect(count == nranks && me == rank, "count and rank");

  void* handle = nullptr;
  std::vector<char> buf(1 << 16);
  ok(ncclCommRegister(comm, buf.data(), buf.size(), &handle), "register", comm);
  ok(ncclCommDeregister(comm, handle), "deregister", comm);
  expect(ncclCommDeregister(comm, handle) == ncclInvalidArgument, "a handle deregisters once");
  void* mem = nullptr;
  ok(ncclMemAlloc(&mem, 1 << 20), "mem alloc");
  ncclWindow_t win = nullptr;
  ok(ncclCommWindowRegister(comm, mem, 1 << 20, &win, NCCL_WIN_COLL_SYMMETRIC), "window register",
     comm);
  ok(ncclCommWindowDeregister(comm, win), "window deregister", comm);
  ok(ncclMemFree(mem), "mem free");

  // a config its initializer did not make is refused (every rank alike)
  ncclConfig_t stray = NCCL_CONFIG_INITIALIZER;
  stray.magic = 0x12345678u;
  ncclComm_t none = nullptr;
  expect(ncclCommSplit(comm, 0, rank, &none, &stray) == ncclInvalidArgument && none == nullptr &&
             std::strstr(ncclGetLastError(comm), "NCCL_CONFIG_INITIALIZER") != nullptr,
         "a config without the initializer's magic is refused, naming it");

  // split by parity, then a sum on the child
  ncclComm_t child = nullptr;
  if (ok(ncclCommSplit(comm, rank % 2, rank, &child, nullptr), "split", comm) && child != nullptr) {
    int cn = 0;
    ncclCommCount(child, &cn);
    expect(cn == (nranks + 1 - rank % 2) / 2, "split size");
    int32_t x = rank, sum = -1;
    ok(ncclAllReduce(&x, &sum, 1, ncclInt32, ncclSum, child, nullptr), "child allreduce", child);
    int32_t want = 0;
    for (int r = rank % 2; r < nranks; r += 2) want += r;
    expect(sum == want, "child allreduce sum");
    ok(ncclCommDestroy(child), "child destroy");
  }

  // a bad type and a bad root: clear errors, never a crash
  int32_t x = 1;
  expect(ncclAllReduce(&x, &x, 1, static_cast<ncclDataType_t>(99), ncclSum, comm, nullptr) ==
             ncclInvalidArgument,
         "a bad type is an invalid argument");
  expect(ncclBroadcast(&x, &x, 1, ncclInt32, nranks + 3, comm, nullptr) == ncclInvalidArgument,
         "a bad root is an invalid argument");
  expect(std::strlen(ncclGetLastError(comm)) > 0, "the last error says why");
  expect(
      std::string(ncclGetErrorString(ncclInvalidUsage)).find("invalid usage") != std::string::npos,
      "error strings");
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ok(ncclGroupStart(), "group start");
  expect(ncclGroupSimulateEnd(&sim) == ncclInvalidUsage, "group simulate end is refused");
  ok(ncclGroupEnd(), "group end after simulate");
  // the device API is linked by clients that do not use it: present,
  // refusing what needs device resources, answering team queries
  alignas(64) char devComm[4096] = {};
  expect(ncclDevCommCreate(comm, nullptr, reinterpret_cast<ClientDevComm*>(devComm)) ==
             ncclInvalidUsage,
         "device communicators are refused");
  expect(std::strstr(ncclGetLastError(comm), "device API") != nullptr,
         "the refusal names the device API");
  ClientTeam world = ncclTeamWorld(comm);
  expect(world.nRanks == nranks && world.rank == rank && world.stride == 1, "the world team");
  expect(ncclTeamRankToWorld(comm, world, nranks - 1) == nranks - 1, "team rank to world rank");
  expect(ncclTeamLsa(comm).nRanks == 1, "no load/store peers");
}

#if NCCL_VERSION_CODE >= 23000
// What NCCL 2.30 added (and 2.32 after it), on a working communicator.
// One-sided: every rank puts into the next one's window (window sizes
// differ per rank) and signals the one before; then the same in a group;
// each checks what landed. Bad puts are refused.
void oneSided(ncclComm_t comm) {
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  std::vector<int32_t> wmem(2048 + 16 * rank, -1);
  ncclWindow_t w = nullptr;
  if (!ok(ncclCommWindowRegister(comm, wmem.data(), wmem.size() * 4, &w, NCCL_WIN_DEFAULT),
          "one-sided window", comm))
    return;
  std::vector<int32_t> src(1000);
  for (int i = 0; i < 1000; ++i) src[i] = rank * 100000 + i;
  ok(ncclPutSignal(src.data(), 1000, ncclInt32, next, w, 64, 1, 0, 0, comm, nullptr), "put signal",
     comm);
  ok(ncclSignal(prev, 2, 1, 0, comm, nullptr), "signal", comm);
  ncclWaitSignalDesc_t d[2] = {{1, prev, 1, 0}, {1, next, 2, 1}};
  ok(ncclWaitSignal(2, d, comm, nullptr), "wait signal", comm);
  size_t bad = 0;
  for (int i = 0; i < 16; ++i) bad += wmem[i] != -1;
  for (int i = 0; i < 1000; ++i) bad += wmem[16 + i] != prev * 100000 + i;
  expect(bad == 0, "put landed in the window (" + std::to_string(bad) + " wrong)");
  // In a group: puts run before the group's waits.
  for (int i = 0; i < 1000; ++i) src[i] = -rank - 1;
  ok(ncclGroupStart(), "group start");
  ok(ncclPutSignal(src.data(), 1000, ncclInt32, next, w, 4096, 3, 0, 0, comm, nullptr),
     "put signal in a group", comm);
  ncclWaitSignalDesc_t g{1, prev, 3, 0};
  ok(ncclWaitSignal(1, &g, comm, nullptr), "wait signal in a group", comm);
  ok(ncclGroupEnd(), "group end", comm);
  bad = 0;
  for (int i = 0; i < 1000; ++i) bad += wmem[1024 + i] != -prev - 1;
  expect(bad == 0, "grouped put landed (" + std::to_string(bad) + " wrong)");
  expect(ncclPutSignal(src.data(), 1000, ncclInt32, next, w, 4 * (2048 + 16 * next) - 8, 1, 0, 0,
                       comm, nullptr) == ncclInvalidArgument &&
             std::strstr(ncclGetLastError(comm), "does not fit") != nullptr,
         "a put past the peer's window is refused");
  expect(ncclPutSignal(src.data(), 1, ncclInt32, next, w, 0, 256, 0, 0, comm, nullptr) ==
             ncclInvalidArgument,
         "a sigIdx out of range is refused");
  ok(ncclCommWindowDeregister(comm, w), "one-sided window deregister", comm);
}

void currentApi(ncclComm_t comm) {
  expect(std::string(ncclGetErrorString(ncclTimeout)).find("timed out") != std::string::npos,
         "ncclTimeout has a text");

  // Suspend gives the scratch back and refuses calls until resume.
  uint64_t persist = 0, suspendable = 0, suspended = 7, total = 0;
  ok(ncclCommMemStats(comm, ncclStatGpuMemPersist, &persist), "mem stats persist", comm);
  ok(ncclCommMemStats(comm, ncclStatGpuMemSuspend, &suspendable), "mem stats suspend", comm);
  ok(ncclCommMemStats(comm, ncclStatGpuMemTotal, &total), "mem stats total", comm);
  expect(total == persist + suspendable, "total = persistent + suspendable");
  expect(nranks == 1 || persist > 0, "rings are counted as persistent memory");
  ok(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), "suspend", comm);
  ok(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended), "mem stats suspended", comm);
  expect(suspended == 1, "suspended is 1 while suspended");
  ok(ncclCommMemStats(comm, ncclStatGpuMemSuspend, &suspendable), "mem stats after suspend", comm);
  expect(suspendable == 0, "suspend gave the scratch back");
  int32_t x = rank + 1, sum = -1;
  expect(ncclAllReduce(&x, &sum, 1, ncclInt32, ncclSum, comm, nullptr) == ncclInvalidUsage,
         "a suspended communicator refuses calls");
  expect(std::strstr(ncclGetLastError(comm), "suspended") != nullptr, "the refusal says why");
  expect(ncclCommSuspend(comm, 0x40) == ncclInvalidArgument, "unknown suspend flags are refused");
  ok(ncclCommResume(comm), "resume", comm);
  expect(ncclCommResume(comm) == ncclInvalidUsage, "resume needs a suspended communicator");
  std::vector<float> big(1 << 16, 1.0f), bigOut(big.size());
  ok(ncclAllReduce(big.data(), bigOut.data(), big.size(), ncclFloat32, ncclSum, comm, nullptr),
     "allreduce after resume", comm);
  bool good = true;
  for (float f : bigOut) good &= f == static_cast<float>(nranks);
  expect(good, "allreduce after resume is exact");
  ok(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended), "mem stats resumed", comm);
  expect(suspended == 0, "suspended is 0 after resume");

  // A grow id: one at a time, consumed by the grow. A grow to the same size
  // (no new rank) and a shrink that excludes nobody make working copies.
  ncclUniqueId growId;
  if (rank == 0) {
    ok(ncclCommGetUniqueId(comm, &growId), "comm get unique id", comm);
    expect(ncclCommGetUniqueId(comm, &growId) == ncclInvalidUsage, "one grow id at a time");
  }
  // The child inherits the parent's non-blocking configuration.
  auto settled = [](ncclResult_t r, ncclComm_t child) {
    while (r == ncclInProgress && child != nullptr) ncclCommGetAsyncError(child, &r);
    return r;
  };
  ncclComm_t grown = nullptr;
  ncclResult_t r = ncclCommGrow(comm, nranks, rank == 0 ? &growId : nullptr, -1, &grown, nullptr);
  if (ok(settled(r, grown), "grow (to the same size)", comm)) {
    int grownRank = -1;
    ncclCommUserRank(grown, &grownRank);
    expect(grownRank == rank, "a grown communicator keeps the ranks");
    std::vector<float> one(64, 1.0f), sum(64);
    ok(ncclAllReduce(one.data(), sum.data(), one.size(), ncclFloat32, ncclSum, grown, nullptr),
       "allreduce on the grown communicator", grown);
    expect(sum[63] == static_cast<float>(nranks), "the grown communicator's allreduce is exact");
    ok(ncclCommDestroy(grown), "destroy the grown communicator", grown);
  }
  if (rank == 0)
    ok(ncclCommGetUniqueId(comm, &growId), "a grow consumed the id: another one", comm);
  ncclComm_t shrunk = nullptr;
  expect(ncclCommShrink(comm, nullptr, 0, &shrunk, nullptr, 0x10) == ncclInvalidArgument &&
             shrunk == nullptr,
         "unknown shrink flags are refused");
  r = ncclCommShrink(comm, nullptr, 0, &shrunk, nullptr, NCCL_SHRINK_DEFAULT);
  if (ok(settled(r, shrunk), "shrink excluding nobody", comm)) {
    std::vector<float> one(64, 1.0f), sum(64);
    ok(ncclAllReduce(one.data(), sum.data(), one.size(), ncclFloat32, ncclSum, shrunk, nullptr),
       "allreduce on the shrunk communicator", shrunk);
    expect(sum[63] == static_cast<float>(nranks), "the shrunk communicator's allreduce is exact");
    ok(ncclCommDestroy(shrunk), "destroy the shrunk communicator", shrunk);
  }
  expect(ncclCommRevoke(comm, 7) == ncclInvalidArgument, "unknown revoke flags are refused");

  // Windows: the user pointer, this rank's own pointer, no peer's.
  std::vector<char> wbuf(8192);
  ncclWindow_t win = nullptr;
  if (ok(ncclCommWindowRegister(comm, wbuf.data(), wbuf.size(), &win, NCCL_WIN_STRICT_ORDERING),
         "window register (strict ordering)", comm)) {
    void* user = nullptr;
    ok(ncclWinGetUserPtr(comm, win, &user), "window user pointer", comm);
    expect(user == wbuf.data(), "the window's user pointer is the buffer");
    void* self = nullptr;
    ok(ncclGetPeerDevicePointer(win, 128, rank, &self), "own window pointer", comm);
    expect(self == wbuf.data() + 128, "own window pointer at its offset");
    void* other = &other;
    if (nranks > 1)
      expect(ncclGetPeerDevicePointer(win, 0, (rank + 1) % nranks, &other) == ncclSuccess &&
                 other == nullptr,
             "a peer of another process: no pointer (NULL), as NCCL's for a non-LSA peer");
    expect(ncclGetPeerDevicePointer(win, 0, nranks, &other) == ncclInvalidArgument,
           "a peer out of range is refused");
    expect(ncclGetLsaDevicePointer(win, 0, 1, &other) == ncclInvalidArgument,
           "an LSA rank outside this rank's team is refused");
    expect(ncclGetPeerDevicePointer(win, wbuf.size(), rank, &self) == ncclInvalidArgument,
           "an offset past the window is refused");
    expect(ncclPutSignal(wbuf.data(), 4, ncclInt8, (rank + 1) % nranks, win, 0, 0, 0, 1, comm,
                         nullptr) == ncclInvalidArgument,
           "put/signal with flags is refused");
    expect(ncclCommDeregister(comm, win) == ncclInvalidArgument,
           "a window is not a buffer registration");
    ok(ncclCommWindowDeregister(comm, win), "window deregister", comm);
  }

  oneSided(comm);

  // Properties, as an NCCL 2.30 struct (shorter than 2.32's): only its
  // fields are written.
  struct Props30 {
    size_t size;
    unsigned int magic, version;
    int rank, nRanks, cudaDev, nvmlDev;
    bool deviceApiSupport, multimemSupport;
    int ginType, nLsaTeams;
    bool hostRmaSupport;
    int railedGinType;
  };
  struct {
    Props30 p;
    unsigned char canary[64];
  } old;
  std::memset(&old, 0xab, sizeof old);
  old.p.size = sizeof(Props30);
  old.p.magic = 0xcafebeef;
  old.p.version = 23007;
  ok(ncclCommQueryProperties(comm, reinterpret_cast<ncclCommProperties_t*>(&old.p)),
     "query properties (2.30's struct)", comm);
  expect(old.p.rank == rank && old.p.nRanks == nranks && !old.p.deviceApiSupport &&
             !old.p.multimemSupport && old.p.hostRmaSupport && old.p.nLsaTeams == nranks,
         "properties");
  bool untouched = true;
  for (unsigned char c : old.canary) untouched &= c == 0xab;
  expect(untouched, "properties wrote nothing past a 2.30 struct");
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  ok(ncclCommQueryProperties(comm, &props), "query properties", comm);
  ncclCommProperties_t unset = NCCL_COMM_PROPERTIES_INITIALIZER;
  unset.magic = 1;
  expect(ncclCommQueryProperties(comm, &unset) == ncclInvalidArgument &&
             std::strstr(ncclGetLastError(comm), "NCCL_COMM_PROPERTIES_INITIALIZER") != nullptr,
         "properties without the initializer's magic are refused, naming it");
  expect(props.rank == rank && props.nRanks == nranks, "properties of this header's struct");

  // The parameter API: NCCL's names, grove's values.
  ncclParamHandle_t h = nullptr;
  ok(ncclParamBind(&h, "NCCL_BUFFSIZE"), "param bind");
  int64_t buffsize = 0;
  ok(ncclParamGetI64(h, &buffsize), "param get i64");
  expect(buffsize > 0, "NCCL_BUFFSIZE is grove's buffer size");
  int8_t small = 0;
  expect(ncclParamGetI8(h, &small) == ncclInvalidArgument, "a value that does not fit is refused");
  const char* text = nullptr;
  int len = 0;
  ok(ncclParamGetParameter("NCCL_BUFFSIZE", &text, &len), "param get parameter");
  expect(text != nullptr && std::to_string(buffsize) == text && len == (int)std::strlen(text),
         "the parameter as text");
  ncclParamHandle_t debug = nullptr;
  ok(ncclParamBind(&debug, "NCCL_DEBUG"), "param bind NCCL_DEBUG");
  int32_t notNumber = 0;
  expect(ncclParamGetI32(debug, &notNumber) == ncclInvalidArgument, "text is not a number");
  expect(ncclParamBind(&h, "NCCL_NO_SUCH_PARAMETER") == ncclInvalidArgument,
         "an unknown key is refused");
  const char** keys = nullptr;
  int nKeys = 0;
  ok(ncclParamGetAllParameterKeys(&keys, &nKeys), "param keys");
  bool hasDebug = false;
  for (int i = 0; i < nKeys; ++i) hasDebug |= std::strcmp(keys[i], "NCCL_DEBUG") == 0;
  expect(nKeys >= 10 && hasDebug, "the keys include NCCL_DEBUG");

#if NCCL_VERSION_CODE >= 23200
  ncclCollConfig_t cc = NCCL_COLLCONFIG_INITIALIZER;
  std::vector<int32_t> cin(1000, rank + 1), cout(1000, -1);
  ok(ncclAllReduceConfig(cin.data(), cout.data(), cin.size(), ncclInt32, ncclSum, comm, nullptr,
                         &cc),
     "allreduce config", comm);
  good = true;
  for (int32_t v : cout) good &= v == nranks * (nranks + 1) / 2;
  expect(good, "configured allreduce is exact");
  ok(ncclBroadcastConfig(cin.data(), cout.data(), cin.size(), ncclInt32, 0, comm, nullptr, nullptr),
     "broadcast config (NULL config)", comm);
  good = true;
  for (int32_t v : cout) good &= v == 1;
  expect(good, "configured broadcast is exact");
  cc.algSelection = "ring";
  expect(ncclAllReduceConfig(cin.data(), cout.data(), 1, ncclInt32, ncclSum, comm, nullptr, &cc) ==
             ncclInvalidUsage,
         "a forced algorithm selection is refused");
  ncclEncryptionConfig_t enc = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  ok(ncclSetEncryption(&enc), "encryption none");
  enc.mode = NCCL_ENCRYPTION_MODE_PSK;
  enc.psk = "secret";
  expect(ncclSetEncryption(&enc) == ncclInvalidUsage, "encryption with a key is refused");
#endif
}
#endif

// Non-blocking init (config.blocking = 0): ncclInProgress until ready.
ncclComm_t initNonBlocking(const ncclUniqueId& id) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "nccl_client";
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, nranks, id, rank, &cfg);
  expect(r == ncclSuccess || r == ncclInProgress, "non-blocking init starts");
  ncclResult_t state = ncclInProgress;
  while (comm != nullptr && state == ncclInProgress) ncclCommGetAsyncError(comm, &state);
  expect(state == ncclSuccess, "non-blocking init completes");
  return comm;
}

#if NCCL_VERSION_CODE >= 23000
// Two ranks of one process (ncclCommInitAll) form one LSA team: each
// reaches the other's window through its own window handle.
void sameProcessWindows(ncclComm_t* two) {
  std::vector<char> mem0(4096), mem1(8192);
  ncclWindow_t w0 = nullptr, w1 = nullptr;
  ncclResult_t r1 = ncclSuccess;
  std::thread other([&] {
    r1 = ncclCommWindowRegister(two[1], mem1.data(), mem1.size(), &w1, NCCL_WIN_DEFAULT);
  });
  ncclResult_t r0 = ncclCommWindowRegister(two[0], mem0.data(), mem0.size(), &w0, NCCL_WIN_DEFAULT);
  other.join();
  if (!ok(r0, "same-process window register (rank 0)", two[0]) ||
      !ok(r1, "same-process window register (rank 1)", two[1]))
    return;
  const ClientTeam lsa0 = ncclTeamLsa(two[0]), lsa1 = ncclTeamLsa(two[1]);
  expect(lsa0.nRanks == 2 && lsa0.rank == 0 && lsa1.nRanks == 2 && lsa1.rank == 1,
         "the ranks of one process form one LSA team");
  expect(ncclTeamRankToLsa(two[0], ncclTeamWorld(two[0]), 1) == 1, "world rank 1 is LSA rank 1");
  void* p = nullptr;
  ok(ncclGetPeerDevicePointer(w0, 100, 1, &p), "peer pointer in this process", two[0]);
  expect(p == mem1.data() + 100, "rank 1's window at the offset, through rank 0's handle");
  ok(ncclGetLsaDevicePointer(w1, 8, 0, &p), "LSA pointer in this process", two[1]);
  expect(p == mem0.data() + 8, "rank 0's window at the offset, through rank 1's handle");
  expect(ncclGetPeerDevicePointer(w1, 5000, 0, &p) == ncclInvalidArgument,
         "an offset past the peer's (smaller) window is refused");
  expect(ncclGetLsaDevicePointer(w0, 0, 2, &p) == ncclInvalidArgument,
         "an LSA rank past the team is refused");
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  ok(ncclCommQueryProperties(two[0], &props), "same-process properties", two[0]);
  expect(props.nLsaTeams == 1, "one LSA team");
  std::thread dereg([&] { r1 = ncclCommWindowDeregister(two[1], w1); });
  ok(ncclCommWindowDeregister(two[0], w0), "same-process window deregister (rank 0)", two[0]);
  dereg.join();
  ok(r1, "same-process window deregister (rank 1)", two[1]);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  rank = std::atoi(std::getenv("GROVE_RANK") ? std::getenv("GROVE_RANK") : "0");
  nranks = std::atoi(std::getenv("GROVE_NRANKS") ? std::getenv("GROVE_NRANKS") : "1");
  ncclUniqueId id;
  if (!ok(ncclGetUniqueId(&id), "get unique id"))
    return 1;  // GROVE_COMM_ID: the same id on every rank
  if (argc > 1 && std::strcmp(argv[1], "--env") == 0) {
    for (const char* name : {"GROVE_DEBUG", "GROVE_DEBUG_SUBSYS", "GROVE_ALGO",
                             "GROVE_SOCKET_IFNAME", "GROVE_TRANSPORT", "GROVE_P2P_DISABLE"})
      std::printf("rank %d: %s=%s\n", rank, name,
                  std::getenv(name) ? std::getenv(name) : "(unset)");
    return 0;
  }
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&ncclAllReduce), &info);
  int version = 0;
  ncclGetVersion(&version);
  expect(version >= NCCL_VERSION_CODE, "ncclGetVersion: at least the NCCL version of nccl.h");

  ncclComm_t comm = initNonBlocking(id);
  if (comm == nullptr) return 1;
  for (size_t count : {size_t{1}, size_t{1000}, size_t{70001}}) {
    allReduces(comm, count);
    dataMovement(comm, count);
  }
  preMulSums(comm, 4099);
  lifecycle(comm);
#if NCCL_VERSION_CODE >= 23000
  currentApi(comm);
#endif

  ok(ncclCommFinalize(comm), "finalize", comm);
  int32_t x = 1;
  expect(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, nullptr) == ncclInvalidUsage,
         "a finalized communicator takes no new work");
  ok(ncclCommDestroy(comm), "destroy");

  if (rank == 0) {  // two communicators of one process
    ncclComm_t two[2] = {nullptr, nullptr};
    if (ok(ncclCommInitAll(two, 2, nullptr), "init all")) {
      int r1 = -1;
      ncclCommUserRank(two[1], &r1);
      expect(r1 == 1, "init all ranks");
#if NCCL_VERSION_CODE >= 23000
      sameProcessWindows(two);
#endif
      ncclCommDestroy(two[0]);
      ncclCommDestroy(two[1]);
    }
  }
  std::printf("nccl_client: rank %d of %d on %s (NCCL %d): %d checks, %d failed\n", rank, nranks,
              info.dli_fname ? info.dli_fname : "?", version, checks, failures);
  return failures == 0 ? 0 : 1;
}
