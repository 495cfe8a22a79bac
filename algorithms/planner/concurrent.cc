// Independent planning work on several threads at once; see concurrent.h.
#include "algorithms/planner/concurrent.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

#include "base/config.h"

namespace grove::plan::detail {

int planThreads() {
  const int64_t asked = config::getInt("GROVE_PLAN_THREADS");
  if (asked > 0) return static_cast<int>(asked);
  return std::max(1u, std::thread::hardware_concurrency());
}

void forEachConcurrently(size_t n, int threads, const std::function<void(size_t)>& fn) {
  const size_t workers = std::min(n, static_cast<size_t>(std::max(1, threads)));
  std::vector<std::exception_ptr> failed(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        fn(i);
      } catch (...) {
        failed[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  if (workers > 1) pool.reserve(workers - 1);
  for (size_t t = 1; t < workers; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads: those running (and this one) do the rest
    }
  }
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
}

}  // namespace grove::plan::detail
