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
//
// nccl_client.h holds what the parts share, nccl_client_util.cc the tally
// and the element helpers, nccl_client_current.cc the newer API's checks.
#include "nccl_client.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace nccl_client;

namespace {

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
      if (t == ncclFloat32) {
        // A count whose bytes wrap around is refused, not scaled into a
        // buffer sized by the wrapped number.
        expect(ncclAllReduce(in.data(), out.data(), SIZE_MAX / 4 + 2, t, op, comm, nullptr) ==
                       ncclInvalidArgument &&
                   std::strstr(ncclGetLastError(comm), "count") != nullptr,
               what + ": a count that overflows is refused");
        expect(ncclReduceScatter(in.data(), out.data(), SIZE_MAX / 4 / nranks + 1, t, op, comm,
                                 nullptr) == ncclInvalidArgument,
               what + ": a reduce-scatter whose input overflows is refused");
        // In a group the input would be scaled before the group's earlier
        // calls ran: refused, and with it the whole group (NCCL's group
        // error), whose other call then does not run either.
        std::vector<char> other(out.size(), 0);
        ok(ncclGroupStart(), "group start");
        ncclAllReduce(in.data(), other.data(), count, t, ncclSum, comm, nullptr);
        expect(
            ncclAllReduce(in.data(), out.data(), count, t, op, comm, nullptr) == ncclInvalidUsage,
            what + ": a PreMulSum op in a group is refused");
        expect(ncclGroupEnd() == ncclInvalidUsage &&
                   std::strstr(ncclGetLastError(nullptr), "group") != nullptr,
               what + ": the group of a refused call fails at its end");
        expect(std::all_of(other.begin(), other.end(), [](char c) { return c == 0; }),
               what + ": no call of the failed group ran");
      }
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
  // A later registration never gets a deregistered one's handle, so a stale
  // handle cannot take it away.
  std::vector<void*> seen{handle};
  bool fresh = true;
  for (int i = 0; i < 64; ++i) {
    void* later = nullptr;
    ok(ncclCommRegister(comm, buf.data(), buf.size(), &later), "register again", comm);
    for (void* old : seen) fresh = fresh && later != old;
    seen.push_back(later);
    ok(ncclCommDeregister(comm, later), "deregister again", comm);
  }
  expect(fresh, "a new registration never gets an earlier one's handle");
  expect(ncclCommDeregister(comm, handle) == ncclInvalidArgument, "a stale handle is refused");
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
  expectMakesNothing(comm, "finalized");
  ok(ncclCommDestroy(comm), "destroy");

  if (rank == 0) {  // two communicators of one process
    ncclComm_t two[2] = {nullptr, nullptr};
    expect(ncclCommInitAll(two, 0, nullptr) == ncclInvalidArgument, "init all of no device");
    if (ok(ncclCommInitAll(two, 2, nullptr), "init all")) {
      int r1 = -1;
      ncclCommUserRank(two[1], &r1);
      expect(r1 == 1, "init all ranks");
      // One thread splits both ranks in a group, as NCCL's examples do.
      ncclComm_t kids[2] = {nullptr, nullptr};
      ok(ncclGroupStart(), "group start");
      ok(ncclCommSplit(two[0], 0, 1, &kids[0], nullptr), "split in a group", two[0]);
      ok(ncclCommSplit(two[1], 0, 0, &kids[1], nullptr), "split in a group", two[1]);
      if (ok(ncclGroupEnd(), "group end of the splits") && kids[0] && kids[1]) {
        int k0 = -1;
        ncclCommUserRank(kids[0], &k0);
        expect(k0 == 1, "a split in a group orders by key");
        int32_t v[2] = {3, 4}, s[2] = {0, 0};
        ok(ncclGroupStart(), "group start");
        for (int i = 0; i < 2; ++i)
          ok(ncclAllReduce(&v[i], &s[i], 1, ncclInt32, ncclSum, kids[i], nullptr),
             "allreduce on a split child", kids[i]);
        ok(ncclGroupEnd(), "group end");
        expect(s[0] == 7 && s[1] == 7, "the children of a split in a group sum");
        ncclCommDestroy(kids[0]);
        ncclCommDestroy(kids[1]);
      }
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
