// Independent planning work on several threads at once.
//
// How it works: the planners' expensive steps are often independent of one
// another -- the judge's simulations of each candidate tree set, the joint
// packing and the heterogeneous split -- and each is a pure function of the
// graph. forEachConcurrently hands the indices out one by one to at most
// `threads` threads (the calling thread is one of them), waits for all, and
// then rethrows the exception of the lowest index that failed, so a result
// never depends on which thread ran what: the plans are the same with one
// thread or many.
#pragma once

#include <cstddef>
#include <functional>

namespace grove::plan::detail {

/// The threads planning may use: GROVE_PLAN_THREADS, or the hardware's
/// threads when that is 0 (at least 1).
int planThreads();

/// Calls fn(i) for every i in [0, n) on up to `threads` threads (<= 1: one
/// after the other on the calling thread); returns when every call has
/// returned and rethrows the exception of the lowest i that threw.
void forEachConcurrently(size_t n, int threads, const std::function<void(size_t)>& fn);

}  // namespace grove::plan::detail
