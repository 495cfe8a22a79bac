// A small LRU cache of built programs, so that repeated calls with the same
// shape (the common case in training loops) do not rebuild their program.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>

#include "algorithms/select/selector.h"
#include "ir/schedule.h"

namespace grove::plan {

/// Everything a program depends on.
struct ProgramKey {
  Coll coll = Coll::kAllReduce;
  Algo algo = Algo::kRing;
  uint64_t count = 0;
  int dtype = 0;
  int op = 0;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  bool inPlace = false;
  int nChannels = 1;
  uint64_t chunkBytes = 0;
  uint64_t planBytes = 0;
  /// Keys order lexicographically (for the map).
  auto operator<=>(const ProgramKey&) const = default;
};

/// The key of a call.
ProgramKey programKey(Algo algo, const CollArgs& args, const PlanParams& params);

/// LRU cache of programs keyed by ProgramKey. Not thread-safe: a
/// communicator runs its calls one at a time. One cache serves one
/// communicator, so its topology plans need no place in the key.
class ProgramCache {
 public:
  /// A cache holding at most `capacity` programs (at least 1), built with
  /// the communicator's topology plans (null: rank-order builders only;
  /// the plans must outlive the cache).
  explicit ProgramCache(size_t capacity = 256, TopoPlans* plans = nullptr);

  /// The program for this call: cached, or built with build() and cached.
  /// The pointer stays valid after eviction.
  std::shared_ptr<const Program> get(Algo algo, const CollArgs& args, const PlanParams& params);

  /// Number of cached programs.
  size_t size() const { return map_.size(); }
  /// Calls answered from the cache.
  uint64_t hits() const { return hits_; }
  /// Calls that built a program.
  uint64_t misses() const { return misses_; }
  /// Drops every cached program.
  void clear();

 private:
  struct Entry {
    std::shared_ptr<const Program> program;
    std::list<ProgramKey>::iterator lru;
  };
  size_t capacity_;
  TopoPlans* plans_;
  std::map<ProgramKey, Entry> map_;
  std::list<ProgramKey> lru_;  ///< most recently used first
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace grove::plan
