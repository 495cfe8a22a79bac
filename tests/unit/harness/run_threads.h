// runThreads: fn(rank) on n threads of the test, joined; an exception on a
// thread fails the test with the rank and its message (header-only, for the
// transport and bootstrap tests that drive their own endpoints per thread).
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace grove::harness {

/// Runs fn(0) .. fn(n-1) on n threads and joins them.
inline void runThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  for (auto& t : threads) t.join();
}

}  // namespace grove::harness
