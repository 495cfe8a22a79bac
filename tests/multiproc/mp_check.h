// Shared declarations of grove_mp_check (see grove_mp_check.cc for how it works).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "grove/grove.h"

namespace mp {

enum Coll {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kGather,
  kScatter,
  kAlltoAll,
  kRing,
  kPair,
  kAllPairs,
  kNumColl
};
inline const char* const kCollNames[kNumColl] = {
    "allreduce", "broadcast", "reduce",        "allgather",     "reducescatter",    "gather",
    "scatter",   "alltoall",  "sendrecv_ring", "sendrecv_pair", "sendrecv_allpairs"};
inline bool isReducing(int c) { return c == kAllReduce || c == kReduce || c == kReduceScatter; }
inline bool isRooted(int c) {
  return c == kBroadcast || c == kReduce || c == kGather || c == kScatter;
}
inline bool hasInPlace(int c) { return c < kAlltoAll; }

constexpr int kLarge = -1;  ///< size code of (1 MiB)/elemsize + 3 elements

/// Command-line options (usage() in grove_mp_check.cc).
struct Options {
  bool quick = false, async = false, verbose = false;
  std::set<std::string> filter;  ///< collective names; empty = all
  std::vector<int> sizes = {0, 1, 7, 1021, kLarge};
  std::vector<int> dtypes, ops;            ///< at sizes other than large
  std::vector<int> largeDtypes, largeOps;  ///< at the large size
  int partK = 0, partM = 1;                ///< run combination i only if i % M == K
  int largePartK = 0, largePartM = 1;      ///< the same, for the large size only
  std::string roots = "all";               ///< all | ends (0 and n-1) at small sizes
  int nChannels = INT32_MIN, timeoutMs = INT32_MIN;
  std::string transport;
  uint64_t seed = 1;
  int maxPrint = 40;
  std::string injectFault;  ///< self-test of the checker: result | guard | send
  // failure-test modes
  double loopSeconds = 0;
  size_t loopCount = 16384;  ///< floats per all-reduce of the loop
  int dieRank = -1;
  double dieAfter = 1.0;
  int sleepRank = -1;
  double sleepSeconds = 60;
  std::string readyDir;
  int badNranksRank = -1, badNranksValue = 0;
};

/// The state of this rank.
struct Job {
  Options opt;
  groveComm_t comm = nullptr;
  groveHostStream_t hs = nullptr;  ///< non-null with --async
  int rank = 0, n = 1;
  long cases = 0, failures = 0, printed = 0;
  long injected = 0;  ///< faults injected (--inject-fault), each of which must be caught
  bool quiet = false;
  double collTime[kNumColl] = {};
  long collCases[kNumColl] = {};
  std::vector<uint8_t> arenaS, arenaR, expS, expR;
};

/// Prints the failed call with groveGetLastError, aborts the comm, exits 2.
[[noreturn]] void fatalCall(Job& job, const char* what, groveResult_t r);
/// fatalCall unless r is groveSuccess.
inline void check(Job& job, groveResult_t r, const char* what) {
  if (r != groveSuccess) fatalCall(job, what, r);
}

/// Runs every selected case; counts cases and failures in job.
void runCases(Job& job);

double nowSec();

}  // namespace mp
