// Helpers of the in-process API tests: ranks as threads of this process.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "grove/grove.h"

namespace mpapi {

/// Resident set size of this process, in KiB (-1 if unknown).
inline long rssKiB() {
  long pages = 0, resident = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/// Entries of directory `path` ("." and ".." included; 0 if unreadable).
inline int dirEntries(const char* path) {
  int n = 0;
  if (DIR* d = opendir(path)) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}
/// Open file descriptors of this process.
inline int openFds() { return dirEntries("/proc/self/fd"); }
/// Threads of this process.
inline int threadCount() { return dirEntries("/proc/self/task"); }

/// Runs fn(rank) on n threads at once and joins them.
inline void onRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

/// n communicators made by groveCommInitAll; destroyed (concurrently) at the end.
struct Comms {
  std::vector<groveComm_t> c;
  explicit Comms(int n) : c(n, nullptr) {
    groveResult_t r = groveCommInitAll(c.data(), n, nullptr);
    EXPECT_EQ(r, groveSuccess) << groveGetLastError(nullptr);
    if (r != groveSuccess) c.clear();
  }
  ~Comms() {
    onRanks(static_cast<int>(c.size()), [&](int r) {
      if (c[r] != nullptr) {
        EXPECT_EQ(groveCommDestroy(c[r]), groveSuccess) << groveGetLastError(nullptr);
      }
    });
  }
  bool ok() const { return !c.empty(); }
  groveComm_t operator[](int r) const { return c[r]; }
  int size() const { return static_cast<int>(c.size()); }
};

/// True if the thread's (and, given, the comm's) last error text contains `word`.
inline ::testing::AssertionResult lastErrorNames(groveComm_t comm, const std::string& word) {
  std::string t = groveGetLastError(nullptr);
  std::string c = comm ? groveGetLastError(comm) : t;
  if (t.find(word) == std::string::npos)
    return ::testing::AssertionFailure()
           << "thread's last error \"" << t << "\" does not name \"" << word << "\"";
  if (c.find(word) == std::string::npos)
    return ::testing::AssertionFailure()
           << "comm's last error \"" << c << "\" does not name \"" << word << "\"";
  return ::testing::AssertionSuccess();
}

/// All-reduce (float sum of rank+1) on every rank of comms, one thread each;
/// true if every rank got n(n+1)/2 everywhere.
inline bool allReduceWorks(const Comms& comms, size_t count = 1000) {
  const int n = comms.size();
  std::vector<int> good(n, 0);
  onRanks(n, [&](int r) {
    std::vector<float> in(count, static_cast<float>(r + 1)), out(count, -1.f);
    groveResult_t res =
        groveAllReduce(in.data(), out.data(), count, groveFloat32, groveSum, comms[r], nullptr);
    EXPECT_EQ(res, groveSuccess) << "rank " << r << ": " << groveGetLastError(comms[r]);
    bool ok = res == groveSuccess;
    for (float v : out) ok = ok && v == static_cast<float>(n * (n + 1) / 2);
    good[r] = ok;
  });
  for (int g : good)
    if (!g) return false;
  return true;
}

}  // namespace mpapi
