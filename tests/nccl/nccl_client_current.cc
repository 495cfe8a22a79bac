// nccl_client's checks of what NCCL 2.30 added (and 2.32 after it), on a
// working communicator; see nccl_client.cc. Empty against an older nccl.h.
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl_client.h"

#if NCCL_VERSION_CODE >= 23000
namespace nccl_client {
namespace {

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
  // A put the library refuses inside a group (unknown flags) fails the
  // whole group: its all-reduce does not run either.
  std::vector<float> in(64, 1.f), out(64, 0.f);
  ok(ncclGroupStart(), "group start");
  ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, nullptr);
  expect(ncclPutSignal(src.data(), 1, ncclInt32, next, w, 0, 1, 0, 1, comm, nullptr) != ncclSuccess,
         "a put with unknown flags is refused in a group");
  expect(ncclGroupEnd() != ncclSuccess, "the group of a refused put fails at its end");
  expect(out[0] == 0.f, "no call of the failed group ran");
  ok(ncclCommWindowDeregister(comm, w), "one-sided window deregister", comm);
}

}  // namespace

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
  // So does every call that makes something of it (each rank alike).
  expectMakesNothing(comm, "suspended");
  ncclComm_t none = nullptr;
  expect(
      ncclCommShrink(comm, nullptr, 0, &none, nullptr, NCCL_SHRINK_DEFAULT) == ncclInvalidUsage &&
          none == nullptr,
      "a suspended communicator refuses a shrink");
  ncclUniqueId refusedId;
  expect(ncclCommGetUniqueId(comm, &refusedId) == ncclInvalidUsage,
         "a suspended communicator gives no grow id");
  expect(ncclSignal((rank + 1) % nranks, 0, 0, 0, comm, nullptr) == ncclInvalidUsage,
         "a suspended communicator sends no signal");
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

  // A registration refused on rank 0 alone (a misaligned symmetric window)
  // counts as a call all the same: rank 0's next registration meets rank
  // 1's pending one and both fail at once, where rank 0's second window
  // paired with rank 1's first.
  std::vector<char> odd(8192);
  expect(ncclCommWindowRegister(two[0], odd.data() + 1, 4096, &w0, NCCL_WIN_COLL_SYMMETRIC) ==
             ncclInvalidArgument,
         "a misaligned symmetric window is refused");
  std::thread again([&] {
    r1 = ncclCommWindowRegister(two[1], mem1.data(), mem1.size(), &w1, NCCL_WIN_DEFAULT);
  });
  r0 = ncclCommWindowRegister(two[0], mem0.data(), mem0.size(), &w0, NCCL_WIN_DEFAULT);
  again.join();
  expect(r0 == ncclInvalidUsage && r1 == ncclInvalidUsage,
         "the registration after one refused on one rank alone fails on both");
  // A thread that made no call reads the failure from ncclGetLastError(NULL)
  // once ncclCommGetAsyncError reported it.
  ncclResult_t async = ncclSuccess;
  std::string text;
  std::thread fresh([&] {
    ncclCommGetAsyncError(two[1], &async);
    const char* t = ncclGetLastError(nullptr);
    text = t != nullptr ? t : "";
  });
  fresh.join();
  expect(async != ncclSuccess && text.find("the same calls") != std::string::npos,
         "ncclGetLastError(NULL) after ncclCommGetAsyncError names the failure");
}

}  // namespace nccl_client
#endif
